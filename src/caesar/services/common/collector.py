"""Garbage-collector settings for a process that runs CAESAR services.

The engine keeps its state in many long-lived containers (a Part per
partition and key, stacks, pending results) and every batch allocates and
drops many more. With CPython's default thresholds (700, 10, 10) the cyclic
collector then runs thousands of times per second and walks that state:
~20 % of the CPU of the embedded pipeline on Linear Road data. The data path
creates no reference cycles of its own, so collecting rarely loses nothing.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

THRESHOLDS = (20_000, 20, 100)


def tune_collector() -> None:
    """Collect rarely; objects alive now (imports, plans) are never scanned again."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)


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
