"""The event distributor and time-driven scheduler (section 6.2 of the CAESAR
paper): input records in, stream transactions out, in timestamp order.

One processor serves one Kafka partition index j of the input topics (every
stream partition lives in exactly one j). Its watermark W is decided by event
time only, record by record, so that what is late is a function of the input
alone (never of batch sizes, poll timing or wall-clock pauses):

    W = max(highest accepted event time - allowance, input watermarks)

where an input watermark is a producer's explicit promise "no event with
ts < t follows on this partition" (a record with the `caesar.watermark`
header and no value; producers send one at the end of a bounded input, and
may send them to release sparse input early). Each record is judged against W
as it stands after every record before it:

- ts < W: late, dead-lettered (reason "late");
- ts more than `max_ahead` beyond the highest event time (or W) so far:
  held; dead-lettered (reason "ahead") as soon as a record within range
  follows, accepted once `ahead_confirm` such records arrive in a row (a
  genuine gap in the input rather than one bad clock);
- otherwise accepted, buffered until W passes it.

Everything buffered with ts < W is released, grouped into transactions (all
events of one ts and one stream partition, ordered by input topic and
offset), in ts order, as one columnar `TxnBatch` per release (numpy columns
per event type, what the deriver, router and matcher work on), followed by a
progress marker W. Undecodable records,
records of an unknown or undeclared event type, and values that break their
type or its checks (NOT NULL, BETWEEN, 64-bit integers) are dead-lettered
with the reason. Nothing is dropped silently.

The decisions are record by record, the work is columnar: a batch of one
topic and one event type whose values have exactly their declared Python
types (the common case: a producer's batch) is checked a column at a time,
and its lateness decided with a running maximum over its ts column (W only
moves forward, so record i's watermark is a function of the records before
it); any other batch (input watermarks, mixed topics or types, a value that
needs a closer look, far-ahead records) takes the record-by-record path,
which is the reference the fast path is tested against. Accepted events wait
as columns (`_Chunk`) and a release is a sort of those columns, not one
Python object per event.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast, overload

import numpy as np

from caesar.events.batch import (
    NUMPY_DTYPES,
    EventBatch,
    StringPool,
    TypeColumns,
    distinct,
)
from caesar.events.grouping import is_sorted, lex_sorted
from caesar.plans.execution import EventTypeDef, ExecutionPlan
from caesar.services.common.messages import (
    END_OF_TIME,
    INGEST,
    DeadLetter,
    InputColumns,
    InputRecord,
    Progress,
    TxnBatch,
    dead_letter_of,
    partition_id,
    partition_key,
)
from caesar.services.matcher.key_table import KeyTable
from caesar.services.scheduler.clean_columns import record_values, strict_columns

NEVER = -(2**62)
INT64 = (-(2**63), 2**63 - 1)
DEFAULT_AHEAD_CONFIRM = 100
DEFAULT_MAX_AHEAD_MS = 24 * 3600 * 1000  # one day of event time


def default_max_ahead(plan: ExecutionPlan) -> int:
    """One day of event time in the model's ticks."""
    return max(1, DEFAULT_MAX_AHEAD_MS // max(1, plan.time_unit_ms))


_PY_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,), "float": (float, int), "string": (str,), "bool": (bool,)}


def event_problem(etype: EventTypeDef, value: Mapping[str, Any],
                  partition_by: Sequence[str]) -> str:
    """Why `value` is not a valid `etype` event ("" when it is): the timestamp
    must be a 64-bit int inside event time, the partition attributes present,
    every field of its declared type (integers in 64 bits, floats finite) and
    within the type's checks (NOT NULL, BETWEEN). The Spark jobs check their
    rows with it too, so what they accept the scheduler accepts."""
    ts = value.get(etype.ts_field)
    if not isinstance(ts, int) or isinstance(ts, bool):
        return f"{etype.name}: timestamp field {etype.ts_field!r} must be an int, got {ts!r}"
    if not NEVER < ts < END_OF_TIME:
        return f"{etype.name}.{etype.ts_field}: timestamp {ts} is out of range"
    for attr, kind in etype.fields.items():
        problem = _field_problem(etype, attr, kind, value.get(attr), partition_by)
        if problem:
            return problem
    return ""


def _field_problem(etype: EventTypeDef, attr: str, kind: str, v: Any,
                   partition_by: Sequence[str]) -> str:
    check = etype.checks.get(attr)
    if v is None:
        if attr in partition_by:
            return f"{etype.name}: partition attribute {attr!r} is missing"
        if check is not None and check.not_null:
            return f"{etype.name}.{attr}: is null (declared NOT NULL)"
        return ""
    ok = isinstance(v, _PY_TYPES.get(kind, (object,))) and not (
        kind in ("int", "float") and isinstance(v, bool)) and not (
        kind == "float" and isinstance(v, float) and not math.isfinite(v))
    if not ok:
        return f"{etype.name}.{attr}: expected {kind}, got {type(v).__name__} {v!r}"
    if isinstance(v, int) and not INT64[0] <= v <= INT64[1]:
        return f"{etype.name}.{attr}: {v} does not fit a 64-bit int"
    if check is None or isinstance(v, str | bool):
        return ""
    between = f"(BETWEEN {check.low} AND {check.high})"
    if check.low is not None and v < check.low:
        return f"{etype.name}.{attr}: {v} is below {check.low} {between}"
    if check.high is not None and v > check.high:
        return f"{etype.name}.{attr}: {v} is above {check.high} {between}"
    return ""


def strict_fields(etype: EventTypeDef) -> tuple[tuple[str, type], ...] | None:
    """(attribute, the one Python type it holds) per field, for
    `strictly_valid`; None when the type has checks (NOT NULL, BETWEEN)."""
    if etype.checks:
        return None
    return tuple((a, _STRICT.get(k, object)) for a, k in etype.fields.items())


def strictly_valid(value: Mapping[str, Any], ts_field: str,
                   fields: tuple[tuple[str, type], ...]) -> bool:
    """The common case of `event_problem(...) == ""` in one pass: every field
    present with exactly its kind's Python type (ints in 64 bits, floats
    finite). False sends the record to `event_problem`, which says why or
    accepts it (an int in a float field, a null)."""
    ts = value.get(ts_field)
    if type(ts) is not int or not NEVER < ts < END_OF_TIME:
        return False
    for attr, kind in fields:
        v = value.get(attr)
        if type(v) is not kind:
            return False
        if kind is int:
            if not INT64[0] <= cast(int, v) <= INT64[1]:
                return False
        elif kind is float and not math.isfinite(cast(float, v)):
            return False
    return True


# The one Python type a column of this kind holds on the fast path (an int in
# a float column, a None or a subclass sends the batch the record-by-record way).
_STRICT: dict[str, type] = {"int": int, "float": float, "string": str, "bool": bool}


class ColumnValues(Sequence[Mapping[str, Any]]):
    """Input values decoded to columns (InputColumns), as the dicts
    `{field: value, ..., type_field: type, INGEST: ingest}` the record path
    holds, made only when asked for (a snapshot of the buffer)."""

    def __init__(self, names: Sequence[str], columns: Sequence[np.ndarray], type_field: str,
                 type_name: str, ingest: np.ndarray) -> None:
        self.names, self.columns = list(names), list(columns)
        self.type_field, self.type_name, self.ingest = type_field, type_name, ingest

    def __len__(self) -> int:
        return len(self.ingest)

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        # a column at a time (tolist), not an item per field and event: a
        # snapshot of the buffer, which the scheduler writes at every commit
        names, tf, name = self.names, self.type_field, self.type_name
        rows = zip(*(c.tolist() for c in self.columns), strict=True) if self.columns else \
            [()] * len(self)
        for row, ingest in zip(rows, self.ingest.tolist(), strict=True):
            value: dict[str, Any] = dict(zip(names, row, strict=True))
            value[tf] = name
            value[INGEST] = ingest
            yield value

    @overload
    def __getitem__(self, i: int) -> Mapping[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Mapping[str, Any]]: ...

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return self.take(np.arange(len(self))[i])
        value: dict[str, Any] = {a: c[i].item() for a, c in zip(self.names, self.columns,
                                                                  strict=True)}
        value[self.type_field] = self.type_name
        value[INGEST] = int(self.ingest[i])
        return value

    def take(self, rows: np.ndarray) -> ColumnValues:
        return ColumnValues(self.names, [c[rows] for c in self.columns], self.type_field,
                            self.type_name, self.ingest[rows])

    @staticmethod
    def concat(parts: Sequence[Sequence[Mapping[str, Any]]]) -> Sequence[Mapping[str, Any]]:
        """One sequence of the parts' values, none made: columns while every
        part is columns of the same fields, else the parts side by side
        (a batch of one record goes the record path, so both kinds mix)."""
        first = parts[0]
        if isinstance(first, ColumnValues) and all(
                isinstance(p, ColumnValues) and p.names == first.names
                and p.type_name == first.type_name and p.type_field == first.type_field
                for p in parts):
            cvs = cast(Sequence[ColumnValues], parts)
            return ColumnValues(first.names, [np.concatenate([p.columns[k] for p in cvs])
                                              for k in range(len(first.names))],
                                first.type_field, first.type_name,
                                np.concatenate([p.ingest for p in cvs]))
        return ValueParts(parts)


class ValueParts(Sequence[Mapping[str, Any]]):
    """Values of several parts (dict lists, ColumnValues) one after another,
    without copying them."""

    parts: list[Sequence[Mapping[str, Any]]]

    def __init__(self, parts: Sequence[Sequence[Mapping[str, Any]]]) -> None:
        flat: list[Sequence[Mapping[str, Any]]] = []
        for p in parts:
            flat += p.parts if isinstance(p, ValueParts) else [p] if len(p) else []
        self.parts = flat
        self.ends = np.cumsum([len(p) for p in flat], dtype=np.int64)

    def __len__(self) -> int:
        return int(self.ends[-1]) if len(self.ends) else 0

    @overload
    def __getitem__(self, i: int) -> Mapping[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Mapping[str, Any]]: ...

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(len(self))[i]]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        k = int(np.searchsorted(self.ends, i, side="right"))
        return self.parts[k][i - (int(self.ends[k - 1]) if k else 0)]

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        return (v for p in self.parts for v in p)

    def take(self, rows: np.ndarray) -> Sequence[Mapping[str, Any]]:
        """The values of `rows`, in that order."""
        part = np.searchsorted(self.ends, rows, side="right")
        if len(rows) > 1 and bool((np.diff(rows) <= 0).any()):
            return [self[i] for i in rows.tolist()]  # not ascending: one by one
        out: list[Sequence[Mapping[str, Any]]] = []
        for k in distinct(part).tolist():
            local = rows[part == k] - (int(self.ends[k - 1]) if k else 0)
            p = self.parts[k]
            out.append(p.take(local) if isinstance(p, ColumnValues) else
                       [p[i] for i in local.tolist()])
        return ValueParts(out)


@dataclass
class _Chunk:
    """Accepted events of one type, not released yet, in arrival order."""

    cols: TypeColumns  # `seq` holds the arrival number (ties within a transaction)
    topics: np.ndarray  # int64: index into SchedulerProcessor._topics
    offsets: np.ndarray  # int64
    has_ingest: np.ndarray  # bool: the value carried INGEST
    # the values as received (snapshots): dicts, or the columns they were
    # decoded to (ColumnValues: no dict per event on the way through)
    events: Sequence[Mapping[str, Any]]

    def take(self, rows: np.ndarray) -> _Chunk:
        """The rows `rows` (ascending)."""
        events = self.events
        if len(rows) and int(rows[-1]) - int(rows[0]) == len(rows) - 1:
            # one run of rows (the ready ones of a chunk in time order, or
            # the rest): slices, not a copy of every column and list item
            at = slice(int(rows[0]), int(rows[-1]) + 1)
            return _Chunk(self.cols.take(at), self.topics[at], self.offsets[at],
                          self.has_ingest[at],
                          events.take(rows) if isinstance(events, ColumnValues | ValueParts)
                          else events[at])
        return _Chunk(self.cols.take(rows), self.topics[rows], self.offsets[rows],
                      self.has_ingest[rows],
                      events.take(rows) if isinstance(events, ColumnValues | ValueParts) else
                      [events[i] for i in rows.tolist()])

    @staticmethod
    def concat(parts: Sequence[_Chunk]) -> _Chunk:
        if len(parts) == 1:
            return parts[0]
        return _Chunk(TypeColumns.concat([p.cols for p in parts]),
                      np.concatenate([p.topics for p in parts]),
                      np.concatenate([p.offsets for p in parts]),
                      np.concatenate([p.has_ingest for p in parts]),
                      ColumnValues.concat([p.events for p in parts]))


@dataclass
class SchedulerOutput:
    transactions: list[TxnBatch | Progress] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)


class SchedulerProcessor:
    def __init__(self, plan: ExecutionPlan, allowance: int = 0, type_field: str = "type",
                 max_ahead: int | None = None,
                 ahead_confirm: int = DEFAULT_AHEAD_CONFIRM,
                 strings: StringPool | None = None) -> None:
        """`max_ahead` in ticks: None = one day of event time, 0 = no limit."""
        if allowance < 0:
            raise ValueError("the out-of-orderness allowance cannot be negative")
        if max_ahead is not None and max_ahead < 0:
            raise ValueError("max_ahead cannot be negative")
        self.plan = plan
        self.allowance = allowance
        self.max_ahead = default_max_ahead(plan) if max_ahead is None else (max_ahead or None)
        self.ahead_confirm = ahead_confirm
        self.type_field = type_field
        self.strings = strings or StringPool.shared()
        self.schemas = {t.name: dict(t.fields) for t in plan.event_types}
        self.types = {t.name: t for t in plan.event_types}
        by_topic: dict[str, list[EventTypeDef]] = defaultdict(list)
        for t in plan.event_types:
            if t.topic is not None:
                by_topic[t.topic].append(t)
        self.by_topic = dict(by_topic)
        # Types that may arrive as input: those read from a topic (all of them
        # in a model that names no topics: embedded runs from files).
        self.inputs = [t for t in plan.event_types if t.topic is not None] or \
            list(plan.event_types)
        self._strict = {t.name: strict_fields(t) for t in self.inputs}
        self.watermark = NEVER  # release: every event with ts < W is released
        self.max_ts = NEVER  # highest accepted event time (any input topic)
        # Per input topic (of this Kafka partition j): its own watermark, from
        # its own records only, against which its records are late; the
        # release watermark is the lowest of them (a topic that has not
        # spoken yet holds it back), so how topics interleave never decides
        # what is late. Once a record of a declared input topic arrives, every
        # declared topic counts (records from elsewhere, e.g. a file in
        # embedded mode, are their own sources).
        self.source_wm: dict[str, int] = {}
        self.source_max: dict[str, int] = {}
        # Accepted, not released: columns per event type, plus the events
        # the record-by-record path accepted since the last release
        # (type, ts, partition id, topic, offset, arrival, event).
        self.pending: dict[str, list[_Chunk]] = {}
        self._staged: list[tuple[str, int, int, str, int, int, dict[str, Any]]] = []
        self._arrival = 0  # arrival number of the next accepted event
        self._topics: list[str] = []
        self._topic_index: dict[str, int] = {}
        self._pids: dict[str, int] = {}  # partition key -> id
        # the ids of the key attributes' int values seen (_partition_ids)
        self._pid_tables: dict[tuple[str, ...], KeyTable] = {}
        self._key_of: dict[int, str] = {}  # partition id -> key
        # far-ahead records waiting for a decision, with their event time
        self.ahead: list[tuple[InputRecord, int]] = []
        self.released = 0
        self.next_seq = 0  # arrival order of released events (TxnBatch.seq)
        self.dead = 0
        self.dead_by_reason: Counter[str] = Counter()

    # ------------------------------------------------------------ input
    def process(self, records: Sequence[InputRecord]) -> SchedulerOutput:
        out = SchedulerOutput()
        if not self._process_fast(records, out):
            for rec in records:
                self._accept(rec, out)
        self._release(out)
        return out

    def _process_fast(self, records: Sequence[InputRecord], out: SchedulerOutput) -> bool:
        """The whole batch at once, when it is one topic and one event type
        with clean values and nothing far ahead: the same decisions as
        `_accept` record by record. False (and nothing changed) otherwise."""
        n = len(records)
        if n < 2 or not self._fast_possible():
            return False
        topic = records[0].topic
        summary = record_values(records, self.type_field, INGEST) \
            if isinstance(records, list) else None
        if summary is not None:  # (one pass in C over plain dict values)
            values, one_type, has_ingest, any_ingest, offsets = summary
            etype = self.check(topic, values[0])[0] if one_type else None
        else:
            if any(r.value is None or r.topic != topic or r.error is not None
                   or r.watermark is not None for r in records):
                return False
            values = [r.value for r in records if r.value is not None]
            etype = self._one_type(topic, values)
            has_ingest = np.fromiter((INGEST in v for v in values), dtype=bool, count=n)
            any_ingest = bool(has_ingest.any())
            offsets = np.fromiter((r.offset for r in records), dtype=np.int64, count=n)
        if etype is None or any(a not in etype.fields for a in self.plan.transaction_key):
            return False
        clean = _clean_columns(etype, values)
        if clean is None:
            return False
        lists, ts, arrays = clean
        ingest = np.fromiter((v.get(INGEST, 0) for v in values), dtype=np.int64, count=n) \
            if any_ingest else None
        return self._take_clean(out, topic, etype, ts, arrays, lists, offsets, values,
                                has_ingest, ingest, records.__getitem__)

    def _fast_possible(self) -> bool:
        return not self.ahead and self.allowance < 2**62

    def _columns_fast(self, batch: InputColumns, out: SchedulerOutput) -> bool:
        """`_process_fast` on records decoded in bulk, without a dict or an
        InputRecord per record (made only for a late one): for a type whose
        fields are all ints, which the bulk decoder's int64 columns hold
        exactly as the records' values would."""
        n = len(batch)
        if n < 2 or not self._fast_possible() or batch.event_type not in self.types:
            return False
        names, topic = list(batch.columns), batch.topic
        cols = [batch.columns[a] for a in names]
        if any(c.dtype != np.int64 for c in cols):
            return False
        first = {a: c[0].item() for a, c in zip(names, cols, strict=True)}
        first[self.type_field] = batch.event_type
        first[INGEST] = int(batch.ingest_ms[0])
        etype, _, _ = self.check(topic, first)
        if etype is None or etype.name != batch.event_type or \
                any(a not in etype.fields for a in self.plan.transaction_key) or \
                any(kind != "int" or a not in batch.columns for a, kind in etype.fields.items()):
            return False
        ts = batch.columns[etype.ts_field]
        if int(ts.min()) <= NEVER or int(ts.max()) >= END_OF_TIME:
            return False
        arrays = {a: batch.columns[a] for a in etype.fields}
        if not all(_within(etype, a, arr) for a, arr in arrays.items()):
            return False
        values = ColumnValues(names, cols, self.type_field, etype.name, batch.ingest_ms)
        return self._take_clean(out, topic, etype, ts, arrays, {}, batch.offsets, values,
                                np.ones(n, dtype=bool), batch.ingest_ms,
                                lambda i: _column_record(batch, values, i))

    def _take_clean(self, out: SchedulerOutput, topic: str, etype: EventTypeDef, ts: np.ndarray,
                    arrays: Mapping[str, np.ndarray], lists: Mapping[str, list[Any]],
                    offsets: np.ndarray, values: Sequence[Mapping[str, Any]],
                    has_ingest: np.ndarray, ingest: np.ndarray | None,
                    record: Callable[[int], InputRecord]) -> bool:
        """The decisions of a clean batch (`_process_fast`): late rows dead
        lettered, the rest buffered; False (nothing changed) when a row is
        far ahead."""
        # Record i's watermark: the highest accepted event time before it
        # less the allowance, or W (a late record is below W, so counting it
        # in the running maximum changes no decision).
        n = len(ts)
        floor = max(self.watermark, self._wm(topic))
        m0 = self.source_max.get(topic, NEVER)
        before = np.empty(n, dtype=np.int64)
        before[0] = m0
        np.maximum(np.maximum.accumulate(ts[:-1]), m0, out=before[1:])
        wm = np.maximum(before - self.allowance, floor)
        late = ts < wm
        if self.max_ahead is not None:
            reference = np.maximum(before, wm)
            limit = min(self.max_ahead, 2**63 - 1)
            if bool((~late & (reference > NEVER) & (ts - reference > limit)).any()):
                return False
        # From here on the batch is taken.
        for i in np.flatnonzero(late).tolist():
            self._dead(out, record(i), "late",
                       f"ts {int(ts[i])} is below the partition's watermark {int(wm[i])} "
                       f"(allowed out-of-orderness {self.allowance})")
        keep = np.flatnonzero(~late)
        if len(keep):
            self._accept_rows(topic, etype, lists, ts, arrays, keep, offsets, values,
                              has_ingest, ingest)
        return True

    def _accept_rows(self, topic: str, etype: EventTypeDef, lists: Mapping[str, list[Any]],
                     ts: np.ndarray, arrays: Mapping[str, np.ndarray], keep: np.ndarray,
                     offsets: np.ndarray, values: Sequence[Mapping[str, Any]],
                     has_ingest: np.ndarray, ingest: np.ndarray | None) -> None:
        """Buffer the rows `keep` of a clean batch (`_buffer`, a batch at once)."""
        n, m = len(ts), len(keep)
        schema = etype.fields
        columns = {}
        for a, kind in schema.items():
            if kind == "string":
                col = lists[a]
                columns[a] = self.strings.codes(col if m == n else [col[i] for i in keep.tolist()])
            else:
                columns[a] = arrays[a] if m == n else arrays[a][keep]
        accepted: Sequence[Mapping[str, Any]]
        if m == n:
            accepted = values
        elif isinstance(values, ColumnValues | ValueParts):
            accepted = values.take(keep)
        else:
            accepted = [values[i] for i in keep.tolist()]
        ts = ts if m == n else ts[keep]
        has_ingest = has_ingest if m == n else has_ingest[keep]
        partition = self._partition_ids(self.plan.transaction_key, schema, columns, accepted)
        cols = TypeColumns(ts=ts, seq=np.arange(self._arrival, self._arrival + m, dtype=np.int64),
                           partition=partition, columns=columns)
        if ingest is not None and has_ingest.any():
            cols.ingest = ingest if m == n else ingest[keep]
        self._arrival += m
        self.pending.setdefault(etype.name, []).append(_Chunk(
            cols, np.full(m, self._topic(topic), dtype=np.int64),
            offsets if m == n else offsets[keep], has_ingest, accepted))
        top = int(ts.max())
        self.max_ts = max(self.max_ts, top)
        self._source(topic, max_ts=top)

    def _one_type(self, topic: str, values: Sequence[Mapping[str, Any]]
                  ) -> EventTypeDef | None:
        """The event type of every value, if they name one and the same valid
        type for `topic` (the first value checked in full)."""
        try:
            if len({v.get(self.type_field) for v in values}) != 1:
                return None
        except TypeError:  # an unhashable type name: the record path says why
            return None
        etype, _, _ = self.check(topic, values[0])
        return etype

    def _partition_ids(self, attrs: Sequence[str], schema: Mapping[str, str],
                       columns: Mapping[str, np.ndarray],
                       values: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """Stream partition id per row, the key text made once per distinct
        key (each key column holds one Python type, so equal column values
        are equal texts)."""
        n = len(values)
        if not attrs:
            return np.full(n, self._pid(""), dtype=np.int64)
        parts = []
        for a in attrs:
            col = columns[a]
            parts.append(col.view(np.int64) if schema[a] == "float" else col.astype(np.int64))
        # each row's key looked up in C among the keys seen before (LR: ~200
        # (xway, dir, seg) keys, every second): no sort into groups, and a
        # key text made only for a key never seen
        table = self._pid_tables.get(tuple(attrs))
        if table is None:
            table = self._pid_tables[tuple(attrs)] = KeyTable(len(attrs))

        def make(missing: list[tuple[int, ...]]) -> list[int]:
            want = set(missing)
            row_of: dict[tuple[int, ...], int] = {}
            for row, key in enumerate(zip(*[p.tolist() for p in parts], strict=True)):
                if key in want and key not in row_of:
                    row_of[key] = row
                    if len(row_of) == len(want):
                        break
            return [self._pid(partition_key(values[row_of[k]], attrs)) for k in missing]

        return table.lookup(np.ascontiguousarray(np.stack(parts)), make)

    def _pid(self, key: str) -> int:
        pid = self._pids.get(key)
        if pid is None:
            pid = self._pids[key] = partition_id(key)
            self._key_of[pid] = key
        return pid

    def _topic(self, topic: str) -> int:
        i = self._topic_index.get(topic)
        if i is None:
            i = self._topic_index[topic] = len(self._topics)
            self._topics.append(topic)
        return i

    def process_columns(self, batch: InputColumns) -> SchedulerOutput:
        """`process` for records decoded in bulk (caesar.codecs.flat): the
        same record-by-record decisions (lateness depends on the records
        before each one, never on where a batch ends)."""
        out = SchedulerOutput()
        if self._columns_fast(batch, out):
            self._release(out)
            return out
        names = list(batch.columns)
        rows = zip(*(batch.columns[a].tolist() for a in names), strict=True)
        records = [InputRecord(batch.topic, part, off, {**dict(zip(names, row, strict=True)),
                                                          self.type_field: batch.event_type,
                                                          INGEST: ingest}, raw,
                               timestamp_ms=ingest)
                   for row, part, off, ingest, raw in zip(
                       rows, batch.partitions.tolist(), batch.offsets.tolist(),
                       batch.ingest_ms.tolist(), batch.raw, strict=True)]
        return self.process(records)

    @property
    def buffered(self) -> int:
        """Events accepted and not released yet."""
        return len(self._staged) + sum(len(c.cols) for cs in self.pending.values() for c in cs)

    def flush(self) -> SchedulerOutput:
        """End of a bounded input: release everything (an input watermark at
        the end of time)."""
        out = SchedulerOutput()
        self._settle_ahead(out, accept=False)
        self._advance_all(END_OF_TIME)
        self._release(out)
        return out

    def _advance_all(self, watermark: int) -> None:
        for t in self.source_wm:
            self.source_wm[t] = max(self.source_wm[t], watermark)
        self.watermark = max(self.watermark, watermark)

    def _source(self, topic: str, *, max_ts: int | None = None, wm: int | None = None) -> None:
        """Move one input topic's watermark, then the release watermark."""
        if topic in self.by_topic and topic not in self.source_wm:
            for t in self.by_topic:
                self.source_wm.setdefault(t, NEVER)
        current = self.source_wm.get(topic, NEVER)
        if max_ts is not None:
            self.source_max[topic] = max(self.source_max.get(topic, NEVER), max_ts)
            current = max(current, self.source_max[topic] - self.allowance)
        if wm is not None:
            current = max(current, wm)
        self.source_wm[topic] = current
        self.watermark = max(self.watermark, min(self.source_wm.values()))

    def _wm(self, topic: str) -> int:
        return max(self.source_wm.get(topic, NEVER), NEVER)

    def advance(self, watermark: int) -> SchedulerOutput:
        """An input watermark from the caller: no event below `watermark`
        follows; release every timestamp before it (an event that still comes
        below it is late)."""
        out = SchedulerOutput()
        self._settle_ahead(out, accept=False)
        self._advance_all(watermark)
        self._release(out)
        return out

    def _accept(self, rec: InputRecord, out: SchedulerOutput) -> None:
        if rec.watermark is not None:
            self._settle_ahead(out, accept=False)
            self._source(rec.topic, wm=rec.watermark)
            return
        if rec.error is not None or rec.value is None:
            self._dead(out, rec, "undecodable", rec.error or "no value")
            return
        etype, reason, problem = self.check(rec.topic, rec.value)
        if etype is None:
            self._dead(out, rec, reason, problem)
            return
        ts = rec.value[etype.ts_field]
        wm = max(self._wm(rec.topic), self.watermark)
        if ts < wm:
            self._dead(out, rec, "late",
                       f"ts {ts} is below the partition's watermark {wm} "
                       f"(allowed out-of-orderness {self.allowance})")
            return
        reference = max(self.source_max.get(rec.topic, NEVER), wm)
        if self.max_ahead is not None and reference > NEVER and ts > reference + self.max_ahead:
            self.ahead.append((rec, ts))
            if 0 < self.ahead_confirm <= len(self.ahead):
                self._settle_ahead(out, accept=True)
            return
        if self.ahead:
            self._settle_ahead(out, accept=False)
        self._buffer(rec, etype, ts)

    def _settle_ahead(self, out: SchedulerOutput, accept: bool) -> None:
        """Accept the held far-ahead records (enough of them in a row: the input
        jumped) or dead-letter them (a record within range came after them)."""
        held, self.ahead = self.ahead, []
        for rec, ts in held:
            wm = max(self._wm(rec.topic), self.watermark)
            reference = max(self.source_max.get(rec.topic, NEVER), wm)
            if not accept:
                self._dead(out, rec, "ahead",
                           f"ts {ts} is more than {self.max_ahead} ahead of the partition's "
                           f"event time {reference} and the records after it are not (a clock "
                           f"far off?); raise max_ahead if such jumps are real")
            elif ts < wm:
                self._dead(out, rec, "late", f"ts {ts} is below the partition's watermark "
                           f"{wm} (allowed out-of-orderness {self.allowance})")
            else:
                etype, _, _ = self.check(rec.topic, rec.value or {})
                assert etype is not None
                self._buffer(rec, etype, ts)

    def _buffer(self, rec: InputRecord, etype: EventTypeDef, ts: int) -> None:
        event = dict(rec.value or {})
        event[self.type_field] = etype.name
        pid = self._pid(partition_key(event, self.plan.transaction_key))
        self._staged.append((etype.name, ts, pid, rec.topic, rec.offset, self._arrival, event))
        self._arrival += 1
        self.max_ts = max(self.max_ts, ts)
        self._source(rec.topic, max_ts=ts)

    def check(self, topic: str, value: Mapping[str, Any]
              ) -> tuple[EventTypeDef | None, str, str]:
        """The record's event type, or None with the reason and the problem."""
        name = value.get(self.type_field)
        declared = self.by_topic.get(topic, [])
        if name is not None:
            etype = self.types.get(name) if isinstance(name, str) else None
            if etype is None:
                return None, "unknown_type", (
                    f"unknown event type {name!r} (input types: "
                    f"{sorted(t.name for t in self.inputs)})")
            if etype not in self.inputs:
                return None, "unknown_type", (f"{name} is derived by the model, not an input "
                                              "event type")
            if declared and etype not in declared:
                return None, "unknown_type", (f"event type {name} does not belong on topic "
                                              f"{topic!r} (it carries "
                                              f"{[c.name for c in declared]})")
        elif len(declared) == 1:
            etype = declared[0]
        else:
            return None, "unknown_type", (
                f"cannot tell the event type: no field {self.type_field!r} and topic {topic!r} "
                f"carries {[c.name for c in declared] or 'no declared type'}")
        strict = self._strict.get(etype.name)
        if strict is not None and strictly_valid(value, etype.ts_field, strict):
            return etype, "", ""
        problem = event_problem(etype, value, self.plan.transaction_key)
        return (None, "schema", problem) if problem else (etype, "", "")

    def _dead(self, out: SchedulerOutput, rec: InputRecord, reason: str, detail: str) -> None:
        self.dead += 1
        self.dead_by_reason[reason] += 1
        out.dead_letters.append(dead_letter_of(rec, reason, detail))

    # ------------------------------------------------------------ output
    def _stage(self) -> None:
        """The events the record-by-record path accepted, as columns."""
        staged, self._staged = self._staged, []
        by_type: dict[str, list[tuple[str, int, int, str, int, int, dict[str, Any]]]] = {}
        for s in staged:
            by_type.setdefault(s[0], []).append(s)
        for name, rows in by_type.items():
            events: list[Mapping[str, Any]] = [r[6] for r in rows]
            cols = TypeColumns.from_values(
                events, self.schemas[name], self.strings,
                ts=np.array([r[1] for r in rows], dtype=np.int64),
                seq=np.array([r[5] for r in rows], dtype=np.int64),
                partition=np.array([r[2] for r in rows], dtype=np.int64))
            has_ingest = np.array([INGEST in e for e in events], dtype=bool)
            if has_ingest.any():
                cols.ingest = np.array([e.get(INGEST, 0) for e in events], dtype=np.int64)
            self.pending.setdefault(name, []).append(_Chunk(
                cols, np.array([self._topic(r[3]) for r in rows], dtype=np.int64),
                np.array([r[4] for r in rows], dtype=np.int64), has_ingest, list[Mapping[str, Any]](events)))

    def _release(self, out: SchedulerOutput) -> None:
        """Every pending event below W, as one TxnBatch: transactions in ts
        order, then partition key order; a transaction's events by input
        topic, offset and arrival; `seq` numbers the events in that order."""
        if self._staged:
            self._stage()
        watermark = self.watermark
        ready: dict[str, _Chunk] = {}
        for name in list(self.pending):
            chunk = _Chunk.concat(self.pending[name])
            is_ready = chunk.cols.ts < watermark
            if not is_ready.any():
                self.pending[name] = [chunk]
                continue
            if is_ready.all():
                del self.pending[name]
                ready[name] = chunk
            else:
                ready[name] = chunk.take(np.flatnonzero(is_ready))
                self.pending[name] = [chunk.take(np.flatnonzero(~is_ready))]
        if ready:
            out.transactions.append(self._batch(ready))
        if watermark > NEVER:
            out.transactions.append(Progress(watermark, "scheduler"))

    def _batch(self, ready: Mapping[str, _Chunk]) -> TxnBatch:
        names = list(ready)
        chunks = [ready[t] for t in names]
        pids = np.concatenate([c.cols.partition for c in chunks])
        uniq = distinct(pids)
        key_list = [self._key_of[p] for p in uniq.tolist()]
        key_rank = np.empty(len(uniq), dtype=np.int64)
        key_rank[sorted(range(len(uniq)), key=key_list.__getitem__)] = np.arange(len(uniq))
        topic_rank = np.empty(len(self._topics), dtype=np.int64)
        topic_rank[sorted(range(len(self._topics)), key=self._topics.__getitem__)] = \
            np.arange(len(self._topics))
        ties = (np.concatenate([c.cols.seq for c in chunks]),
                np.concatenate([c.offsets for c in chunks]),
                topic_rank[np.concatenate([c.topics for c in chunks])])
        main = (key_rank[np.searchsorted(uniq, pids)], np.concatenate([c.cols.ts for c in chunks]))
        total = len(pids)
        seq = np.arange(self.next_seq, self.next_seq + total, dtype=np.int64)
        # ties in (ts, key) already in (topic, offset, seq) order (one topic,
        # records in offset order: LR) leave them to the stable sort: two
        # keys sorted, not five; rows in order already, none
        keys = main if lex_sorted(ties) else ties + main
        order = None if lex_sorted(keys) else np.lexsort(keys)
        if order is not None:
            seq[order] = seq.copy()
        by_type = {}
        start = 0
        for name, c in zip(names, chunks, strict=True):
            mine = seq[start:start + len(c.cols)]
            start += len(c.cols)
            if order is None or (len(chunks) > 1 and is_sorted(mine)):
                cols = c.cols.take(slice(None))
                cols.seq = mine
            else:
                # one chunk: its rows in seq order are the sort's order
                rows = order if len(chunks) == 1 else np.argsort(mine, kind="stable")
                cols = c.cols.take(rows)
                cols.seq = mine[rows]
            if not c.has_ingest.any():
                cols.ingest = None
            by_type[name] = cols
        self.next_seq += total
        self.released += total
        return TxnBatch(EventBatch(by_type, self.strings),
                        {p: self._key_of[p] for p in uniq.tolist()})

    # ------------------------------------------------------------ state
    def snapshot(self) -> dict[str, Any]:
        """Plain data (services/store/state_format.py)."""
        return {"watermark": self.watermark, "max_ts": self.max_ts,
                "source_wm": [[t, w] for t, w in self.source_wm.items()],
                "source_max": [[t, m] for t, m in self.source_max.items()],
                "buffer": self._buffer_state(),
                "ahead": [[_record_state(r), ts] for r, ts in self.ahead],
                "released": self.released, "dead": self.dead, "next_seq": self.next_seq}

    def restore(self, state: Mapping[str, Any]) -> None:
        self.watermark = int(state["watermark"])
        self.max_ts = int(state["max_ts"])
        self.source_wm.update({t: int(w) for t, w in state.get("source_wm", [])})
        self.source_max = {t: int(m) for t, m in state.get("source_max", [])}
        self.pending, self._staged, self._arrival = {}, [], 0
        for ts, slot in state["buffer"]:
            for pid, key, events in slot:
                self._pids[key] = int(pid)
                self._key_of[int(pid)] = key
                for t, o, e in events:
                    event = dict(e)
                    self._staged.append((event[self.type_field], int(ts), int(pid), t, int(o),
                                         self._arrival, event))
                    self._arrival += 1
        self._stage()
        self.ahead = [(_record_from(r), int(ts)) for r, ts in state["ahead"]]
        self.released, self.dead = int(state["released"]), int(state["dead"])
        self.next_seq = int(state.get("next_seq", 0))

    def _buffer_state(self) -> list[Any]:
        """[[ts, [[pid, key, [[topic, offset, event]]]]]]: in arrival order."""
        if self._staged:
            self._stage()
        rows = []
        for name, chunks in self.pending.items():
            for c in chunks:
                for ts, pid, t, o, a, e in zip(c.cols.ts.tolist(), c.cols.partition.tolist(),
                                               c.topics.tolist(), c.offsets.tolist(),
                                               c.cols.seq.tolist(), c.events, strict=True):
                    rows.append((a, ts, pid, self._topics[t], o,
                                 {**e, self.type_field: name}))
        rows.sort(key=lambda r: r[0])
        slots: dict[int, dict[int, list[list[Any]]]] = {}
        for _, ts, pid, t, o, e in rows:
            slots.setdefault(ts, {}).setdefault(pid, []).append([t, o, e])
        return [[ts, [[pid, self._key_of[pid], events] for pid, events in slot.items()]]
                for ts, slot in slots.items()]



def _clean_columns(etype: EventTypeDef, values: Sequence[Mapping[str, Any]]
                   ) -> tuple[Mapping[str, list[Any]], np.ndarray, dict[str, np.ndarray]] | None:
    """(values per string attribute, ts as int64, the other columns) when
    every value passes `event_problem` by construction: each field holds
    exactly its declared Python type (no None), ts and ints fit 64 bits, ts
    is inside event time, floats are finite and within the type's checks.
    None when some value needs the record-by-record look. Dicts go through
    clean_columns.pyx in one pass; other Mappings through the reference."""
    schema = etype.fields
    clean = _strict_lists(etype, values)
    if clean is None:
        return None
    lists, arrays = clean
    if etype.ts_field in arrays and schema[etype.ts_field] == "int":
        ts = arrays[etype.ts_field]
    else:
        ts_list = [v.get(etype.ts_field) for v in values]
        if set(map(type, ts_list)) != {int}:
            return None
        try:
            ts = np.array(ts_list, dtype=np.int64)
        except OverflowError:
            return None
    if int(ts.min()) <= NEVER or int(ts.max()) >= END_OF_TIME:
        return None
    for a, arr in arrays.items():
        if not _within(etype, a, arr):
            return None
    return lists, ts, arrays


def _strict_lists(etype: EventTypeDef, values: Sequence[Mapping[str, Any]]
                  ) -> tuple[Mapping[str, list[Any]], dict[str, np.ndarray]] | None:
    """strict_columns on a list of dicts, else the Python reference."""
    if isinstance(values, list):
        try:
            return strict_columns(values, etype.fields)
        except TypeError:  # not all dicts
            pass
    return _clean_lists(etype, values)


def _clean_lists(etype: EventTypeDef, values: Sequence[Mapping[str, Any]]
                 ) -> tuple[dict[str, list[Any]], dict[str, np.ndarray]] | None:
    """strict_columns in Python (any Mapping; the reference its tests
    compare with): the string attributes' values and the other columns, or
    None when a value is missing, of another type or an int beyond 64 bits."""
    lists: dict[str, list[Any]] = {}
    arrays: dict[str, np.ndarray] = {}
    for a, kind in etype.fields.items():
        col = [v.get(a) for v in values]
        if set(map(type, col)) != {_STRICT.get(kind)}:
            return None
        if kind == "string":  # strings are coded once accepted
            lists[a] = col
            continue
        try:
            arrays[a] = np.array(col, dtype=NUMPY_DTYPES[kind])
        except OverflowError:  # an int beyond 64 bits
            return None
    return lists, arrays


def _within(etype: EventTypeDef, attr: str, arr: np.ndarray) -> bool:
    kind = etype.fields[attr]
    if kind == "float" and not bool(np.isfinite(arr).all()):
        return False
    check = etype.checks.get(attr)
    if check is None or kind == "bool":
        return True
    return not (check.low is not None and arr.min().item() < check.low
                or check.high is not None and arr.max().item() > check.high)

def _column_record(batch: InputColumns, values: ColumnValues, i: int) -> InputRecord:
    """Row i of a bulk-decoded batch as the InputRecord the record path reads."""
    ingest = int(batch.ingest_ms[i])
    return InputRecord(batch.topic, int(batch.partitions[i]), int(batch.offsets[i]),
                       dict(values[i]), batch.raw[i], timestamp_ms=ingest)


def _record_state(r: InputRecord) -> list[Any]:
    return [r.topic, r.partition, r.offset, dict(r.value or {}), r.raw, r.key,
            [list(h) for h in r.headers], r.timestamp_ms]


def _record_from(s: list[Any]) -> InputRecord:
    topic, partition, offset, value, raw, key, headers, ts = s
    return InputRecord(topic, int(partition), int(offset), dict(value), raw, None, key,
                       tuple((str(k), v) for k, v in headers), int(ts))
