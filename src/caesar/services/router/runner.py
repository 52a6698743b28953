"""Binds RouterProcessor to the bus: transactions partition j and
context-changes partition j in, routed transactions (+ router progress) on
partition j of the routed topic out."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from caesar.bus.records import OutRecord, Record, TopicPartition
from caesar.services.common.config import ServiceConfig
from caesar.services.common.messages import (
    ContextChange,
    Discard,
    Progress,
    RoutedTransaction,
    Transaction,
)
from caesar.services.common.replay import SeqFilter, owned, owned_by
from caesar.services.common.wire import (
    CHANGE,
    PROGRESS,
    ROUTED,
    TXN,
    change_from,
    progress_from,
    progress_record,
    routed_record,
    txn_from,
)
from caesar.services.router.processor import RouterProcessor


class RouterHandler:
    def __init__(self, cfg: ServiceConfig) -> None:
        self.cfg = cfg
        self.codec = cfg.codec
        self.procs = {j: RouterProcessor(cfg.plan) for j in cfg.partitions}
        self.seen_txn = SeqFilter()
        self.seen_change = SeqFilter()
        self.txn_seq: dict[tuple[int, int], int] = {}  # (partition, ts) -> seq, for output
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
        # Transactions never routed (skipped) leave their seq behind: forget old ones.
        if len(self.txn_seq) > 100_000:
            self.txn_seq.clear()
        return out

    def _decode(self, records: Sequence[Record]
                ) -> dict[int, list[Transaction | ContextChange | Progress]]:
        """The fresh inputs per Kafka partition (replayed ones dropped)."""
        by_partition: dict[int, list[Transaction | ContextChange | Progress]] = defaultdict(list)
        for r in records:
            if r.value is None:  # a tombstone: the services never write one here
                continue
            schema, value = self.codec.decode(r.value)
            if schema == TXN:
                txn, seq = txn_from(value)
                self.owner[txn.partition] = r.partition
                if self.seen_txn.fresh(txn.partition, seq):
                    self.txn_seq[(txn.partition, txn.ts)] = seq
                    by_partition[r.partition].append(txn)
            elif schema == CHANGE:
                change, seq = change_from(value)
                self.owner[change.partition] = r.partition
                if self.seen_change.fresh(change.partition, seq):
                    by_partition[r.partition].append(change)
            elif schema == PROGRESS:
                by_partition[r.partition].append(progress_from(value))
        return by_partition

    def _encode(self, j: int, routed: Sequence[RoutedTransaction | Discard | Progress]
                ) -> list[OutRecord]:
        topic = self.cfg.routed_topic
        out: list[OutRecord] = []
        for item in routed:
            if isinstance(item, Progress):
                out.append(OutRecord(topic, self.codec.encode(
                    PROGRESS, progress_record(item, self.cfg.actor_id, j)), b"__progress__",
                    partition=j))
                continue
            if isinstance(item, RoutedTransaction):
                seq = self.txn_seq.pop((item.txn.partition, item.txn.ts), -1)
                key = item.txn.key.encode()
            else:  # a discard order carries the seq of the skipped transaction
                seq = self.txn_seq.pop((item.partition, item.ts), -1)
                key = None
            out.append(OutRecord(topic, self.codec.encode(ROUTED, routed_record(item, seq)),
                                 key, partition=j))
        return out

    def idle(self, idle_s: float) -> list[OutRecord]:
        return []

    def snapshot_partition(self, j: int) -> Any:
        return {"proc": self.procs[j].snapshot(),
                "seen_txn": owned(self.seen_txn.last, self.owner, j),
                "seen_change": owned(self.seen_change.last, self.owner, j),
                "txn_seq": owned_by(self.txn_seq, self.owner, j, lambda k: k[0])}

    def restore_partition(self, j: int, state: Any) -> None:
        self.procs[j].restore(state["proc"])
        self.seen_txn.last.update(state["seen_txn"])
        self.seen_change.last.update(state["seen_change"])
        self.txn_seq.update(state["txn_seq"])
        self.owner.update(dict.fromkeys(state["seen_txn"], j))
        self.owner.update(dict.fromkeys(state["seen_change"], j))

    def event_time(self) -> int:
        return max((p.forwarded for p in self.procs.values()), default=0)
