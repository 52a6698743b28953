"""Windowed aggregation plans (count, count distinct, sum, avg, min, max over
tumbling and sliding windows, grouped by attributes).

Contract between the compiler (producer) and src/caesar/services/matcher/aggregate
(consumer). Windows are aligned to multiples of `slide` in event time:
a window is [start, start + size) with start a multiple of `slide`; tumbling
means size == slide. A window's result is emitted once event time passes its
end (watermark >= end), stamped per `emit_ts`: "window_last" (the default)
= end - 1, the window's last tick, so an event at `end` (the first tick of the
next window) strictly follows the result and a context derived from it holds
for that event (windows (ti, tt] are half-open); "window_end" = end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from caesar.plans.expr import AggFunc, Expr

WindowKind = Literal["time", "count", "session"]


@dataclass(frozen=True)
class AggregateSpec:
    name: str
    func: AggFunc
    arg: Expr | None  # None only for count(*)


@dataclass(frozen=True)
class AggregatePlan:
    plan_id: str
    source_type: str
    output_type: str
    size: int
    slide: int
    group_by: tuple[str, ...]
    aggregates: tuple[AggregateSpec, ...]
    where: tuple[Expr, ...] = ()  # filter on input events before aggregation
    having: tuple[Expr, ...] = ()  # filter on output rows (Attr(None, name) reads outputs)
    emit_ts: Literal["window_last", "window_end"] = "window_last"  # ts = end - 1 | end
    # "time": the aligned windows above; "count": `size` events per (partition,
    # group), a new window every `slide` events; "session": `size` is the gap
    # (see src/caesar/services/matcher/windows.py).
    window: WindowKind = "time"
