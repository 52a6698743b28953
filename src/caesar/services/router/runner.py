"""Binds RouterProcessor to the bus: transaction batches and context changes
of partition j in, routed batches (+ router progress) on partition j of the
routed topic out."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from caesar.bus.records import OutRecord, Record, TopicPartition
from caesar.events.batch import StringPool
from caesar.services.common.columnar import batch_from, routed_chunks, routed_record
from caesar.services.common.config import ServiceConfig
from caesar.services.common.messages import ContextChange, Progress, RoutedBatch, TxnBatch
from caesar.services.common.replay import SeqFilter, owned
from caesar.services.common.wire import (
    CHANGE,
    PROGRESS,
    ROUTED_BATCH,
    TXN_BATCH,
    change_from,
    progress_from,
    progress_record,
)
from caesar.services.router.processor import RouterProcessor


class RouterHandler:
    def __init__(self, cfg: ServiceConfig) -> None:
        self.cfg = cfg
        self.codec = cfg.codec
        self.procs = {j: RouterProcessor(cfg.plan) for j in cfg.partitions}
        self.strings = StringPool()  # the router reads no strings; the batches keep theirs
        self.seen_txn = SeqFilter()  # per Kafka partition: transaction batches
        self.seen_change = SeqFilter()  # per stream partition: context changes
        self.seq: dict[int, int] = defaultdict(int)  # Kafka partition -> routed batches sent
        self.owner: dict[int, int] = {}  # stream partition -> Kafka partition

    def inputs(self) -> list[TopicPartition]:
        return [tp for j in self.cfg.partitions for tp in self.partition_inputs(j)]

    def partition_inputs(self, j: int) -> list[TopicPartition]:
        t = self.cfg.topics
        return [TopicPartition(t.transactions, j), TopicPartition(t.context_changes, j)]

    def handle(self, records: Sequence[Record]) -> list[OutRecord]:
        out: list[OutRecord] = []
        for j, items in self._decode(records).items():
            out += self._encode(j, self.procs[j].process(items).routed)
        return out

    def _decode(self, records: Sequence[Record]
                ) -> dict[int, list[TxnBatch | ContextChange | Progress]]:
        """The fresh inputs per Kafka partition (replayed ones dropped)."""
        by_partition: dict[int, list[TxnBatch | ContextChange | Progress]] = defaultdict(list)
        for r in records:
            if r.value is None:  # a tombstone: the services never write one here
                continue
            schema, value = self.codec.decode(r.value)
            if schema == TXN_BATCH:
                if self.seen_txn.fresh(r.partition, value["seq"]):
                    by_partition[r.partition].append(batch_from(value, self.strings)[0])
            elif schema == CHANGE:
                change, seq = change_from(value)
                self.owner[change.partition] = r.partition
                if self.seen_change.fresh(change.partition, seq):
                    by_partition[r.partition].append(change)
            elif schema == PROGRESS:
                by_partition[r.partition].append(progress_from(value))
        return by_partition

    def _encode(self, j: int, routed: Sequence[RoutedBatch | Progress]) -> list[OutRecord]:
        topic = self.cfg.routed_topic
        out: list[OutRecord] = []
        for item in routed:
            if isinstance(item, Progress):
                out.append(OutRecord(topic, self.codec.encode(
                    PROGRESS, progress_record(item, self.cfg.actor_id, j)), b"__progress__",
                    partition=j))
                continue
            for piece in routed_chunks(item):
                self.seq[j] += 1
                out.append(OutRecord(topic, self.codec.encode(
                    ROUTED_BATCH, routed_record(piece, self.seq[j])), None, partition=j))
        return out

    def idle(self, idle_s: float) -> list[OutRecord]:
        return []

    def snapshot_partition(self, j: int) -> Any:
        return {"proc": self.procs[j].snapshot(), "seen_txn": self.seen_txn.last.get(j, -1),
                "seen_change": owned(self.seen_change.last, self.owner, j),
                "seq": self.seq[j]}

    def restore_partition(self, j: int, state: Any) -> None:
        self.procs[j].restore(state["proc"])
        if isinstance(state["seen_txn"], int):
            self.seen_txn.last[j] = state["seen_txn"]
        self.seen_change.last.update(state["seen_change"])
        self.owner.update(dict.fromkeys(state["seen_change"], j))
        self.seq[j] = state.get("seq", 0)

    def event_time(self) -> int:
        return max((p.forwarded for p in self.procs.values()), default=0)
