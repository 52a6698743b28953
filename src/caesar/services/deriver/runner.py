"""Binds DeriverProcessor to the bus: transactions partition j -> context
changes and deriver progress, both on partition j of the compacted
context-changes topic (one topic, so the router sees every change before the
progress that covers it)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, cast

from caesar.bus.records import OutRecord, Record, TopicPartition
from caesar.services.common.columnar import batch_from, batch_record, chunks
from caesar.services.common.config import ServiceConfig
from caesar.services.common.messages import PlanSwitch, Progress, TxnBatch
from caesar.services.common.replay import SeqFilter, decode_fresh, owned
from caesar.services.common.switching import PartitionPlans, segments
from caesar.services.common.wire import (
    CHANGE,
    PROGRESS,
    SWITCH,
    SWITCH_KEY,
    TXN_BATCH,
    change_record,
    progress_record,
    switch_record,
)
from caesar.services.deriver.processor import DeriverProcessor
from caesar.services.matcher.runner import OutputEncoder, dead_records
from caesar.services.matcher.stage_graph import default_engine_factory
from caesar.services.store.state_format import from_pairs, pairs

PROGRESS_KEY = b"__progress__"
# Results for the matcher (ExecutionPlan.imports) ride on the context-changes
# topic too, ahead of the progress that covers them; like progress they are
# read from the router's checkpointed offsets, never as a compacted table.
IMPORTS_KEY = b"__imports__"


class DeriverHandler:
    # Outputs and state are a function of the input records in offset order
    # (one input per partition), not of the batches: the loop may checkpoint
    # every interval and replay the rest (loop.py; test_checkpoint_replay.py).
    replayable = True

    def __init__(self, cfg: ServiceConfig) -> None:
        self.cfg = cfg
        self.codec = cfg.codec
        factory = cfg.engine_factory or default_engine_factory
        self.plans = PartitionPlans(cfg, lambda plan: DeriverProcessor(plan, factory))
        self.procs = self.plans.procs
        self.seen = SeqFilter()  # per Kafka partition: transaction batches
        self.outputs = OutputEncoder(cfg)
        self.change_seq: dict[int, int] = defaultdict(int)
        self.import_seq: dict[int, int] = defaultdict(int)  # Kafka partition -> batches sent
        self.owner: dict[int, int] = {}  # stream partition -> Kafka partition

    def inputs(self) -> list[TopicPartition]:
        return [tp for j in self.cfg.partitions for tp in self.partition_inputs(j)]

    def partition_inputs(self, j: int) -> list[TopicPartition]:
        return [TopicPartition(self.cfg.topics.transactions, j)]

    def handle(self, records: Sequence[Record]) -> dict[int, list[OutRecord]]:
        outputs: dict[int, list[OutRecord]] = {}
        topic = self.cfg.topics.context_changes
        for j, items in self._decode(records).items():
            out = outputs[j] = []
            for chunk, switch in segments(items):
                if chunk:
                    self._derive(j, cast(list[TxnBatch | Progress], chunk), out)
                if switch is not None:  # pass the model upgrade on, after the old plan's work
                    self.plans.switch(j, switch.plan)
                    out.append(OutRecord(topic, self.codec.encode(
                        SWITCH, switch_record(switch, self.cfg.actor_id, j)), SWITCH_KEY,
                        partition=j))
        return outputs

    def _decode(self, records: Sequence[Record]
                ) -> dict[int, list[TxnBatch | Progress | PlanSwitch]]:
        """The fresh inputs per Kafka partition (replayed batches dropped)."""
        return decode_fresh(self.codec, records, self.seen, TXN_BATCH, lambda v: v["seq"],
                            lambda j, v: batch_from(v, self.procs[j].graph.strings)[0])

    def _derive(self, j: int, items: list[TxnBatch | Progress], out: list[OutRecord]) -> None:
        topic = self.cfg.topics.context_changes
        before: dict[int, int] = {}
        result = self.procs[j].process(items)
        for c in result.changes:
            previous = before.get(c.partition)
            self.change_seq[c.partition] += 1
            rec = change_record(c, self.change_seq[c.partition],
                                previous if previous is not None else -1)
            before[c.partition] = c.vector
            self.owner[c.partition] = j
            out.append(OutRecord(topic, self.codec.encode(CHANGE, rec), c.key.encode(),
                                 partition=j))
        if result.imports is not None:
            for piece in chunks(result.imports):
                self.import_seq[j] += 1
                out.append(OutRecord(topic, self.codec.encode(
                    TXN_BATCH, batch_record(piece, self.import_seq[j])), IMPORTS_KEY,
                    partition=j))
        out += self.outputs.encode(result.alerts, self.plans.plan(j))
        out += dead_records(self.cfg, result.dead_letters, "deriver")
        if result.progress is not None:
            out.append(OutRecord(topic, self.codec.encode(
                PROGRESS, progress_record(result.progress, self.cfg.actor_id, j)),
                PROGRESS_KEY, partition=j))

    def plan_versions(self) -> dict[int, str]:
        return dict(self.plans.versions)

    def snapshot_partition(self, j: int) -> Any:
        return {"plan": self.plans.versions[j], "proc": self.procs[j].snapshot(),
                "seen": self.seen.last.get(j, -1),
                "change_seq": pairs(owned(self.change_seq, self.owner, j)),
                "import_seq": self.import_seq[j]}

    def restore_partition(self, j: int, state: Any) -> None:
        self.plans.restore(j, state.get("plan"), state["proc"])
        if isinstance(state["seen"], int):
            self.seen.last[j] = state["seen"]
        self.import_seq[j] = int(state.get("import_seq", 0))
        change_seq = from_pairs(state["change_seq"])
        self.change_seq.update(change_seq)
        self.owner.update(dict.fromkeys(change_seq, j))

    def event_time(self) -> int:
        return max((p.done_before for p in self.procs.values()), default=0)
