"""Context-aware routing (section 6.2 of the CAESAR paper).

The router merges two inputs of one bus partition: transactions with the
scheduler's progress, and the deriver's context changes with its progress.
A transaction at t is routed only once the deriver's progress says every
context change with ts < t is known (D >= t); never by waiting on a clock.
It goes to the matcher stages whose contexts hold for its partition at t
(the vector after all changes with ts < t); stages that are suspended
receive nothing and the events they did not get are counted. When an
original context window ended since the partition's previous transaction,
the stages it owned are told to discard their partial matches first.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from caesar.plans.execution import ExecutionPlan
from caesar.services.common.messages import (
    ContextChange,
    Discard,
    Progress,
    RoutedTransaction,
    Transaction,
)
from caesar.services.router.contexts import ContextResolver, StageActivation

NEVER = -(2**62)


@dataclass
class RouterOutput:
    routed: list[RoutedTransaction | Discard | Progress] = field(default_factory=list)


class RouterProcessor:
    def __init__(self, plan: ExecutionPlan) -> None:
        self.resolver = ContextResolver(plan)
        self.activation = StageActivation(self.resolver, plan.matcher_stages)
        # Context-independent plans: stage -> masks of the contexts its outputs need.
        self._filters = [(pid, tuple(self.resolver.mask(c) for c in ctxs))
                         for pid, ctxs in getattr(plan, "context_filters", {}).items()]
        self._muted: dict[int, tuple[str, ...]] = {}
        self.pending: deque[Transaction] = deque()
        self.changes: dict[int, deque[ContextChange]] = {}
        self.vectors: dict[int, int] = {}  # partition -> vector as of its last routed txn
        self.scheduler_wm = NEVER
        self.deriver_done = NEVER
        self.forwarded = NEVER
        self.skipped_events: Counter[str] = Counter()  # plan id -> events it did not receive
        self.skipped_transactions = 0
        self.routed_transactions = 0

    def process(self, items: Sequence[Transaction | ContextChange | Progress]) -> RouterOutput:
        out = RouterOutput()
        for item in items:
            if isinstance(item, Transaction):
                self.pending.append(item)
            elif isinstance(item, ContextChange):
                self.changes.setdefault(item.partition, deque()).append(item)
            elif isinstance(item, Progress):
                if item.source == "deriver":
                    self.deriver_done = max(self.deriver_done, item.watermark)
                else:
                    self.scheduler_wm = max(self.scheduler_wm, item.watermark)
            else:
                raise TypeError(f"router cannot process {type(item).__name__}")
        self._route(out)
        return out

    def _route(self, out: RouterOutput) -> None:
        while self.pending and self.pending[0].ts <= self.deriver_done:
            txn = self.pending.popleft()
            vector, ended = self._vector_at(txn.partition, txn.ts)
            active = self.activation.active(vector)
            # A stage that runs in the new contexts too keeps its partial matches
            # (e.g. a query of every context: no window of it ended).
            discard = tuple(p for p in self.activation.ended(ended) if p not in active)
            n = len(txn.events)
            for pid in self.activation.plan_ids():
                if pid not in active:
                    self.skipped_events[pid] += n
            if active:
                out.routed.append(RoutedTransaction(txn, tuple(sorted(active)), discard,
                                                    self._muted_at(vector)))
                self.routed_transactions += 1
            else:
                if discard:
                    out.routed.append(Discard(txn.partition, txn.ts, discard))
                self.skipped_transactions += 1
        # Everything below min(scheduler, deriver) progress has been routed.
        wm = min(self.scheduler_wm, self.deriver_done)
        if self.pending:
            wm = min(wm, self.pending[0].ts)
        if wm > self.forwarded:
            self.forwarded = wm
            out.routed.append(Progress(wm, "router"))

    def _muted_at(self, vector: int) -> tuple[str, ...]:
        """Filtered stages (context-independent plans) whose context does not hold."""
        if not self._filters:
            return ()
        found = self._muted.get(vector)
        if found is None:
            found = tuple(sorted(pid for pid, masks in self._filters
                                 if not any(vector & m == m for m in masks)))
            self._muted[vector] = found
        return found

    def _vector_at(self, partition: int, ts: int) -> tuple[int, int]:
        """Apply the partition's changes with ts' < ts; return (vector, bits that ended)."""
        vector = self.vectors.get(partition, self.resolver.effective(0))
        ended = 0
        queue = self.changes.get(partition)
        while queue and queue[0].ts < ts:
            change = queue.popleft()
            ended |= vector & ~change.vector
            vector = change.vector
        if queue is not None and not queue:
            del self.changes[partition]
        self.vectors[partition] = vector
        return vector, ended

    # state for the store
    def snapshot(self) -> dict:
        return {"pending": list(self.pending),
                "changes": {p: list(q) for p, q in self.changes.items()},
                "vectors": dict(self.vectors), "scheduler_wm": self.scheduler_wm,
                "deriver_done": self.deriver_done, "forwarded": self.forwarded,
                "skipped_events": dict(self.skipped_events),
                "skipped_transactions": self.skipped_transactions}

    def restore(self, state: dict) -> None:
        self.pending = deque(state["pending"])
        self.changes = {p: deque(q) for p, q in state["changes"].items()}
        self.vectors = dict(state["vectors"])
        self.scheduler_wm, self.deriver_done = state["scheduler_wm"], state["deriver_done"]
        self.forwarded = state["forwarded"]
        self.skipped_events = Counter(state["skipped_events"])
        self.skipped_transactions = state["skipped_transactions"]
