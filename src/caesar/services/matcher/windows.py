"""Count and session windows for windowed aggregation (AggregatePlan.window
"count" / "session"; time windows are aggregate.py's vectorized executor).

Both keep, per (stream partition, GROUP BY values), the argument values of
the events of their open windows, and fold them with the pattern engines'
aggregate semantics (expr_eval.aggregate: INT/LONG sums exact, a sum outside
64 bits is null).

- COUNT n [EVERY m] (Flink's countWindow(n, m)): a window closes at every
  m-th event of its group (m = n: tumbling) and holds that group's last n
  events (fewer before the n-th); a tumbling group's incomplete last window
  never closes. The result is stamped with the closing event's timestamp and
  released once the watermark passes it (every event of that timestamp has
  been seen). `_window_start` is the first event's timestamp.
- SESSION GAP d (Flink's event-time session windows): consecutive events of
  a group less than d apart share a session [first.ts, last.ts + d); it
  closes when the watermark reaches its end, stamped end - 1 (or end: the
  plan's `emit_ts`), like a time window.

Events arrive in timestamp order per partition (the scheduler orders them);
an event older than the watermark is dropped, as by the time windows.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from caesar.errors import PlanError
from caesar.events.batch import StringPool, TypeColumns
from caesar.plans.aggregate import AggregatePlan
from caesar.plans.functions import FunctionFailure
from caesar.services.matcher.column_eval import (
    ColumnEvaluator,
    columns_from_records,
    having_holds,
    plan_attributes,
)
from caesar.services.matcher.expr_eval import MISSING, aggregate, overflows
from caesar.services.store import tagged

STATE_VERSION = 2  # 2: plain data (services/store/tagged.py)
GroupKey = tuple[Any, ...]  # (partition, group-by values...)


@dataclass
class _Session:
    start: int
    last: int
    values: list[tuple[Any, ...]] = field(default_factory=list)  # per event, per aggregate


tagged.register(_Session)
tagged.register_singleton("missing", MISSING)


class WindowExecutor:
    """The count/session executor: the same interface as AggregateExecutor
    (add, advance, snapshot, restore, strings, overflows)."""

    def __init__(self, plan: AggregatePlan, strings: StringPool | None = None) -> None:
        if plan.window not in ("count", "session"):
            raise PlanError(f"{plan.plan_id}: {plan.window} windows run in AggregateExecutor")
        if plan.size <= 0 or plan.slide <= 0 or plan.slide > plan.size:
            raise PlanError(f"{plan.plan_id}: window size and slide must be positive, "
                            "slide <= size")
        self.plan = plan
        self.evaluator = ColumnEvaluator(strings or StringPool())
        self._needed = plan_attributes(plan)
        self.watermark = -(2**62)
        self._keys: dict[int, str] = {}
        # count: per group, its last `size` events (ts, values) and its count
        self._recent: dict[GroupKey, deque[tuple[int, tuple[Any, ...]]]] = {}
        self._seen: dict[GroupKey, int] = {}
        # session: per group, its open session
        self._sessions: dict[GroupKey, _Session] = {}
        self._closed: list[tuple[int, GroupKey, int, list[tuple[Any, ...]]]] = []
        self._overflows = 0

    @property
    def strings(self) -> StringPool:
        return self.evaluator.strings

    @strings.setter
    def strings(self, pool: StringPool) -> None:
        self.evaluator.strings = pool

    def take_failures(self) -> list[FunctionFailure]:
        """Failed user-defined function calls since the last take."""
        out, self.evaluator.failures = self.evaluator.failures, []
        return out

    @property
    def overflows(self) -> int:
        return self.evaluator.overflows + self._overflows

    # -- input
    def add(self, records: Sequence[Mapping[str, Any]], ts: np.ndarray,
            partitions: np.ndarray, keys: Mapping[int, str] | None = None) -> None:
        n = len(records)
        if n == 0:
            return
        if keys:
            self._keys.update(keys)
        cols, missing = columns_from_records(records, self._needed, self.strings)
        keep = ts >= self.watermark
        for cond in self.plan.where:
            v, _ = self.evaluator.eval(cond, cols, missing, n)
            keep &= v.astype(bool)
        values = self._values(cols, missing, n)
        for i in np.nonzero(keep)[0].tolist():
            group = (int(partitions[i]),) + tuple(records[i].get(g) for g in self.plan.group_by)
            if self.plan.window == "count":
                self._count(group, int(ts[i]), values[i])
            else:
                self._session(group, int(ts[i]), values[i])

    def add_columns(self, events: TypeColumns, keys: Mapping[int, str] | None = None) -> None:
        """`add` for events given as columns (strings coded in this executor's
        pool): count and session windows fold event by event anyway."""
        if len(events):
            self.add(events.values(self.strings), events.ts, events.partition, keys)

    def _values(self, cols: dict[str, np.ndarray], missing: dict[str, np.ndarray],
                n: int) -> list[tuple[Any, ...]]:
        """Per event, the value of each aggregate's argument (MISSING where
        it has none; count(*) counts every event)."""
        per_agg: list[list[Any]] = []
        for spec in self.plan.aggregates:
            if spec.arg is None:
                per_agg.append([True] * n)
                continue
            v, m = self.evaluator.eval(spec.arg, cols, missing, n)
            v = np.broadcast_to(np.asarray(v), (n,))
            per_agg.append([MISSING if bad else x
                            for x, bad in zip(v.tolist(), np.asarray(m).tolist(), strict=True)])
        return list(zip(*per_agg, strict=True)) if per_agg else [()] * n

    def _count(self, group: GroupKey, ts: int, values: tuple[Any, ...]) -> None:
        recent = self._recent.setdefault(group, deque(maxlen=self.plan.size))
        recent.append((ts, values))
        seen = self._seen[group] = self._seen.get(group, 0) + 1
        if seen % self.plan.slide == 0:
            self._closed.append((ts, group, recent[0][0], [v for _, v in recent]))
            if self.plan.slide == self.plan.size:
                recent.clear()

    def _session(self, group: GroupKey, ts: int, values: tuple[Any, ...]) -> None:
        s = self._sessions.get(group)
        if s is not None and ts - s.last >= self.plan.size:
            self._close_session(group, s)
            s = None
        if s is None:
            s = self._sessions[group] = _Session(ts, ts)
        s.last = ts
        s.values.append(values)

    def _close_session(self, group: GroupKey, s: _Session) -> None:
        end = s.last + self.plan.size
        stamp = end - 1 if self.plan.emit_ts == "window_last" else end
        self._closed.append((stamp, group, s.start, s.values))
        del self._sessions[group]

    # -- output
    def _final_at(self, stamp: int) -> int:
        """The least watermark at which a closed window stamped `stamp` is
        final: once the watermark passes the stamp (a session stamped with
        its end: once the watermark reaches it)."""
        at_end = self.plan.window == "session" and self.plan.emit_ts == "window_end"
        return stamp if at_end else stamp + 1

    def next_release(self) -> int | None:
        """The least watermark at which `advance` releases a window (None: none pending)."""
        found = [self._final_at(c[0]) for c in self._closed]
        found += [s.last + self.plan.size for s in self._sessions.values()]
        return min(found, default=None)

    def advance(self, watermark: int) -> list[dict[str, Any]]:
        """Release the windows that are final at `watermark`, ordered by
        (stamp, partition, group)."""
        if watermark <= self.watermark:
            return []
        self.watermark = watermark
        if self.plan.window == "session":
            for group, s in list(self._sessions.items()):
                if s.last + self.plan.size <= watermark:
                    self._close_session(group, s)
        due = [c for c in self._closed if self._final_at(c[0]) <= watermark]
        self._closed = [c for c in self._closed if c not in due]
        out = []
        for stamp, group, start, values in sorted(due, key=lambda c: (c[0], repr(c[1]))):
            row = self._row(stamp, group, start, values)
            if self._having(row):
                out.append(row)
        return out

    def _row(self, stamp: int, group: GroupKey, start: int,
             values: list[tuple[Any, ...]]) -> dict[str, Any]:
        row: dict[str, Any] = {"type": self.plan.output_type}
        for i, g in enumerate(self.plan.group_by):
            row[g] = group[1 + i]
        before = overflows.count
        for ai, spec in enumerate(self.plan.aggregates):
            v = aggregate(spec.func, [vals[ai] for vals in values])
            row[spec.name] = None if v is MISSING else v
        self._overflows += overflows.count - before
        row["ts"] = stamp
        row["_partition"] = group[0]
        row["_key"] = self._keys.get(group[0], "")
        row["_window_start"] = start
        return row

    def _having(self, row: dict[str, Any]) -> bool:
        return having_holds(self.plan.having, row, self.evaluator)

    # -- state for the store
    def snapshot(self) -> dict[str, Any]:
        """Plain data (services/store/tagged.py), with the strings its rows' codes name."""
        strings = [self.strings.string(i) for i in range(len(self.strings))]
        return {"format": STATE_VERSION, "state": tagged.encode(
            (self.watermark, self._keys, {g: list(d) for g, d in self._recent.items()},
             self._seen, self._sessions, self._closed, strings))}

    def restore(self, state: Mapping[str, Any]) -> None:
        if state.get("format") != STATE_VERSION:
            raise PlanError(f"window state version {state.get('format')} is not {STATE_VERSION}")
        (self.watermark, self._keys, recent, self._seen, self._sessions, self._closed,
         strings) = tagged.decode(state["state"])
        self._recent = {g: deque(d, maxlen=self.plan.size) for g, d in recent.items()}
        pool = StringPool()
        for s in strings:
            pool.code(s)
        self.strings = pool
