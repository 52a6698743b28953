"""Binds DeriverProcessor to the bus: transactions partition j -> context
changes and deriver progress, both on partition j of the compacted
context-changes topic (one topic, so the router sees every change before the
progress that covers it)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from caesar.bus.records import OutRecord, Record, TopicPartition
from caesar.services.common.columnar import batch_from
from caesar.services.common.config import ServiceConfig
from caesar.services.common.messages import Progress, TxnBatch
from caesar.services.common.replay import SeqFilter, owned
from caesar.services.common.wire import (
    CHANGE,
    PROGRESS,
    TXN_BATCH,
    change_record,
    progress_from,
    progress_record,
)
from caesar.services.deriver.processor import DeriverProcessor
from caesar.services.matcher.runner import OutputEncoder
from caesar.services.matcher.stage_graph import default_engine_factory

PROGRESS_KEY = b"__progress__"


class DeriverHandler:
    def __init__(self, cfg: ServiceConfig) -> None:
        self.cfg = cfg
        self.codec = cfg.codec
        factory = cfg.engine_factory or default_engine_factory
        self.procs = {j: DeriverProcessor(cfg.plan, factory) for j in cfg.partitions}
        self.seen = SeqFilter()  # per Kafka partition: transaction batches
        self.outputs = OutputEncoder(cfg)
        self.change_seq: dict[int, int] = defaultdict(int)
        self.owner: dict[int, int] = {}  # stream partition -> Kafka partition

    def inputs(self) -> list[TopicPartition]:
        return [tp for j in self.cfg.partitions for tp in self.partition_inputs(j)]

    def partition_inputs(self, j: int) -> list[TopicPartition]:
        return [TopicPartition(self.cfg.topics.transactions, j)]

    def handle(self, records: Sequence[Record]) -> list[OutRecord]:
        by_partition: dict[int, list[TxnBatch | Progress]] = defaultdict(list)
        for r in records:
            if r.value is None:  # a tombstone: the services never write one here
                continue
            schema, value = self.codec.decode(r.value)
            if schema == TXN_BATCH:
                if self.seen.fresh(r.partition, value["seq"]):
                    batch, _ = batch_from(value, self.procs[r.partition].graph.strings)
                    by_partition[r.partition].append(batch)
            elif schema == PROGRESS:
                by_partition[r.partition].append(progress_from(value))
        out: list[OutRecord] = []
        topic = self.cfg.topics.context_changes
        for j, items in by_partition.items():
            proc = self.procs[j]
            before: dict[int, int] = {}
            result = proc.process(items)
            for c in result.changes:
                previous = before.get(c.partition)
                self.change_seq[c.partition] += 1
                rec = change_record(c, self.change_seq[c.partition],
                                    previous if previous is not None else -1)
                before[c.partition] = c.vector
                self.owner[c.partition] = j
                out.append(OutRecord(topic, self.codec.encode(CHANGE, rec), c.key.encode(),
                                     partition=j))
            out += self.outputs.encode(result.alerts)
            if result.progress is not None:
                out.append(OutRecord(topic, self.codec.encode(
                    PROGRESS, progress_record(result.progress, self.cfg.actor_id, j)),
                    PROGRESS_KEY, partition=j))
        return out

    def idle(self, idle_s: float) -> list[OutRecord]:
        return []

    def snapshot_partition(self, j: int) -> Any:
        return {"proc": self.procs[j].snapshot(), "seen": self.seen.last.get(j, -1),
                "change_seq": owned(self.change_seq, self.owner, j)}

    def restore_partition(self, j: int, state: Any) -> None:
        self.procs[j].restore(state["proc"])
        if isinstance(state["seen"], int):
            self.seen.last[j] = state["seen"]
        self.change_seq.update(state["change_seq"])
        self.owner.update(dict.fromkeys(state["change_seq"], j))

    def event_time(self) -> int:
        return max((p.done_before for p in self.procs.values()), default=0)
