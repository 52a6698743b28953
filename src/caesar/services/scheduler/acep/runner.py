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

`tables(as_of)` answers `caesar tables` from another thread of the actor
(a lock keeps it out of a batch): the rows of the newest checkpoint written,
or of an older timestamp still kept.

State: per partition its matcher state; the tables, the newest timestamp
run and the held-back matches ride with the lowest partition's checkpoint
(the store's changelog), so a restarted actor goes on from the last commit.
The tables see every partition's input, so the partitions must not commit
one after another (a crash between two commits would replay the later
partitions' input into tables that already saw it): `one_transaction` makes
the loop commit the whole batch, i.e. the outputs, every partition's
checkpoint and every input partition's offsets, in ONE Kafka transaction,
and refuse to restore the checkpoints into another partition grouping.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from caesar.bus.records import OutRecord, Record, TopicPartition
from caesar.plans.execution import ExecutionPlan
from caesar.plans.pattern import PatternPlan
from caesar.plans.serialize import plan_version
from caesar.services.common.config import ServiceConfig
from caesar.services.common.messages import PlanSwitch
from caesar.services.common.replay import SeqFilter
from caesar.services.matcher.processor import MatcherProcessor
from caesar.services.matcher.runner import OutputEncoder, dead_records, decode_routed
from caesar.services.matcher.stage_graph import default_engine_factory
from caesar.services.scheduler.acep.processor import AcepProcessor
from caesar.services.scheduler.acep.tables import TOP

# Timestamps whose table versions the service keeps for `caesar tables --as-of`.
TABLE_HISTORY = 1024


def acep_stages_plan(plan: ExecutionPlan) -> ExecutionPlan:
    """The plan with only the matcher stages deriving `_acep_*` matches."""
    assert plan.acep is not None
    inputs = plan.acep.input_types()
    stages = tuple(s for s in plan.matcher_stages
                   if isinstance(s.plan, PatternPlan) and s.plan.output is not None
                   and s.plan.output.event_type in inputs)
    return replace(plan, matcher_stages=stages)


class AcepHandler:
    one_transaction = True  # ServiceLoop: the tables are shared by all partitions

    def __init__(self, cfg: ServiceConfig, scheduler: str = "lwm") -> None:
        assert cfg.plan.acep is not None
        self.cfg, self.codec = cfg, cfg.codec
        plan = acep_stages_plan(cfg.plan)
        factory = cfg.engine_factory or default_engine_factory
        self.matchers = {j: MatcherProcessor(plan, factory) for j in cfg.partitions}
        self.acep = AcepProcessor(cfg.plan.acep, scheduler, history=TABLE_HISTORY)
        self.seen = SeqFilter()
        self.outputs = OutputEncoder(cfg)
        self.lock = threading.Lock()  # the loop's thread vs `tables()` callers
        # The newest timestamp in a checkpoint written (-TOP: the initial rows).
        self.committed = -TOP
        self.acep.pin(self.committed)

    def inputs(self) -> list[TopicPartition]:
        return [tp for j in self.cfg.partitions for tp in self.partition_inputs(j)]

    def partition_inputs(self, j: int) -> list[TopicPartition]:
        return [TopicPartition(self.cfg.routed_topic, j)]

    def handle(self, records: Sequence[Record]) -> dict[int, list[OutRecord]]:
        with self.lock:
            return self._handle(records)

    def _handle(self, records: Sequence[Record]) -> dict[int, list[OutRecord]]:
        # Decoded like the matcher's input; model switches are not followed
        # (plan_versions).
        decoded = decode_routed(self.codec, records, self.seen,
                                lambda j: self.matchers[j].graph.strings)
        matches = []
        for j, items in decoded.items():
            matches += self.matchers[j].process(
                [i for i in items if not isinstance(i, PlanSwitch)]).alerts
        watermark = min(m.watermark for m in self.matchers.values())
        alerts, dead = self.acep.process(matches, watermark)
        out = self.outputs.encode(alerts) + dead_records(self.cfg, dead, "matcher")
        # Every partition it read changed (its offsets commit). The lowest is
        # always named, read or not: its checkpoint holds the tables and the
        # held-back matches, so it is written whenever they may have moved
        # (all of them in the one transaction of the batch: one_transaction).
        first = min(self.cfg.partitions)
        result: dict[int, list[OutRecord]] = {j: [] for j in decoded}
        result.setdefault(first, []).extend(out)
        return result

    def plan_versions(self) -> dict[int, str]:
        """The model version it runs (model upgrades do not reach the acep
        service yet: it keeps the version it started with)."""
        version = plan_version(self.cfg.plan)
        return dict.fromkeys(self.cfg.partitions, version)

    def snapshot_partition(self, j: int) -> Any:
        state: dict[str, Any] = {"proc": self.matchers[j].snapshot(),
                                 "seen": self.seen.last.get(j, -1)}
        if j == min(self.cfg.partitions):
            with self.lock:
                state["acep"] = self.acep.snapshot()
                if self.acep.done_ts is not None:
                    self.committed = self.acep.done_ts
                    self.acep.pin(self.committed)
        return state

    def restore_partition(self, j: int, state: Any) -> None:
        self.matchers[j].restore(state["proc"])
        if isinstance(state["seen"], int):
            self.seen.last[j] = state["seen"]
        if "acep" in state:
            with self.lock:
                self.acep.restore(state["acep"])
                if self.acep.done_ts is not None:
                    self.committed = self.acep.done_ts
                    self.acep.pin(self.committed)

    def tables(self, as_of: int | None = None) -> dict[str, Any]:
        """The tables' rows (each table's in key order) as of the newest
        checkpoint written, or (`as_of`) after the s-transactions up to that
        timestamp, if it is older and still kept: {"ts": the timestamp shown
        (None: the initial rows), "tables": {name: [row, ...]}}. HistoryError
        when `as_of` is no longer kept."""
        with self.lock:
            at = self.committed if as_of is None else min(as_of, self.committed)
            rows = self.acep.tables(at)
        return {"ts": None if at == -TOP else at,
                "tables": {name: [dict(row) for _, row in sorted(table.items())]
                           for name, table in rows.items()}}

    def event_time(self) -> int:
        return max((m.watermark for m in self.matchers.values()), default=0)
