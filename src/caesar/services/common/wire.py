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
    Progress,
)

TXN_BATCH = "caesar.TransactionBatch"  # transactions: caesar.services.common.columnar
ROUTED_BATCH = "caesar.RoutedBatch"
PROGRESS = "caesar.Progress"
CHANGE = "caesar.ContextChange"
DERIVED = "caesar.DerivedEvent"
DEAD = "caesar.DeadLetter"
AVRO_TYPES = {"int": "long", "float": "double", "string": "string", "bool": "boolean"}
_REASONS = {"undecodable": "UNDECODABLE", "schema": "SCHEMA_VIOLATION", "late": "LATE",
            "unknown_type": "UNKNOWN_TYPE"}
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
    return {"version": 1, "topic": d.topic, "partition": d.partition, "offset": d.offset,
            "key": None, "value": d.raw or None, "headers": {}, "record_ms": -1,
            "reason": _REASONS.get(d.reason, "PROCESSING_ERROR"), "detail": d.detail,
            "service": service, "time_ms": now_ms()}
