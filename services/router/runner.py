"""Binds RouterProcessor to the bus: transactions partition j and
context-changes partition j in, routed transactions (+ router progress) on
partition j of the routed topic out."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from services.router.processor import RouterProcessor
from services.scheduler.messages import ContextChange, Progress, RoutedTransaction, Transaction
from services.scheduler.wire import (
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
from services.store.loop import SeqFilter, ServiceConfig
from shared.bus.records import OutRecord, Record, TopicPartition


class RouterHandler:
    def __init__(self, cfg: ServiceConfig) -> None:
        self.cfg = cfg
        self.codec = cfg.codec
        self.procs = {j: RouterProcessor(cfg.plan) for j in cfg.partitions}
        self.seen_txn = SeqFilter()
        self.seen_change = SeqFilter()
        self.txn_seq: dict[tuple[int, int], int] = {}  # (partition, ts) -> seq, for output

    def inputs(self) -> list[TopicPartition]:
        t = self.cfg.topics
        return [TopicPartition(topic, j) for j in self.cfg.partitions
                for topic in (t.transactions, t.context_changes)]

    def handle(self, records: Sequence[Record]) -> list[OutRecord]:
        by_partition: dict[int, list[Transaction | ContextChange | Progress]] = defaultdict(list)
        for r in records:
            schema, value = self.codec.decode(r.value)
            if schema == TXN:
                txn, seq = txn_from(value)
                if self.seen_txn.fresh(txn.partition, seq):
                    self.txn_seq[(txn.partition, txn.ts)] = seq
                    by_partition[r.partition].append(txn)
            elif schema == CHANGE:
                change, seq = change_from(value)
                if self.seen_change.fresh(change.partition, seq):
                    by_partition[r.partition].append(change)
            elif schema == PROGRESS:
                by_partition[r.partition].append(progress_from(value))
        out: list[OutRecord] = []
        topic = self.cfg.routed_topic
        for j, items in by_partition.items():
            for item in self.procs[j].process(items).routed:
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
        # Transactions never routed (skipped) leave their seq behind: forget old ones.
        if len(self.txn_seq) > 100_000:
            self.txn_seq.clear()
        return out

    def idle(self, idle_s: float) -> list[OutRecord]:
        return []

    def snapshot(self) -> Any:
        return {"procs": {j: p.snapshot() for j, p in self.procs.items()},
                "seen_txn": dict(self.seen_txn.last), "seen_change": dict(self.seen_change.last),
                "txn_seq": dict(self.txn_seq)}

    def restore(self, state: Any) -> None:
        for j, s in state["procs"].items():
            if j in self.procs:
                self.procs[j].restore(s)
        self.seen_txn.last.update(state["seen_txn"])
        self.seen_change.last.update(state["seen_change"])
        self.txn_seq.update(state["txn_seq"])

    def event_time(self) -> int:
        return max((p.forwarded for p in self.procs.values()), default=0)
