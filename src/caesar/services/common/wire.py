"""Messages <-> Avro records of the internal topics (schemas/*.avsc); the
transaction batches have theirs in caesar.services.common.columnar.

Progress on the wire says "done up to and including ts" while the services
count "nothing below watermark follows": ts = watermark - 1.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from caesar.codecs import SchemaRepository
from caesar.plans.execution import EventTypeDef, ExecutionPlan
from caesar.services.common.messages import (
    END_OF_TIME,
    Alert,
    ContextChange,
    DeadLetter,
    PlanSwitch,
    Progress,
)

TXN_BATCH = "caesar.TransactionBatch"  # transactions: caesar.services.common.columnar
ROUTED_BATCH = "caesar.RoutedBatch"
PROGRESS = "caesar.Progress"
CHANGE = "caesar.ContextChange"
DERIVED = "caesar.DerivedEvent"
DEAD = "caesar.DeadLetter"
SWITCH = "caesar.PlanSwitch"
SWITCH_KEY = b"__plan_switch__"
AVRO_TYPES = {"int": "long", "float": "double", "string": "string", "bool": "boolean"}
_REASONS = {"undecodable": "UNDECODABLE", "schema": "SCHEMA_VIOLATION", "late": "LATE",
            "ahead": "TOO_FAR_AHEAD", "unknown_type": "UNKNOWN_TYPE"}
# A dead letter must fit the producer's message limit (1 MB by default) with
# room to spare: larger parts are cut, and the cut is said in `detail` and the
# `caesar.truncated` header (original sizes), never a failed produce.
DEAD_VALUE_MAX = 512 * 1024
DEAD_KEY_MAX = 16 * 1024
DEAD_HEADERS_MAX = 64 * 1024
DEAD_DETAIL_MAX = 4 * 1024
TRUNCATED_HEADER = "caesar.truncated"
_STAGES = {"scheduler": "SCHEDULER", "deriver": "DERIVER", "router": "ROUTER",
           "matcher": "MATCHER"}


def now_ms() -> int:
    return int(time.time() * 1000)


def input_schema_name(etype: EventTypeDef) -> str:
    return f"caesar.input.{etype.name}"


def register_input_schemas(repo: SchemaRepository, plan: ExecutionPlan) -> dict[str, str]:
    """Avro schemas for the model's input event types (nullable fields; the ts
    field required); returns event type -> schema full name."""
    names = {}
    for t in plan.event_types:
        fields: list[dict[str, Any]] = [{"name": t.ts_field, "type": "long"}]
        fields += [{"name": a, "type": ["null", AVRO_TYPES[k]], "default": None}
                   for a, k in t.fields.items() if a != t.ts_field]
        entry = repo.add({"type": "record", "name": t.name, "namespace": "caesar.input",
                          "fields": fields})
        names[t.name] = entry.name
    return names


def register_model_schemas(repo: SchemaRepository, plan: ExecutionPlan) -> dict[str, str]:
    """The schemas the model names with SCHEMA (the plan carries their text), added
    to `repo`; returns event type -> schema full name for those types."""
    return {t.name: repo.add(t.schema_json).name for t in plan.event_types if t.schema_json}


# ------------------------------------------------------------ plan switches
def switch_record(s: PlanSwitch, actor: str, kafka_partition: int) -> dict[str, Any]:
    return {"version": 1, "plan": s.plan, "previous": s.previous,
            "kafka_partition": kafka_partition, "watermark": s.watermark, "source": actor,
            "wall_ms": now_ms()}


def switch_from(rec: Mapping[str, Any]) -> PlanSwitch:
    return PlanSwitch(rec["plan"], rec["previous"], rec["watermark"])


def progress_record(p: Progress, actor: str, kafka_partition: int) -> dict[str, Any]:
    return {"version": 1, "stage": _STAGES.get(p.source, "SCHEDULER"), "source": actor,
            "kafka_partition": kafka_partition, "partition_key": None,
            "ts": min(p.watermark, END_OF_TIME) - 1, "txn_seq": -1, "wall_ms": now_ms()}


def progress_from(rec: Mapping[str, Any]) -> Progress:
    return Progress(rec["ts"] + 1, rec["stage"].lower())


def change_record(c: ContextChange, seq: int, previous: int) -> dict[str, Any]:
    return {"version": 1, "partition_key": c.key, "partition": c.partition, "ts": c.ts,
            "txn_seq": seq, "contexts": c.vector, "previous": previous,
            "active": list(c.contexts), "ingest_ms": 0}


def change_from(rec: Mapping[str, Any]) -> tuple[ContextChange, int]:
    return (ContextChange(rec["partition"], rec["partition_key"], rec["ts"], rec["contexts"],
                          tuple(rec["active"])), rec["txn_seq"])


def alert_record(a: Alert, contexts: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"version": 1, "plan_id": a.plan_id, "event_type": a.event_type,
            "partition_key": a.key, "partition": a.partition, "start_ts": a.start_ts,
            "end_ts": a.end_ts, "fields": dict(a.fields), "event_seqs": [],
            "contexts": list(contexts), "ingest_ms": a.ingest_ms, "emit_ms": now_ms()}


def alert_from(rec: Mapping[str, Any]) -> Alert:
    return Alert(rec["plan_id"], rec["event_type"], rec["partition"], rec["partition_key"],
                 rec["start_ts"], rec["end_ts"], dict(rec["fields"]), ingest_ms=rec["ingest_ms"])


def output_record(a: Alert, schema_fields: list[str]) -> dict[str, Any]:
    """An alert in its own event type's schema (e.g. the Linear Road outputs)."""
    values = {**a.fields, "ingest_ms": a.ingest_ms}
    return {name: values.get(name) for name in schema_fields}


def dead_record(d: DeadLetter, service: str) -> dict[str, Any]:
    """The dead letter as a caesar.DeadLetter record: the original key, value
    and headers byte for byte, or cut to fit (see DEAD_VALUE_MAX)."""
    cuts = []
    value = d.raw or None
    if value is not None and len(value) > DEAD_VALUE_MAX:
        cuts.append(f"value {len(value)} bytes")
        value = value[:DEAD_VALUE_MAX]
    key = d.key
    if key is not None and len(key) > DEAD_KEY_MAX:
        cuts.append(f"key {len(key)} bytes")
        key = key[:DEAD_KEY_MAX]
    headers: dict[str, bytes] = {}
    room = DEAD_HEADERS_MAX
    for name, raw in d.headers:
        name = name[:256]
        raw = raw or b""
        if len(name) + len(raw) > room:
            cuts.append(f"header {name!r} {len(raw)} bytes")
            raw = raw[:max(0, room - len(name))]
        headers[name] = raw
        room -= len(name) + len(raw)
    detail = d.detail
    if cuts:
        headers[TRUNCATED_HEADER] = "; ".join(cuts).encode()
        detail = f"{detail} [truncated to fit a dead letter: {'; '.join(cuts)}]"
    if len(detail) > DEAD_DETAIL_MAX:
        detail = detail[:DEAD_DETAIL_MAX - 20] + " ...[detail cut]"
    return {"version": 1, "topic": d.topic, "partition": d.partition, "offset": d.offset,
            "key": key, "value": value, "headers": headers, "record_ms": d.timestamp_ms,
            "reason": _REASONS.get(d.reason, "PROCESSING_ERROR"), "detail": detail,
            "service": service, "time_ms": now_ms()}
