"""Binds MatcherProcessor to the bus: routed partition j in, alerts (derived
events) to the alerts topic keyed by the stream partition key, matcher
progress to the progress topic."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from caesar.bus.records import OutRecord, Record, TopicPartition
from caesar.services.common.config import ServiceConfig
from caesar.services.common.latency import LatencyHistogram
from caesar.services.common.messages import (
    Alert,
    DeadLetter,
    Discard,
    Progress,
    RoutedTransaction,
)
from caesar.services.common.replay import SeqFilter, owned
from caesar.services.common.wire import (
    DEAD,
    DERIVED,
    PROGRESS,
    ROUTED,
    alert_record,
    dead_record,
    output_record,
    progress_from,
    progress_record,
    register_model_schemas,
    routed_from,
)
from caesar.services.matcher.processor import MatcherProcessor
from caesar.services.matcher.stage_graph import default_engine_factory


class OutputEncoder:
    """Alerts -> records: every alert as a DerivedEvent on the alerts topic, and
    alerts of stages with an output topic also there, in their event type's
    own schema when the model names one (what the apps downstream read)."""

    def __init__(self, cfg: ServiceConfig) -> None:
        self.cfg, self.codec = cfg, cfg.codec
        repo = self.codec.repository
        self.schemas: dict[str, tuple[str, list[str]]] = {
            etype: (name, repo.get(name).field_names())
            for etype, name in register_model_schemas(repo, cfg.plan).items()}
        # Input Kafka timestamp -> alert encoded: the pipeline's end-to-end latency.
        self.latency = LatencyHistogram()

    def encode(self, alerts: list[Alert]) -> list[OutRecord]:
        out: list[OutRecord] = []
        now = time.time() * 1000
        for a in alerts:
            if a.ingest_ms:
                self.latency.observe(now - a.ingest_ms)
            key = a.key.encode()
            generic = self.codec.encode(DERIVED, alert_record(a))
            out.append(OutRecord(self.cfg.topics.alerts, generic, key))
            if a.topic:
                own = self.schemas.get(a.event_type)
                try:
                    value = (self.codec.encode(own[0], output_record(a, own[1])) if own
                             else generic)
                except Exception as exc:  # the alert breaks its declared schema
                    out.append(self._dead(a, generic, f"{type(exc).__name__}: {exc}"))
                    continue
                out.append(OutRecord(a.topic, value, key))
        return out

    def _dead(self, a: Alert, generic: bytes, detail: str) -> OutRecord:
        letter = DeadLetter("schema", f"{a.event_type} does not fit the schema of topic "
                            f"{a.topic}: {detail}", a.topic or "", -1, -1, generic)
        return OutRecord(self.cfg.topics.dead_letters,
                         self.codec.encode(DEAD, dead_record(letter, "matcher")), None)


class MatcherHandler:
    def __init__(self, cfg: ServiceConfig) -> None:
        self.cfg = cfg
        self.codec = cfg.codec
        factory = cfg.engine_factory or default_engine_factory
        self.procs = {j: MatcherProcessor(cfg.plan, factory) for j in cfg.partitions}
        self.seen = SeqFilter()
        self.outputs = OutputEncoder(cfg)
        self.owner: dict[int, int] = {}  # stream partition -> Kafka partition

    def inputs(self) -> list[TopicPartition]:
        return [tp for j in self.cfg.partitions for tp in self.partition_inputs(j)]

    def partition_inputs(self, j: int) -> list[TopicPartition]:
        return [TopicPartition(self.cfg.routed_topic, j)]

    def handle(self, records: Sequence[Record]) -> list[OutRecord]:
        by_partition: dict[int, list[RoutedTransaction | Discard | Progress]] = defaultdict(list)
        for r in records:
            if r.value is None:  # a tombstone: the services never write one here
                continue
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
            out += self.outputs.encode(result.alerts)
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
