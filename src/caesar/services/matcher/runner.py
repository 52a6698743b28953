"""Binds MatcherProcessor to the bus: routed partition j in, alerts (derived
events) to the alerts topic keyed by the stream partition key, matcher
progress to the progress topic."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, cast

from caesar.bus.records import OutRecord, Record, TopicPartition
from caesar.plans.execution import ExecutionPlan
from caesar.services.common.config import ServiceConfig
from caesar.services.common.latency import LatencyHistogram
from caesar.services.common.messages import (
    Alert,
    DeadLetter,
    Discard,
    PlanSwitch,
    Progress,
    RoutedTransaction,
)
from caesar.services.common.replay import SeqFilter, owned
from caesar.services.common.switching import PartitionPlans, segments
from caesar.services.common.wire import (
    DEAD,
    DERIVED,
    PROGRESS,
    ROUTED,
    SWITCH,
    alert_record,
    dead_record,
    output_record,
    progress_from,
    progress_record,
    register_model_schemas,
    routed_from,
    switch_from,
)
from caesar.services.matcher.processor import MatcherProcessor
from caesar.services.matcher.stage_graph import default_engine_factory
from caesar.services.store.state_format import from_pairs, pairs


class OutputEncoder:
    """Alerts -> records: every alert as a DerivedEvent on the alerts topic, and
    alerts of stages with an output topic also there, in their event type's
    own schema when the model names one (what the apps downstream read)."""

    def __init__(self, cfg: ServiceConfig) -> None:
        self.cfg, self.codec = cfg, cfg.codec
        self._by_plan: dict[int, dict[str, tuple[str, list[str]]]] = {}
        # Input Kafka timestamp -> alert encoded: the pipeline's end-to-end latency.
        self.latency = LatencyHistogram()

    def _schemas(self, plan: ExecutionPlan) -> dict[str, tuple[str, list[str]]]:
        """Event type -> (schema name, fields) of the plan's output schemas."""
        found = self._by_plan.get(id(plan))
        if found is None:
            repo = self.codec.repository
            found = self._by_plan[id(plan)] = {
                etype: (name, repo.get(name).field_names())
                for etype, name in register_model_schemas(repo, plan).items()}
        return found

    def encode(self, alerts: list[Alert], plan: ExecutionPlan | None = None) -> list[OutRecord]:
        schemas = self._schemas(plan or self.cfg.plan)
        out: list[OutRecord] = []
        now = time.time() * 1000
        for a in alerts:
            if a.ingest_ms:
                self.latency.observe(now - a.ingest_ms)
            key = a.key.encode()
            generic = self.codec.encode(DERIVED, alert_record(a))
            out.append(OutRecord(self.cfg.topics.alerts, generic, key))
            if a.topic:
                own = schemas.get(a.event_type)
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
        self.plans = PartitionPlans(cfg, lambda plan: MatcherProcessor(plan, factory))
        self.procs = self.plans.procs
        self.seen = SeqFilter()
        self.outputs = OutputEncoder(cfg)
        self.owner: dict[int, int] = {}  # stream partition -> Kafka partition

    def inputs(self) -> list[TopicPartition]:
        return [tp for j in self.cfg.partitions for tp in self.partition_inputs(j)]

    def partition_inputs(self, j: int) -> list[TopicPartition]:
        return [TopicPartition(self.cfg.routed_topic, j)]

    def handle(self, records: Sequence[Record]) -> dict[int, list[OutRecord]]:
        outputs: dict[int, list[OutRecord]] = {}
        for j, items in self._decode(records).items():
            out = outputs[j] = []
            for chunk, switch in segments(items):
                if chunk:
                    result = self.procs[j].process(
                        cast(list[RoutedTransaction | Discard | Progress], chunk))
                    out += self.outputs.encode(result.alerts, self.plans.plan(j))
                    if result.progress is not None:
                        out.append(OutRecord(self.cfg.topics.progress, self.codec.encode(
                            PROGRESS, progress_record(result.progress, self.cfg.actor_id, j)),
                            b"__progress__", partition=j))
                if switch is not None:
                    self.plans.switch(j, switch.plan)
        return outputs

    def _decode(self, records: Sequence[Record]
                ) -> dict[int, list[RoutedTransaction | Discard | Progress | PlanSwitch]]:
        """The fresh inputs per Kafka partition (replayed ones dropped)."""
        by_partition: dict[int, list[RoutedTransaction | Discard | Progress | PlanSwitch]] = \
            defaultdict(list)
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
            elif schema == SWITCH:
                by_partition[r.partition].append(switch_from(value))
        return by_partition

    def plan_versions(self) -> dict[int, str]:
        return dict(self.plans.versions)

    def snapshot_partition(self, j: int) -> Any:
        return {"plan": self.plans.versions[j], "proc": self.procs[j].snapshot(),
                "seen": pairs(owned(self.seen.last, self.owner, j))}

    def restore_partition(self, j: int, state: Any) -> None:
        self.plans.restore(j, state.get("plan"), state["proc"])
        seen = from_pairs(state["seen"])
        self.seen.last.update(seen)
        self.owner.update(dict.fromkeys(seen, j))

    def event_time(self) -> int:
        return max((p.watermark for p in self.procs.values()), default=0)
