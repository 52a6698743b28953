"""The matcher service's processor: consumes routed transactions, discard
orders and progress records, runs the plan's matcher stages (a StageGraph) and
returns alerts; it does no I/O."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from caesar.plans.execution import ExecutionPlan
from caesar.services.common.config import EngineFactory
from caesar.services.common.messages import (
    Alert,
    DeadLetter,
    Discard,
    Progress,
    RoutedBatch,
    RoutedTransaction,
    TxnBatch,
)
from caesar.services.matcher.alerts import AlertMaker
from caesar.services.matcher.stage_graph import Output, StageGraph, default_engine_factory
from caesar.services.router.contexts import ContextResolver, StageActivation


@dataclass
class MatcherOutput:
    alerts: list[Alert] = field(default_factory=list)
    progress: Progress | None = None
    dead_letters: list[DeadLetter] = field(default_factory=list)  # failed function calls


class MatcherProcessor:
    """Runs the plan's matcher stages on routed transactions."""

    def __init__(self, plan: ExecutionPlan, engine_factory: EngineFactory = default_engine_factory
                 ) -> None:
        self.plan = plan
        self.schemas = {t.name: dict(t.fields) for t in plan.event_types}
        emit = [s.plan.plan_id for s in plan.matcher_stages if s.output_topic is not None]
        activation = StageActivation(ContextResolver(plan), plan.matcher_stages)
        # what a partition's events reach before its first routed transaction
        default = activation.active(activation.resolver.effective(0))
        self.ingest: dict[int, int] = {}  # partition -> Kafka ms of its latest input
        # emitted rows become alerts straight from the engine's columns
        self.alert_maker = AlertMaker(self.ingest)
        self.graph = StageGraph(
            plan.matcher_stages, self.schemas, engine_factory, emit=emit,
            context_key=plan.context_key, stream_attrs=len(plan.partition_by),
            everywhere=activation.everywhere() - set(plan.context_filters),
            default_active=default,  # (a closure over self would make a cycle)
            outputs_of=self.alert_maker)
        self.watermark = -(2**62)
        # Several timestamps per step where the stages allow it (StageGraph.step);
        # False: one step per timestamp (the reference the tests compare with).
        # (Imported results may sit at a ts where no routed transaction of a
        # piece of the batch is: they go in a step of their own, not a wave.)
        self.waves = self.graph.waves and not plan.imports
        self.alerts_emitted = 0

    def process(self, items: Sequence[RoutedBatch | RoutedTransaction | Discard | Progress]
                ) -> MatcherOutput:
        out = MatcherOutput()
        for item in self._batches(items):
            if isinstance(item, RoutedBatch):
                self._run_batch(item, out)
            elif isinstance(item, Progress):
                if item.watermark > self.watermark:
                    self.watermark = item.watermark
                    out.alerts.extend(self._alerts(self.graph.advance(item.watermark)))
                    out.progress = Progress(self.watermark, "matcher")
            else:
                raise TypeError(f"matcher cannot process {type(item).__name__}")
        self.alerts_emitted += len(out.alerts)
        out.dead_letters = self.graph.take_dead_letters()
        return out

    def _run_batch(self, batch: RoutedBatch, out: MatcherOutput) -> None:
        discards: dict[int, list[Discard]] = defaultdict(list)
        for d in batch.discards:
            discards[d.ts].append(d)
        txn_at: dict[int, list[int]] = defaultdict(list)
        for i, ts in enumerate(batch.txn_ts.tolist()):
            txn_at[ts].append(i)
        parts = batch.txn_partition.tolist()
        active_sets = [frozenset(a) for a in batch.active_sets]
        muted_sets = [frozenset(m) for m in batch.muted_sets]
        if self.waves and len(set(parts)) > 1:  # one partition: a wave is one timestamp
            self._run_waves(batch, discards, txn_at, parts, active_sets, muted_sets, out)
            return
        by_ts = dict(batch.txns.by_ts())
        # imported results (ExecutionPlan.imports) are rows without a
        # transaction of their own: a batch cut between transactions
        # (routed_chunks) may hold some at a ts without one
        stamps = set(txn_at) | set(discards) | (set(by_ts) if self.plan.imports else set())
        for ts in sorted(stamps):
            for d in discards.get(ts, ()):  # a window ended before ts: drop first
                self.graph.discard(d.plan_ids, d.partition)
            rows = txn_at.get(ts, [])
            if not rows and ts not in by_ts:
                continue
            active = {}
            for i in rows:
                p = parts[i]
                active[p] = active_sets[int(batch.txn_active[i])]
                muted = muted_sets[int(batch.txn_muted[i])]
                # Context-independent plans: stages whose context does not hold from here.
                if muted or self.graph.muted_at(p, ts):
                    self.graph.mute(p, ts, muted)
            txns = by_ts.get(ts, TxnBatch.empty())
            self._note_ingest(txns)
            out.alerts.extend(self._alerts(self.graph.step(ts, txns, active)))

    def _run_waves(self, batch: RoutedBatch, discards: Mapping[int, list[Discard]],
                   txn_at: Mapping[int, list[int]], parts: list[int],
                   active_sets: list[frozenset[str]], muted_sets: list[frozenset[str]],
                   out: MatcherOutput) -> None:
        """`_run_batch` a wave at a time (StageGraph.step): runs of
        timestamps in which no partition has two transactions. A discard
        order for a partition ends the wave if the partition already has a
        transaction in it; otherwise it goes first, as it would at its ts."""
        # (discards to apply first, rows, partition -> ts) per wave
        waves: list[tuple[list[Discard], list[int], dict[int, int]]] = [([], [], {})]
        for ts in sorted(set(txn_at) | set(discards)):
            here = txn_at.get(ts, ())
            orders = discards.get(ts, ())
            _, rows, stamps = waves[-1]
            if any(parts[i] in stamps for i in here) or \
                    any(d.partition in stamps for d in orders):
                waves.append(([], [], {}))
            pre, rows, stamps = waves[-1]
            pre.extend(orders)
            for i in here:
                stamps[parts[i]] = ts
                rows.append(i)
        txn_ts = batch.txn_ts
        spans = [(int(txn_ts[rows[0]]), int(txn_ts[rows[-1]])) for _, rows, _ in waves if rows]
        slices = iter(batch.txns.spans([f for f, _ in spans], [la for _, la in spans]))
        bounds = iter(spans)
        for pre, rows, stamps in waves:
            for d in pre:
                self.graph.discard(d.plan_ids, d.partition)
            if not rows:
                continue
            first, last = next(bounds)
            txns = next(slices)
            active = {parts[i]: active_sets[int(batch.txn_active[i])] for i in rows}
            for i in rows:
                p = parts[i]
                muted = muted_sets[int(batch.txn_muted[i])]
                if muted or self.graph.muted_at(p, stamps[p]):
                    self.graph.mute(p, stamps[p], muted)
            self._note_ingest(txns)
            out.alerts.extend(self._alerts(self.graph.step(first, txns, active, stamps, last)))

    def _note_ingest(self, txns: TxnBatch) -> None:
        """Alerts of this step were triggered by it: remember each partition's
        latest input time (Kafka ms) for their latency."""
        for cols in txns.events.by_type.values():
            if cols.ingest is None or not len(cols):
                continue
            order = np.argsort(cols.partition, kind="stable")
            parts = cols.partition[order]
            starts = np.flatnonzero(np.r_[True, parts[1:] != parts[:-1]])
            latest = np.maximum.reduceat(cols.ingest[order], starts)
            self.ingest.update(zip(parts[starts].tolist(), latest.tolist(), strict=True))

    def _batches(self, items: Sequence) -> list:
        """Runs of routed transactions and discard orders given one at a time
        become one RoutedBatch (tests, tools)."""
        out: list = []
        run: list[RoutedTransaction | Discard] = []

        def close() -> None:
            if run:
                out.append(RoutedBatch.of(run, self.schemas, self.graph.strings))
                run.clear()

        for item in items:
            if isinstance(item, (RoutedTransaction, Discard)):
                run.append(item)
            else:
                close()
                out.append(item)
        close()
        return out

    def snapshot(self) -> dict[str, Any]:
        """Plain data (services/store/state_format.py), queries by identity."""
        return {"graph": self.graph.snapshot(list(self.graph._keys)),
                "watermark": self.watermark,
                "muted": [[p, [[ts, self.graph.identities(m)] for ts, m in hist]]
                          for p, hist in self.graph.muted_state().items()]}

    def restore(self, state: Mapping[str, Any]) -> None:
        self.graph.restore(state["graph"])
        self.watermark = int(state["watermark"])
        self.graph.restore_muted({int(p): [(int(ts), self.graph.plan_ids(ids)) for ts, ids in hist]
                                  for p, hist in state.get("muted", [])})

    def _alerts(self, outputs: Iterable[Output]) -> list[Alert]:
        return self.alert_maker.of_outputs(outputs, self.graph)

