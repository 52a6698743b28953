"""collector_paused: no cyclic collection inside, the collector's state
restored after (also when the body raises, or when it was off already).
tune_collector: what outlives a young collection is frozen, still freed by
reference counting; a cycle among frozen objects waits for `sweep`."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from caesar.services.common import collector
from caesar.services.common.collector import collector_paused, sweep, tune_collector


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


def test_the_clock_counts_runs_per_generation(tuned: None) -> None:
    runs = list(collector.CLOCK.runs)
    gc.collect(0)
    gc.collect(1)
    assert collector.CLOCK.runs[0] == runs[0] + 1 and collector.CLOCK.runs[1] == runs[1] + 1
    assert set(collector.CLOCK.as_dict()) == {"gc_runs", "gc_s", "gc_max_s", "gc_pauses"}


def test_long_pauses_are_kept_with_their_time_for_a_window_s_longest() -> None:
    clock = collector.CollectorClock()
    for took in (0.002, 0.03, 0.012):
        clock("start", {"generation": 0})
        clock._started -= took  # as if the collection had taken `took`
        clock("stop", {"generation": 0})
    pauses = clock.as_dict()["gc_pauses"]
    assert [round(s, 3) for _, s in pauses] == [0.03, 0.012]  # the short one is not kept
    assert collector.longest_pause(pauses, since=0.0) == pytest.approx(0.03, abs=1e-3)
    assert collector.longest_pause(pauses, since=pauses[-1][0] + 1) == 0.0


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


def test_an_idle_loop_sweeps_once_per_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    from test_batch_bound import pipeline

    from caesar.services.common import loop as loop_module

    swept: list[float] = []
    monkeypatch.setattr(loop_module, "sweep", lambda: swept.append(1.0) or 0)
    _, _, pipe = pipeline(1, batch_bytes=262_144)
    sched = pipe.loops["scheduler"]
    sched.run_once()  # idle, the interval not yet over
    assert swept == []
    monkeypatch.setattr(loop_module, "SWEEP_INTERVAL_S", 0.0)
    sched.run_once()
    assert swept == [1.0]
    monkeypatch.setattr(loop_module, "SWEEP_INTERVAL_S", 3600.0)
    sched.run_once()  # swept just now
    assert swept == [1.0]
