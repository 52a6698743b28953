"""The matcher service's processor: consumes routed transactions, discard
orders and progress records, runs the plan's matcher stages (a StageGraph) and
returns alerts; it does no I/O."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from caesar.plans.execution import ExecutionPlan
from caesar.plans.pattern import PatternPlan
from caesar.plans.serialize import stage_identity
from caesar.services.common.config import EngineFactory
from caesar.services.common.messages import (
    Alert,
    Discard,
    Progress,
    RoutedTransaction,
    Transaction,
)
from caesar.services.matcher.stage_graph import (
    StageGraph,
    StageOutput,
    default_engine_factory,
)


@dataclass
class MatcherOutput:
    alerts: list[Alert] = field(default_factory=list)
    progress: Progress | None = None


@dataclass
class _Step:
    """The transactions of one event-time step, run through the graph together."""

    ts: int | None = None
    items: list[tuple[Transaction, frozenset[str]]] = field(default_factory=list)


class MatcherProcessor:
    """Runs the plan's matcher stages on routed transactions."""

    def __init__(self, plan: ExecutionPlan, engine_factory: EngineFactory = default_engine_factory
                 ) -> None:
        self.plan = plan
        schemas = {t.name: dict(t.fields) for t in plan.event_types}
        self.graph = StageGraph(plan.matcher_stages, schemas, engine_factory)
        self.watermark = -(2**62)
        self.alerts_emitted = 0
        self.ingest: dict[int, int] = {}  # partition -> Kafka ms of its latest input
        # Context-independent plans: partition -> stages whose outputs are
        # dropped (their context does not hold as of its latest transaction).
        self.muted: dict[int, frozenset[str]] = {}

    def process(self, items: Sequence[RoutedTransaction | Discard | Progress]) -> MatcherOutput:
        out = MatcherOutput()
        step = _Step()
        for item in items:
            if isinstance(item, RoutedTransaction):
                self._add(item, step, out)
            elif isinstance(item, Discard):
                self._run(step, out)
                self.graph.discard(item.plan_ids, item.partition)
            elif isinstance(item, Progress):
                self._run(step, out)
                if item.watermark > self.watermark:
                    self.watermark = item.watermark
                    out.alerts.extend(self._alerts(self.graph.advance(item.watermark)))
                    out.progress = Progress(self.watermark, "matcher")
            else:
                raise TypeError(f"matcher cannot process {type(item).__name__}")
        self._run(step, out)
        self.alerts_emitted += len(out.alerts)
        return out

    def _add(self, item: RoutedTransaction, step: _Step, out: MatcherOutput) -> None:
        """Add a transaction to the step at its ts (running the step before
        when the ts moves on or a context window ended before it)."""
        if step.ts is not None and item.txn.ts != step.ts:
            self._run(step, out)
        if item.discard:
            # The window ended before this transaction: drop first.
            self._run(step, out)
            self.graph.discard(item.discard, item.txn.partition)
        step.ts = item.txn.ts
        step.items.append((item.txn, frozenset(item.active)))
        if item.muted or item.txn.partition in self.muted:
            self.muted[item.txn.partition] = frozenset(item.muted)

    def _run(self, step: _Step, out: MatcherOutput) -> None:
        if step.ts is not None:
            for txn, _ in step.items:  # alerts of this step were triggered by it
                self.ingest[txn.partition] = max(
                    (e.get("_ingest_ms", 0) for e in txn.events), default=0)
            out.alerts.extend(self._alerts(self.graph.step(step.ts, step.items)))
        step.ts, step.items = None, []

    def snapshot(self) -> dict[str, Any]:
        """Plain data (services/store/state_format.py), queries by identity."""
        return {"graph": self.graph.snapshot(list(self.graph._keys)),
                "watermark": self.watermark,
                "muted": [[p, self.graph.identities(m)] for p, m in self.muted.items()]}

    def restore(self, state: Mapping[str, Any]) -> None:
        self.graph.restore(state["graph"])
        self.watermark = int(state["watermark"])
        self.muted = {int(p): self.graph.plan_ids(m) for p, m in state["muted"]}

    def _alerts(self, outputs: Iterable[StageOutput]) -> list[Alert]:
        alerts = []
        for o in outputs:
            topic = o.stage.output_topic
            timeout = o.stage.plan.timeout if isinstance(o.stage.plan, PatternPlan) else None
            if timeout is not None and o.record["type"] == timeout.event_type:
                topic = o.stage.timeout_topic  # ON TIMEOUT events have their own topic
            if topic is None:
                continue
            if self.muted and o.stage.plan.plan_id in self.muted.get(o.record["_p"], ()):
                continue
            fields = {k: v for k, v in o.record.items() if k != "type" and not k.startswith("_")}
            # the query's stable identity: the same across model versions
            alerts.append(Alert(plan_id=stage_identity(o.stage), event_type=o.record["type"],
                                partition=o.record["_p"], key=o.record["_key"],
                                start_ts=o.start_ts, end_ts=o.end_ts, fields=fields,
                                topic=topic,
                                ingest_ms=self.ingest.get(o.record["_p"], 0)))
        return alerts
