"""The 2-phase reference of TPStream: the test oracle of the Cython engine.

The paper's first straw man (section 1): phase 1 derives every situation of
the whole input (Definition 8), phase 2 matches the temporal pattern over
all combinations of them (Definition 13). Each match is then stamped with the
detection time the paper's low-latency analysis gives it (section 5.3.1,
Table 2), independently of how the engine finds it:

    t_d(R) = the third endpoint of the holding relation R;
    t_d(C) = the second endpoint (max of the starts) if C holds R's whole
             prefix group (Table 2), else t_d(R);
    t_d(P) = max over the constraints, and no earlier than each member is
             certain to exist (duration bounds, section 5.3.2).

`certain_at` is a third, brute-force view used by the property tests: the
configuration's match is certain at t if it holds for every value the ends
unknown at t may still take. It checks the analysis (certain at t_d, not at
the instant before) without relying on it.

Written for clarity, not speed; semantics in src/caesar/plans/temporal.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from caesar.events.batch import EventBatch
from caesar.plans.engine import DerivedEvent
from caesar.plans.expr import Agg, Expr
from caesar.plans.temporal import (
    OPEN,
    PREFIX_GROUPS,
    SituationSpec,
    TemporalPlan,
    allen,
    certain,
    mask_of,
)
from caesar.services.matcher.expr_eval import MISSING, aggregate, evaluate, holds


@dataclass(frozen=True)
class Ev:
    ts: int
    seq: int
    type: str
    attrs: dict[str, Any]


@dataclass(frozen=True)
class Situation:
    name: str
    ts: int
    te: int | None  # None: still running at the end of the input
    visible_at: int | None  # first instant it is certain to exist (None: not yet)
    events: tuple[Ev, ...]


def decode_batch(batch: EventBatch) -> dict[int, list[Ev]]:
    """Columnar batch -> per-partition events in arrival order (strings decoded)."""
    out: dict[int, list[Ev]] = {}
    for type_name, cols in batch.by_type.items():
        for row in range(len(cols)):
            attrs: dict[str, Any] = {}
            for name, col in cols.columns.items():
                mask = cols.nulls.get(name)
                if mask is not None and mask[row]:
                    attrs[name] = None
                elif col.dtype.kind == "i" and col.dtype.itemsize == 4:
                    attrs[name] = batch.strings.string(int(col[row]))
                elif col.dtype.kind == "i" and col.dtype.itemsize == 1:
                    attrs[name] = bool(col[row])
                elif col.dtype.kind == "f":
                    attrs[name] = float(col[row])
                else:
                    attrs[name] = int(col[row])
            out.setdefault(int(cols.partition[row]), []).append(
                Ev(int(cols.ts[row]), int(cols.seq[row]), type_name, attrs))
    for events in out.values():
        events.sort(key=lambda e: e.seq)
    return out


def instants(events: Iterable[Ev], types: Iterable[str]) -> list[tuple[int, list[Ev]]]:
    """The partition's events of the plan's source types, grouped by timestamp."""
    wanted = set(types)
    out: list[tuple[int, list[Ev]]] = []
    for e in events:
        if e.type not in wanted:
            continue
        if out and out[-1][0] == e.ts:
            out[-1][1].append(e)
        else:
            out.append((e.ts, [e]))
    return out


def _holds(spec: SituationSpec, e: Ev) -> bool:
    return holds(spec.condition, lambda _var, name: e.attrs.get(name))


def derive(spec: SituationSpec, steps: Sequence[tuple[int, list[Ev]]],
           silence: int | None = None) -> list[Situation]:
    """Phase 1: every situation of one definition (Definition 7 over instants).
    `silence` (the plan's WITHIN): a run still going when the partition falls
    silent that long is cut there -- its end stays unknown -- and the next
    instant starts afresh."""
    runs, cut = _runs(spec, steps, silence)
    times = [t for t, _ in steps]
    lo = spec.min_duration or 0
    hi = spec.max_duration
    out = []
    for ts, te, evs in runs:
        if te is not None and not (lo <= te - ts and (hi is None or te - ts <= hi)):
            continue
        visible = _visible_from(spec, ts, te, te if te is not None else cut.get(ts), times)
        out.append(Situation(spec.name, ts, te, visible, tuple(evs)))
    return out


def _runs(spec: SituationSpec, steps: Sequence[tuple[int, list[Ev]]], silence: int | None
          ) -> tuple[list[tuple[int, int | None, list[Ev]]], dict[int, int]]:
    """The maximal runs of instants whose source events all satisfy the
    condition, as (start, end or None, events), and where silence cut a run
    (its start -> the first instant after the silence)."""
    runs: list[tuple[int, int | None, list[Ev]]] = []
    cut: dict[int, int] = {}
    start: int | None = None
    run: list[Ev] = []
    last: int | None = None
    for t, evs in steps:
        if silence is not None and last is not None and t - last >= silence \
                and start is not None:
            runs.append((start, None, run))
            cut[start] = t
            start = None
        last = t
        src = [e for e in evs if e.type == spec.source_type]
        if not src:
            continue
        if all(_holds(spec, e) for e in src):
            if start is None:
                start, run = t, []
            run.extend(src)
        elif start is not None:
            runs.append((start, t, run))
            start = None
    if start is not None:
        runs.append((start, None, run))
    return runs, cut


def _visible_from(spec: SituationSpec, ts: int, te: int | None, until: int | None,
                  times: list[int]) -> int | None:
    """The first instant a situation [ts, te) is certain to exist; `until`:
    where its run ended or was cut (None: still running)."""
    if spec.max_duration is not None:
        return te  # only its end proves it short enough
    if spec.min_duration is None:
        return ts
    early = [t for t in times if t >= ts and (until is None or t < until)
             and t + 1 - ts >= spec.min_duration]
    return early[0] if early else te


def _group_of(relation: str) -> frozenset[str]:
    return next(g for g in PREFIX_GROUPS if relation in g)


def detection_time(plan: TemporalPlan, config: dict[str, Situation]) -> int:
    """The paper's t_d(P) of a matching configuration (Table 2 + duration bounds)."""
    td = max(_visible(s) for s in config.values())
    for c in plan.constraints:
        x, y = config[c.left], config[c.right]
        if x.te is None and y.te is None:
            # The relation is still open; the constraint can only have been
            # certain through a whole prefix group, at the later start.
            td = max(td, x.ts, y.ts)
            continue
        rel = allen(x.ts, OPEN if x.te is None else x.te, y.ts, OPEN if y.te is None else y.te)
        points = sorted([x.ts, y.ts, OPEN if x.te is None else x.te,
                         OPEN if y.te is None else y.te])
        # t3 of the holding relation, t2 when the constraint holds its prefix group
        td = max(td, points[1] if _group_of(rel) <= set(c.relations) else points[2])
    return td


def _visible(s: Situation) -> int:
    assert s.visible_at is not None
    return s.visible_at


def certain_at(plan: TemporalPlan, config: dict[str, Situation], t: int) -> bool:
    """Brute force: is the configuration's match certain given the instants <= t?"""
    for s in config.values():
        if s.visible_at is None or s.visible_at > t:
            return False
    for c in plan.constraints:
        x, y = config[c.left], config[c.right]
        if not certain(c.mask, x.ts, _end_at(x, t), y.ts, _end_at(y, t)):
            return False
    return True


def _end_at(s: Situation, t: int) -> int | None:
    return s.te if s.te is not None and s.te <= t else None


@dataclass(frozen=True)
class Match:
    partition: int
    config: dict[str, Situation]
    detected: int


class TwoPhaseReference:
    """Collects the input, then derives and matches it all (`matches`)."""

    def __init__(self, plan: TemporalPlan) -> None:
        self.plan = plan
        self.events: dict[int, list[Ev]] = {}

    def process(self, batch: EventBatch) -> None:
        for part, evs in decode_batch(batch).items():
            self.events.setdefault(part, []).extend(evs)

    def situations(self, partition: int) -> dict[str, list[Situation]]:
        steps = instants(self.events.get(partition, ()), self.plan.source_types)
        return {s.name: derive(s, steps, self.plan.within) for s in self.plan.situations}

    def instants_of(self, partition: int) -> list[int]:
        return [t for t, _ in instants(self.events.get(partition, ()), self.plan.source_types)]

    def found(self) -> list[Match]:
        plan = self.plan
        out: list[Match] = []
        for part in sorted(self.events):
            sits = self.situations(part)
            if plan.emit == "end":
                (spec,) = plan.situations
                out += [Match(part, {spec.name: s}, s.te) for s in sits[spec.name]
                        if s.te is not None]
                continue
            names = [s.name for s in plan.situations]
            pools = [[s for s in sits[n] if s.visible_at is not None] for n in names]
            for combo in itertools.product(*pools):
                config = dict(zip(names, combo, strict=True))
                if not all(certain(mask_of(c.relations), config[c.left].ts, config[c.left].te,
                                   config[c.right].ts, config[c.right].te)
                           for c in plan.constraints):
                    continue
                td = detection_time(plan, config)
                if plan.within is not None and td - min(s.ts for s in combo) >= plan.within:
                    continue
                out.append(Match(part, config, td))
        return out

    def matches(self) -> list[DerivedEvent]:
        return [derived_event(self.plan, m) for m in self.found()]


def derived_event(plan: TemporalPlan, m: Match) -> DerivedEvent:
    fields: dict[str, Any] = {}
    if plan.output is not None:
        def agg(node: Agg) -> Any:
            return _aggregate(node, m)

        for f in plan.output.fields:
            value = evaluate(f.expr, _no_attrs, agg)
            fields[f.name] = None if value is MISSING else value
    for name, s in m.config.items():
        fields[f"{name}_ts"] = s.ts
        fields[f"{name}_te"] = s.te if s.te is not None and s.te <= m.detected else None
    return DerivedEvent(plan_id=plan.plan_id,
                        event_type=plan.output.event_type if plan.output else plan.plan_id,
                        partition=m.partition, start_ts=min(s.ts for s in m.config.values()),
                        end_ts=m.detected, fields=fields)


def _no_attrs(var: str | None, name: str) -> Any:
    raise AssertionError(f"situation attribute {var}.{name} read outside an aggregate")


def _aggregate(node: Agg, m: Match) -> Any:
    events = [e for e in m.config[node.var].events if e.ts <= m.detected]
    arg: Expr | None = node.arg
    if arg is None:
        values: list[Any] = [True] * len(events)
    else:
        values = [evaluate(arg, _reader(e)) for e in events]
    return aggregate(node.func, values)


def _reader(e: Ev) -> Any:
    def lookup(_var: str | None, name: str) -> Any:
        return e.attrs.get(name)
    return lookup
