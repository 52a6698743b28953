"""Binds SchedulerProcessor to the bus: input topic partition j -> one
processor -> transactions (+ progress) on partition j of the transactions
topic, dead letters to the dead-letter topic. Input topics must be keyed by
the stream partition key (all events of one stream partition arrive through
one partition index), as the DESIGN's data flow requires."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from caesar.bus.records import OutRecord, Record, TopicPartition
from caesar.codecs import CodecError
from caesar.services.common.config import ServiceConfig
from caesar.services.common.messages import InputRecord, Progress, Transaction
from caesar.services.common.replay import owned
from caesar.services.common.wire import (
    DEAD,
    INGEST,
    PROGRESS,
    TXN,
    dead_record,
    progress_record,
    register_input_schemas,
    register_model_schemas,
    txn_record,
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
        self.procs = {j: SchedulerProcessor(cfg.plan, cfg.allowance) for j in cfg.partitions}
        for j, proc in self.procs.items():
            for topic in cfg.input_topics():
                proc.register_source(topic, j)
        self.seq: dict[int, int] = defaultdict(int)
        self.owner: dict[int, int] = {}  # stream partition -> Kafka partition
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
        by_partition: dict[int, list[InputRecord]] = defaultdict(list)
        for r in records:
            by_partition[r.partition].append(self.decode(r))
        out: list[OutRecord] = []
        for j, recs in by_partition.items():
            out += self._encode(j, self.procs[j].process(recs))
        return out

    def idle(self, idle_s: float) -> list[OutRecord]:
        if self.cfg.idle_flush_s is None or idle_s < self.cfg.idle_flush_s:
            return []
        out: list[OutRecord] = []
        for j, proc in self.procs.items():
            if proc.buffer:
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
            if isinstance(item, Transaction):
                self.seq[item.partition] += 1
                self.owner[item.partition] = j
                self.max_ts = max(self.max_ts, item.ts)
                out.append(OutRecord(topic, self.codec.encode(
                    TXN, txn_record(item, self.seq[item.partition])), item.key.encode(),
                    partition=j))
            elif isinstance(item, Progress):
                out.append(OutRecord(topic, self.codec.encode(
                    PROGRESS, progress_record(item, self.cfg.actor_id, j)), b"__progress__",
                    partition=j))
        out.extend(OutRecord(self.cfg.topics.dead_letters,
                             self.codec.encode(DEAD, dead_record(d, "scheduler")), None)
                   for d in result.dead_letters)
        return out

    def snapshot_partition(self, j: int) -> Any:
        return {"proc": self.procs[j].snapshot(), "seq": owned(self.seq, self.owner, j),
                "max_ts": self.max_ts}

    def restore_partition(self, j: int, state: Any) -> None:
        self.procs[j].restore(state["proc"])
        self.seq.update(state["seq"])
        self.owner.update(dict.fromkeys(state["seq"], j))
        self.max_ts = max(self.max_ts, state["max_ts"])

    def event_time(self) -> int:
        return self.max_ts
