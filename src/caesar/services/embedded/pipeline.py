"""Embedded mode, direct wiring: scheduler -> deriver -> router -> matcher in
one process, each hop a batch handed to the next processor. The same
processor objects run in the bus-bound runners (services/*/runner.py); this
is the quickest way to run a model on a file and the baseline the
distributed mode is compared with.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from caesar.plans.execution import ExecutionPlan
from caesar.services.common.collector import Sweeper, settle
from caesar.services.common.config import EngineFactory
from caesar.services.common.messages import (
    Alert,
    ContextChange,
    DeadLetter,
    Imports,
    InputRecord,
    Progress,
    TxnBatch,
)
from caesar.services.deriver.processor import DeriverProcessor
from caesar.services.matcher.processor import MatcherProcessor
from caesar.services.matcher.stage_graph import default_engine_factory
from caesar.services.router.processor import RouterProcessor
from caesar.services.scheduler.acep.processor import AcepProcessor
from caesar.services.scheduler.processor import (
    DEFAULT_AHEAD_CONFIRM,
    SchedulerOutput,
    SchedulerProcessor,
)


@dataclass
class PipelineResult:
    """What the pipeline produced. The lists grow with every batch: a caller
    that takes the outputs as they come (`feed`'s return, Session, `caesar
    run`) clears them, so a long run holds none of it; `alerts_out` counts
    every alert all the same."""
    alerts: list[Alert] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    context_changes: list[ContextChange] = field(default_factory=list)
    events_in: int = 0
    alerts_out: int = 0

    def take(self) -> PipelineResult:
        """The outputs held now, handed over: these lists are empty after
        (the counts stay)."""
        taken = PipelineResult(self.alerts, self.dead_letters, self.context_changes)
        self.alerts, self.dead_letters, self.context_changes = [], [], []
        return taken


class EmbeddedPipeline:
    def __init__(self, plan: ExecutionPlan, *, allowance: int = 0,
                 engine_factory: EngineFactory = default_engine_factory,
                 batch_size: int = 2000, max_ahead: int | None = None,
                 ahead_confirm: int = DEFAULT_AHEAD_CONFIRM, acep_scheduler: str = "lwm") -> None:
        self.plan = plan
        self.batch_size = batch_size
        self.scheduler = SchedulerProcessor(plan, allowance, max_ahead=max_ahead,
                                            ahead_confirm=ahead_confirm)
        self.deriver = DeriverProcessor(plan, engine_factory)
        self.router = RouterProcessor(plan)
        self.matcher = MatcherProcessor(plan, engine_factory)
        # ACEP: rules and table-reading queries over the shared tables.
        self.acep = AcepProcessor(plan.acep, acep_scheduler) if plan.acep else None
        # A process that freezes survivors (tune_collector: `caesar run`)
        # never walks what a user function leaves in cycles; fed from a file
        # it has no lull, so it sweeps when its memory doubled (Sweeper).
        self.sweeper = Sweeper()
        self.result = PipelineResult()
        self._offset = 0

    def feed(self, records: Iterable[InputRecord]) -> list[Alert]:
        """Push one batch of input records through every service."""
        records = list(records)
        self.result.events_in += len(records)
        return self._downstream(self.scheduler.process(records))

    def finish(self) -> list[Alert]:
        """End of input: flush the scheduler (watermark = end of time)."""
        alerts = self._downstream(self.scheduler.flush())
        if self.acep is not None:
            more, dead = self.acep.flush()
            self.result.alerts += more
            self.result.alerts_out += len(more)
            self.result.dead_letters += dead
            alerts += more
        return alerts

    def advance(self, watermark: int) -> list[Alert]:
        """No input below `watermark` follows: process everything before it."""
        return self._downstream(self.scheduler.advance(watermark))

    def contexts(self, partition: int) -> tuple[str, ...]:
        """The contexts holding for a stream partition (its id) after the
        transactions processed so far."""
        return self.deriver.resolver.names(self.deriver.vector(partition))

    def _downstream(self, sched: SchedulerOutput) -> list[Alert]:
        settle()  # the last batch's survivors, unwalked (collector.settle)
        self.sweeper.maybe(idle_for_s=0.0)
        self.result.dead_letters += sched.dead_letters
        items: list[TxnBatch | Progress] = sched.transactions
        derived = self.deriver.process(items)
        self.result.context_changes += derived.changes
        router_in: list[Any] = list(items) + list(derived.changes)
        if derived.imports is not None:
            router_in.append(Imports(derived.imports))
        if derived.progress is not None:
            router_in.append(derived.progress)
        routed = self.router.process(router_in)
        matched = self.matcher.process(routed.routed)
        self.result.dead_letters += derived.dead_letters + matched.dead_letters
        alerts = derived.alerts + matched.alerts
        if self.acep is not None:
            alerts, dead = self.acep.process(alerts)
            self.result.dead_letters += dead
        self.result.alerts += alerts
        self.result.alerts_out += len(alerts)
        return alerts

    def run_values(self, values: Iterable[Mapping[str, Any] | None], topic: str = "input",
                   errors: Iterable[str | None] | None = None) -> PipelineResult:
        """Run decoded input values (None = undecodable) to the end."""
        it = iter(values)
        errs = iter(errors) if errors is not None else None
        while True:
            chunk = list(islice(it, self.batch_size))
            if not chunk:
                break
            recs = []
            for value in chunk:
                err = next(errs) if errs is not None else None
                recs.append(InputRecord(topic, 0, self._offset, value, error=err))
                self._offset += 1
            self.feed(recs)
        self.finish()
        return self.result
