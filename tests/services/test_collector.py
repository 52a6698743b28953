"""collector_paused: no cyclic collection inside, the collector's state
restored after (also when the body raises, or when it was off already).
tune_collector: what outlives a young collection is frozen, still freed by
reference counting; a cycle among frozen objects waits for `sweep`."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
from service_plans import pos, two_context_plan

from caesar.services.common import collector
from caesar.services.common.collector import collector_paused, settle, sweep, tune_collector
from caesar.services.common.messages import InputRecord
from caesar.services.embedded.pipeline import EmbeddedPipeline


@pytest.fixture
def tuned() -> Iterator[None]:
    thresholds, callbacks = gc.get_threshold(), list(gc.callbacks)
    tune_collector()
    try:
        yield
    finally:
        gc.callbacks[:] = callbacks
        gc.set_threshold(*thresholds)
        gc.unfreeze()


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def young_collection() -> None:
    """As an allocation past the young threshold starts one (callbacks included)."""
    gc.collect(0)


def test_survivors_of_a_young_collection_are_frozen_and_still_freed(tuned: None) -> None:
    frozen = gc.get_freeze_count()
    kept = [Node() for _ in range(1000)]
    young_collection()
    assert gc.get_freeze_count() >= frozen + 1000
    gone = weakref.ref(kept[0])
    del kept
    assert gone() is None, "reference counting frees a frozen object"


def test_a_frozen_cycle_waits_for_the_sweep(tuned: None) -> None:
    a, b = Node(), Node()
    a.other, b.other = b, a
    young_collection()  # both survive it: frozen
    gone = weakref.ref(a)
    del a, b
    gc.collect(0)
    gc.collect(1)
    assert gone() is not None, "a young or middle collection does not walk frozen objects"
    assert sweep() >= 2
    assert gone() is None
    assert gc.get_freeze_count() > 0, "the sweep freezes the survivors again"


def test_a_discarded_pipeline_frees_itself(tuned: None) -> None:
    """No reference cycles in a pipeline: dropped, its processors and their
    graphs (with the engines and all the state they hold) are freed by
    reference counting, also where survivors are frozen. (Closures over the
    processors made cycles: Figure 14's runs kept 24 GB of them frozen in
    session 22.)"""

    def discarded() -> list[weakref.ref[object]]:
        pipe = EmbeddedPipeline(two_context_plan(), batch_size=3)
        pipe.run_values([pos(t, v, 7, 50.0) for t in range(1, 20) for v in range(3)])
        return [weakref.ref(o) for o in (pipe, pipe.deriver, pipe.deriver.graph, pipe.matcher,
                                         pipe.matcher.graph, pipe.router, pipe.scheduler)]

    with collector_paused():
        refs = discarded()
        assert [r() for r in refs] == [None] * len(refs)


def test_tuning_again_collects_what_the_last_tuning_froze(tuned: None) -> None:
    """A benchmark's next run calls tune_collector again: the cycles the
    last runs left frozen go then, which gc.collect alone does not walk."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    young_collection()  # both survive it: frozen
    gone = weakref.ref(a)
    del a, b
    gc.collect()
    assert gone() is not None, "gc.collect does not walk frozen objects"
    tune_collector()
    assert gone() is None


def test_no_sweep_where_survivors_are_not_frozen() -> None:
    # an untuned process (other tests may have tuned this one: `caesar run`)
    tuned = collector._freeze_survivors in gc.callbacks
    if tuned:
        gc.callbacks.remove(collector._freeze_survivors)
    a, b = Node(), Node()
    a.other, b.other = b, a
    gc.freeze()  # e.g. before a fork, by the application
    try:
        gone = weakref.ref(a)
        del a, b
        assert sweep() == 0
        assert gone() is not None, "what the application froze stays frozen"
    finally:
        gc.unfreeze()
        gc.collect()
        if tuned:
            gc.callbacks.append(collector._freeze_survivors)


def test_replacing_old_objects_grows_the_young_list_unseen_until_settled(tuned: None) -> None:
    """Every object freed counts against the young threshold, frozen ones
    too: a loop that replaces old state with new never reaches it, and the
    young list grows (what one collection then walks). settle() freezes it."""
    old: list[Node | None] = [Node() for _ in range(30_000)]
    gc.collect(0)  # frozen (tune_collector)
    new = []
    for i in range(len(old)):
        new.append(Node())
        old[i] = None
    assert gc.get_count()[0] < 100  # no young collection came
    young = {id(o) for o in gc.get_objects(0)}
    assert sum(id(n) in young for n in new) == len(new)  # but all of `new` waits in it
    settle()
    assert not {id(o) for o in gc.get_objects(0)} & {id(n) for n in new}
    del new
    assert gc.get_count()[0] == 0  # frozen objects still freed by reference counting


def test_settle_freezes_nothing_where_survivors_are_not_frozen() -> None:
    thresholds, callbacks = gc.get_threshold(), list(gc.callbacks)
    tune_collector(freeze_survivors=False)
    try:
        node = Node()
        settle()
        assert any(o is node for o in gc.get_objects(0))
    finally:
        gc.callbacks[:] = callbacks
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def test_the_clock_counts_runs_per_generation(tuned: None) -> None:
    runs = list(collector.CLOCK.runs)
    gc.collect(0)
    gc.collect(1)
    assert collector.CLOCK.runs[0] == runs[0] + 1 and collector.CLOCK.runs[1] == runs[1] + 1
    assert set(collector.CLOCK.as_dict()) == {"gc_runs", "gc_s", "gc_max_s", "gc_pauses"}


def test_long_pauses_are_kept_with_their_time_for_a_window_s_longest() -> None:
    clock = collector.CollectorClock()
    for g, took in enumerate((0.002, 0.03, 0.012)):
        clock("start", {"generation": g})
        clock._started -= took  # as if the collection had taken `took`
        clock("stop", {"generation": g, "collected": 7 * g})
    pauses = clock.as_dict()["gc_pauses"]
    assert [round(p[1], 3) for p in pauses] == [0.03, 0.012]  # the short one is not kept
    assert [(p[2], p[4]) for p in pauses] == [(1, 7), (2, 14)]  # generation, found
    assert all(isinstance(p[3], int) for p in pauses)  # young objects at the start
    assert collector.longest_pause(pauses, since=0.0) == pytest.approx(0.03, abs=1e-3)
    assert collector.longest_pause(pauses, since=pauses[-1][0] + 1) == 0.0


def test_a_collection_while_the_pauses_are_read_does_not_break_the_reading(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """stats() reads the pauses while a collection may append one (every
    allocation collects here, and every collection is a long pause)."""
    clock = collector.CollectorClock()
    for _ in range(50):
        clock("start", {"generation": 0})
        clock._started -= 0.05
        clock("stop", {"generation": 0, "collected": 0})
    monkeypatch.setattr(collector, "LONG_PAUSE_S", 0.0)
    thresholds, callbacks = gc.get_threshold(), list(gc.callbacks)
    gc.callbacks.append(clock)
    gc.set_threshold(1)
    try:
        pauses = clock.as_dict()["gc_pauses"]
    finally:
        gc.set_threshold(*thresholds)
        gc.callbacks[:] = callbacks
    assert len(pauses) >= 50 and len(clock.pauses) > len(pauses)


def test_paused_inside_and_restored_after() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_stays_off_when_it_was_off() -> None:
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


class FakeHeap:
    """A clock, a memory size and a sweep that only counts (Sweeper's parts)."""

    def __init__(self) -> None:
        self.now, self.size, self.sweeps = 0.0, 1000, 0

    def sweeper(self) -> collector.Sweeper:
        return collector.Sweeper(interval_s=600, lull_s=5, clock=lambda: self.now,
                                 size=lambda: self.size, collect=self.collect)

    def collect(self) -> int:
        self.sweeps += 1
        return 0


def test_a_sweep_waits_for_the_interval_and_a_lull() -> None:
    heap = FakeHeap()
    sweeper = heap.sweeper()
    heap.now = 599.0
    assert sweeper.maybe(idle_for_s=60) is None and heap.sweeps == 0  # interval not over
    heap.now = 600.0
    assert sweeper.maybe(idle_for_s=0.4) is None  # between two bursts: no lull
    assert sweeper.maybe(idle_for_s=5.0) == 0 and heap.sweeps == 1  # a lull
    heap.now = 1100.0
    assert sweeper.maybe(idle_for_s=60) is None and heap.sweeps == 1  # swept 500 s ago


def test_without_lulls_a_sweep_comes_once_the_memory_doubled() -> None:
    assert collector.resident_bytes() > 10 * 2**20  # this process's, measured
    heap = FakeHeap()
    sweeper = heap.sweeper()
    busy = 0.3  # a loop that never waits longer between two inputs
    heap.now = 600.0
    assert sweeper.maybe(busy) is None and sweeper.baseline == 1000  # first check: baseline
    heap.size = 2500
    heap.now = 900.0
    assert sweeper.maybe(busy) is None  # counted once per interval only
    heap.size = 1900
    heap.now = 1200.0
    assert sweeper.maybe(busy) is None and heap.sweeps == 0  # < 2x the baseline
    heap.size = 2000
    heap.now = 1800.0
    assert sweeper.maybe(busy) == 0 and heap.sweeps == 1  # doubled
    assert sweeper.baseline == 2000  # the next one at 4000
    heap.size = 3900
    heap.now = 2400.0
    assert sweeper.maybe(busy) is None and heap.sweeps == 1


def test_an_idle_loop_asks_its_sweeper_with_the_time_since_its_input() -> None:
    from test_batch_bound import pipeline

    asked: list[float] = []

    class Recording(collector.Sweeper):
        def maybe(self, idle_for_s: float) -> int | None:
            asked.append(idle_for_s)
            return None

    _, _, pipe = pipeline(1, batch_bytes=262_144)
    sched = pipe.loops["scheduler"]
    sched.sweeper = Recording()
    sched._input_at -= 30.0  # its last input 30 s ago
    sched.run_once()  # idle
    assert len(asked) == 1 and asked[0] >= 30.0


def test_an_embedded_pipeline_sweeps_once_its_memory_doubled() -> None:
    """`caesar run` feeds a file with no lull: its pipeline sweeps by memory."""
    heap = FakeHeap()
    pipe = EmbeddedPipeline(two_context_plan())
    pipe.sweeper = heap.sweeper()
    batches = iter([InputRecord("input", 0, t, pos(t, t, 7, 90.0))] for t in range(1, 5))
    pipe.feed(next(batches))
    heap.now = 600.0
    pipe.feed(next(batches))  # the first check: the baseline
    heap.size, heap.now = 1900, 1200.0
    pipe.feed(next(batches))
    assert heap.sweeps == 0
    heap.size, heap.now = 2000, 1800.0
    pipe.feed(next(batches))
    assert heap.sweeps == 1
