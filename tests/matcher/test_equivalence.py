"""Property tests: the Cython engine produces exactly the reference's matches
(plan, partition, interval, event seqs, output fields) for random patterns
over random tapes, for every selection strategy, across batch boundaries,
watermarks, `active` sets, discard and snapshot/restore."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caesar.events.batch import StringPool
from caesar.plans.pattern import STRATEGIES
from caesar.services.matcher.engine import CythonEngine
from caesar.services.matcher.reference import ReferenceEngine
from caesar.services.store import tagged

from .strategies import patterns, tapes
from .tapes import multiset, tape

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _drive(engine, plans, rows, cuts, actives, pool, snapshot_at=None):
    out = []
    start = 0
    seq = 0
    for i, cut in enumerate(list(cuts) + [len(rows)]):
        chunk = rows[start:cut]
        start = cut
        if chunk:
            batch = tape(chunk, pool, partition_key="part", first_seq=seq)
            seq += len(chunk)
            out += engine.process(batch, actives[i % len(actives)])
            out += engine.advance(max(r[1] for r in chunk))
        if snapshot_at == i:
            # move every partition's state into a fresh engine
            fresh = type(engine)(plans)
            if isinstance(engine, CythonEngine):
                fresh.sweep_min = engine.sweep_min
            for part in (0, 1):
                state = engine.snapshot(part)
                fresh.restore(part, state, pool)
                if isinstance(engine, CythonEngine):
                    # format 4 restores every part as it was, and so does format 3
                    # (tagged lists, what earlier versions wrote)
                    raw = engine._snapshot_raw(part)
                    assert fresh._snapshot_raw(part) == raw
                    older = type(engine)(plans)
                    older.restore(part, {pid: tagged.encode(a) for pid, a in raw.items()})
                    assert older._snapshot_raw(part) == raw
            engine = fresh
    out += engine.advance(10**9)
    return out


@st.composite
def scenario(draw, strategy, plans_of=patterns, rows=None, max_cuts=2):
    """1-2 plans drawn by `plans_of(strategy)`, a tape (`rows`, default
    tapes()), up to `max_cuts` batch cuts and per-batch active plan sets."""
    plans = [dataclasses.replace(draw(plans_of(strategy)), plan_id=f"q{i}")
             for i in range(draw(st.integers(1, 2)))]
    rows = draw(tapes() if rows is None else rows)
    cuts = sorted(draw(st.lists(st.integers(0, len(rows)), max_size=max_cuts)))
    ids = [p.plan_id for p in plans]
    actives = draw(st.lists(st.one_of(st.none(), st.sets(st.sampled_from(ids))),
                            min_size=1, max_size=3))
    return plans, rows, cuts, actives


def assert_cython_equals_reference(data, drawn) -> None:
    """Both engines over the drawn scenario, the Cython one moved to a fresh
    engine through snapshots at a drawn point (or never), its sweeps of idle
    parts in slices of one part or of the default least slice."""
    plans, rows, cuts, actives = drawn
    snap = data.draw(st.sampled_from([None, 0, 1]))
    expected = _drive(ReferenceEngine(plans), plans, rows, cuts, actives, StringPool())
    engine = CythonEngine(plans)
    engine.sweep_min = data.draw(st.sampled_from([1, engine.sweep_min]))
    got = _drive(engine, plans, rows, cuts, actives, StringPool(), snap)
    assert multiset(got) == multiset(expected)


@pytest.mark.parametrize("strategy", STRATEGIES)
@SETTINGS
@given(data=st.data())
def test_cython_equals_reference(strategy, data):
    assert_cython_equals_reference(data, data.draw(scenario(strategy)))


@SETTINGS
@given(data=st.data())
def test_discard_drops_partial_matches_in_both(data):
    plans, rows, cuts, actives = data.draw(scenario(None))
    outs = [multiset(discard_halfway(engine, rows, [plans[0].plan_id]))
            for engine in (ReferenceEngine(plans), CythonEngine(plans))]
    assert outs[0] == outs[1]


def discard_halfway(engine, rows, plan_ids) -> list:
    """Feed the first half of `rows`, discard `plan_ids` in partition 0, feed
    the rest, close every window: what the engine derived."""
    pool = StringPool()
    half = len(rows) // 2
    out = []
    if rows[:half]:
        out += engine.process(tape(rows[:half], pool, partition_key="part"))
    engine.discard(plan_ids, 0)
    if rows[half:]:
        out += engine.process(tape(rows[half:], pool, partition_key="part", first_seq=half))
    out += engine.advance(10**9)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("strategy", STRATEGIES)
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_cython_equals_reference_many(strategy, data):
    assert_cython_equals_reference(data, data.draw(scenario(strategy)))
