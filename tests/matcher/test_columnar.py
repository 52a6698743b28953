"""The engine's columnar calls (process_columns, advance_columns) return,
per call, the same matches as process and advance in the same order: MatchBatch.events()
equals the DerivedEvents, for random patterns with every feature, strategy,
batch cut, `active` set and snapshot/restore. And the columns themselves:
typed fields, seq offsets, order across plans."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caesar.events.batch import StringPool
from caesar.plans.engine import DerivedEvent
from caesar.plans.matches import MatchBatch
from caesar.plans.pattern import STRATEGIES
from caesar.services.matcher.engine import CythonEngine

from .strategies import featured_patterns, predicate, scalar_expr, tapes
from .tapes import attr, comp, plan, tape
from .test_equivalence import assert_cython_equals_reference, scenario
from .test_features import with_timeout_types

SETTINGS = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


def _key(ev: DerivedEvent) -> tuple:
    # NaN never equals itself: compare it as a token
    fields = tuple(sorted((k, "nan" if isinstance(v, float) and math.isnan(v) else v)
                          for k, v in ev.fields.items()))
    return (ev.plan_id, ev.event_type, ev.partition, ev.start_ts, ev.end_ts, fields,
            ev.event_seqs)


def _calls(modes: list[bool], plans, rows, cuts, actives, snapshot_at):
    """Each call's output, as DerivedEvents, in order; call k is columnar
    when modes[k % len(modes)]."""
    engine = CythonEngine(plans)
    pool = StringPool()
    calls: list[list[tuple]] = []

    def columnar() -> bool:
        return modes[len(calls) % len(modes)]

    def took(out) -> None:
        if isinstance(out, MatchBatch):
            out = out.events()
        calls.append([_key(ev) for ev in out])

    start = seq = 0
    for i, cut in enumerate([*cuts, len(rows)]):
        chunk = rows[start:cut]
        start = cut
        if chunk:
            batch = tape(chunk, pool, partition_key="part", first_seq=seq)
            seq += len(chunk)
            took((engine.process_columns if columnar() else engine.process)(
                batch, actives[i % len(actives)]))
            took((engine.advance_columns if columnar() else engine.advance)(
                max(r[1] for r in chunk)))
        if snapshot_at == i:
            fresh = CythonEngine(plans)
            for part in (0, 1):
                fresh.restore(part, engine.snapshot(part))
            engine = fresh
    took(engine.advance_columns(10**9) if columnar() else engine.advance(10**9))
    return calls


@pytest.mark.parametrize("strategy", STRATEGIES)
@SETTINGS
@given(data=st.data())
def test_columns_equal_objects_call_by_call(strategy, data):
    plans, rows, cuts, actives = with_timeout_types(
        data.draw(scenario(strategy, plans_of=featured_patterns)))
    snap = data.draw(st.sampled_from([None, 0, 1]))
    # columnar calls only, or mixed with object calls on the same engine
    modes = data.draw(st.one_of(st.just([True]), st.lists(st.booleans(), min_size=2,
                                                          max_size=4)))
    assert _calls(modes, plans, rows, cuts, actives, snap) == \
        _calls([False], plans, rows, cuts, actives, snap)


@st.composite
def solo_plans(draw):
    """One positive component, no key, negation or Kleene: the engine makes
    their matches straight from the event (engine._solo)."""
    types = tuple(draw(st.lists(st.sampled_from(("A", "B", "C", "D")), min_size=1,
                                max_size=2, unique=True)))
    where = draw(st.lists(predicate(["p0"], []), max_size=2))
    return plan("q", [comp("p0", *types)], where=where,
                within=draw(st.one_of(st.none(), st.integers(1, 5))),
                fields={"first": attr("p0", "x"), "v": draw(scalar_expr(["p0"], 1))})


@SETTINGS
@given(data=st.data())
def test_solo_plans_columns_equal_objects_and_reference(data):
    import dataclasses

    plans = [dataclasses.replace(data.draw(solo_plans()), plan_id=f"q{i}")
             for i in range(data.draw(st.integers(1, 2)))]
    rows = data.draw(tapes())
    cuts = sorted(data.draw(st.lists(st.integers(0, len(rows)), max_size=2)))
    actives = data.draw(st.lists(st.one_of(st.none(), st.sets(st.sampled_from(
        [p.plan_id for p in plans]))), min_size=1, max_size=3))
    snap = data.draw(st.sampled_from([None, 0, 1]))
    assert _calls([True], plans, rows, cuts, actives, snap) == \
        _calls([False], plans, rows, cuts, actives, snap)
    assert_cython_equals_reference(data, (plans, rows, cuts, actives))


def _abc_plans():
    fields = {"x": attr("a", "x"), "s": attr("b", "s"), "f": attr("c", "f")}
    return [plan("p", [comp("a", "A"), comp("b", "B"), comp("c", "C")], within=100,
                 fields=fields),
            plan("k", [comp("a", "A"), comp("b", "B", kleene=True), comp("c", "C")],
                 within=100)]


def _abc_rows():
    def row(t, ts, x, s, f):
        return (t, ts, {"part": 0, "x": x, "y": 0, "s": s, "f": f})
    return [row("A", 1, 7, "a", 0.5), row("B", 2, 1, "hello", 1.5),
            row("B", 3, 2, "world", 2.5), row("C", 4, 3, "c", 3.25)]


def test_columns_are_typed_and_ordered():
    pool = StringPool()
    batch = tape(_abc_rows(), pool, partition_key="part")
    out = CythonEngine(_abc_plans()).process_columns(batch)
    objects = CythonEngine(_abc_plans()).process(tape(_abc_rows(), StringPool(),
                                                      partition_key="part"))
    assert [_key(e) for e in out.events()] == [_key(e) for e in objects]
    by_plan = {c.plan_id: c for c in out}
    p, k = by_plan["p"], by_plan["k"]
    assert len(out) == len(p) + len(k) == len(objects)
    assert p.fields["x"].dtype == np.int64 and p.fields["x"].tolist() == [7, 7]
    assert p.fields["s"].dtype == object and p.fields["s"].tolist() == ["hello", "world"]
    assert p.fields["f"].dtype == np.float64 and p.fields["f"].tolist() == [3.25, 3.25]
    assert p.seq_matrix().tolist() == [[0, 1, 3], [0, 2, 3]]
    assert p.start_ts.tolist() == [1, 1] and p.end_ts.tolist() == [4, 4]
    # Kleene: a match with one B and one with both, so the rows differ in length
    seqs = [k.event_seqs(i) for i in range(len(k))]
    assert seqs == [e.event_seqs for e in objects if e.plan_id == "k"]
    assert sorted(seqs) == [(0, 1, 2, 3), (0, 1, 3), (0, 2, 3)]
    assert k.seq_offsets.tolist() == [0, 3, 7, 10]
    with pytest.raises(ValueError, match="Kleene"):
        k.seq_matrix()
    # order numbers every match of the call once
    assert sorted(p.order.tolist() + k.order.tolist()) == list(range(len(out)))


def test_batches_add_in_call_order():
    pool = StringPool()
    engine = CythonEngine(_abc_plans())
    rows = _abc_rows()
    first = engine.process_columns(tape(rows[:2], pool, partition_key="part"))
    second = engine.process_columns(tape(rows[2:], pool, partition_key="part", first_seq=2))
    both = first + second
    assert len(both) == len(first) + len(second) > 0
    assert both.events() == first.events() + second.events()
    last = engine.advance_columns(10**9)
    assert isinstance(last, MatchBatch) and len(last) == 0
    # an object call between columnar ones is unaffected by them
    assert engine.advance(10**9) == []


def as_format_4(state):
    """A format-5 snapshot as format 4 wrote it: a tagged key per part, the
    runs of each part among its extras."""
    import numpy as np

    out = {}
    for pid, plan_state in state.items():
        alts = []
        for alt, block in plan_state["alts"]:
            block = dict(block)
            if "key_ints" in block:
                a = block.pop("key_arity")
                ints = np.frombuffer(block.pop("key_ints"), dtype=np.int64).tolist()
                block["keys"] = ints if a == 0 else \
                    [{"$t": ints[i:i + a]} for i in range(0, len(ints), a)]
            run_part, run_len, entry_len, rows = [
                np.frombuffer(b, dtype=np.int64).tolist() for b in block.pop("runs")]
            runs: dict[int, list] = {}
            e = r = 0
            for i, n in zip(run_part, run_len, strict=True):
                run = []
                for _ in range(n):
                    run.append(rows[r:r + entry_len[e]])
                    r += entry_len[e]
                    e += 1
                runs.setdefault(i, []).append(run)
            empty = {"$t": []}
            block["extras"] = sorted(block["extras"] + [[i, [rs, empty, empty, empty]]
                                                        for i, rs in runs.items()])
            alts.append([alt, block])
        out[pid] = {"v": 4, "alts": alts}
    return out


def test_snapshot_round_trips_keys_runs_and_stacks():
    """snapshot() stores a plan's parts column-wise (format 5): int, tuple
    and string keys as one int64 column, float keys tagged, runs flattened,
    parts with and without runs, restored as they were and to the same
    matches; formats 4 and 3 (tagged lists) still restore."""
    from caesar.services.store import tagged
    from caesar.services.store.state_format import pack, unpack

    def row(t, ts, x, y, s):
        return (t, ts, {"part": 0, "x": x, "y": y, "s": s, "f": 0.0})
    rows = [row("A", 1, 1, 2, "u"), row("A", 2, 1, 3, "v"), row("B", 3, 1, 2, "u"),
            row("A", 4, 2, 2, "u"), row("A", 5, 3, 2, "w")]
    plans = [plan("one", [comp("a", "A"), comp("b", "B")], equivalence=["x"], within=100),
             plan("two", [comp("a", "A"), comp("b", "B")], equivalence=["x", "y"], within=100),
             plan("str", [comp("a", "A"), comp("b", "B")], equivalence=["s"], within=100),
             plan("run", [comp("a", "A"), comp("b", "B")], equivalence=["x"], within=100,
                  strategy="skip_till_next_match"),
             plan("flt", [comp("a", "A"), comp("b", "B")], equivalence=["f"], within=100),
             plan("kln", [comp("a", "A", kleene=True), comp("b", "B")], equivalence=["y"],
                  within=100, strategy="skip_till_next_match")]
    pool = StringPool()
    engine = CythonEngine(plans)
    engine.process(tape(rows, pool, partition_key="part"))
    raw = engine._snapshot_raw(0)
    keys = {type(k) for alts in raw.values() for _alt, parts in alts for k, *_ in parts}
    assert keys == {int, tuple, float}  # string keys are 1-tuples of their code
    assert any(p[2] for _alt, parts in raw["run"] for p in parts)  # a run held
    # a run whose Kleene entry holds several rows, in their order
    assert any(len(entry) > 1 for _alt, parts in raw["kln"] for p in parts
               for run in p[2] for entry in run)
    state = unpack(pack(engine.snapshot(0)))  # through the state format
    assert all(v["v"] == 5 for v in state.values())
    blocks = {pid: v["alts"][0][1] for pid, v in state.items()}
    assert [blocks[p].get("key_arity") for p in ("one", "two", "str", "run", "flt", "kln")] \
        == [0, 2, 1, 0, None, 0]
    assert "keys" in blocks["flt"] and blocks["run"]["extras"] == []  # runs flattened
    fresh, older, four = CythonEngine(plans), CythonEngine(plans), CythonEngine(plans)
    fresh.restore(0, state)
    older.restore(0, {pid: tagged.encode(alts) for pid, alts in raw.items()})
    four.restore(0, as_format_4(state))
    assert fresh._snapshot_raw(0) == older._snapshot_raw(0) == four._snapshot_raw(0) == raw
    more = [row("B", 6, 2, 2, "u"), row("B", 7, 1, 3, "v")]

    def out(e):
        return [_key(ev) for ev in e.process(tape(more, pool, partition_key="part",
                                                  first_seq=5))]
    want = out(engine)
    assert want and out(fresh) == want and out(older) == want and out(four) == want


def test_snapshot_falls_back_to_format_3_for_mixed_widths():
    """Formats 4 and 5 store one width per component; a plan whose stacks of
    one component differ in width is written as format 3 and restores the same."""
    from caesar.services.store import tagged

    rows = [("A", 1, {"part": 0, "x": 1, "y": 0, "s": "u", "f": 0.0}),
            ("A", 2, {"part": 0, "x": 2, "y": 0, "s": "u", "f": 0.0})]
    plans = [plan("one", [comp("a", "A"), comp("b", "B")], equivalence=["x"], within=100)]
    engine = CythonEngine(plans)
    engine.process(tape(rows, StringPool(), partition_key="part"))
    assert isinstance(engine.snapshot(0)["one"], dict)  # format 5
    from caesar.services.matcher.stack import Stack

    (p, keyed), = engine._keyed_parts(0)["one"]
    part = next(iter(keyed.values()))
    assert len(part.stacks[1]) == 0
    # an empty stack of another width: no row is read with the wrong width
    part.stacks = part.stacks[:1] + (Stack(part.stacks[1].width + 1),)
    raw = engine._snapshot_raw(0)
    state = engine.snapshot(0)
    assert state == {"one": tagged.encode(raw["one"])}  # format 3
    fresh = CythonEngine(plans)
    fresh.restore(0, state)
    assert fresh._snapshot_raw(0) == raw


def test_snapshot_flattens_only_runs_that_are_plain_to_the_end():
    """Format 5 flattens a part's runs only when every run, entry and row id
    is plain (lists of int64); a part whose runs stop being plain halfway
    (a later run, entry or row id of another kind) goes to the extras whole,
    and the parts around it keep their own runs."""
    rows = [("A", t, {"part": 0, "x": x, "y": 0, "s": "u", "f": 0.0})
            for t, x in enumerate([1, 2, 3, 4, 5, 6], start=1)]
    plans = [plan("run", [comp("a", "A"), comp("b", "B")], equivalence=["x"], within=100,
                  strategy="skip_till_next_match")]
    engine = CythonEngine(plans)
    engine.process(tape(rows, StringPool(), partition_key="part"))
    (_p, keyed), = engine._keyed_parts(0)["run"]
    parts = list(keyed.values())
    assert len(parts) == 6 and all(part.runs for part in parts)
    first = parts[1].runs[0]
    parts[1].runs = [first, "not a run"]  # a later run of another kind
    parts[2].runs = [first, [[7, "eight"]]]  # a later row id of another kind
    parts[3].runs = [first, [[7], 8]]  # a later entry of another kind
    parts[4].runs = [[[2**63]]]  # a row id beyond int64
    raw = engine._snapshot_raw(0)
    state = engine.snapshot(0)
    block = state["run"]["alts"][0][1]
    assert [i for i, _ in block["extras"]] == [1, 2, 3, 4]
    fresh = CythonEngine(plans)
    fresh.restore(0, state)
    assert fresh._snapshot_raw(0) == raw
