"""SEI, S2PL and LWM (ACEP paper, section 5) against the serial reference:
random streams with interleaved reads and writes on shared tables, run by
several actors whose steps interleave under hypothesis-chosen schedules;
every output, every dead-lettered action and every final table must equal
serial execution in timestamp order (Definition 6)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from acep_models import bank_plan, transactions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caesar.services.scheduler.acep import executors
from caesar.services.scheduler.acep.executors import (
    RunResult,
    Simulator,
    ThreadedRun,
    run_serial,
    steps_of,
)
from caesar.services.scheduler.acep.schedulers import LWM, S2PL, SEI

PLAN = bank_plan()
SCHEDULERS = ("sei", "s2pl", "lwm")

ids = st.integers(1, 4)
event = st.one_of(
    st.tuples(st.just("Dep"), st.fixed_dictionaries({"id": ids, "amt": st.integers(-3, 9)})),
    st.tuples(st.just("Chk"), st.fixed_dictionaries({"id": ids})),
    st.tuples(st.just("Mark"), st.fixed_dictionaries(
        {"id": ids, "st": st.sampled_from(["frozen", "open", "dup", "watch"])})),
    st.tuples(st.just("Del"), st.fixed_dictionaries({"id": ids})),
)
streams = st.lists(st.tuples(st.integers(1, 3), st.lists(event, min_size=1, max_size=3)),
                   min_size=1, max_size=25).map(
    lambda steps: [(sum(gap for gap, _ in steps[:i + 1]), evs) for i, (_, evs) in
                   enumerate(steps)])


def same(a: RunResult, b: RunResult) -> None:
    assert [(o.ts, o.actor, o.event_type, o.fields) for o in a.outputs] == \
        [(o.ts, o.actor, o.event_type, o.fields) for o in b.outputs]
    assert [(e.ts, e.actor, e.reason) for e in a.errors] == \
        [(e.ts, e.actor, e.reason) for e in b.errors]
    assert a.tables == b.tables


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=streams, schedule=st.randoms(use_true_random=False),
       scheduler=st.sampled_from(SCHEDULERS), granularity=st.sampled_from(["table", "tuple"]))
def test_every_schedule_equals_the_serial_reference(stream: Any, schedule: random.Random,
                                                    scheduler: str, granularity: Any) -> None:
    workload = transactions(stream)
    expected = run_serial(PLAN, workload)
    got = Simulator(PLAN, scheduler, gc_every=3, granularity=granularity).run(workload, schedule)
    same(got, expected)


def test_sei_with_seeded_choices_runs_inline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under SEI only position order is possible: seeded runs take the inline
    path (no move is chosen) and still equal the serial reference; a chooser
    function still drives the simulation."""
    rng = random.Random(3)
    stream = [(t, [("Dep", {"id": rng.randint(1, 3), "amt": rng.randint(-2, 9)}),
                   ("Chk", {"id": rng.randint(1, 3)}), ("Del", {"id": rng.randint(1, 3)})])
              for t in range(1, 60)]
    workload = transactions(stream)
    expected = run_serial(PLAN, workload)
    moves: list[int] = []

    def chooser(labels: Any) -> int:
        moves.append(len(labels))
        return 0

    same(Simulator(PLAN, "sei").run(workload, chooser), expected)
    assert moves
    monkeypatch.setattr(executors, "_chooser", lambda choose: pytest.fail("simulated"))
    same(Simulator(PLAN, "sei", gc_every=3).run(workload, 5), expected)
    same(Simulator(PLAN, "sei").run(workload, random.Random(1)), expected)


def test_the_workload_exercises_reads_writes_and_errors() -> None:
    """The generator is not vacuous: outputs read tables, rows change, keys clash."""
    rng = random.Random(1)
    stream = [(t, [("Dep", {"id": rng.randint(1, 3), "amt": 4}),
                   ("Mark", {"id": rng.randint(1, 3), "st": rng.choice(["dup", "open"])}),
                   ("Chk", {"id": rng.randint(1, 3)}), ("Del", {"id": rng.randint(1, 3)})])
              for t in range(1, 40)]
    result = run_serial(PLAN, transactions(stream))
    assert any(o.event_type == "Balance" and o.fields["bal"] for o in result.outputs)
    assert any(o.event_type == "Closed" for o in result.outputs)
    assert any("exists already" in e.reason for e in result.errors)
    assert result.tables["acct"]


@pytest.mark.parametrize("granularity", ["table", "tuple"])
@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_threads_equal_the_serial_reference(scheduler: str, granularity: Any) -> None:
    rng = random.Random(7)
    stream = [(t, [("Dep", {"id": rng.randint(1, 4), "amt": rng.randint(-2, 9)}),
                   ("Mark", {"id": rng.randint(1, 4),
                             "st": rng.choice(["frozen", "open", "dup"])}),
                   ("Chk", {"id": rng.randint(1, 4)}), ("Del", {"id": rng.randint(1, 4)})])
              for t in range(1, 120)]
    workload = transactions(stream)
    for _ in range(3):
        same(ThreadedRun(PLAN, scheduler, granularity=granularity).run(workload),
             run_serial(PLAN, workload))


def test_gc_keeps_versions_bounded_below_the_low_water_mark() -> None:
    stream = [(t, [("Dep", {"id": 1, "amt": 1})]) for t in range(1, 300)]
    workload = transactions(stream)
    sim = Simulator(PLAN, "lwm", gc_every=8)
    result = sim.run(workload, 3)
    assert result.collected > 250  # one version per deposit, collected as lwm passes
    assert sim.store.version_count() <= 4
    assert result.tables == run_serial(PLAN, workload).tables


def test_lwm_grants_as_the_paper_says() -> None:
    """Definition 8 and the grant rules: reads at ts <= lwm, writes at lwm only,
    reads never block writes."""
    lwm = LWM()
    lwm.register((2, 0), frozenset({"P"}), frozenset())
    lwm.register((10, 1), frozenset({"P"}), frozenset({"P"}))
    lwm.register((15, 0), frozenset({"P"}), frozenset())
    lwm.register((18, 1), frozenset({"P"}), frozenset({"P"}))
    assert lwm.lwm("P") == (10, 1)
    assert lwm.may_read((2, 0), "P") and not lwm.may_read((15, 0), "P")
    assert lwm.may_write((10, 1), "P") and not lwm.may_write((18, 1), "P")
    lwm.finish((10, 1))
    assert lwm.lwm("P") == (18, 1)
    assert lwm.may_read((15, 0), "P") and lwm.may_write((18, 1), "P")


def test_s2pl_and_sei_order_conflicting_steps() -> None:
    s2pl = S2PL()
    s2pl.register((2, 0), frozenset({"P"}), frozenset())
    s2pl.register((3, 0), frozenset({"P"}), frozenset())
    s2pl.register((10, 1), frozenset({"P"}), frozenset({"P"}))
    s2pl.register((15, 0), frozenset({"P"}), frozenset())
    assert s2pl.may_start((2, 0)) and s2pl.may_start((3, 0))  # shared read locks
    assert not s2pl.may_start((10, 1))  # write waits for the earlier readers
    assert not s2pl.may_start((15, 0))  # and a later read waits for the write (FIFO)
    s2pl.finish((2, 0))
    s2pl.finish((3, 0))
    assert s2pl.may_start((10, 1)) and not s2pl.may_start((15, 0))
    sei = SEI()
    sei.register((2, 0), frozenset(), frozenset())
    sei.register((3, 0), frozenset(), frozenset())
    assert sei.may_start((2, 0)) and not sei.may_start((3, 0))


def test_row_locks_conflict_with_their_row_and_their_table() -> None:
    """lockG = tuple: a row lock conflicts with the same row and with a lock
    on the whole table, not with other rows."""
    lwm = LWM()
    lwm.register((1, 0), (), [("P", (1,))])
    lwm.register((2, 0), (), [("P", (2,))])
    lwm.register((3, 0), ["P"], ["P"])  # a scan, and a write it cannot pin to a row
    assert lwm.may_write((2, 0), ("P", (2,)))  # row 2's oldest writer, despite (1, 0)
    assert lwm.may_read((2, 0), ("P", (1,))) is False  # row 1 waits for (1, 0)
    assert lwm.lwm("P") == (1, 0) and not lwm.may_write((3, 0), "P")
    lwm.finish((1, 0))
    lwm.finish((2, 0))
    assert lwm.may_write((3, 0), "P")
    s2pl = S2PL()
    s2pl.register((1, 0), (), [("P", (1,))])
    s2pl.register((2, 0), [("P", (2,))], [])
    s2pl.register((3, 0), [("P", (1,))], [])
    s2pl.register((4, 0), ["P"], [])
    assert s2pl.may_start((1, 0)) and s2pl.may_start((2, 0))
    assert not s2pl.may_start((3, 0)) and not s2pl.may_start((4, 0))
    s2pl.finish((1, 0))
    assert s2pl.may_start((3, 0)) and s2pl.may_start((4, 0))


def test_tuple_locks_let_more_steps_run_at_once() -> None:
    """Steps on different rows overlap under lockG = tuple, not under table."""
    stream = [(t, [("Dep", {"id": t % 4 + 1, "amt": 1})]) for t in range(1, 30)]
    workload = transactions(stream)

    def widest(granularity: Any) -> int:
        sim = Simulator(PLAN, "s2pl", granularity=granularity)
        steps = [spec for txn in steps_of(PLAN, workload) for spec in txn]
        for spec in steps:
            sim.scheduler.register(spec.pos, *spec.resources(granularity))
        return sum(sim.scheduler.may_start(spec.pos) for spec in steps)

    assert widest("table") == 1 and widest("tuple") >= 4
