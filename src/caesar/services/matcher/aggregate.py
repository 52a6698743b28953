"""Windowed aggregation executor for `caesar.plans.aggregate.AggregatePlan`.

Windows are aligned to multiples of `slide`: [start, start + size). Events are
added in batches; per batch the work is numpy-vectorized: every event is
expanded to the windows that contain it, rows are grouped on
(partition, group-by values, window start) with one `np.unique`, and each
aggregate is reduced per group with ufunc `reduceat`. Only the per-group merge
into the open-window table is a Python loop (one step per group, not per event).
A window is emitted once the watermark reaches its end (no event with
ts < end can follow), stamped with ts = end - 1 (or end; the plan's `emit_ts`).
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from caesar.errors import PlanError
from caesar.events.batch import StringPool
from caesar.plans.aggregate import AggregatePlan, AggregateSpec
from caesar.plans.expr import Attr, Binary, Call, Const, Expr, Unary

STATE_VERSION = 2


# ---------------------------------------------------------------- expressions
Columns = tuple[np.ndarray, np.ndarray]  # (values, missing mask)

COMPARISONS = {"=": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
               ">": np.greater, ">=": np.greater_equal}
ARITHMETIC = {"+": np.add, "-": np.subtract, "*": np.multiply}
DIVISIONS = {"/": np.true_divide, "%": np.mod}  # by zero: the value is missing


def eval_columns(expr: Expr, cols: Mapping[str, np.ndarray], missing: Mapping[str, np.ndarray],
                 n: int, strings: StringPool) -> Columns:
    """Evaluate `expr` over columns; returns (values, missing mask).

    Follows src/caesar/plans/expr.py: a comparison reading a missing value is
    false (not missing); division by zero makes the value missing; strings are
    interned codes, so only = and != make sense on them.
    """
    none = np.zeros(n, dtype=bool)
    match expr:
        case Const(value=value):
            return _constant(value, n, strings), none
        case Attr(name=name):
            if name not in cols:
                return np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool)
            return cols[name], missing.get(name, none)
        case Unary(op=op, operand=operand):
            v, m = eval_columns(operand, cols, missing, n, strings)
            if op == "NOT":
                return ~(v.astype(bool)) & ~m, none
            return -v, m
        case Binary(op=op, left=left, right=right):
            return _binary(op, eval_columns(left, cols, missing, n, strings),
                           eval_columns(right, cols, missing, n, strings), none)
        case Call(func=func, args=args):
            return _call(func, [eval_columns(a, cols, missing, n, strings) for a in args], none)
    raise PlanError(f"expression not supported in an aggregation: {expr!r}")


def _constant(value: int | float | str | bool, n: int, strings: StringPool) -> np.ndarray:
    if isinstance(value, str):
        return np.full(n, strings.code(value), dtype=np.int64)
    if isinstance(value, bool):
        return np.full(n, value, dtype=bool)
    return np.full(n, value)


def _binary(op: str, left: Columns, right: Columns, none: np.ndarray) -> Columns:
    """AND/OR and comparisons are never missing (missing reads as false);
    arithmetic is missing where an operand is or a divisor is zero."""
    (lv, lm), (rv, rm) = left, right
    if op == "AND":
        return lv.astype(bool) & rv.astype(bool) & ~lm & ~rm, none
    if op == "OR":
        return (lv.astype(bool) & ~lm) | (rv.astype(bool) & ~rm), none
    both = lm | rm
    if op in COMPARISONS:
        return COMPARISONS[op](lv, rv) & ~both, none
    with np.errstate(divide="ignore", invalid="ignore"):
        if op in ARITHMETIC:
            return ARITHMETIC[op](lv, rv), both
        if op in DIVISIONS:
            zero = rv == 0
            return DIVISIONS[op](lv, np.where(zero, 1, rv)), both | zero
    raise PlanError(f"operator {op} not supported in an aggregation")


def _call(func: str, args: list[Columns], none: np.ndarray) -> Columns:
    m = none
    for _, am in args:
        m = m | am
    first = args[0][0]
    if func == "abs":
        return np.abs(first), m
    if func == "floor":
        return np.floor(first).astype(np.int64), m
    if func == "ceil":
        return np.ceil(first).astype(np.int64), m
    if func in ("least", "greatest"):
        reduce = np.minimum if func == "least" else np.maximum
        out = first
        for v, _ in args[1:]:
            out = reduce(out, v)
        return out, m
    raise PlanError(f"function {func} not supported in an aggregation")


def columns_from_records(records: Sequence[Mapping[str, Any]], names: Sequence[str],
                         strings: StringPool) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Column arrays for `names` (strings interned, None -> missing mask)."""
    cols: dict[str, np.ndarray] = {}
    missing: dict[str, np.ndarray] = {}
    for name in names:
        values = [r.get(name) for r in records]
        mask = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
        sample = next((v for v in values if v is not None), None)
        if isinstance(sample, str):
            arr = np.fromiter((-1 if v is None else strings.code(v) for v in values),
                              dtype=np.int64, count=len(values))
        elif isinstance(sample, float):
            arr = np.fromiter((0.0 if v is None else v for v in values), dtype=np.float64,
                              count=len(values))
        else:
            arr = np.fromiter((0 if v is None else v for v in values), dtype=np.int64,
                              count=len(values))
        cols[name] = arr
        if mask.any():
            missing[name] = mask
    return cols, missing


def attributes(expr: Expr | None) -> set[str]:
    match expr:
        case None | Const():
            return set()
        case Attr(name=name):
            return {name}
        case Unary(operand=operand):
            return attributes(operand)
        case Binary(left=left, right=right):
            return attributes(left) | attributes(right)
        case Call(args=args):
            out: set[str] = set()
            for a in args:
                out |= attributes(a)
            return out
    raise PlanError(f"expression not supported in an aggregation: {expr!r}")


# ---------------------------------------------------------------- executor
@dataclass(frozen=True)
class _Groups:
    """One batch grouped by window: `rows` (event index per row, sorted by
    group), group starts `bounds`, rows per group `counts`, window `slots`."""

    rows: np.ndarray
    bounds: np.ndarray
    counts: np.ndarray
    slots: np.ndarray


class AggregateExecutor:
    """Runs one AggregatePlan over batches of events of its source type.

    Open windows live in slots of numpy accumulator arrays (count, total, min,
    max per aggregate); a dict maps (partition, group values, window start)
    to its slot, and windows are indexed by their end so closing them does
    not scan the open ones.
    """

    def __init__(self, plan: AggregatePlan, strings: StringPool | None = None) -> None:
        if plan.size <= 0 or plan.slide <= 0:
            raise PlanError(f"{plan.plan_id}: window size and slide must be positive")
        self.plan = plan
        self.strings = strings or StringPool()
        needed: set[str] = set(plan.group_by)
        for spec in plan.aggregates:
            needed |= attributes(spec.arg)
        for cond in plan.where:
            needed |= attributes(cond)
        self._needed = sorted(needed)
        self._windows_per_event = -(-plan.size // plan.slide)
        na = len(plan.aggregates)
        self._distinct_aggs = [i for i, s in enumerate(plan.aggregates)
                               if s.func == "count_distinct"]
        self._slot: dict[tuple, int] = {}  # (partition, group values..., start) -> slot
        self._free: list[int] = []
        cap = 64
        self._count = np.zeros((na, cap), dtype=np.int64)
        self._total = np.zeros((na, cap), dtype=np.float64)
        self._low = np.full((na, cap), np.inf)
        self._high = np.full((na, cap), -np.inf)
        self._distinct: dict[int, list[set]] = {}  # slot -> one set per aggregate
        self._by_end: dict[int, list[tuple]] = {}
        self._keys: dict[int, str] = {}  # partition id -> readable key
        self._string_group = [False] * len(plan.group_by)
        self.watermark = -(2**62)

    def _slots(self, keys: list[tuple]) -> np.ndarray:
        out = np.empty(len(keys), dtype=np.int64)
        size = self.plan.size
        for i, key in enumerate(keys):
            slot = self._slot.get(key)
            if slot is None:
                slot = self._free.pop() if self._free else len(self._slot)
                if slot >= self._count.shape[1]:
                    self._grow()
                self._slot[key] = slot
                self._by_end.setdefault(key[-1] + size, []).append(key)
                if self._distinct_aggs:
                    self._distinct[slot] = [set() for _ in self.plan.aggregates]
            out[i] = slot
        return out

    def _grow(self) -> None:
        cap = self._count.shape[1]
        self._count = np.concatenate([self._count, np.zeros_like(self._count)], axis=1)
        self._total = np.concatenate([self._total, np.zeros_like(self._total)], axis=1)
        self._low = np.concatenate([self._low, np.full_like(self._low, np.inf)], axis=1)
        self._high = np.concatenate([self._high, np.full_like(self._high, -np.inf)], axis=1)
        assert self._count.shape[1] == 2 * cap

    # -- input
    def add(self, records: Sequence[Mapping[str, Any]], ts: np.ndarray,
            partitions: np.ndarray, keys: Mapping[int, str] | None = None) -> None:
        """Add events (dicts of the source type) with their ts and partition ids."""
        n = len(records)
        if n == 0:
            return
        if keys:
            self._keys.update(keys)
        cols, missing = columns_from_records(records, self._needed, self.strings)
        for i, g in enumerate(self.plan.group_by):
            if isinstance(records[0].get(g), str):
                self._string_group[i] = True
        idx = self._passing(cols, missing, ts, n)
        if idx is not None:
            ts, partitions = ts[idx], partitions[idx]
            cols = {k: v[idx] for k, v in cols.items()}
            missing = {k: v[idx] for k, v in missing.items()}
            n = len(idx)
            if n == 0:
                return
        groups = self._group(cols, ts, partitions, n)
        for ai, spec in enumerate(self.plan.aggregates):
            self._accumulate(ai, spec, groups, cols, missing, n)

    def _passing(self, cols: dict[str, np.ndarray], missing: dict[str, np.ndarray],
                 ts: np.ndarray, n: int) -> np.ndarray | None:
        """Indexes of the events that pass WHERE and are not late; None: all."""
        keep = np.ones(n, dtype=bool)
        for cond in self.plan.where:
            v, _ = eval_columns(cond, cols, missing, n, self.strings)
            keep &= v.astype(bool)
        keep &= ts >= self.watermark  # windows already emitted cannot change
        return None if keep.all() else np.nonzero(keep)[0]

    def _group(self, cols: dict[str, np.ndarray], ts: np.ndarray, partitions: np.ndarray,
               n: int) -> _Groups:
        """Expand each event to the windows containing it (starts s = k*slide
        with s <= ts < s + size) and group on (partition, group-by, start)."""
        plan = self.plan
        last_start = (ts // plan.slide) * plan.slide
        w = self._windows_per_event
        rep = np.repeat(np.arange(n), w)
        starts = np.repeat(last_start, w) - np.tile(np.arange(w) * plan.slide, n)
        inside = starts + plan.size > np.repeat(ts, w)
        rep, starts = rep[inside], starts[inside]
        key_cols = [partitions[rep]]
        for g in plan.group_by:
            col = cols[g][rep]
            key_cols.append(col.view(np.int64) if col.dtype == np.float64 else col.astype(np.int64))
        key_cols.append(starts)
        keys_matrix = np.stack(key_cols, axis=1)
        order = np.lexsort(keys_matrix.T[::-1])
        keys_sorted = keys_matrix[order]
        change = np.ones(len(order), dtype=bool)
        change[1:] = np.any(keys_sorted[1:] != keys_sorted[:-1], axis=1)
        bounds = np.nonzero(change)[0]
        return _Groups(rows=rep[order], bounds=bounds,
                       counts=np.diff(np.append(bounds, len(order))),
                       slots=self._slots(list(map(tuple, keys_sorted[bounds].tolist()))))

    def _accumulate(self, ai: int, spec: AggregateSpec, groups: _Groups,
                    cols: dict[str, np.ndarray], missing: dict[str, np.ndarray], n: int) -> None:
        """Merge one aggregate of every group into its window's accumulators."""
        rows, bounds, slots = groups.rows, groups.bounds, groups.slots
        if spec.arg is None:
            self._count[ai, slots] += groups.counts
            return
        v, m = eval_columns(spec.arg, cols, missing, n, self.strings)
        v = np.asarray(v)[rows]
        valid = ~np.asarray(m)[rows]
        vf = v.astype(np.float64)
        self._count[ai, slots] += np.add.reduceat(valid.astype(np.int64), bounds)
        self._total[ai, slots] += np.add.reduceat(np.where(valid, vf, 0.0), bounds)
        self._low[ai, slots] = np.minimum(
            self._low[ai, slots], np.minimum.reduceat(np.where(valid, vf, np.inf), bounds))
        self._high[ai, slots] = np.maximum(
            self._high[ai, slots], np.maximum.reduceat(np.where(valid, vf, -np.inf), bounds))
        if spec.func == "count_distinct":
            ends = np.append(bounds[1:], len(rows))
            for s, e, slot in zip(bounds.tolist(), ends.tolist(), slots.tolist(), strict=True):
                self._distinct[slot][ai].update(v[s:e][valid[s:e]].tolist())

    # -- output
    def advance(self, watermark: int) -> list[dict[str, Any]]:
        """Close windows with end <= watermark; rows ordered by (end, partition, group)."""
        if watermark <= self.watermark:
            return []
        self.watermark = watermark
        plan = self.plan
        closing_ends = sorted(e for e in self._by_end if e <= watermark)
        out: list[dict[str, Any]] = []
        for end in closing_ends:
            for key in sorted(self._by_end.pop(end)):
                slot = self._slot.pop(key)
                row: dict[str, Any] = {"type": plan.output_type}
                for i, g in enumerate(plan.group_by):
                    raw = key[1 + i]
                    row[g] = self.strings.string(raw) if self._string_group[i] else raw
                for ai, spec in enumerate(plan.aggregates):
                    row[spec.name] = self._value(spec.func, ai, slot)
                row["ts"] = end - 1 if plan.emit_ts == "window_last" else end
                row["_partition"] = key[0]
                row["_key"] = self._keys.get(key[0], "")
                row["_window_start"] = key[-1]
                self._count[:, slot] = 0
                self._total[:, slot] = 0.0
                self._low[:, slot] = np.inf
                self._high[:, slot] = -np.inf
                self._distinct.pop(slot, None)
                self._free.append(slot)
                if self._having(row):
                    out.append(row)
        return out

    def _value(self, func: str, ai: int, slot: int) -> Any:
        count = int(self._count[ai, slot])
        if func == "count":
            return count
        if func == "count_distinct":
            return len(self._distinct[slot][ai])
        if count == 0:
            return None
        if func == "sum":
            total = float(self._total[ai, slot])
            return int(total) if total.is_integer() else total
        if func == "avg":
            return float(self._total[ai, slot]) / count
        if func == "min":
            return _num(self._low[ai, slot])
        if func == "max":
            return _num(self._high[ai, slot])
        raise PlanError(f"aggregate function {func} not supported in windowed aggregation")

    def _having(self, row: dict[str, Any]) -> bool:
        if not self.plan.having:
            return True
        names = set()
        for cond in self.plan.having:
            names |= attributes(cond)
        cols, missing = columns_from_records([row], sorted(names), self.strings)
        return all(bool(eval_columns(c, cols, missing, 1, self.strings)[0][0])
                   for c in self.plan.having)

    # -- state for the store
    def snapshot(self) -> bytes:
        strings = [self.strings.string(i) for i in range(len(self.strings))]
        return pickle.dumps((STATE_VERSION, self._slot, self._free, self._count, self._total,
                             self._low, self._high, self._distinct, self._by_end, self._keys,
                             self._string_group, self.watermark, strings))

    def restore(self, state: bytes) -> None:
        version, *rest = pickle.loads(state)
        if version != STATE_VERSION:
            raise PlanError(f"aggregate state version {version} is not {STATE_VERSION}")
        (self._slot, self._free, self._count, self._total, self._low, self._high,
         self._distinct, self._by_end, self._keys, self._string_group, self.watermark,
         strings) = rest
        pool = StringPool()
        for s in strings:
            pool.code(s)
        self.strings = pool


def _num(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value
