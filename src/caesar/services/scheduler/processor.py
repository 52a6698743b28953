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
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from caesar.events.batch import StringPool
from caesar.plans.execution import EventTypeDef, ExecutionPlan
from caesar.services.common.messages import (
    END_OF_TIME,
    INGEST,
    DeadLetter,
    InputColumns,
    InputRecord,
    Progress,
    Transaction,
    TxnBatch,
    dead_letter_of,
    partition_id,
    partition_key,
)

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
        # ts -> partition id -> (key, [(topic, offset, event)])
        self.buffer: dict[int, dict[int, tuple[str, list[tuple[str, int, dict[str, Any]]]]]] = {}
        # far-ahead records waiting for a decision, with their event time
        self.ahead: list[tuple[InputRecord, int]] = []
        self.released = 0
        self.next_seq = 0  # arrival order of released events (TxnBatch.seq)
        self.dead = 0
        self.dead_by_reason: Counter[str] = Counter()

    # ------------------------------------------------------------ input
    def process(self, records: Sequence[InputRecord]) -> SchedulerOutput:
        out = SchedulerOutput()
        for rec in records:
            self._accept(rec, out)
        self._release(out)
        return out

    def process_columns(self, batch: InputColumns) -> SchedulerOutput:
        """`process` for records decoded in bulk (caesar.codecs.flat): the
        same record-by-record decisions (lateness depends on the records
        before each one, never on where a batch ends)."""
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
        return sum(len(events) for slot in self.buffer.values() for _, events in slot.values())

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
        key = partition_key(event, self.plan.transaction_key)
        slot = self.buffer.setdefault(ts, {})
        pid = partition_id(key)
        if pid not in slot:
            slot[pid] = (key, [])
        slot[pid][1].append((rec.topic, rec.offset, event))
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
        problem = event_problem(etype, value, self.plan.transaction_key)
        return (None, "schema", problem) if problem else (etype, "", "")

    def _dead(self, out: SchedulerOutput, rec: InputRecord, reason: str, detail: str) -> None:
        self.dead += 1
        self.dead_by_reason[reason] += 1
        out.dead_letters.append(dead_letter_of(rec, reason, detail))

    # ------------------------------------------------------------ output
    def _release(self, out: SchedulerOutput) -> None:
        watermark = self.watermark
        ready = sorted(ts for ts in self.buffer if ts < watermark)
        txns = []
        for ts in ready:
            slot = self.buffer.pop(ts)
            for pid in sorted(slot, key=lambda p: slot[p][0]):
                key, events = slot[pid]
                events.sort(key=lambda e: (e[0], e[1]))  # input topic, offset
                txns.append(Transaction(pid, key, ts, tuple(e for _, _, e in events)))
                self.released += len(events)
        if txns:
            out.transactions.append(TxnBatch.of(txns, self.schemas, self.strings,
                                                self.type_field, first_seq=self.next_seq))
            self.next_seq += sum(len(t.events) for t in txns)
        if watermark > NEVER:
            out.transactions.append(Progress(watermark, "scheduler"))

    # ------------------------------------------------------------ state
    def snapshot(self) -> dict[str, Any]:
        """Plain data (services/store/state_format.py)."""
        return {"watermark": self.watermark, "max_ts": self.max_ts,
                "source_wm": [[t, w] for t, w in self.source_wm.items()],
                "source_max": [[t, m] for t, m in self.source_max.items()],
                "buffer": [[ts, [[pid, key, [list(e) for e in events]]
                                 for pid, (key, events) in slot.items()]]
                           for ts, slot in self.buffer.items()],
                "ahead": [[_record_state(r), ts] for r, ts in self.ahead],
                "released": self.released, "dead": self.dead, "next_seq": self.next_seq}

    def restore(self, state: Mapping[str, Any]) -> None:
        self.watermark = int(state["watermark"])
        self.max_ts = int(state["max_ts"])
        self.source_wm.update({t: int(w) for t, w in state.get("source_wm", [])})
        self.source_max = {t: int(m) for t, m in state.get("source_max", [])}
        self.buffer = {int(ts): {int(pid): (key, [(t, int(o), dict(e)) for t, o, e in events])
                                 for pid, key, events in slot}
                       for ts, slot in state["buffer"]}
        self.ahead = [(_record_from(r), int(ts)) for r, ts in state["ahead"]]
        self.released, self.dead = int(state["released"]), int(state["dead"])
        self.next_seq = int(state.get("next_seq", 0))


def _record_state(r: InputRecord) -> list[Any]:
    return [r.topic, r.partition, r.offset, dict(r.value or {}), r.raw, r.key,
            [list(h) for h in r.headers], r.timestamp_ms]


def _record_from(s: list[Any]) -> InputRecord:
    topic, partition, offset, value, raw, key, headers, ts = s
    return InputRecord(topic, int(partition), int(offset), dict(value), raw, None, key,
                       tuple((str(k), v) for k, v in headers), int(ts))
