"""The event distributor and time-driven scheduler (section 6.2 of the CAESAR
paper): input records in, stream transactions out, in timestamp order.

Event-time progress is tracked per source partition (topic, partition): its
watermark is the highest ts seen minus the out-of-orderness allowance. The
scheduler's watermark W is the minimum over its source partitions; every
buffered event with ts < W is released, grouped into transactions (all
events of one ts and one stream partition), in ts order, followed by a
progress marker W. An event with ts < W arrives too late to be ordered: it
goes to the dead letters with reason "late", as do undecodable records and
records that break their event type's schema. Nothing is dropped silently.

The work is columnar: a batch of records becomes numpy columns per event
type (types checked per column, per record only when a column holds a bad
value), partition keys are computed once per distinct key, and a release is
one `TxnBatch` (the transactions of every ts below W) rather than one object
per transaction.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from caesar.events.batch import NUMPY_DTYPES, EventBatch, StringPool, TypeColumns, group_rows
from caesar.plans.execution import EventTypeDef, ExecutionPlan
from caesar.services.common.messages import (
    END_OF_TIME,
    INGEST,
    DeadLetter,
    InputColumns,
    InputRecord,
    Progress,
    TxnBatch,
    partition_id,
)

NEVER = -(2**62)
_PY_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,), "float": (float, int), "string": (str,), "bool": (bool,)}
# Python types a column of this kind may hold without a closer look (bool is
# an int subclass, so `type(v) is int` rather than isinstance).
_CLEAN: dict[str, frozenset[type]] = {
    "int": frozenset({int}), "float": frozenset({float, int}), "string": frozenset({str}),
    "bool": frozenset({bool})}


def event_problem(etype: EventTypeDef, value: Mapping[str, Any],
                  partition_by: Sequence[str]) -> str:
    """Why `value` is not a valid `etype` event ("" when it is): the timestamp must
    be an int, the partition attributes present, every field of its declared type.
    The Spark jobs check their rows with it too, so what they accept the
    scheduler accepts."""
    ts = value.get(etype.ts_field)
    if not isinstance(ts, int) or isinstance(ts, bool):
        return f"{etype.name}: timestamp field {etype.ts_field!r} must be an int, got {ts!r}"
    for attr, kind in etype.fields.items():
        v = value.get(attr)
        if v is None:
            if attr in partition_by:
                return f"{etype.name}: partition attribute {attr!r} is missing"
            continue
        ok = isinstance(v, _PY_TYPES.get(kind, (object,)))
        if kind in ("int", "float") and isinstance(v, bool):
            ok = False
        if kind == "float" and isinstance(v, float) and not math.isfinite(v):
            ok = False
        if not ok:
            return f"{etype.name}.{attr}: expected {kind}, got {type(v).__name__} {v!r}"
    return ""


@dataclass
class SchedulerOutput:
    transactions: list[TxnBatch | Progress] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)


class SchedulerProcessor:
    def __init__(self, plan: ExecutionPlan, allowance: int = 0, type_field: str = "type",
                 strings: StringPool | None = None) -> None:
        if allowance < 0:
            raise ValueError("the out-of-orderness allowance cannot be negative")
        self.plan = plan
        self.allowance = allowance
        self.type_field = type_field
        self.strings = strings or StringPool.shared()
        self.types = {t.name: t for t in plan.event_types}
        by_topic: dict[str, list[EventTypeDef]] = defaultdict(list)
        for t in plan.event_types:
            if t.topic is not None:
                by_topic[t.topic].append(t)
        self.by_topic = dict(by_topic)
        self.max_ts: dict[tuple[str, int], int] = {}
        self.watermark = NEVER
        self.pending: list[TxnBatch] = []  # accepted, not released yet
        self.next_seq = 0  # arrival order of accepted events
        self.released = 0
        self.dead = 0
        self.dead_by_reason: Counter[str] = Counter()
        # (event type, partition values) -> (id, key)
        self._keys: dict[tuple[Any, ...], tuple[int, str]] = {}

    @property
    def buffered(self) -> int:
        """Events accepted and not released yet."""
        return sum(len(b) for b in self.pending)

    # ------------------------------------------------------------ input
    def process(self, records: Sequence[InputRecord]) -> SchedulerOutput:
        out = SchedulerOutput()
        dead: list[tuple[int, DeadLetter]] = []
        by_type: dict[str, list[int]] = defaultdict(list)
        for i, rec in enumerate(records):
            if rec.error is not None or rec.value is None:
                dead.append((i, self._letter(rec, "undecodable", rec.error or "no value")))
                continue
            etype, problem = self._event_type(rec.topic, rec.value)
            if etype is None:
                dead.append((i, self._letter(rec, "schema", problem)))
                continue
            by_type[etype.name].append(i)
        chunks: dict[str, TypeColumns] = {}
        for name, rows in by_type.items():
            cols = self._columns(self.types[name], records, rows, dead)
            if cols is not None:
                chunks[name] = cols
        if chunks:
            self.pending.append(TxnBatch(EventBatch(chunks, self.strings), self._batch_keys(chunks)))
        dead.sort(key=lambda d: d[0])
        out.dead_letters = [d for _, d in dead]
        self.dead += len(dead)
        self.dead_by_reason.update(d.reason for d in out.dead_letters)
        self._release(self._current_watermark(), out)
        return out

    def process_columns(self, batch: InputColumns) -> SchedulerOutput:
        """`process` for records decoded in bulk: their types are the Avro
        schema's, so only lateness is checked per event (vectorized)."""
        out = SchedulerOutput()
        etype = self.types[batch.event_type]
        n = len(batch)
        ts = batch.columns[etype.ts_field].astype(np.int64)
        rows = np.arange(n)
        late = ts < self.watermark
        if late.any():
            out.dead_letters = [
                DeadLetter("late", f"ts {int(ts[j])} is below the watermark {self.watermark} "
                           f"(allowed out-of-orderness {self.allowance})", batch.topic,
                           int(batch.partitions[j]), int(batch.offsets[j]), batch.raw[j])
                for j in np.nonzero(late)[0].tolist()]
            self.dead += len(out.dead_letters)
            self.dead_by_reason["late"] += len(out.dead_letters)
            rows = np.nonzero(~late)[0]
        if len(rows):
            parts = batch.partitions[rows]
            for j in np.unique(parts).tolist():
                source = (batch.topic, j)
                top = int(ts[rows][parts == j].max())
                self.max_ts[source] = max(self.max_ts.get(source, NEVER), top)
            m = len(rows)
            cols = TypeColumns(
                ts=ts[rows], seq=np.arange(self.next_seq, self.next_seq + m, dtype=np.int64),
                partition=np.zeros(m, dtype=np.int64),
                columns={a: batch.columns[a][rows].astype(NUMPY_DTYPES[kind])
                         for a, kind in etype.fields.items()},
                ingest=batch.ingest_ms[rows].astype(np.int64))
            self.next_seq += m
            cols.partition = self._partitions(etype.name, cols)
            chunks = {etype.name: cols}
            self.pending.append(TxnBatch(EventBatch(chunks, self.strings),
                                         self._batch_keys(chunks)))
        self._release(self._current_watermark(), out)
        return out

    def flush(self) -> SchedulerOutput:
        """End of a bounded input: release everything."""
        out = SchedulerOutput()
        self._release(END_OF_TIME, out)
        return out

    def advance(self, watermark: int) -> SchedulerOutput:
        """The caller promises no event below `watermark` follows: release every
        timestamp before it (an event that still comes below it is late)."""
        out = SchedulerOutput()
        self._release(watermark, out)
        return out

    def advance_idle(self) -> SchedulerOutput:
        """The inputs went quiet: release everything seen so far (what arrives
        later with a ts at or below it will be late)."""
        out = SchedulerOutput()
        if self.pending:
            top = max(int(c.ts.max()) for b in self.pending for c in b.events.by_type.values()
                      if len(c))
            self._release(top + 1, out)
        return out

    def register_source(self, topic: str, partition: int) -> None:
        """Hold the watermark back until this source partition has spoken."""
        self.max_ts.setdefault((topic, partition), NEVER)

    def _event_type(self, topic: str, value: Mapping[str, Any]) -> tuple[EventTypeDef | None, str]:
        name = value.get(self.type_field)
        if isinstance(name, str) and name in self.types:
            return self.types[name], ""
        candidates = self.by_topic.get(topic, [])
        if len(candidates) != 1:
            return None, (f"cannot tell the event type: field {self.type_field!r} is "
                          f"{name!r} and topic {topic!r} carries "
                          f"{[c.name for c in candidates] or 'no declared type'}")
        return candidates[0], ""

    def _columns(self, etype: EventTypeDef, records: Sequence[InputRecord], rows: list[int],
                 dead: list[tuple[int, DeadLetter]]) -> TypeColumns | None:
        """The accepted records `rows` of one type as columns; bad and late
        ones go to `dead`. Types are checked a column at a time; a column
        holding something unexpected is checked record by record."""
        values = [v for i in rows if (v := records[i].value) is not None]  # all of them
        schema = dict(etype.fields)
        lists = {attr: [v.get(attr) for v in values] for attr in schema}
        ts_list = lists[etype.ts_field] if etype.ts_field in lists else \
            [v.get(etype.ts_field) for v in values]
        bad = self._bad_rows(etype, values, lists, ts_list)
        if bad:
            dead.extend((rows[j], self._letter(records[rows[j]], "schema", bad[j]))
                        for j in sorted(bad))
            keep = [j for j in range(len(rows)) if j not in bad]
            rows = [rows[j] for j in keep]
            values = [values[j] for j in keep]
            lists = {a: [col[j] for j in keep] for a, col in lists.items()}
            ts_list = [ts_list[j] for j in keep]
        if not rows:
            return None
        ts = np.array(ts_list, dtype=np.int64)
        late = ts < self.watermark
        if late.any():
            dead.extend((rows[j], self._letter(
                records[rows[j]], "late", f"ts {int(ts[j])} is below the watermark "
                f"{self.watermark} (allowed out-of-orderness {self.allowance})"))
                for j in np.nonzero(late)[0].tolist())
            keep = np.nonzero(~late)[0].tolist()
            rows = [rows[j] for j in keep]
            values = [values[j] for j in keep]
            lists = {a: [col[j] for j in keep] for a, col in lists.items()}
            ts = ts[~late]
            if not rows:
                return None
        # event-time progress per source partition
        first = records[rows[0]]
        source = (first.topic, first.partition)
        if all(records[i].partition == first.partition and records[i].topic == first.topic
               for i in rows):
            self.max_ts[source] = max(self.max_ts.get(source, NEVER), int(ts.max()))
        else:
            sources: dict[tuple[str, int], list[int]] = defaultdict(list)
            for j, i in enumerate(rows):
                sources[(records[i].topic, records[i].partition)].append(j)
            for src, idx in sources.items():
                self.max_ts[src] = max(self.max_ts.get(src, NEVER), int(ts[idx].max()))
        n = len(rows)
        seq = np.arange(self.next_seq, self.next_seq + n, dtype=np.int64)
        self.next_seq += n
        cols = TypeColumns.from_lists(lists, schema, self.strings, ts=ts, seq=seq,
                                      partition=np.zeros(n, dtype=np.int64))
        cols.partition = self._partitions(etype.name, cols)
        cols.ingest = np.array([v.get(INGEST, 0) for v in values], dtype=np.int64)
        return cols

    def _bad_rows(self, etype: EventTypeDef, values: list[Mapping[str, Any]],
                  lists: Mapping[str, list[Any]], ts_list: list[Any]) -> dict[int, str]:
        """Row -> problem, for rows that break the type's schema."""
        suspect = set(map(type, ts_list)) != {int}
        for attr, kind in etype.fields.items():
            if suspect:
                break
            found = set(map(type, lists[attr]))
            allowed = _CLEAN.get(kind, frozenset())
            if attr not in self.plan.transaction_key:
                allowed = allowed | {type(None)}
            if not found <= allowed or kind == "float" and float in found and not all(
                    math.isfinite(x) for x in lists[attr] if isinstance(x, float)):
                suspect = True
        if not suspect:
            return {}
        bad = {}
        for j, v in enumerate(values):
            problem = self._check(etype, v)
            if problem:
                bad[j] = problem
        return bad

    def _check(self, etype: EventTypeDef, value: Mapping[str, Any]) -> str:
        """What is wrong with one record of `etype` ("" = nothing)."""
        return event_problem(etype, value, self.plan.transaction_key)

    def _partitions(self, type_name: str, cols: TypeColumns) -> np.ndarray:
        """Stream partition id of every row, computed once per distinct key."""
        attrs = self.plan.transaction_key
        n = len(cols)
        if not attrs:
            pid, _ = self._key(())
            return np.full(n, pid, dtype=np.int64)
        parts = []
        for a in attrs:
            col = cols.columns.get(a)
            if col is None:  # not an attribute of this type: "" in the key
                parts.append(np.zeros(n, dtype=np.int64))
            elif col.dtype == np.float64:
                parts.append(col.view(np.int64))
            else:
                parts.append(col.astype(np.int64))
        first, inverse = group_rows(parts)
        ids = np.empty(len(first), dtype=np.int64)
        for u, row in enumerate(first.tolist()):
            raw = (type_name, *(int(p[row]) for p in parts))
            found = self._keys.get(raw)
            if found is None:
                found = self._key(tuple(_value(cols, a, row, self.strings) for a in attrs))
                self._keys[raw] = found
            ids[u] = found[0]
        return ids[inverse]

    def _key(self, parts: tuple) -> tuple[int, str]:
        key = "|".join("" if v is None else str(v) for v in parts)
        return partition_id(key), key

    def _batch_keys(self, chunks: Mapping[str, TypeColumns]) -> dict[int, str]:
        ids = set()
        for c in chunks.values():
            ids.update(np.unique(c.partition).tolist())
        names = {pid: key for pid, key in self._keys.values()}
        if not self.plan.transaction_key:
            names.update([self._key(())])
        return {pid: names[pid] for pid in ids}

    def _letter(self, rec: InputRecord, reason: str, detail: str) -> DeadLetter:
        return DeadLetter(reason, detail, rec.topic, rec.partition, rec.offset, rec.raw, rec.value)

    # ------------------------------------------------------------ output
    def _current_watermark(self) -> int:
        if not self.max_ts:
            return self.watermark
        low = min(self.max_ts.values())
        if low == NEVER:
            return self.watermark
        return max(self.watermark, low - self.allowance)

    def _release(self, watermark: int, out: SchedulerOutput) -> None:
        if watermark <= self.watermark:
            return
        if self.pending:
            batch = TxnBatch.concat(self.pending)
            ready, rest = batch.split(watermark)
            self.pending = [rest] if len(rest) else []
            if len(ready):
                out.transactions.append(_in_time_order(ready))
                self.released += len(ready)
        self.watermark = watermark
        out.transactions.append(Progress(watermark, "scheduler"))

    # state for the store
    def snapshot(self) -> dict:
        pending = TxnBatch.concat(self.pending) if self.pending else None
        return {"max_ts": dict(self.max_ts), "watermark": self.watermark,
                "next_seq": self.next_seq,
                "pending": None if pending is None else
                [(t.ts, t.partition, t.events) for t in pending.transactions()]}

    def restore(self, state: dict) -> None:
        from caesar.services.common.messages import Transaction

        self.max_ts = dict(state["max_ts"])
        self.watermark = state["watermark"]
        self.next_seq = state.get("next_seq", 0)
        self.pending = []
        if state.get("pending"):
            schemas = {t.name: dict(t.fields) for t in self.plan.event_types}
            names = {pid: key for pid, key in self._keys.values()}
            txns = [Transaction(p, names.get(p, ""), ts, tuple(events))
                    for ts, p, events in state["pending"]]
            batch = TxnBatch.of(txns, schemas, self.strings, first_seq=self.next_seq)
            self.next_seq += len(batch)
            self.pending = [batch]


def _value(cols: TypeColumns, attr: str, row: int, strings: StringPool) -> Any:
    """The Python value of one cell (what the key text is made of)."""
    col = cols.columns.get(attr)
    if col is None or (attr in cols.nulls and cols.nulls[attr][row]):
        return None
    v = col[row].item()
    if col.dtype == np.int32:
        return strings.string(int(v))
    if col.dtype == np.int8:
        return bool(v)
    return v


def _in_time_order(batch: TxnBatch) -> TxnBatch:
    """Each type's rows sorted by (ts, partition, arrival): transactions are contiguous."""
    by_type = {}
    for t, cols in batch.events.by_type.items():
        order = np.lexsort((cols.seq, cols.partition, cols.ts))
        by_type[t] = cols.take(order)
    return TxnBatch(EventBatch(by_type, batch.events.strings), batch.keys)
