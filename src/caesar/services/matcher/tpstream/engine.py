"""The temporal engine: TPStream plans over columnar batches.

    engine = TemporalEngine(plans)
    out = engine.process(batch, active)   # matches certain at the batch's instants
    engine.advance(watermark)             # releases situations WITHIN has passed
    engine.discard(plan_ids, partition)   # a context window ended: forget its state
    engine.snapshot(partition) / restore  # plain data (dicts, lists, numbers)

Per batch and plan, numpy evaluates each situation's condition and each
aggregate's argument over the source columns (vector_eval.py), then the
Cython runner (core.pyx) walks the events: deriver and matcher in one pass,
matches emitted at their earliest detection time. A batch must hold whole
instants (every event of one timestamp and partition), as the matcher's
stream transactions do; events of a partition come in timestamp order.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from caesar.errors import PlanError
from caesar.events.batch import EventBatch, StringPool, TypeColumns
from caesar.plans.engine import DerivedEvent
from caesar.plans.expr import Agg, Attr, Binary, Call, Const, Expr, Unary
from caesar.plans.temporal import TemporalPlan
from caesar.services.matcher.expr_eval import MISSING, evaluate
from caesar.services.matcher.tpstream.compile import AGG_CODES, CompiledPlan, compile_plan
from caesar.services.matcher.tpstream.core import PlanRunner
from caesar.services.matcher.tpstream.order import AdaptiveOrder
from caesar.services.matcher.tpstream.vector_eval import holds, numbers

STATE_VERSION = 1
KIND_CODES = {"int": 0, "float": 1, "bool": 2, "string": 3}


def expr_type(expr: Expr, schema: dict[str, str]) -> str:
    """Type of an expression over one event type's attributes."""
    match expr:
        case Const(value=v):
            return "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else \
                "float" if isinstance(v, float) else "string"
        case Attr(name=name):
            return schema.get(name, "float")
        case Unary(op="NOT"):
            return "bool"
        case Unary(operand=o):
            return expr_type(o, schema)
        case Binary(op=op, left=left, right=right):
            if op in ("AND", "OR", "=", "!=", "<", "<=", ">", ">="):
                return "bool"
            lt, rt = expr_type(left, schema), expr_type(right, schema)
            return "int" if lt in ("int", "bool") and rt in ("int", "bool") and op != "/" \
                else "float"
        case Call(func=func, args=args):
            if func in ("floor", "ceil"):
                return "int"
            types = {expr_type(a, schema) for a in args}
            return "float" if "float" in types else "int"
    return "float"


# ts, partition, type index, conditions, aggregate values, known, seq
_Columns = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                 np.ndarray]


class _Plan:
    def __init__(self, plan: TemporalPlan, adaptive: bool) -> None:
        self.plan = plan
        cp = compile_plan(plan)
        # aggregates sorted by situation: the runner keeps them in ranges
        order = sorted(range(len(cp.aggs)), key=lambda k: cp.aggs[k].situation)
        cp.aggs = [cp.aggs[k] for k in order]
        remap = {old: new for new, old in enumerate(order)}
        cp.agg_of = {node: remap[k] for node, k in cp.agg_of.items()}
        self.cp: CompiledPlan = cp
        self.runner = PlanRunner(cp.n, cp.min_duration, cp.max_duration,
                                 [a.situation for a in cp.aggs],
                                 [AGG_CODES[a.func] for a in cp.aggs], cp.mask, cp.orders,
                                 cp.within, cp.emit_end)
        self.types = list(dict.fromkeys(cp.sources))
        self.type_sits = np.array([sum(1 << i for i, t in enumerate(cp.sources) if t == typ)
                                   for typ in self.types], np.int64)
        self.out_kinds = []
        for a in cp.aggs:
            schema = plan.schemas.get(cp.sources[a.situation], {})
            arg_t = expr_type(a.arg, schema) if a.arg is not None else "int"
            self.out_kinds.append("int" if a.func == "count" else
                                  "float" if a.func == "avg" else arg_t)
        fields = plan.output.fields if plan.output is not None else ()
        self.event_type = plan.output.event_type if plan.output is not None else plan.plan_id
        self.exprs = [f for f in fields if not isinstance(f.expr, Agg)]
        self.runner.set_output(
            cp.names, [(f.name, cp.agg_of[f.expr] if isinstance(f.expr, Agg) else -1)
                       for f in fields],
            [KIND_CODES[k] for k in self.out_kinds], bool(self.exprs))
        self.adaptive = AdaptiveOrder(cp, self.runner) if adaptive and cp.n > 2 else None

    def feed(self, batch: EventBatch) -> None:
        # One set of columns per source type present, merged into arrival
        # order; numpy per batch and type, never per event.
        parts = [self._type_columns(ti, cols, batch.strings)
                 for ti, typ in enumerate(self.types)
                 if (cols := batch.by_type.get(typ)) is not None and len(cols)]
        if not parts:
            return
        ts, part, etype, cond, val, known = _in_arrival_order(parts)
        try:
            self.runner.feed(np.ascontiguousarray(ts, np.int64),
                             np.ascontiguousarray(self._slots(part)),
                             np.ascontiguousarray(etype), self.type_sits,
                             np.ascontiguousarray(cond), np.ascontiguousarray(val),
                             np.ascontiguousarray(known))
        except ValueError as exc:
            raise PlanError(f"temporal plan {self.plan.plan_id}: {exc}") from None
        if self.adaptive is not None:
            self.adaptive.update()

    def _type_columns(self, ti: int, cols: TypeColumns, strings: StringPool) -> _Columns:
        """The runner's columns for the events of source type `self.types[ti]`."""
        cond = self._conditions(self.types[ti], cols, strings)
        val, known = self._aggregate_args(self.types[ti], cols, strings)
        return (cols.ts, cols.partition, np.full(len(cols), ti, np.int8), cond, val, known,
                cols.seq)

    def _conditions(self, typ: str, cols: TypeColumns, strings: StringPool) -> np.ndarray:
        """Which situation conditions each event satisfies (event x situation)."""
        cond = np.zeros((len(cols), self.cp.n), np.uint8)
        for i, spec in enumerate(self.plan.situations):
            if spec.source_type == typ:
                cond[:, i] = holds(spec.condition, cols, strings)
        return cond

    def _aggregate_args(self, typ: str, cols: TypeColumns, strings: StringPool
                        ) -> tuple[np.ndarray, np.ndarray]:
        """Each aggregate's argument per event, and whether it is known (not
        null); aggregates over another type's situation stay unknown."""
        cp = self.cp
        n_agg = max(len(cp.aggs), 1)
        val = np.zeros((len(cols), n_agg), np.float64)
        known = np.zeros((len(cols), n_agg), np.uint8)
        for k, a in enumerate(cp.aggs):
            if cp.sources[a.situation] != typ:
                continue
            if a.arg is None:
                known[:, k] = 1
            else:
                val[:, k], known[:, k] = numbers(a.arg, cols, strings)
        return val, known

    def _slots(self, part: np.ndarray) -> np.ndarray:
        """The runner's state slot of each event's partition (one lookup per
        distinct partition of the batch)."""
        uniq, inverse = np.unique(part, return_inverse=True)
        slot_of = np.fromiter((self.runner.slot(int(p)) for p in uniq), np.int64, len(uniq))
        return slot_of[inverse]

    def drain(self, strings: StringPool) -> list[DerivedEvent]:
        out = self.runner.out
        if not out:
            return []
        self.runner.out = []
        pid, etype = self.plan.plan_id, self.event_type
        if self.exprs:
            for _partition, _td, _start, fields, values in out:
                aggs = _Aggs(self.cp, values or [])
                for f in self.exprs:
                    value = evaluate(f.expr, _no_attrs, aggs)
                    fields[f.name] = None if value is MISSING else value
        return [DerivedEvent(pid, etype, partition, start, td, fields)
                for partition, td, start, fields, _ in out]


def _in_arrival_order(parts: list[_Columns]) -> tuple[np.ndarray, ...]:
    """The per-type columns as one stream in arrival (`seq`) order."""
    if len(parts) == 1:
        return parts[0][:6]
    by_seq = np.argsort(np.concatenate([p[6] for p in parts]), kind="stable")
    return tuple(np.concatenate([p[c] for p in parts])[by_seq] for c in range(6))


class _Aggs:
    """Aggregate lookup of one match (for expressions over aggregates)."""

    def __init__(self, cp: CompiledPlan, values: list[Any]) -> None:
        self.cp, self.values = cp, values

    def __call__(self, node: Agg) -> Any:
        value = self.values[self.cp.agg_of[node]]
        return MISSING if value is None else value


def _no_attrs(var: str | None, name: str) -> Any:
    return MISSING


class TemporalEngine:
    """Every TPStream plan of a matcher (or deriver), per stream partition."""

    def __init__(self, plans: Sequence[TemporalPlan], *, adaptive: bool = True) -> None:
        self.plans = {p.plan_id: _Plan(p, adaptive) for p in plans}
        self.strings = StringPool()
        self._watermark = -(2**62)
        self._swept = -(2**62)

    def process(self, batch: EventBatch, active: Collection[str] | None = None
                ) -> list[DerivedEvent]:
        self.strings = batch.strings
        out: list[DerivedEvent] = []
        for pid, p in self.plans.items():
            if active is not None and pid not in active:
                continue
            p.runner.strings = batch.strings
            p.feed(batch)
            out += p.drain(batch.strings)
        return out

    def advance(self, watermark: int) -> list[DerivedEvent]:
        """Releases situations no later match can use, partitions that hold
        nothing, and partitions silent for a whole WITHIN window (they would
        start afresh at their next instant anyway): bounded state on an
        unbounded stream of partitions. Detection happens at events, so
        nothing is emitted here."""
        if watermark <= self._watermark:
            return []
        self._watermark = watermark
        for p in self.plans.values():
            p.runner.purge(watermark)
        # Forgetting idle partitions costs a pass over all of them: do it when
        # event time has moved by a sizeable step.
        step = min((p.cp.within for p in self.plans.values() if p.cp.within > 0), default=1)
        if watermark - self._swept >= max(step, 1):
            self._swept = watermark
            for p in self.plans.values():
                idle = [q for q in p.runner.slot_of if p.runner.idle(q)]
                for partition in set(idle) | set(p.runner.stale(watermark)):
                    p.runner.release(partition)
        return []

    def discard(self, plan_ids: Collection[str], partition: int) -> None:
        for pid in plan_ids:
            p = self.plans.get(pid)
            if p is not None:
                p.runner.release(partition)

    def snapshot(self, partition: int) -> dict[str, Any]:
        plans = {}
        for pid, p in self.plans.items():
            state = p.runner.state(partition)
            if state is not None:
                plans[pid] = state
        return {"version": STATE_VERSION, "plans": plans}

    def restore(self, partition: int, state: dict[str, Any],
                strings: StringPool | None = None) -> None:
        # (`strings` unused: conditions on strings are decided per batch, the
        # state holds situations and numbers only)
        if state.get("version") != STATE_VERSION:
            raise PlanError(f"temporal engine state version {state.get('version')} is not "
                            f"{STATE_VERSION}")
        for pid, s in state["plans"].items():
            if pid in self.plans:
                self.plans[pid].runner.load(partition, s)

    # -- introspection (tests, bench) --
    def partitions(self) -> int:
        return sum(len(p.runner.slot_of) for p in self.plans.values())

    def buffered(self) -> int:
        return sum(p.runner.buffered() for p in self.plans.values())
