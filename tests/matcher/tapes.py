"""Small helpers to build plans and event tapes for matcher tests."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from caesar.events.batch import EventBatch, StringPool
from caesar.plans.engine import DerivedEvent
from caesar.plans.expr import Attr, Binary, Const, Expr
from caesar.plans.pattern import Output, OutputField, PatternComponent, PatternPlan

SCHEMA = {"x": "int", "y": "int", "s": "string", "f": "float"}
TYPES = ("A", "B", "C", "D")
SCHEMAS = {t: dict(SCHEMA) for t in TYPES}


def comp(var: str, *types: str, neg: bool = False, kleene: bool = False,
         filt: Expr | None = None) -> PatternComponent:
    return PatternComponent(var=var, types=tuple(types), negated=neg, kleene=kleene,
                            iteration_filter=filt)


def attr(var: str, name: str) -> Attr:
    return Attr(var, name)


def cmp(op: str, left: Expr, right: Expr | int | float | str) -> Binary:
    if not isinstance(right, (Attr, Binary, Const)) and not hasattr(right, "op"):
        right = Const(right)
    return Binary(op, left, right)


def plan(plan_id: str, comps: Sequence[PatternComponent], *, where: Sequence[Expr] = (),
         equivalence: Sequence[str] = (), within: int | None = None,
         strategy: str = "skip_till_any_match",
         fields: Mapping[str, Expr] | None = None,
         schemas: Mapping[str, Mapping[str, str]] | None = None) -> PatternPlan:
    output = None
    if fields is not None:
        output = Output(f"{plan_id}_out",
                        tuple(OutputField(k, v) for k, v in fields.items()))
    return PatternPlan(plan_id=plan_id, components=tuple(comps), where=tuple(where),
                       equivalence=tuple(equivalence), within=within,
                       strategy=strategy,  # type: ignore[arg-type]
                       output=output, schemas=dict(schemas or SCHEMAS))


def tape(spec: Iterable[tuple[Any, ...]], pool: StringPool | None = None,
         schemas: Mapping[str, Mapping[str, str]] | None = None,
         partition_key: str | None = None, first_seq: int = 0) -> EventBatch:
    """spec rows: (type, ts, {attrs}) or (type, ts)."""
    records = []
    for row in spec:
        rec = {"type": row[0], "ts": row[1]}
        if len(row) > 2:
            rec.update(row[2])
        records.append(rec)
    part = (lambda r: int(r.get(partition_key, 0))) if partition_key else None
    pool = pool if pool is not None else StringPool()  # an empty pool is falsy
    return EventBatch.from_records(records, schemas or SCHEMAS, pool,
                                   partition_of=part, first_seq=first_seq)


def _norm(v: Any) -> str:
    # -0.0 and 0.0 are the same number (they compare equal)
    return repr(v + 0.0) if isinstance(v, float) else repr(v)


def key(d: DerivedEvent) -> tuple[Any, ...]:
    return (d.plan_id, d.partition, d.start_ts, d.end_ts, d.event_seqs,
            tuple(sorted((k, _norm(v)) for k, v in d.fields.items())))


def multiset(events: Iterable[DerivedEvent]) -> Counter:
    return Counter(key(d) for d in events)


def seqs(events: Iterable[DerivedEvent]) -> set[tuple[int, ...]]:
    return {d.event_seqs for d in events}


def run(engine: Any, batches: Sequence[EventBatch], final_watermark: int | None = None,
        ) -> list[DerivedEvent]:
    out: list[DerivedEvent] = []
    for b in batches:
        out += engine.process(b)
    if final_watermark is not None:
        out += engine.advance(final_watermark)
    return out
