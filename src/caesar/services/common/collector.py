"""Garbage-collector settings for a process that runs CAESAR services.

The engine keeps its state in many long-lived containers (a Part per
partition and key, stacks, pending results) and every batch allocates and
drops many more. With CPython's default thresholds (700, 10, 10) the cyclic
collector then runs thousands of times per second and walks that state:
~20 % of the CPU of the embedded pipeline on Linear Road data.

Even collecting rarely, each object that lives past a batch was walked
twice, once young and once in the middle generation, to find nothing: the
data path makes no reference cycles (on Linear Road's peak the collector
found 317 cyclic objects in 90 s of input, all from one-off signature
parsing). So the survivors of each young collection are frozen (never walked
again; reference counting still frees them), and `sweep` unfreezes and
collects everything now and then, for the cycles a user function may leave:
in a lull of the input, or when the process's memory doubled (`Sweeper`).
Loops also call `settle` between steps, which freezes what a step left
alive without walking it: the collector's count of young objects is net of
frees, so without it the young list grows unseen while old state is freed.
"""

from __future__ import annotations

import contextlib
import gc
import os
import resource
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

THRESHOLDS = (20_000, 20, 100)
SWEEP_INTERVAL_S = 600.0  # at least this long between two full collections
# A full collection walks every object and stops the loop meanwhile: 0.8-1.3 s
# with one expressway's Linear Road state in a process (3.2-3.7M objects,
# session 19). So it waits for a lull, this long without input; a loop that
# never has one sweeps when its resident memory doubled since the last sweep
# (the state grew, or something leaks cycles): a pause per doubling, not one
# every interval. (Counting the frozen objects instead walks their list:
# 0.1-0.2 s for that state.)
SWEEP_LULL_S = 5.0


def resident_bytes() -> int:
    """This process's resident memory now (its peak where /proc is missing)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# Pauses at least this long are kept with their wall time (the last
# PAUSES_KEPT of them), so a benchmark can tell the longest in its window.
LONG_PAUSE_S = 0.01
PAUSES_KEPT = 512


class CollectorClock:
    """The collector's runs and seconds in this process, per generation, and
    its recent long pauses."""

    def __init__(self) -> None:
        self.runs = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self.max_s = [0.0, 0.0, 0.0]
        # (wall time at its end, seconds, generation, young objects at its
        # start, unreachable objects it found)
        self.pauses: deque[tuple[float, float, int, int, int]] = deque(maxlen=PAUSES_KEPT)
        self._started = 0.0
        self._young = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._young = gc.get_count()[0]
            self._started = time.perf_counter()
            return
        g, took = info["generation"], time.perf_counter() - self._started
        self.runs[g] += 1
        self.seconds[g] += took
        self.max_s[g] = max(self.max_s[g], took)
        if took >= LONG_PAUSE_S:
            self.pauses.append((time.time(), took, g, self._young, info["collected"]))

    def as_dict(self) -> dict[str, Any]:
        # Copied first, by list() (no collector object allocated while it
        # iterates; tuple() allocates after taking its iterator): the loop
        # below allocates, so a collection (this clock's callback) may append
        # a pause meanwhile, as may the service loop's thread (stats() runs in
        # one of Ray's).
        pauses = list(self.pauses)
        return {"gc_runs": list(self.runs), "gc_s": [round(s, 3) for s in self.seconds],
                "gc_max_s": [round(s, 4) for s in self.max_s],
                "gc_pauses": [[round(at, 3), round(s, 4), g, young, found]
                              for at, s, g, young, found in pauses]}


def longest_pause(pauses: list[list[float]], since: float) -> float:
    """The longest of `as_dict()["gc_pauses"]` that ended at or after `since`
    (wall seconds): 0 when none did (or all were shorter than LONG_PAUSE_S)."""
    return max((p[1] for p in pauses if p[0] >= since), default=0.0)


CLOCK = CollectorClock()


def _freeze_survivors(phase: str, info: dict[str, Any]) -> None:
    if phase == "stop" and info["generation"] == 0:
        gc.freeze()


def tune_collector(freeze_survivors: bool = True) -> None:
    """Collect rarely; objects alive now (imports, plans) are never scanned
    again, nor (freeze_survivors) what outlives a young collection. Called
    again (a benchmark's next run), it first collects what the earlier call
    froze: `gc.collect` alone skips frozen objects, and a discarded
    pipeline's engines sit in cycles with everything they hold (24 GB of
    Figure 14's runs, then the OOM killer, in session 22)."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    for callback in (CLOCK, _freeze_survivors):
        if callback in gc.callbacks:
            gc.callbacks.remove(callback)
    gc.callbacks.append(CLOCK)
    if freeze_survivors:
        gc.callbacks.append(_freeze_survivors)


def settle() -> None:
    """Between two steps of a loop in a process that freezes survivors
    (tune_collector): freeze what is alive now, without walking it.
    CPython starts a young collection when allocations outnumber
    deallocations by the threshold, and every object freed counts, frozen
    ones too. So while a loop replaces old state with new (events make
    parts as a sweep frees others) the young list grows unseen, and the
    collection that finally comes walks all of it: 0.3-0.55 s at each
    sweep of Linear Road's 4-expressway state (session 21). Frozen each
    step, the young list holds one step's objects at most."""
    if _freeze_survivors in gc.callbacks:
        gc.freeze()


def sweep() -> int:
    """A full collection of every object, the frozen ones too, which are
    frozen again after it: the unreachable objects it found. Nothing in a
    process that does not freeze survivors (tune_collector): its collector
    finds cycles itself, and objects someone else froze stay as they are."""
    if _freeze_survivors not in gc.callbacks:
        return 0
    gc.unfreeze()
    try:
        return gc.collect()
    finally:
        gc.freeze()


class Sweeper:
    """When a service loop runs `sweep`: see SWEEP_LULL_S."""

    def __init__(self, interval_s: float = SWEEP_INTERVAL_S, lull_s: float = SWEEP_LULL_S,
                 clock: Callable[[], float] = time.monotonic,
                 size: Callable[[], int] = resident_bytes,
                 collect: Callable[[], int] | None = None) -> None:
        self.interval_s, self.lull_s = interval_s, lull_s
        self.clock, self.size = clock, size
        self.collect = collect or sweep
        self.swept_at = self.checked_at = clock()
        self.baseline: int | None = None  # the size after the last sweep (or at the first check)

    def maybe(self, idle_for_s: float) -> int | None:
        """Called when the loop is idle, `idle_for_s` since its last input:
        the unreachable objects found if it swept, else None."""
        now = self.clock()
        if now - self.swept_at < self.interval_s:
            return None
        if idle_for_s < self.lull_s:
            if now - self.checked_at < self.interval_s:
                return None
            self.checked_at = now
            size = self.size()
            if self.baseline is None:
                self.baseline = size
            if size < 2 * self.baseline:
                return None
        found = self.collect()
        self.swept_at = self.checked_at = self.clock()
        self.baseline = self.size()
        return found


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection inside. For building or reading big acyclic data
    (a checkpoint: ~1M new lists, dicts and bytes at LR's peak): every
    collection it triggers walks the whole heap, which made a matcher
    snapshot 5-13 CPU-s instead of 1."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
