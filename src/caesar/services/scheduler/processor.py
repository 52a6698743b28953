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
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from caesar.plans.execution import EventTypeDef, ExecutionPlan
from caesar.services.common.messages import (
    END_OF_TIME,
    DeadLetter,
    InputRecord,
    Progress,
    Transaction,
    partition_id,
    partition_key,
)

NEVER = -(2**62)
_PY_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,), "float": (float, int), "string": (str,), "bool": (bool,)}


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
    transactions: list[Transaction | Progress] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)


class SchedulerProcessor:
    def __init__(self, plan: ExecutionPlan, allowance: int = 0, type_field: str = "type") -> None:
        if allowance < 0:
            raise ValueError("the out-of-orderness allowance cannot be negative")
        self.plan = plan
        self.allowance = allowance
        self.type_field = type_field
        self.types = {t.name: t for t in plan.event_types}
        by_topic: dict[str, list[EventTypeDef]] = defaultdict(list)
        for t in plan.event_types:
            if t.topic is not None:
                by_topic[t.topic].append(t)
        self.by_topic = dict(by_topic)
        self.max_ts: dict[tuple[str, int], int] = {}
        self.watermark = NEVER
        # ts -> partition id -> (key, events)
        self.buffer: dict[int, dict[int, tuple[str, list[dict[str, Any]]]]] = {}
        self.released = 0
        self.dead = 0
        self.dead_by_reason: Counter[str] = Counter()

    # ------------------------------------------------------------ input
    def process(self, records: Sequence[InputRecord]) -> SchedulerOutput:
        out = SchedulerOutput()
        for rec in records:
            self._accept(rec, out)
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
        if self.buffer:
            self._release(max(self.buffer) + 1, out)
        return out

    def register_source(self, topic: str, partition: int) -> None:
        """Hold the watermark back until this source partition has spoken."""
        self.max_ts.setdefault((topic, partition), NEVER)

    def _accept(self, rec: InputRecord, out: SchedulerOutput) -> None:
        if rec.error is not None or rec.value is None:
            self._dead(out, rec, "undecodable", rec.error or "no value")
            return
        etype, problem = self._check(rec.topic, rec.value)
        if etype is None:
            self._dead(out, rec, "schema", problem)
            return
        ts = rec.value[etype.ts_field]
        source = (rec.topic, rec.partition)
        if ts < self.watermark:
            self._dead(out, rec, "late",
                       f"ts {ts} is below the watermark {self.watermark} "
                       f"(allowed out-of-orderness {self.allowance})")
            return
        self.max_ts[source] = max(self.max_ts.get(source, NEVER), ts)
        event = dict(rec.value)
        event[self.type_field] = etype.name
        key = partition_key(event, self.plan.partition_by)
        slot = self.buffer.setdefault(ts, {})
        pid = partition_id(key)
        if pid not in slot:
            slot[pid] = (key, [])
        slot[pid][1].append(event)

    def _check(self, topic: str, value: Mapping[str, Any]) -> tuple[EventTypeDef | None, str]:
        """Find the event type and validate the record against it."""
        name = value.get(self.type_field)
        if isinstance(name, str) and name in self.types:
            etype = self.types[name]
        else:
            candidates = self.by_topic.get(topic, [])
            if len(candidates) != 1:
                return None, (f"cannot tell the event type: field {self.type_field!r} is "
                              f"{name!r} and topic {topic!r} carries "
                              f"{[c.name for c in candidates] or 'no declared type'}")
            etype = candidates[0]
        problem = event_problem(etype, value, self.plan.partition_by)
        return (None, problem) if problem else (etype, "")

    def _dead(self, out: SchedulerOutput, rec: InputRecord, reason: str, detail: str) -> None:
        self.dead += 1
        self.dead_by_reason[reason] += 1
        out.dead_letters.append(DeadLetter(reason, detail, rec.topic, rec.partition, rec.offset,
                                           rec.raw, rec.value))

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
        ready = sorted(ts for ts in self.buffer if ts < watermark)
        for ts in ready:
            slot = self.buffer.pop(ts)
            for pid in sorted(slot, key=lambda p: slot[p][0]):
                key, events = slot[pid]
                out.transactions.append(Transaction(pid, key, ts, tuple(events)))
                self.released += len(events)
        self.watermark = watermark
        out.transactions.append(Progress(watermark, "scheduler"))

    # state for the store
    def snapshot(self) -> dict:
        return {"max_ts": dict(self.max_ts), "watermark": self.watermark,
                "buffer": {ts: {p: (k, list(e)) for p, (k, e) in s.items()}
                           for ts, s in self.buffer.items()}}

    def restore(self, state: dict) -> None:
        self.max_ts = dict(state["max_ts"])
        self.watermark = state["watermark"]
        self.buffer = state["buffer"]
