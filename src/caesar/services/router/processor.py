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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from caesar.errors import PlanError
from caesar.events.batch import EventBatch, TypeColumns, unique_pairs
from caesar.plans.execution import ExecutionPlan
from caesar.plans.serialize import stage_identity
from caesar.services.common.messages import (
    ContextChange,
    Discard,
    Imports,
    Progress,
    RoutedBatch,
    Transaction,
    TxnBatch,
    coalesce_transactions,
)
from caesar.services.router.contexts import ContextResolver, StageActivation

NEVER = -(2**62)


@dataclass
class RouterOutput:
    routed: list[RoutedBatch | Progress] = field(default_factory=list)

    def items(self) -> list:
        """The routed transactions, discards and progress one at a time (tests)."""
        out: list = []
        for item in self.routed:
            out += item.items() if isinstance(item, RoutedBatch) else [item]
        return out


class RouterProcessor:
    def __init__(self, plan: ExecutionPlan) -> None:
        self.resolver = ContextResolver(plan)
        self.activation = StageActivation(self.resolver, plan.matcher_stages)
        self._identity = {s.plan.plan_id: stage_identity(s) for s in plan.matcher_stages}
        # Context-independent plans: stage -> masks of the contexts its outputs need.
        self._filters = [(pid, tuple(self.resolver.mask(c) for c in ctxs))
                         for pid, ctxs in getattr(plan, "context_filters", {}).items()]
        self._muted: dict[int, tuple[str, ...]] = {}
        self.schemas = {t.name: dict(t.fields) for t in plan.event_types}
        self.pending: deque[TxnBatch] = deque()
        # The deriver's results for the matcher (ExecutionPlan.imports) not
        # yet routed, and the latest ts routed (none may come at or before it).
        self.has_imports = bool(plan.imports)
        self.imported: deque[TxnBatch] = deque()
        self.routed_through = NEVER
        self.changes: dict[int, deque[ContextChange]] = {}
        self.vectors: dict[int, int] = {}  # partition -> vector as of its last routed txn
        self.scheduler_wm = NEVER
        self.deriver_done = NEVER
        self.forwarded = NEVER
        # events routed per active stage set (skipped_events derives from it)
        self._events_by_set: Counter[frozenset[str]] = Counter()
        self.skipped_transactions = 0
        self.routed_transactions = 0

    @property
    def skipped_events(self) -> Counter[str]:
        """Plan id -> events it did not receive (its contexts did not hold)."""
        out: Counter[str] = Counter()
        for active, n in self._events_by_set.items():
            for pid in self.activation.plan_ids():
                if pid not in active:
                    out[pid] += n
        return out

    def process(self, items: Sequence[TxnBatch | Transaction | ContextChange | Imports |
                                      Progress]) -> RouterOutput:
        out = RouterOutput()
        for item in coalesce_transactions(items, self.schemas):
            if isinstance(item, TxnBatch):
                if len(item):
                    self.pending.append(item)
            elif isinstance(item, ContextChange):
                self.changes.setdefault(item.partition, deque()).append(item)
            elif isinstance(item, Imports):
                if len(item.batch):
                    self._import(item.batch)
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
        ready = self._take_ready()
        if ready is not None:
            routed = self._route_batch(ready)
            if routed is not None:
                out.routed.append(routed)
        # Everything below min(scheduler, deriver) progress has been routed.
        wm = min(self.scheduler_wm, self.deriver_done)
        if self.pending:
            wm = min(wm, int(self.pending[0].timestamps()[0]))
        if wm > self.forwarded:
            alone = self._imports_before(wm)
            if alone is not None:
                out.routed.append(alone)
            self.forwarded = wm
            out.routed.append(Progress(wm, "router"))

    def _take_ready(self) -> TxnBatch | None:
        """The pending transactions with ts <= D (the deriver's progress);
        with imports, ts < D: D = t says every change before t is out, but
        transactions at t of other partitions, and what they derive for the
        matcher at t, may still follow (D passes t with the next
        transaction or the scheduler's progress, which follows each release)."""
        if not self.pending or self.deriver_done == NEVER:
            return None
        through = self.deriver_done - 1 if self.has_imports else self.deriver_done
        ready: list[TxnBatch] = []
        while self.pending:
            head = self.pending[0]
            stamps = head.timestamps()
            if stamps[-1] <= through:
                ready.append(self.pending.popleft())
                continue
            if stamps[0] <= through:
                now, later = head.split(through + 1)
                ready.append(now)
                self.pending[0] = later
            break
        return TxnBatch.concat(ready) if ready else None

    def _route_batch(self, batch: TxnBatch) -> RoutedBatch | None:
        """Route every transaction (ts, partition) of the batch, in ts order.
        The transactions are found on the whole batch's columns at once and
        the routed rows taken in one pass per type: slicing the batch per
        timestamp cost more than routing itself when every event has its
        own timestamp (bench/peers, contexts)."""
        t_part: list[int] = []
        t_ts: list[int] = []
        t_active: list[int] = []
        t_muted: list[int] = []
        sets: dict[frozenset[str], int] = {}
        muted_sets: dict[tuple[str, ...], int] = {}
        discards: list[Discard] = []
        by_type = _ts_sorted(batch.events)
        if not by_type:
            return None
        imports = self._take_imports(int(batch.timestamps()[-1]))
        cols = list(by_type.values())
        pair_ts, pair_part, inverse, counts = unique_pairs(
            np.concatenate([c.ts for c in cols]), np.concatenate([c.partition for c in cols]))
        routed = np.zeros(len(pair_ts), dtype=bool)
        for i, (ts, p, n) in enumerate(zip(pair_ts.tolist(), pair_part.tolist(),
                                           counts.tolist(), strict=True)):
            vector, ended = self._vector_at(p, ts)
            active = self.activation.active(vector)
            # A stage that runs in the new contexts too keeps its partial
            # matches (e.g. a query of every context: no window of it ended).
            discard = tuple(d for d in self.activation.ended(ended) if d not in active)
            self._events_by_set[active] += n
            if active:
                routed[i] = True
                t_part.append(p)
                t_ts.append(ts)
                t_active.append(sets.setdefault(active, len(sets)))
                t_muted.append(muted_sets.setdefault(self._muted_at(vector),
                                                     len(muted_sets)))
                self.routed_transactions += 1
            else:
                self.skipped_transactions += 1
            if discard:
                discards.append(Discard(p, ts, discard))
        if not t_part and not discards and imports is None:
            return None
        events = EventBatch(by_type if routed.all() else
                            _take_rows(by_type, routed[inverse]),
                            batch.events.strings)
        keys = dict(batch.keys)
        if imports is not None:
            events = _with_imports(events, imports.events)
            keys.update(imports.keys)
        return RoutedBatch(
            TxnBatch(events, keys), np.array(t_part, dtype=np.int64),
            np.array(t_ts, dtype=np.int64),
            np.array(t_active, dtype=np.int32), np.array(t_muted, dtype=np.int32),
            [tuple(sorted(a)) for a in sets], list(muted_sets), discards)

    def _take_imports(self, through: int) -> TxnBatch | None:
        """The imported results with ts <= `through` (the last ts of the
        transactions being routed); they go with those transactions."""
        if not self.imported:
            self.routed_through = max(self.routed_through, through)
            return None
        now, later = TxnBatch.concat(list(self.imported)).split(through + 1)
        self.imported = deque([later] if len(later) else [])
        self.routed_through = max(self.routed_through, through)
        return now if len(now) else None

    def _imports_before(self, wm: int) -> RoutedBatch | None:
        """Imported results with ts < wm that no routed transaction took
        along (an aggregate's, released by the deriver's progress after the
        last transaction): on their own, before the progress saying no
        event before wm follows."""
        if not self.imported:
            return None
        now = self._take_imports(wm - 1)
        if now is None:
            return None
        none = np.zeros(0, dtype=np.int64)
        return RoutedBatch(now, none, none, none.astype(np.int32), none.astype(np.int32), [], [])

    def _import(self, batch: TxnBatch) -> None:
        first = int(batch.timestamps()[0])
        if first <= self.routed_through:
            # The deriver sends a result before its progress covering it, and
            # no transaction is routed before that progress: this one would
            # be lost.
            raise PlanError(f"a result the deriver derived for the matcher at ts {first} "
                            f"came after the transactions up to {self.routed_through} "
                            "were routed")
        self.imported.append(batch)

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
    def snapshot(self) -> dict[str, Any]:
        """Plain data (services/store/state_format.py); context vectors by
        name, stages by identity."""
        names = self.resolver.names
        ident = self._identity
        pending = TxnBatch.concat(list(self.pending)) if self.pending else None
        imported = TxnBatch.concat(list(self.imported)) if self.imported else None
        return {"pending": [] if pending is None else
                [txn_data(t) for t in pending.transactions()],
                "imported": [] if imported is None else
                [txn_data(t) for t in imported.transactions()],
                "routed_through": self.routed_through,
                "changes": [[c.partition, c.key, c.ts, list(names(c.vector)), list(c.contexts)]
                            for q in self.changes.values() for c in q],
                "vectors": [[p, list(names(v))] for p, v in self.vectors.items()],
                "scheduler_wm": self.scheduler_wm, "deriver_done": self.deriver_done,
                "forwarded": self.forwarded,
                "events_by_set": [[sorted(ident.get(pid, pid) for pid in active), n]
                                  for active, n in self._events_by_set.items()],
                "skipped_transactions": self.skipped_transactions,
                "routed_transactions": self.routed_transactions}

    def restore(self, state: Mapping[str, Any]) -> None:
        vector = self.resolver.vector
        pending = [txn_from_data(t) for t in state["pending"]]
        self.pending = deque([TxnBatch.of(pending, self.schemas)] if pending else [])
        imported = [txn_from_data(t) for t in state.get("imported", [])]
        self.imported = deque([TxnBatch.of(imported, self.schemas)] if imported else [])
        self.routed_through = int(state.get("routed_through", NEVER))
        self.changes = {}
        for p, key, ts, names, contexts in state["changes"]:
            self.changes.setdefault(int(p), deque()).append(
                ContextChange(int(p), key, int(ts), self.resolver.effective(vector(names)),
                              tuple(contexts)))
        self.vectors = {int(p): self.resolver.effective(vector(names))
                        for p, names in state["vectors"]}
        self.scheduler_wm = int(state["scheduler_wm"])
        self.deriver_done = int(state["deriver_done"])
        self.forwarded = int(state["forwarded"])
        by_identity = {i: pid for pid, i in self._identity.items()}
        self._events_by_set = Counter({frozenset(by_identity[i] for i in active
                                                 if i in by_identity): int(n)
                                       for active, n in state["events_by_set"]})
        self.skipped_transactions = int(state["skipped_transactions"])
        self.routed_transactions = int(state["routed_transactions"])


def txn_data(t: Transaction) -> list[Any]:
    return [t.partition, t.key, t.ts, [dict(e) for e in t.events]]


def txn_from_data(d: list[Any]) -> Transaction:
    return Transaction(int(d[0]), d[1], int(d[2]), tuple(dict(e) for e in d[3]))


def _ts_sorted(events: EventBatch) -> dict[str, TypeColumns]:
    """The non-empty types' rows, each in ts order (as TxnBatch.by_ts gives them)."""
    out = {t: c for t, c in events.by_type.items() if len(c)}
    for t, c in out.items():
        if len(c) > 1 and bool((c.ts[1:] < c.ts[:-1]).any()):
            out[t] = c.take(np.argsort(c.ts, kind="stable"))
    return out


def _with_imports(events: EventBatch, imports: EventBatch) -> EventBatch:
    """The routed rows and the imported ones, each type's rows in ts order."""
    merged = EventBatch.concat([events, imports.in_pool(events.strings)])
    return EventBatch(_ts_sorted(merged), merged.strings)


def _take_rows(by_type: dict[str, TypeColumns], rows: np.ndarray) -> dict[str, TypeColumns]:
    """`rows`: a mask over the types' rows one after the other."""
    kept: dict[str, TypeColumns] = {}
    off = 0
    for t, c in by_type.items():
        mask = rows[off:off + len(c)]
        off += len(c)
        if mask.any():
            kept[t] = c.take(mask)
    return kept
