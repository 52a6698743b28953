"""Which contexts held for which stream partition, when: intervals built from
the deriver's context changes (a change at ts says which contexts hold for
t > ts; context windows are half-open, (ti, tt])."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass


@dataclass
class Interval:
    context: str
    start: int  # the window holds for t > start
    end: int | None = None  # ... and t <= end; None: still open

    def as_json(self) -> dict[str, object]:
        return {"context": self.context, "start": self.start, "end": self.end}


class ContextTimeline:
    """Bounded: the most recently changed `max_partitions` partitions, each
    with its newest `max_intervals` intervals (a live view, not an archive).
    Thread-safe: a feed applies changes while the HTTP threads read."""

    def __init__(self, max_partitions: int = 200, max_intervals: int = 200) -> None:
        self.max_partitions = max_partitions
        self.max_intervals = max_intervals
        self._parts: OrderedDict[str, list[Interval]] = OrderedDict()
        self.changes = 0
        self.latest_ts: int | None = None
        self._lock = threading.Lock()

    def apply(self, key: str, ts: int, contexts: tuple[str, ...]) -> None:
        """The contexts holding for partition `key` from after `ts` on."""
        with self._lock:
            self._apply(key, ts, contexts)

    def _apply(self, key: str, ts: int, contexts: tuple[str, ...]) -> None:
        intervals = self._parts.pop(key, [])
        self._parts[key] = intervals  # most recently changed last
        holding = set(contexts)
        open_now = {i.context: i for i in intervals if i.end is None}
        for name, interval in open_now.items():
            if name not in holding:
                interval.end = ts
        intervals.extend(Interval(name, ts) for name in contexts if name not in open_now)
        del intervals[:-self.max_intervals]
        while len(self._parts) > self.max_partitions:
            self._parts.popitem(last=False)
        self.changes += 1
        self.latest_ts = ts if self.latest_ts is None else max(self.latest_ts, ts)

    def advance(self, ts: int) -> None:
        """Event time reached `ts` (the deriver's progress): open windows reach it."""
        with self._lock:
            self.latest_ts = ts if self.latest_ts is None else max(self.latest_ts, ts)

    def holding(self, key: str) -> tuple[str, ...]:
        with self._lock:
            return tuple(i.context for i in self._parts.get(key, []) if i.end is None)

    def partitions(self) -> list[str]:
        with self._lock:
            return list(self._parts)

    def as_json(self) -> dict[str, object]:
        with self._lock:
            return {"changes": self.changes, "latest_ts": self.latest_ts,
                    "partitions": [{"key": key, "intervals": [i.as_json() for i in intervals]}
                                   for key, intervals in reversed(self._parts.items())]}
