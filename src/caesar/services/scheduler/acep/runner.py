"""Binds the ACEP stage to the bus (the "acep" service of a deployment whose
model has shared tables): it reads the routed transactions of every
partition, runs the pattern parts of the rules and table-reading queries
(the `_acep_*` matcher stages) itself, and once every partition's progress
has passed a timestamp runs that s-transaction over the tables
(processor.py). Its derived events go out like the matcher's (alerts topic,
and the type's own topic); actions that break a table's key are dead letters.

One actor owns all partitions (the tables are shared by all of them). Reading
the routed topic, rather than the matcher's alerts, keeps each partition's
matches and its progress in one ordered stream.

State: per partition its matcher state; the tables, the newest timestamp
run and the held-back matches ride with the lowest partition's checkpoint
(the store's changelog), so a restarted actor goes on from the last commit.
What the rules derive goes out in that partition's Kafka transaction too.
Exactly once holds per partition: the partitions commit one after another,
so a crash between two of those commits replays the later partitions' input
into tables that already saw it (not yet covered: one transaction for all
of the actor's partitions would close it).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from caesar.bus.records import OutRecord, Record, TopicPartition
from caesar.plans.execution import ExecutionPlan
from caesar.plans.pattern import PatternPlan
from caesar.plans.serialize import plan_version
from caesar.services.common.columnar import routed_from
from caesar.services.common.config import ServiceConfig
from caesar.services.common.messages import Alert, DeadLetter, Progress, RoutedBatch
from caesar.services.common.replay import SeqFilter
from caesar.services.common.wire import DEAD, PROGRESS, ROUTED_BATCH, dead_record, progress_from
from caesar.services.matcher.processor import MatcherProcessor
from caesar.services.matcher.runner import OutputEncoder
from caesar.services.matcher.stage_graph import default_engine_factory
from caesar.services.scheduler.acep.processor import AcepProcessor


def acep_stages_plan(plan: ExecutionPlan) -> ExecutionPlan:
    """The plan with only the matcher stages deriving `_acep_*` matches."""
    assert plan.acep is not None
    inputs = plan.acep.input_types()
    stages = tuple(s for s in plan.matcher_stages
                   if isinstance(s.plan, PatternPlan) and s.plan.output is not None
                   and s.plan.output.event_type in inputs)
    return replace(plan, matcher_stages=stages)


class AcepHandler:
    def __init__(self, cfg: ServiceConfig, scheduler: str = "lwm") -> None:
        assert cfg.plan.acep is not None
        self.cfg, self.codec = cfg, cfg.codec
        plan = acep_stages_plan(cfg.plan)
        factory = cfg.engine_factory or default_engine_factory
        self.matchers = {j: MatcherProcessor(plan, factory) for j in cfg.partitions}
        self.acep = AcepProcessor(cfg.plan.acep, scheduler)
        self.seen = SeqFilter()
        self.outputs = OutputEncoder(cfg)

    def inputs(self) -> list[TopicPartition]:
        return [tp for j in self.cfg.partitions for tp in self.partition_inputs(j)]

    def partition_inputs(self, j: int) -> list[TopicPartition]:
        return [TopicPartition(self.cfg.routed_topic, j)]

    def handle(self, records: Sequence[Record]) -> dict[int, list[OutRecord]]:
        # Decoded like the matcher's input (matcher/runner.py).
        by_partition: dict[int, list[RoutedBatch | Progress]] = defaultdict(list)
        for r in records:
            if r.value is None:
                continue
            schema, value = self.codec.decode(r.value)
            if schema == ROUTED_BATCH:
                if self.seen.fresh(r.partition, value["batch"]["seq"]):
                    batch, _ = routed_from(value, self.matchers[r.partition].graph.strings)
                    by_partition[r.partition].append(batch)
            elif schema == PROGRESS:
                by_partition[r.partition].append(progress_from(value))
        matches = []
        for j, items in by_partition.items():
            matches += self.matchers[j].process(items).alerts
        watermark = min(m.watermark for m in self.matchers.values())
        out = self._encode(*self.acep.process(matches, watermark))
        # every partition it read is dirty (its offsets commit); the outputs
        # ride with the lowest partition, whose checkpoint holds the tables
        first = min(self.cfg.partitions)
        result: dict[int, list[OutRecord]] = {j: [] for j in by_partition}
        result.setdefault(first, []).extend(out)
        return result

    def _encode(self, alerts: list[Alert], dead: list[DeadLetter]) -> list[OutRecord]:
        out = self.outputs.encode(alerts)
        out += [OutRecord(self.cfg.topics.dead_letters,
                          self.codec.encode(DEAD, dead_record(d, "matcher")), None)
                for d in dead]
        return out

    def plan_versions(self) -> dict[int, str]:
        """The model version it runs (model upgrades do not reach the acep
        service yet: it keeps the version it started with)."""
        version = plan_version(self.cfg.plan)
        return dict.fromkeys(self.cfg.partitions, version)

    def snapshot_partition(self, j: int) -> Any:
        state: dict[str, Any] = {"proc": self.matchers[j].snapshot(),
                                 "seen": self.seen.last.get(j, -1)}
        if j == min(self.cfg.partitions):
            state["acep"] = self.acep.snapshot()
        return state

    def restore_partition(self, j: int, state: Any) -> None:
        self.matchers[j].restore(state["proc"])
        if isinstance(state["seen"], int):
            self.seen.last[j] = state["seen"]
        if "acep" in state:
            self.acep.restore(state["acep"])

    def event_time(self) -> int:
        return max((m.watermark for m in self.matchers.values()), default=0)
