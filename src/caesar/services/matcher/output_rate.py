"""Output rate limiting of one stage (Esper's output clause, `OUTPUT [ALL |
FIRST | LAST] EVERY d`; the contract is caesar.plans.execution.OutputRate).

Per stream partition, event time is cut into intervals [k * d, (k+1) * d) and
each output falls into the interval of its timestamp:
- FIRST: the interval's first output passes at once, the others are dropped;
- LAST: only the interval's last output (in arrival order) is kept, and
  released when the interval closes (the watermark reaches its end);
- ALL: every output of the interval is kept and released, in arrival order,
  when the interval closes.
Released outputs are stamped with the interval's last tick (end - 1), like a
closed aggregation window, so what consumes them downstream runs with the
contexts that held then. An output whose interval has already closed (a
result released late, e.g. by an end negation) passes at once.

A processor without I/O: `offer` and `advance` return what leaves it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from caesar.plans.execution import OutputRate

Held = tuple[dict[str, Any], int, int]  # (record, start_ts, end_ts)


@dataclass
class OutputLimiter:
    rate: OutputRate
    # (partition, interval index) -> outputs held for it (LAST: at most one)
    held: dict[tuple[int, int], list[Held]] = field(default_factory=dict)
    # FIRST: intervals whose first output has passed, by partition
    seen: dict[int, set[int]] = field(default_factory=dict)
    closed_before: int = -(2**62)  # intervals ending at or before this are closed

    def _interval(self, ts: int) -> int:
        return ts // self.rate.every

    def offer(self, partition: int, record: dict[str, Any], start_ts: int,
              end_ts: int) -> list[Held]:
        """One output of the stage; what passes now."""
        k = self._interval(record["_ts"])
        if (k + 1) * self.rate.every <= self.closed_before:
            return [(record, start_ts, end_ts)]
        if self.rate.kind == "first":
            seen = self.seen.setdefault(partition, set())
            if k in seen:
                return []
            seen.add(k)
            return [(record, start_ts, end_ts)]
        slot = self.held.setdefault((partition, k), [])
        if self.rate.kind == "last":
            slot.clear()
        slot.append((record, start_ts, end_ts))
        return []

    def next_release(self) -> int | None:
        """The least watermark at which `advance` releases something (None: nothing held)."""
        return min(((k + 1) * self.rate.every for _, k in self.held), default=None)

    def advance(self, watermark: int) -> list[Held]:
        """Close the intervals that end at or before `watermark`; what they release."""
        if watermark <= self.closed_before:
            return []
        self.closed_before = watermark
        every = self.rate.every
        out: list[Held] = []
        for key in sorted(k for k in self.held if (k[1] + 1) * every <= watermark):
            last_tick = (key[1] + 1) * every - 1
            for record, start, end in self.held.pop(key):
                out.append(({**record, "_ts": last_tick}, start, end))
        for seen in self.seen.values():
            seen.difference_update([k for k in seen if (k + 1) * every <= watermark])
        return out
