"""Windowed aggregation plans (count, count distinct, sum, avg, min, max over
tumbling and sliding windows, grouped by attributes).

Contract between the compiler (producer) and services/matcher/aggregate
(consumer). Windows are aligned to multiples of `slide` in event time:
a window is [start, start + size) with start a multiple of `slide`; tumbling
means size == slide. A window's result is emitted once event time passes its
end (watermark >= end), with timestamp end - 1 ... see `emit_ts`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from shared.plans.expr import AggFunc, Expr


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
    emit_ts: Literal["window_end"] = "window_end"  # output ts = window end (exclusive bound)
