"""Binds SchedulerProcessor to the bus: input topic partition j -> one
processor -> transactions (+ progress) on partition j of the transactions
topic, dead letters to the dead-letter topic. Input topics must be keyed by
the stream partition key (all events of one stream partition arrive through
one partition index), as the DESIGN's data flow requires.

An input record with the header `caesar.watermark` (decimal event time, no
value) is an input watermark for its partition; `caesar.error` (set by
producers that could not encode a value) gives the reason of a record that
does not decode."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from caesar.bus.records import OutRecord, Record, TopicPartition
from caesar.codecs import CodecError, SingleObjectCodec
from caesar.codecs.flat import FlatCodec, flat_fields
from caesar.plans.execution import ExecutionPlan
from caesar.services.common.columnar import batch_record, chunks
from caesar.services.common.config import ServiceConfig
from caesar.services.common.messages import (
    INGEST,
    InputColumns,
    InputRecord,
    PlanSwitch,
    Progress,
    TxnBatch,
)
from caesar.services.common.switching import PartitionPlans
from caesar.services.common.wire import (
    DEAD,
    PROGRESS,
    SWITCH,
    SWITCH_KEY,
    TXN_BATCH,
    dead_record,
    progress_record,
    register_input_schemas,
    register_model_schemas,
    switch_record,
)
from caesar.services.scheduler.processor import SchedulerOutput, SchedulerProcessor

WATERMARK_HEADER = "caesar.watermark"
ERROR_HEADER = "caesar.error"


def watermark_record(topic: str, partition: int, ts: int) -> OutRecord:
    """An input watermark: no event with ts < `ts` follows on this partition."""
    return OutRecord(topic, None, None, ((WATERMARK_HEADER, str(ts).encode()),),
                     partition=partition)


class SchedulerHandler:
    def __init__(self, cfg: ServiceConfig) -> None:
        self.cfg = cfg
        self.codec = cfg.codec
        self.plans = PartitionPlans(cfg, self._processor)
        self.procs = self.plans.procs
        self._types: dict[str, tuple[dict[str, str], set[str]]] = {}
        self._bulk: dict[str, dict[str, tuple[str, FlatCodec]]] = {}  # plan version -> decoders
        self.seq: dict[int, int] = defaultdict(int)  # Kafka partition -> batches sent
        self.max_ts = -(2**62)

    def inputs(self) -> list[TopicPartition]:
        return [tp for j in self.cfg.partitions for tp in self.partition_inputs(j)]

    def partition_inputs(self, j: int) -> list[TopicPartition]:
        return [TopicPartition(t, j) for t in self.cfg.input_topics()]

    def _processor(self, plan: ExecutionPlan) -> SchedulerProcessor:
        return SchedulerProcessor(plan, self.cfg.allowance, max_ahead=self.cfg.max_ahead,
                                  ahead_confirm=self.cfg.ahead_confirm)

    def _type_names(self, j: int) -> tuple[dict[str, str], set[str]]:
        """Partition j's plan: Avro schema name -> event type, and the type names."""
        version = self.plans.versions[j]
        found = self._types.get(version)
        if found is None:
            # Producers may still write with an earlier version's input schemas
            # (or not yet with this one's): the codec knows them all, so whether
            # a record decodes does not depend on when the switch came.
            for known in self.plans.book.known():
                register_input_schemas(self.codec.repository, known)
            plan = self.plans.plan(j)
            names = register_input_schemas(self.codec.repository, plan)
            by_schema = {v: k for k, v in names.items()}
            for name, schema in register_model_schemas(self.codec.repository, plan).items():
                by_schema.setdefault(schema, name)
            found = self._types[version] = (by_schema, {t.name for t in plan.event_types})
        return found

    def decode(self, rec: Record) -> InputRecord:
        raw = rec.value or b""
        base = dict(key=rec.key, headers=rec.headers, timestamp_ms=rec.timestamp_ms)
        # (registers the input schemas of the partition's plan with the codec)
        type_by_schema, short_names = self._type_names(rec.partition)
        mark = rec.header(WATERMARK_HEADER)
        if mark is not None and rec.value is None:
            try:
                return InputRecord(rec.topic, rec.partition, rec.offset, None,
                                   watermark=int(mark), **base)  # type: ignore[arg-type]
            except ValueError:
                return InputRecord(rec.topic, rec.partition, rec.offset, None, raw,
                                   f"bad {WATERMARK_HEADER} header {mark[:40]!r}", **base)  # type: ignore[arg-type]
        if rec.value is None:
            return InputRecord(rec.topic, rec.partition, rec.offset, None, raw, "empty record",
                               **base)  # type: ignore[arg-type]
        try:
            schema, value = self.codec.decode(rec.value)
        except Exception as exc:  # CodecError, or fastavro's plain errors on truncated data
            error = str(exc) if isinstance(exc, CodecError) else f"{type(exc).__name__}: {exc}"
            why = rec.header(ERROR_HEADER)
            if why is not None:
                error = why.decode(errors="replace")
            return InputRecord(rec.topic, rec.partition, rec.offset, None, raw, error, **base)  # type: ignore[arg-type]
        name = type_by_schema.get(schema) or schema.rsplit(".", 1)[-1]
        if "type" not in value:
            # The schema names the event type (a schema of no declared type: unknown).
            value["type"] = name if name in short_names else schema
        value[INGEST] = rec.timestamp_ms
        return InputRecord(rec.topic, rec.partition, rec.offset, value, raw, **base)  # type: ignore[arg-type]

    def handle(self, records: Sequence[Record]) -> dict[int, list[OutRecord]]:
        by_source: dict[tuple[int, str], list[Record]] = defaultdict(list)
        for r in records:
            by_source[(r.partition, r.topic)].append(r)
        out: dict[int, list[OutRecord]] = defaultdict(list)
        for (j, topic), recs in by_source.items():
            columns = self._decode_bulk(j, topic, recs)
            if columns is not None:
                out[j] += self._encode(j, self.procs[j].process_columns(columns))
            else:
                out[j] += self._encode(j, self.procs[j].process([self.decode(r) for r in recs]))
        return dict(out)

    def _bulk_decoders(self, j: int) -> dict[str, tuple[str, FlatCodec]]:
        """Input topic -> (event type, bulk decoder) for topics of partition j's
        plan carrying one type whose model schema is a flat integer record."""
        version = self.plans.versions[j]
        found = self._bulk.get(version)
        if found is not None:
            return found
        plan, out = self.plans.plan(j), {}
        for t in plan.event_types:
            topic = t.topic
            if topic is None or not t.schema_json or \
                    sum(1 for u in plan.event_types if u.topic == topic) != 1:
                continue
            entry = self.codec.repository.add(t.schema_json)
            fields = flat_fields(entry)
            if fields is not None and set(t.fields) <= {n for n, _ in fields} and \
                    isinstance(self.codec, SingleObjectCodec):
                out[topic] = (t.name, FlatCodec(entry))
        self._bulk[version] = out
        return out

    def _decode_bulk(self, j: int, topic: str, recs: list[Record]) -> InputColumns | None:
        """The records as columns, when the whole batch decodes in bulk (no
        watermark, empty or undecodable record among them)."""
        found = self._bulk_decoders(j).get(topic)
        if found is None or any(r.value is None for r in recs):
            return None
        name, flat = found
        columns = flat.decode([r.value for r in recs if r.value is not None])
        if columns is None:
            return None
        return InputColumns(topic, name, np.fromiter((r.partition for r in recs), np.int64),
                            np.fromiter((r.offset for r in recs), np.int64),
                            np.fromiter((r.timestamp_ms for r in recs), np.int64), columns,
                            [r.value or b"" for r in recs])

    def control(self) -> dict[int, list[OutRecord]]:
        """A requested model upgrade starts here, at a transaction boundary:
        each partition switches plans and says so downstream (PlanSwitch)."""
        want = self.plans.book.requested
        out: dict[int, list[OutRecord]] = {}
        if want is None:
            return out
        for j in self.cfg.partitions:
            previous = self.plans.versions[j]
            if previous == want:
                continue
            self.plans.switch(j, want)
            marker = PlanSwitch(want, previous, self.procs[j].watermark)
            out[j] = [OutRecord(self.cfg.topics.transactions, self.codec.encode(
                SWITCH, switch_record(marker, self.cfg.actor_id, j)), SWITCH_KEY, partition=j)]
        return out

    def plan_versions(self) -> dict[int, str]:
        return dict(self.plans.versions)
    def _encode(self, j: int, result: SchedulerOutput) -> list[OutRecord]:
        topic = self.cfg.topics.transactions
        out: list[OutRecord] = []
        for item in result.transactions:
            if isinstance(item, TxnBatch):
                self.max_ts = max(self.max_ts, int(item.timestamps()[-1]))
                for piece in chunks(item):
                    self.seq[j] += 1
                    out.append(OutRecord(topic, self.codec.encode(
                        TXN_BATCH, batch_record(piece, self.seq[j])), None, partition=j))
            elif isinstance(item, Progress):
                out.append(OutRecord(topic, self.codec.encode(
                    PROGRESS, progress_record(item, self.cfg.actor_id, j)), b"__progress__",
                    partition=j))
        out.extend(OutRecord(self.cfg.topics.dead_letters,
                             self.codec.encode(DEAD, dead_record(d, "scheduler")), d.key)
                   for d in result.dead_letters)
        return out

    def snapshot_partition(self, j: int) -> Any:
        return {"plan": self.plans.versions[j], "proc": self.procs[j].snapshot(),
                "seq": self.seq[j],
                "max_ts": self.max_ts}

    def restore_partition(self, j: int, state: Any) -> None:
        self.plans.restore(j, state.get("plan"), state["proc"])
        self.seq[j] = int(state["seq"]) if isinstance(state["seq"], int) else 0
        self.max_ts = max(self.max_ts, int(state["max_ts"]))

    def event_time(self) -> int:
        return self.max_ts
