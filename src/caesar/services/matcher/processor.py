"""The matcher service's processor: consumes routed transactions, discard
orders and progress records, runs the plan's matcher stages (a StageGraph) and
returns alerts; it does no I/O."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from caesar.plans.execution import ExecutionPlan
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
        # Context-independent plans: stages whose context does not hold from here.
        if item.muted or self.graph.muted_at(item.txn.partition, item.txn.ts):
            self.graph.mute(item.txn.partition, item.txn.ts, frozenset(item.muted))

    def _run(self, step: _Step, out: MatcherOutput) -> None:
        if step.ts is not None:
            for txn, _ in step.items:  # alerts of this step were triggered by it
                self.ingest[txn.partition] = max(
                    (e.get("_ingest_ms", 0) for e in txn.events), default=0)
            out.alerts.extend(self._alerts(self.graph.step(step.ts, step.items)))
        step.ts, step.items = None, []

    def snapshot(self) -> dict:
        return {"graph": self.graph.snapshot(list(self.graph._keys)),
                "watermark": self.watermark, "muted": self.graph.muted_state()}

    def restore(self, state: dict) -> None:
        self.graph.restore(state["graph"])
        self.watermark = state["watermark"]
        self.graph.restore_muted(state.get("muted", {}))

    def _alerts(self, outputs: Iterable[StageOutput]) -> list[Alert]:
        alerts = []
        for o in outputs:
            if o.stage.output_topic is None:
                continue
            if o.stage.plan.plan_id in self.graph.muted_at(o.record["_p"], o.record["_ts"]):
                continue
            fields = {k: v for k, v in o.record.items() if k != "type" and not k.startswith("_")}
            alerts.append(Alert(plan_id=o.stage.plan.plan_id, event_type=o.record["type"],
                                partition=o.record["_p"], key=o.record["_key"],
                                start_ts=o.start_ts, end_ts=o.end_ts, fields=fields,
                                topic=o.stage.output_topic,
                                ingest_ms=self.ingest.get(o.record["_p"], 0)))
        return alerts
