"""Binds MatcherProcessor to the bus: routed partition j in, alerts (derived
events) to the alerts topic keyed by the stream partition key, matcher
progress to the progress topic."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from services.matcher.processor import MatcherProcessor, default_engine_factory
from services.scheduler.messages import Discard, Progress, RoutedTransaction
from services.scheduler.wire import (
    DERIVED,
    PROGRESS,
    ROUTED,
    alert_record,
    progress_from,
    progress_record,
    routed_from,
)
from services.store.loop import SeqFilter, ServiceConfig, owned
from shared.bus.records import OutRecord, Record, TopicPartition


class MatcherHandler:
    def __init__(self, cfg: ServiceConfig) -> None:
        self.cfg = cfg
        self.codec = cfg.codec
        factory = cfg.engine_factory or default_engine_factory
        self.procs = {j: MatcherProcessor(cfg.plan, factory) for j in cfg.partitions}
        self.seen = SeqFilter()
        self.owner: dict[int, int] = {}  # stream partition -> Kafka partition

    def inputs(self) -> list[TopicPartition]:
        return [tp for j in self.cfg.partitions for tp in self.partition_inputs(j)]

    def partition_inputs(self, j: int) -> list[TopicPartition]:
        return [TopicPartition(self.cfg.routed_topic, j)]

    def handle(self, records: Sequence[Record]) -> list[OutRecord]:
        by_partition: dict[int, list[RoutedTransaction | Discard | Progress]] = defaultdict(list)
        for r in records:
            schema, value = self.codec.decode(r.value)
            if schema == ROUTED:
                item, seq = routed_from(value)
                part = item.txn.partition if isinstance(item, RoutedTransaction) else item.partition
                self.owner[part] = r.partition
                if self.seen.fresh(part, seq):
                    by_partition[r.partition].append(item)
            elif schema == PROGRESS:
                by_partition[r.partition].append(progress_from(value))
        out: list[OutRecord] = []
        for j, items in by_partition.items():
            result = self.procs[j].process(items)
            for a in result.alerts:
                out.append(OutRecord(self.cfg.topics.alerts, self.codec.encode(
                    DERIVED, alert_record(a)), a.key.encode()))
            if result.progress is not None:
                out.append(OutRecord(self.cfg.topics.progress, self.codec.encode(
                    PROGRESS, progress_record(result.progress, self.cfg.actor_id, j)),
                    b"__progress__", partition=j))
        return out

    def idle(self, idle_s: float) -> list[OutRecord]:
        return []

    def snapshot_partition(self, j: int) -> Any:
        return {"proc": self.procs[j].snapshot(), "seen": owned(self.seen.last, self.owner, j)}

    def restore_partition(self, j: int, state: Any) -> None:
        self.procs[j].restore(state["proc"])
        self.seen.last.update(state["seen"])
        self.owner.update(dict.fromkeys(state["seen"], j))

    def event_time(self) -> int:
        return max((p.watermark for p in self.procs.values()), default=0)
