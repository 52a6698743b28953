"""Windowed aggregation executor for `caesar.plans.aggregate.AggregatePlan`.

Windows are aligned to multiples of `slide`: [start, start + size). Events are
added in batches; per batch the work is numpy-vectorized: every event is
expanded to the windows that contain it, rows are grouped on
(partition, group-by values, window start) with one sort, and each
aggregate is reduced per group with ufunc `reduceat`. Where size is a
multiple of slide and the arguments are integers, events are grouped by pane
(the slide they fall in) instead, and each pane's results are merged into the
size / slide windows that hold it. Only the per-group merge
into the open-window table is a Python loop (one step per group, not per event).
A window is emitted once the watermark reaches its end (no event with
ts < end can follow), stamped with ts = end - 1 (or end; the plan's `emit_ts`).

INT/LONG arguments are aggregated exactly: sums in int64 (a group whose sum
may leave 64 bits is summed with Python integers; a final sum outside 64 bits
is null and counted in `overflows`), min/max as integers. DOUBLE arguments
use float64 accumulators.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from caesar.errors import PlanError
from caesar.events.batch import StringPool, TypeColumns, distinct, lex_groups
from caesar.plans.aggregate import AggregatePlan, AggregateSpec
from caesar.plans.functions import FunctionFailure
from caesar.services.matcher.column_eval import (
    INT64_MAX,
    INT64_MIN,
    ColumnEvaluator,
    columns_from_records,
    having_holds,
    plan_attributes,
)

STATE_FORMAT = 2  # layout of snapshot(); 2: exact integer accumulators


# ---------------------------------------------------------------- executor
@dataclass(frozen=True)
class _Groups:
    """One batch grouped by window: `rows` (event index per row, sorted by
    group), group starts `bounds`, rows per group `counts`, window `slots`:
    one row of slots per window a group's events are in (several when the
    groups are panes, see _group_panes), each row's slots distinct."""

    rows: np.ndarray
    bounds: np.ndarray
    counts: np.ndarray
    slots: np.ndarray


@dataclass(frozen=True)
class _Keys:
    """Sorted group keys: where each begins, its rows, the key itself."""

    bounds: np.ndarray
    counts: np.ndarray
    first: list[tuple]


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
        self.evaluator = ColumnEvaluator(strings or StringPool())
        self._needed = plan_attributes(plan)
        self._windows_per_event = -(-plan.size // plan.slide)
        na = len(plan.aggregates)
        self._distinct_aggs = [i for i, s in enumerate(plan.aggregates)
                               if s.func == "count_distinct"]
        self._slot: dict[tuple, int] = {}  # (partition, group values..., start) -> slot
        self._free: list[int] = []
        # pane key -> the slots of the windows holding it (_group_panes): a
        # pane's key comes back in every batch of its slide (LR: each second
        # of a minute); forgotten whenever a window closes or state is restored
        self._pane_slots: dict[tuple, list[int]] = {}
        cap = 64
        self._count = np.zeros((na, cap), dtype=np.int64)
        self._total = np.zeros((na, cap), dtype=np.float64)
        self._low = np.full((na, cap), np.inf)
        self._high = np.full((na, cap), -np.inf)
        # integer arguments: exact accumulators; `_big` holds sums (by
        # (aggregate, slot)) that left the safe range, as Python integers
        self._int_arg: list[bool | None] = [None] * na  # None: no value seen yet
        self._itotal = np.zeros((na, cap), dtype=np.int64)
        self._ilow = np.full((na, cap), INT64_MAX, dtype=np.int64)
        self._ihigh = np.full((na, cap), INT64_MIN, dtype=np.int64)
        self._big: dict[tuple[int, int], int] = {}
        self._float_group = [False] * len(plan.group_by)
        # slot -> one set per aggregate (_distinct_set: C int64s when compiled)
        self._distinct: dict[int, list[Any]] = {}
        self._by_end: dict[int, list[tuple]] = {}
        self._keys: dict[int, str] = {}  # partition id -> readable key
        self._string_group = [False] * len(plan.group_by)
        self.watermark = -(2**62)
        # integer arguments in windows whose panes hold whole windows: the C
        # pass (pane_table.pyx) instead of numpy's grouping, when it is built
        self._panes = _pane_table(plan, self._windows_per_event)

    @property
    def strings(self) -> StringPool:
        """The pool string values are interned in (shared with the stage graph)."""
        return self.evaluator.strings

    @strings.setter
    def strings(self, pool: StringPool) -> None:
        self.evaluator.strings = pool

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
                    self._distinct[slot] = [_distinct_set() for _ in self.plan.aggregates]
            out[i] = slot
        return out

    def _grow(self) -> None:
        cap = self._count.shape[1]
        self._count = np.concatenate([self._count, np.zeros_like(self._count)], axis=1)
        self._total = np.concatenate([self._total, np.zeros_like(self._total)], axis=1)
        self._low = np.concatenate([self._low, np.full_like(self._low, np.inf)], axis=1)
        self._high = np.concatenate([self._high, np.full_like(self._high, -np.inf)], axis=1)
        self._itotal = np.concatenate([self._itotal, np.zeros_like(self._itotal)], axis=1)
        self._ilow = np.concatenate([self._ilow, np.full_like(self._ilow, INT64_MAX)], axis=1)
        self._ihigh = np.concatenate([self._ihigh, np.full_like(self._ihigh, INT64_MIN)], axis=1)
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
        self._add(cols, missing, np.asarray(ts, dtype=np.int64),
                  np.asarray(partitions, dtype=np.int64))

    def add_columns(self, events: TypeColumns, keys: Mapping[int, str] | None = None) -> None:
        """Add events of the source type given as columns (strings coded in
        this executor's pool)."""
        n = len(events)
        if n == 0:
            return
        if keys:
            for p in distinct(events.partition).tolist():
                if p not in self._keys:
                    self._keys[p] = keys.get(p, "")
        cols = {a: events.columns[a] for a in self._needed if a in events.columns}
        missing = {a: events.nulls[a] for a in self._needed if a in events.nulls}
        for a in self._needed:
            if a not in cols:  # not an attribute of the source type: every value missing
                cols[a] = np.zeros(n, dtype=np.int64)
                missing[a] = np.ones(n, dtype=bool)
        for i, g in enumerate(self.plan.group_by):
            col = events.columns.get(g)
            if col is not None and col.dtype == np.int32:
                self._string_group[i] = True
                cols[g] = col.astype(np.int64)
        self._add(cols, missing, events.ts, events.partition)

    def _add(self, cols: dict[str, np.ndarray], missing: dict[str, np.ndarray], ts: np.ndarray,
             partitions: np.ndarray) -> None:
        n = len(ts)
        idx = self._passing(cols, missing, ts, n)
        if idx is not None:
            ts, partitions = ts[idx], partitions[idx]
            cols = {k: v[idx] for k, v in cols.items()}
            missing = {k: v[idx] for k, v in missing.items()}
            n = len(idx)
            if n == 0:
                return
        values = [None if spec.arg is None else self.evaluator.eval(spec.arg, cols, missing, n)
                  for spec in self.plan.aggregates]
        if self._panes is not None and self._all_int(values):
            self._add_by_table(cols, ts, partitions, values)
            return
        groups = self._group_panes(cols, ts, partitions) if self._by_panes(values) else \
            self._group(cols, ts, partitions, n)
        if not len(groups.rows):
            return  # every event between two windows (a slide longer than the size)
        for ai, spec in enumerate(self.plan.aggregates):
            self._accumulate(ai, spec, groups, values[ai])

    def _by_panes(self, values: list[tuple[Any, Any] | None]) -> bool:
        """Group by pane (a slide of a partition and group) instead of by
        window: where every window of a pane holds all of its events (size a
        multiple of slide) and merging pane results into windows is exact
        (integer arguments: float sums would round differently)."""
        plan = self.plan
        return self._windows_per_event > 1 and plan.size % plan.slide == 0 and all(
            v is None or (np.asarray(v[0]).dtype.kind in "iub" and self._int_arg[ai] is not False)
            for ai, v in enumerate(values))

    def _all_int(self, values: list[tuple[Any, Any] | None]) -> bool:
        return all(v is None or (np.asarray(v[0]).dtype.kind in "iub" and
                                 self._int_arg[ai] is not False)
                   for ai, v in enumerate(values))

    def _add_by_table(self, cols: dict[str, np.ndarray], ts: np.ndarray, partitions: np.ndarray,
                      values: list[tuple[Any, Any] | None]) -> None:
        """_group_panes + _accumulate in one C pass (pane_table.pyx): the
        same slots, accumulators and exact sums, without sorting the batch."""
        table = self._panes
        assert table is not None
        keys = [partitions]
        for i, g in enumerate(self.plan.group_by):
            col = cols[g]
            if col.dtype == np.float64:
                self._float_group[i] = True
            keys.append(col.view(np.int64) if col.dtype == np.float64 else col)
        key_rows = np.empty((len(keys), len(ts)), dtype=np.int64)
        for i, col in enumerate(keys):
            key_rows[i] = col
        entries = table.resolve(key_rows, np.ascontiguousarray(ts, dtype=np.int64),
                                self.plan.slide, self.plan.size, self._allocate_panes)
        args: list[tuple[np.ndarray, np.ndarray] | None] = []
        for ai, v in enumerate(values):
            if v is None:
                args.append(None)
                continue
            self._int_arg[ai] = True
            args.append((np.ascontiguousarray(v[0], dtype=np.int64),
                         np.ascontiguousarray(v[1], dtype=np.uint8)))
        distinct = tuple(s.func == "count_distinct" for s in self.plan.aggregates)
        table.accumulate(entries, args, self._count, self._itotal, self._ilow, self._ihigh,
                         self._big, self._distinct, distinct)
        if self._big:
            # as _add_int_sums keeps them: Python integers only beyond 2**62
            for (ai, slot), total in list(self._big.items()):
                if abs(total) < 2**62:
                    self._itotal[ai, slot] = total
                    del self._big[(ai, slot)]

    def _allocate_panes(self, panes: list[tuple[int, ...]]) -> list[list[int]]:
        """The slots of each pane's windows (pane key: partition, group
        values, its last window start), latest window first."""
        w, slide = self._panes.w if self._panes is not None else 1, self.plan.slide
        slots = self._slots([(*k[:-1], k[-1] - j * slide) for k in panes for j in range(w)])
        return slots.reshape(len(panes), w).tolist()

    def _passing(self, cols: dict[str, np.ndarray], missing: dict[str, np.ndarray],
                 ts: np.ndarray, n: int) -> np.ndarray | None:
        """Indexes of the events that pass WHERE and are not late; None: all."""
        keep = np.ones(n, dtype=bool)
        for cond in self.plan.where:
            v, _ = self.evaluator.eval(cond, cols, missing, n)
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
        order, keys = self._sorted_keys(cols, partitions, starts, rep)
        return _Groups(rows=rep[order], bounds=keys.bounds, counts=keys.counts,
                       slots=self._slots(keys.first)[None, :])

    def _group_panes(self, cols: dict[str, np.ndarray], ts: np.ndarray,
                     partitions: np.ndarray) -> _Groups:
        """Group on (partition, group-by, last window start) without
        expanding the events: each group's results go to the w windows
        holding its pane (a sliding 5-minute window every minute: 5x fewer
        rows to sort than _group)."""
        plan = self.plan
        last_start = (ts // plan.slide) * plan.slide
        order, keys = self._sorted_keys(cols, partitions, last_start, None)
        w, cache = self._windows_per_event, self._pane_slots
        per_key = []
        for k in keys.first:
            found = cache.get(k)
            if found is None:
                found = cache[k] = self._slots(
                    [(*k[:-1], k[-1] - j * plan.slide) for j in range(w)]).tolist()
            per_key.append(found)
        # rows of distinct slots: one window each
        slots = np.array(per_key, dtype=np.int64).reshape(len(per_key), w).T.copy()
        return _Groups(rows=order, bounds=keys.bounds, counts=keys.counts, slots=slots)

    def _sorted_keys(self, cols: dict[str, np.ndarray], partitions: np.ndarray,
                     starts: np.ndarray, rep: np.ndarray | None) -> tuple[np.ndarray, _Keys]:
        """The order of rows (events `rep`, or all) sorted on (partition,
        group-by, start), and where each key's run begins."""
        key_cols = [partitions if rep is None else partitions[rep]]
        for i, g in enumerate(self.plan.group_by):
            col = cols[g] if rep is None else cols[g][rep]
            if col.dtype == np.float64:
                self._float_group[i] = True
            key_cols.append(col.view(np.int64) if col.dtype == np.float64 else col.astype(np.int64))
        key_cols.append(starts)
        # one stable lexsort and a compare per column (events.batch), not a
        # stacked matrix compared row by row
        order, bounds, _ = lex_groups(key_cols)
        first = order[bounds]
        return order, _Keys(bounds, np.diff(np.append(bounds, len(order))),
                            list(zip(*(c[first].tolist() for c in key_cols), strict=True)))

    def _accumulate(self, ai: int, spec: AggregateSpec, groups: _Groups,
                    value: tuple[Any, Any] | None) -> None:
        """Merge one aggregate of every group into its windows' accumulators
        (`value`: the argument's values and missing mask, None for count(*)):
        exact integer ones for INT/LONG arguments, float64 ones otherwise."""
        rows, bounds = groups.rows, groups.bounds
        if value is None:
            for slots in groups.slots:
                self._count[ai, slots] += groups.counts
            return
        v = np.asarray(value[0])[rows]
        valid = ~np.asarray(value[1])[rows]
        counts = np.add.reduceat(valid.astype(np.int64), bounds)
        for slots in groups.slots:
            self._count[ai, slots] += counts
        if v.dtype.kind in "iub" and self._int_arg[ai] is not False:
            self._int_arg[ai] = True
            self._add_ints(ai, v.astype(np.int64), valid, bounds, groups.slots)
        else:
            if self._int_arg[ai]:
                self._ints_to_floats(ai)
            self._int_arg[ai] = False
            self._add_floats(ai, v.astype(np.float64), valid, bounds, groups.slots)
        if spec.func == "count_distinct":
            ends = np.append(bounds[1:], len(rows))
            seen = [v[s:e][valid[s:e]].tolist()
                    for s, e in zip(bounds.tolist(), ends.tolist(), strict=True)]
            for slots in groups.slots:
                for slot, values in zip(slots.tolist(), seen, strict=True):
                    self._distinct[slot][ai].update(values)

    def _add_floats(self, ai: int, vf: np.ndarray, valid: np.ndarray, bounds: np.ndarray,
                    slot_rows: np.ndarray) -> None:
        total = np.add.reduceat(np.where(valid, vf, 0.0), bounds)
        low = np.minimum.reduceat(np.where(valid, vf, np.inf), bounds)
        high = np.maximum.reduceat(np.where(valid, vf, -np.inf), bounds)
        for slots in slot_rows:
            self._total[ai, slots] += total
            self._low[ai, slots] = np.minimum(self._low[ai, slots], low)
            self._high[ai, slots] = np.maximum(self._high[ai, slots], high)

    def _add_ints(self, ai: int, v: np.ndarray, valid: np.ndarray, bounds: np.ndarray,
                  slot_rows: np.ndarray) -> None:
        vi = np.where(valid, v, 0)
        low = np.minimum.reduceat(np.where(valid, v, INT64_MAX), bounds)
        high = np.maximum.reduceat(np.where(valid, v, INT64_MIN), bounds)
        # int64 addition wraps, but is exact whenever the true result fits:
        # a float estimate (error far below 2**62) finds the groups that
        # might not fit; those are summed with Python integers
        with np.errstate(over="ignore"):
            part = np.add.reduceat(vi, bounds)
        approx = np.add.reduceat(vi.astype(np.float64), bounds)
        for slots in slot_rows:
            self._ilow[ai, slots] = np.minimum(self._ilow[ai, slots], low)
            self._ihigh[ai, slots] = np.maximum(self._ihigh[ai, slots], high)
            self._add_int_sums(ai, vi, bounds, slots, part, approx)

    def _add_int_sums(self, ai: int, vi: np.ndarray, bounds: np.ndarray, slots: np.ndarray,
                      part: np.ndarray, approx: np.ndarray) -> None:
        est = approx + self._itotal[ai, slots].astype(np.float64)
        risky = np.abs(est) >= 2.0**62
        if self._big:
            risky |= np.fromiter(((ai, s) in self._big for s in slots.tolist()), dtype=bool,
                                 count=len(slots))
        safe = ~risky
        with np.errstate(over="ignore"):
            self._itotal[ai, slots[safe]] += part[safe]
        if risky.any():
            ends = np.append(bounds[1:], len(vi))
            for j in np.nonzero(risky)[0].tolist():
                slot = int(slots[j])
                total = self._big.pop((ai, slot), int(self._itotal[ai, slot])) + \
                    sum(vi[bounds[j]:ends[j]].tolist())
                if INT64_MIN <= total <= INT64_MAX and abs(total) < 2**62:
                    self._itotal[ai, slot] = total
                else:
                    self._big[(ai, slot)] = total

    def _ints_to_floats(self, ai: int) -> None:
        """An argument typed int in earlier batches arrives as float: carry
        the exact state over to the float accumulators (mixed input)."""
        self._total[ai] = self._itotal[ai].astype(np.float64)
        for (a, slot), total in list(self._big.items()):
            if a == ai:
                self._total[ai, slot] = float(total)
                del self._big[(a, slot)]
        seen = self._count[ai] > 0
        self._low[ai] = np.where(seen, self._ilow[ai].astype(np.float64), np.inf)
        self._high[ai] = np.where(seen, self._ihigh[ai].astype(np.float64), -np.inf)

    # -- output
    def next_release(self) -> int | None:
        """The least watermark at which `advance` releases a window (None: no open one)."""
        return min(self._by_end, default=None)

    def advance(self, watermark: int) -> list[dict[str, Any]]:
        """Close windows with end <= watermark; rows ordered by (end, partition, group)."""
        if watermark <= self.watermark:
            return []
        self.watermark = watermark
        plan = self.plan
        closing_ends = sorted(e for e in self._by_end if e <= watermark)
        if closing_ends:
            self._pane_slots.clear()  # their slots are freed below
            if self._panes is not None:
                self._panes.clear()
        out: list[dict[str, Any]] = []
        for end in closing_ends:
            for key in sorted(self._by_end.pop(end)):
                slot = self._slot.pop(key)
                row: dict[str, Any] = {"type": plan.output_type}
                for i, g in enumerate(plan.group_by):
                    raw = key[1 + i]
                    row[g] = self.strings.string(raw) if self._string_group[i] else \
                        float(np.int64(raw).view(np.float64)) if self._float_group[i] else raw
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
                self._itotal[:, slot] = 0
                self._ilow[:, slot] = INT64_MAX
                self._ihigh[:, slot] = INT64_MIN
                for ai in range(len(plan.aggregates)):
                    self._big.pop((ai, slot), None)
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
        if self._int_arg[ai]:
            return self._int_value(func, ai, slot, count)
        if func == "sum":
            return float(self._total[ai, slot])
        if func == "avg":
            return float(self._total[ai, slot]) / count
        if func == "min":
            return float(self._low[ai, slot])
        if func == "max":
            return float(self._high[ai, slot])
        raise PlanError(f"aggregate function {func} not supported in windowed aggregation")

    def _int_value(self, func: str, ai: int, slot: int, count: int) -> Any:
        """An aggregate over an INT/LONG argument: exact (sum over 128 bits,
        outside int64 it is missing and counted as an overflow)."""
        total = self._big.get((ai, slot), int(self._itotal[ai, slot]))
        if func == "sum":
            if INT64_MIN <= total <= INT64_MAX:
                return total
            self.evaluator.overflows += 1
            return None
        if func == "avg":
            return float(total) / count
        if func == "min":
            return int(self._ilow[ai, slot])
        if func == "max":
            return int(self._ihigh[ai, slot])
        raise PlanError(f"aggregate function {func} not supported in windowed aggregation")

    def _having(self, row: dict[str, Any]) -> bool:
        return having_holds(self.plan.having, row, self.evaluator)

    def take_failures(self) -> list[FunctionFailure]:
        """Failed user-defined function calls since the last take."""
        out, self.evaluator.failures = self.evaluator.failures, []
        return out

    @property
    def overflows(self) -> int:
        """Integer results outside 64 bits so far (each made null)."""
        return self.evaluator.overflows

    # -- state for the store
    def snapshot(self) -> dict[str, Any]:
        """Plain data (services/store/state_format.py). String group values and
        distinct values are codes of the StringPool the owner saves."""
        na, cap = self._count.shape
        return {"format": STATE_FORMAT, "shape": [na, cap],
                "slots": [[list(k), slot] for k, slot in self._slot.items()],
                "free": list(self._free),
                "count": self._count.tobytes(), "total": self._total.tobytes(),
                "low": self._low.tobytes(), "high": self._high.tobytes(),
                "distinct": [[slot, [_sorted(v) for v in sets]]
                             for slot, sets in self._distinct.items()],
                "by_end": [[end, [list(k) for k in keys]] for end, keys in self._by_end.items()],
                "keys": [[p, k] for p, k in self._keys.items()],
                "string_group": list(self._string_group), "watermark": self.watermark,
                # exact integer accumulators (sums beyond 64 bits as decimal text)
                "int_arg": list(self._int_arg), "itotal": self._itotal.tobytes(),
                "ilow": self._ilow.tobytes(), "ihigh": self._ihigh.tobytes(),
                "big": [[a, slot, str(v)] for (a, slot), v in self._big.items()],
                "float_group": list(self._float_group)}

    def restore(self, state: Mapping[str, Any]) -> None:
        if state.get("format") != STATE_FORMAT:
            raise PlanError(f"{self.plan.plan_id}: aggregate state format "
                            f"{state.get('format')} is not {STATE_FORMAT}")
        na, cap = (int(x) for x in state["shape"])
        if na != len(self.plan.aggregates) or cap < 1 or \
                len(state["count"]) != 8 * na * cap or len(state["total"]) != 8 * na * cap:
            raise PlanError(f"{self.plan.plan_id}: stored aggregate state does not fit the plan")

        def array(name: str, dtype: Any) -> np.ndarray:
            return np.frombuffer(state[name], dtype=dtype).reshape(na, cap).copy()

        self._count = array("count", np.int64)
        self._total = array("total", np.float64)
        self._low = array("low", np.float64)
        self._high = array("high", np.float64)
        self._slot = {tuple(k): int(slot) for k, slot in state["slots"]}
        self._pane_slots = {}
        if self._panes is not None:
            self._panes.clear()
        if any(not 0 <= s < cap for s in self._slot.values()):
            raise PlanError(f"{self.plan.plan_id}: stored aggregate slot out of range")
        self._free = [int(x) for x in state["free"]]
        self._distinct = {int(slot): [_distinct_set(v) for v in sets]
                          for slot, sets in state["distinct"]}
        self._by_end = {int(end): [tuple(k) for k in keys] for end, keys in state["by_end"]}
        self._keys = {int(p): k for p, k in state["keys"]}
        self._string_group = [bool(x) for x in state["string_group"]]
        self.watermark = int(state["watermark"])
        self._int_arg = [None if x is None else bool(x) for x in state["int_arg"]]
        if len(self._int_arg) != na or len(state["itotal"]) != 8 * na * cap:
            raise PlanError(f"{self.plan.plan_id}: stored aggregate state does not fit the plan")
        self._itotal = array("itotal", np.int64)
        self._ilow = array("ilow", np.int64)
        self._ihigh = array("ihigh", np.int64)
        self._big = {(int(a), int(slot)): int(v) for a, slot, v in state["big"]}
        self._float_group = [bool(x) for x in state["float_group"]]


def _pane_table(plan: AggregatePlan, windows_per_event: int) -> Any:
    """The C pass's table for `plan`, where each pane's windows hold all its
    rows (size a multiple of the slide, or at most one slide); None for other
    shapes, very wide keys or without the compiled module."""
    if not (plan.size % plan.slide == 0 or plan.size <= plan.slide) or \
            len(plan.group_by) + 2 > 64 or windows_per_event > 64:
        return None
    try:
        from caesar.services.matcher.pane_table import PaneTable
    except ImportError:  # a checkout without the compiled extension
        return None
    return PaneTable(len(plan.group_by) + 2, windows_per_event)


def _distinct_set(values: Iterable[Any] = ()) -> Any:
    """A count(DISTINCT) window's set: distinct_set.DistinctSet (its int64
    values in C, what pane_table.accumulate adds to), else a Python set (a
    checkout without the compiled extension: no pane table either)."""
    return set(values) if _DISTINCT_SET is None else _DISTINCT_SET(values)


_DISTINCT_SET: type | None
try:
    from caesar.services.matcher.distinct_set import DistinctSet as _DISTINCT_SET
except ImportError:  # a checkout without the compiled extension
    _DISTINCT_SET = None


def _sorted(values: Iterable[Any]) -> list[Any]:
    """A set as a list in a fixed order: ints (LR's distinct car ids) in their
    own order, at C speed; any other mix by repr."""
    if all(type(v) is int for v in values):
        return sorted(values)
    return sorted(values, key=repr)
