"""Binds RouterProcessor to the bus: transaction batches and context changes
of partition j in, routed batches (+ router progress) on partition j of the
routed topic out."""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from typing import Any

from caesar.bus.records import OutRecord, Record, TopicPartition
from caesar.events.batch import StringPool
from caesar.services.common.columnar import batch_from, routed_chunks, routed_record
from caesar.services.common.config import ServiceConfig
from caesar.services.common.messages import (
    ContextChange,
    Imports,
    PlanSwitch,
    Progress,
    Transaction,
    TxnBatch,
)
from caesar.services.common.replay import SeqFilter, owned
from caesar.services.common.switching import PartitionPlans
from caesar.services.common.wire import (
    CHANGE,
    PROGRESS,
    ROUTED_BATCH,
    SWITCH,
    SWITCH_KEY,
    TXN_BATCH,
    change_from,
    progress_from,
    progress_record,
    switch_from,
    switch_record,
)
from caesar.services.router.processor import RouterProcessor, txn_data, txn_from_data
from caesar.services.store.state_format import from_pairs, pairs

Item = TxnBatch | Transaction | ContextChange | Imports | Progress | PlanSwitch
TXN_SIDE, CHANGE_SIDE = "txn", "ctx"


class RouterHandler:
    """A model upgrade reaches the router twice per partition: on the
    transactions (from the scheduler) and on the context changes (from the
    deriver, after it switched). Records of one input that come after its
    switch wait until the other input has reached it too; then the router
    switches, passes the switch on, and routes what waited with the new plan."""

    def __init__(self, cfg: ServiceConfig) -> None:
        self.cfg = cfg
        self.codec = cfg.codec
        self.plans = PartitionPlans(cfg, RouterProcessor)
        self.procs = self.plans.procs
        self.strings = StringPool()  # the router reads no strings; the batches keep theirs
        self.seen_txn = SeqFilter()  # per Kafka partition: transaction batches
        self.seen_change = SeqFilter()  # per stream partition: context changes
        self.seen_imports = SeqFilter()  # per Kafka partition: the deriver's imports
        self.seq: dict[int, int] = defaultdict(int)  # Kafka partition -> routed batches sent
        self.owner: dict[int, int] = {}  # stream partition -> Kafka partition
        self.barrier: dict[int, dict[str, str]] = {}  # partition -> side -> switch seen
        self.held: dict[int, list[tuple[str, Item]]] = {}  # partition -> waiting items

    def inputs(self) -> list[TopicPartition]:
        return [tp for j in self.cfg.partitions for tp in self.partition_inputs(j)]

    def partition_inputs(self, j: int) -> list[TopicPartition]:
        t = self.cfg.topics
        return [TopicPartition(t.transactions, j), TopicPartition(t.context_changes, j)]

    def handle(self, records: Sequence[Record]) -> dict[int, list[OutRecord]]:
        by_partition: dict[int, list[tuple[str, Item]]] = defaultdict(list)
        for r in records:
            if r.value is None:  # a tombstone: the services never write one here
                continue
            side = TXN_SIDE if r.topic == self.cfg.topics.transactions else CHANGE_SIDE
            item = self._decode(r, side)
            if item is not None:
                by_partition[r.partition].append((side, item))
        outputs: dict[int, list[OutRecord]] = {}
        for j, items in by_partition.items():
            outputs[j] = self._partition(j, items)
        return outputs

    def _decode(self, r: Record, side: str) -> Item | None:
        """One input record as the router's item; None: one seen before."""
        assert r.value is not None
        schema, value = self.codec.decode(r.value)
        if schema == TXN_BATCH:  # transactions, or the deriver's results for the matcher
            seen = self.seen_txn if side == TXN_SIDE else self.seen_imports
            if not seen.fresh(r.partition, value["seq"]):
                return None
            batch, _ = batch_from(value, self.strings)
            return batch if side == TXN_SIDE else Imports(batch)
        if schema == CHANGE:
            change, seq = change_from(value)
            self.owner[change.partition] = r.partition
            return change if self.seen_change.fresh(change.partition, seq) else None
        if schema == PROGRESS:
            return progress_from(value)
        if schema == SWITCH:
            return switch_from(value)
        return None

    def _partition(self, j: int, items: list[tuple[str, Item]]) -> list[OutRecord]:
        out: list[OutRecord] = []
        queue = deque(items)
        ready: list[TxnBatch | Transaction | ContextChange | Imports | Progress] = []
        barrier = self.barrier.setdefault(j, {})
        while queue:
            side, item = queue.popleft()
            if side in barrier:  # past a switch the other input has not reached yet
                self.held.setdefault(j, []).append((side, item))
                continue
            if not isinstance(item, PlanSwitch):
                ready.append(item)
                continue
            barrier[side] = item.plan
            if len(barrier) < 2:
                continue
            self._route(j, ready, out)
            ready = []
            self.plans.switch(j, item.plan)
            out.append(OutRecord(self.cfg.routed_topic, self.codec.encode(
                SWITCH, switch_record(item, self.cfg.actor_id, j)), SWITCH_KEY, partition=j))
            barrier.clear()
            queue.extendleft(reversed(self.held.pop(j, [])))
        self._route(j, ready, out)
        return out

    def _route(self, j: int,
               items: list[TxnBatch | Transaction | ContextChange | Imports | Progress],
               out: list[OutRecord]) -> None:
        if not items:
            return
        topic = self.cfg.routed_topic
        for item in self.procs[j].process(items).routed:
            if isinstance(item, Progress):
                out.append(OutRecord(topic, self.codec.encode(
                    PROGRESS, progress_record(item, self.cfg.actor_id, j)), b"__progress__",
                    partition=j))
                continue
            for piece in routed_chunks(item):
                self.seq[j] += 1
                out.append(OutRecord(topic, self.codec.encode(
                    ROUTED_BATCH, routed_record(piece, self.seq[j])), None, partition=j))

    def plan_versions(self) -> dict[int, str]:
        return dict(self.plans.versions)

    def snapshot_partition(self, j: int) -> Any:
        return {"plan": self.plans.versions[j], "proc": self.procs[j].snapshot(),
                "barrier": dict(self.barrier.get(j, {})),
                "held": [[side, _item_data(item)] for side, item in self.held.get(j, [])],
                "seen_txn": self.seen_txn.last.get(j, -1),
                "seen_imports": self.seen_imports.last.get(j, -1),
                "seen_change": pairs(owned(self.seen_change.last, self.owner, j)),
                "seq": self.seq[j]}

    def restore_partition(self, j: int, state: Any) -> None:
        self.plans.restore(j, state.get("plan"), state["proc"])
        self.barrier[j] = dict(state["barrier"])
        schemas = self.procs[j].schemas
        self.held[j] = [(side, item) for side, data in state["held"]
                        for item in _items_from(data, schemas)]
        if isinstance(state["seen_txn"], int):
            self.seen_txn.last[j] = state["seen_txn"]
        if int(state.get("seen_imports", -1)) >= 0:
            self.seen_imports.last[j] = int(state["seen_imports"])
        seen_change = from_pairs(state["seen_change"])
        self.seen_change.last.update(seen_change)
        self.owner.update(dict.fromkeys(seen_change, j))
        self.seq[j] = int(state.get("seq", 0))

    def event_time(self) -> int:
        return max((p.forwarded for p in self.procs.values()), default=0)


def _item_data(item: Item) -> list[Any]:
    """A waiting router input as plain data (state_format)."""
    if isinstance(item, TxnBatch):
        return ["txns", [txn_data(t) for t in item.transactions()]]
    if isinstance(item, Transaction):
        return ["txns", [txn_data(item)]]
    if isinstance(item, ContextChange):
        return ["change", [item.partition, item.key, item.ts, item.vector, list(item.contexts)]]
    if isinstance(item, Imports):
        return ["imports", [txn_data(t) for t in item.batch.transactions()]]
    if isinstance(item, Progress):
        return ["progress", [item.watermark, item.source]]
    return ["switch", [item.plan, item.previous, item.watermark]]


def _items_from(data: list[Any], schemas: Mapping[str, Mapping[str, str]]) -> list[Item]:
    kind, d = data
    if kind == "txns":
        return [txn_from_data(t) for t in d]
    if kind == "imports":
        return [Imports(TxnBatch.of([txn_from_data(t) for t in d], schemas))]
    if kind == "change":
        return [ContextChange(int(d[0]), d[1], int(d[2]), int(d[3]), tuple(d[4]))]
    if kind == "progress":
        return [Progress(int(d[0]), d[1])]
    return [PlanSwitch(d[0], d[1], int(d[2]))]
