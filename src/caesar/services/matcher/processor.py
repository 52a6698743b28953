"""The matcher service's processor: consumes routed transactions, discard
orders and progress records, runs the plan's matcher stages (a StageGraph) and
returns alerts; it does no I/O."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from caesar.plans.execution import ExecutionPlan
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
        step: list[tuple[Transaction, frozenset[str]]] = []
        step_ts: int | None = None

        def run_step() -> None:
            nonlocal step, step_ts
            if step_ts is not None:
                for txn, _ in step:  # alerts of this step were triggered by it
                    self.ingest[txn.partition] = max(
                        (e.get("_ingest_ms", 0) for e in txn.events), default=0)
                out.alerts.extend(self._alerts(self.graph.step(step_ts, step)))
            step, step_ts = [], None

        for item in items:
            if isinstance(item, RoutedTransaction):
                if step_ts is not None and item.txn.ts != step_ts:
                    run_step()
                if item.discard:
                    # The window ended before this transaction: drop first.
                    run_step()
                    self.graph.discard(item.discard, item.txn.partition)
                step_ts = item.txn.ts
                step.append((item.txn, frozenset(item.active)))
                if item.muted or item.txn.partition in self.muted:
                    self.muted[item.txn.partition] = frozenset(item.muted)
            elif isinstance(item, Discard):
                run_step()
                self.graph.discard(item.plan_ids, item.partition)
            elif isinstance(item, Progress):
                run_step()
                if item.watermark > self.watermark:
                    self.watermark = item.watermark
                    out.alerts.extend(self._alerts(self.graph.advance(item.watermark)))
                    out.progress = Progress(self.watermark, "matcher")
            else:
                raise TypeError(f"matcher cannot process {type(item).__name__}")
        run_step()
        self.alerts_emitted += len(out.alerts)
        return out

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
            if o.stage.output_topic is None:
                continue
            if self.muted and o.stage.plan.plan_id in self.muted.get(o.record["_p"], ()):
                continue
            fields = {k: v for k, v in o.record.items() if k != "type" and not k.startswith("_")}
            # the query's stable identity: the same across model versions
            alerts.append(Alert(plan_id=stage_identity(o.stage), event_type=o.record["type"],
                                partition=o.record["_p"], key=o.record["_key"],
                                start_ts=o.start_ts, end_ts=o.end_ts, fields=fields,
                                topic=o.stage.output_topic,
                                ingest_ms=self.ingest.get(o.record["_p"], 0)))
        return alerts
