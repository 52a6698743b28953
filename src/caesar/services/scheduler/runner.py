"""Binds SchedulerProcessor to the bus: input topic partition j -> one
processor -> transactions (+ progress) on partition j of the transactions
topic, dead letters to the dead-letter topic. Input topics must be keyed by
the stream partition key (all events of one stream partition arrive through
one partition index), as the DESIGN's data flow requires."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from caesar.bus.records import OutRecord, Record, TopicPartition
from caesar.codecs import CodecError, SingleObjectCodec
from caesar.codecs.flat import FlatCodec, flat_fields
from caesar.services.common.columnar import batch_record, chunks
from caesar.services.common.config import ServiceConfig
from caesar.services.common.messages import INGEST, InputColumns, InputRecord, Progress, TxnBatch
from caesar.services.common.wire import (
    DEAD,
    PROGRESS,
    TXN_BATCH,
    dead_record,
    progress_record,
    register_input_schemas,
    register_model_schemas,
)
from caesar.services.scheduler.processor import SchedulerOutput, SchedulerProcessor


class SchedulerHandler:
    def __init__(self, cfg: ServiceConfig) -> None:
        self.cfg = cfg
        self.codec = cfg.codec
        schema_names = register_input_schemas(self.codec.repository, cfg.plan)
        self.type_by_schema = {v: k for k, v in schema_names.items()}
        for name, schema in register_model_schemas(self.codec.repository, cfg.plan).items():
            self.type_by_schema.setdefault(schema, name)
        self.short_names = {t.name for t in cfg.plan.event_types}
        self.bulk = self._bulk_decoders(cfg)
        self.procs = {j: SchedulerProcessor(cfg.plan, cfg.allowance) for j in cfg.partitions}
        for j, proc in self.procs.items():
            for topic in cfg.input_topics():
                proc.register_source(topic, j)
        self.seq: dict[int, int] = defaultdict(int)  # Kafka partition -> batches sent
        self.max_ts = -(2**62)

    def inputs(self) -> list[TopicPartition]:
        return [tp for j in self.cfg.partitions for tp in self.partition_inputs(j)]

    def partition_inputs(self, j: int) -> list[TopicPartition]:
        return [TopicPartition(t, j) for t in self.cfg.input_topics()]

    def decode(self, rec: Record) -> InputRecord:
        raw = rec.value or b""
        if rec.value is None:
            return InputRecord(rec.topic, rec.partition, rec.offset, None, raw, "empty record")
        try:
            schema, value = self.codec.decode(rec.value)
        except CodecError as exc:
            return InputRecord(rec.topic, rec.partition, rec.offset, None, raw, str(exc))
        except Exception as exc:  # fastavro raises plain errors on truncated data
            return InputRecord(rec.topic, rec.partition, rec.offset, None, raw,
                               f"{type(exc).__name__}: {exc}")
        name = self.type_by_schema.get(schema) or schema.rsplit(".", 1)[-1]
        if name in self.short_names and "type" not in value:
            value["type"] = name
        value[INGEST] = rec.timestamp_ms
        return InputRecord(rec.topic, rec.partition, rec.offset, value, raw)

    def handle(self, records: Sequence[Record]) -> list[OutRecord]:
        by_source: dict[tuple[int, str], list[Record]] = defaultdict(list)
        for r in records:
            by_source[(r.partition, r.topic)].append(r)
        out: list[OutRecord] = []
        for (j, topic), recs in by_source.items():
            columns = self._decode_bulk(topic, recs)
            if columns is not None:
                out += self._encode(j, self.procs[j].process_columns(columns))
            else:
                out += self._encode(j, self.procs[j].process([self.decode(r) for r in recs]))
        return out

    @staticmethod
    def _bulk_decoders(cfg: ServiceConfig) -> dict[str, tuple[str, FlatCodec]]:
        """Input topic -> (event type, bulk decoder) for topics carrying one
        type whose model schema is a flat integer record."""
        out = {}
        for t in cfg.plan.event_types:
            topic = t.topic
            if topic is None or not t.schema_json or \
                    sum(1 for u in cfg.plan.event_types if u.topic == topic) != 1:
                continue
            entry = cfg.codec.repository.add(t.schema_json)
            fields = flat_fields(entry)
            if fields is not None and set(t.fields) <= {n for n, _ in fields} and \
                    isinstance(cfg.codec, SingleObjectCodec):
                out[topic] = (t.name, FlatCodec(entry))
        return out

    def _decode_bulk(self, topic: str, recs: list[Record]) -> InputColumns | None:
        """The records as columns, when the whole batch decodes in bulk."""
        found = self.bulk.get(topic)
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

    def idle(self, idle_s: float) -> list[OutRecord]:
        if self.cfg.idle_flush_s is None or idle_s < self.cfg.idle_flush_s:
            return []
        out: list[OutRecord] = []
        for j, proc in self.procs.items():
            if proc.buffered:
                out += self._encode(j, proc.advance_idle())
        return out

    def flush_all(self) -> list[OutRecord]:
        """End of a bounded input: release everything (watermark = end of time)."""
        out: list[OutRecord] = []
        for j, proc in self.procs.items():
            out += self._encode(j, proc.flush())
        return out

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
                             self.codec.encode(DEAD, dead_record(d, "scheduler")), None)
                   for d in result.dead_letters)
        return out

    def snapshot_partition(self, j: int) -> Any:
        return {"proc": self.procs[j].snapshot(), "seq": self.seq[j], "max_ts": self.max_ts}

    def restore_partition(self, j: int, state: Any) -> None:
        self.procs[j].restore(state["proc"])
        self.seq[j] = state["seq"] if isinstance(state["seq"], int) else 0
        self.max_ts = max(self.max_ts, state["max_ts"])

    def event_time(self) -> int:
        return self.max_ts
