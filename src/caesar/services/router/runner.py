"""Binds RouterProcessor to the bus: transactions partition j and
context-changes partition j in, routed transactions (+ router progress) on
partition j of the routed topic out."""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from typing import Any

from caesar.bus.records import OutRecord, Record, TopicPartition
from caesar.services.common.config import ServiceConfig
from caesar.services.common.messages import (
    ContextChange,
    PlanSwitch,
    Progress,
    RoutedTransaction,
    Transaction,
)
from caesar.services.common.replay import SeqFilter, owned, owned_by
from caesar.services.common.switching import PartitionPlans
from caesar.services.common.wire import (
    CHANGE,
    PROGRESS,
    ROUTED,
    SWITCH,
    SWITCH_KEY,
    TXN,
    change_from,
    progress_from,
    progress_record,
    routed_record,
    switch_from,
    switch_record,
    txn_from,
)
from caesar.services.router.processor import RouterProcessor, txn_data, txn_from_data
from caesar.services.store.state_format import from_pairs, pairs

Item = Transaction | ContextChange | Progress | PlanSwitch
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
        self.seen_txn = SeqFilter()
        self.seen_change = SeqFilter()
        self.txn_seq: dict[tuple[int, int], int] = {}  # (partition, ts) -> seq, for output
        self.owner: dict[int, int] = {}  # stream partition -> Kafka partition
        self.barrier: dict[int, dict[str, str]] = {}  # partition -> side -> switch seen
        self.held: dict[int, list[tuple[str, Item]]] = {}  # partition -> waiting items

    def inputs(self) -> list[TopicPartition]:
        return [tp for j in self.cfg.partitions for tp in self.partition_inputs(j)]

    def partition_inputs(self, j: int) -> list[TopicPartition]:
        t = self.cfg.topics
        return [TopicPartition(t.transactions, j), TopicPartition(t.context_changes, j)]

    def handle(self, records: Sequence[Record]) -> dict[int, list[OutRecord]]:
        outputs = {j: self._partition(j, items) for j, items in self._decode(records).items()}
        # Transactions never routed (skipped) leave their seq behind: forget old ones.
        if len(self.txn_seq) > 100_000:
            self.txn_seq.clear()
        return outputs

    def _decode(self, records: Sequence[Record]) -> dict[int, list[tuple[str, Item]]]:
        """The fresh inputs per Kafka partition, with the input they came from."""
        by_partition: dict[int, list[tuple[str, Item]]] = defaultdict(list)
        for r in records:
            if r.value is None:  # a tombstone: the services never write one here
                continue
            side = TXN_SIDE if r.topic == self.cfg.topics.transactions else CHANGE_SIDE
            schema, value = self.codec.decode(r.value)
            if schema == TXN:
                txn, seq = txn_from(value)
                self.owner[txn.partition] = r.partition
                if self.seen_txn.fresh(txn.partition, seq):
                    self.txn_seq[(txn.partition, txn.ts)] = seq
                    by_partition[r.partition].append((side, txn))
            elif schema == CHANGE:
                change, seq = change_from(value)
                self.owner[change.partition] = r.partition
                if self.seen_change.fresh(change.partition, seq):
                    by_partition[r.partition].append((side, change))
            elif schema == PROGRESS:
                by_partition[r.partition].append((side, progress_from(value)))
            elif schema == SWITCH:
                by_partition[r.partition].append((side, switch_from(value)))
        return by_partition

    def _partition(self, j: int, items: list[tuple[str, Item]]) -> list[OutRecord]:
        out: list[OutRecord] = []
        queue = deque(items)
        ready: list[Transaction | ContextChange | Progress] = []
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

    def _route(self, j: int, items: list[Transaction | ContextChange | Progress],
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
            if isinstance(item, RoutedTransaction):
                seq = self.txn_seq.pop((item.txn.partition, item.txn.ts), -1)
                key = item.txn.key.encode()
            else:  # a discard order carries the seq of the skipped transaction
                seq = self.txn_seq.pop((item.partition, item.ts), -1)
                key = None
            out.append(OutRecord(topic, self.codec.encode(ROUTED, routed_record(item, seq)),
                                 key, partition=j))

    def plan_versions(self) -> dict[int, str]:
        return dict(self.plans.versions)

    def snapshot_partition(self, j: int) -> Any:
        return {"plan": self.plans.versions[j], "proc": self.procs[j].snapshot(),
                "barrier": dict(self.barrier.get(j, {})),
                "held": [[side, _item_data(item)] for side, item in self.held.get(j, [])],
                "seen_txn": pairs(owned(self.seen_txn.last, self.owner, j)),
                "seen_change": pairs(owned(self.seen_change.last, self.owner, j)),
                "txn_seq": pairs(owned_by(self.txn_seq, self.owner, j, lambda k: k[0]))}

    def restore_partition(self, j: int, state: Any) -> None:
        self.plans.restore(j, state.get("plan"), state["proc"])
        self.barrier[j] = dict(state["barrier"])
        self.held[j] = [(side, _item_from(data)) for side, data in state["held"]]
        seen_txn, seen_change = from_pairs(state["seen_txn"]), from_pairs(state["seen_change"])
        self.seen_txn.last.update(seen_txn)
        self.seen_change.last.update(seen_change)
        self.txn_seq.update(from_pairs(state["txn_seq"]))
        self.owner.update(dict.fromkeys(seen_txn, j))
        self.owner.update(dict.fromkeys(seen_change, j))

    def event_time(self) -> int:
        return max((p.forwarded for p in self.procs.values()), default=0)


def _item_data(item: Item) -> list[Any]:
    """A waiting router input as plain data (state_format)."""
    if isinstance(item, Transaction):
        return ["txn", txn_data(item)]
    if isinstance(item, ContextChange):
        return ["change", [item.partition, item.key, item.ts, item.vector, list(item.contexts)]]
    if isinstance(item, Progress):
        return ["progress", [item.watermark, item.source]]
    return ["switch", [item.plan, item.previous, item.watermark]]


def _item_from(data: list[Any]) -> Item:
    kind, d = data
    if kind == "txn":
        return txn_from_data(d)
    if kind == "change":
        return ContextChange(int(d[0]), d[1], int(d[2]), int(d[3]), tuple(d[4]))
    if kind == "progress":
        return Progress(int(d[0]), d[1])
    return PlanSwitch(d[0], d[1], int(d[2]))
