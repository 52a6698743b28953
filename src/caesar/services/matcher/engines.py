"""One engine object for a StageGraph's stages: SEQ/Kleene pattern plans go
to the pattern engine the factory builds (Cython or reference), TPStream
plans to the temporal engine (services/matcher/tpstream/)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from caesar.events.batch import EventBatch
from caesar.plans.engine import DerivedEvent, PatternEngine
from caesar.plans.pattern import PatternPlan
from caesar.plans.temporal import TemporalPlan
from caesar.services.common.config import EngineFactory


def build_engine(factory: EngineFactory, plans: Sequence[PatternPlan | TemporalPlan]
                 ) -> PatternEngine:
    patterns = [p for p in plans if isinstance(p, PatternPlan)]
    temporal = [p for p in plans if isinstance(p, TemporalPlan)]
    if not temporal:
        return factory(patterns)
    return EngineSet(factory(patterns) if patterns else None, temporal)


class EngineSet:
    def __init__(self, patterns: PatternEngine | None, temporal: Sequence[TemporalPlan]) -> None:
        from caesar.services.matcher.tpstream.engine import TemporalEngine

        self.patterns = patterns
        self.temporal = TemporalEngine(temporal)
        self._temporal_ids = {p.plan_id for p in temporal}

    def process(self, batch: EventBatch, active: Collection[str] | None = None
                ) -> list[DerivedEvent]:
        out: list[DerivedEvent] = []
        if self.patterns is not None:
            seq = None if active is None else [p for p in active if p not in self._temporal_ids]
            if seq is None or seq:
                out += self.patterns.process(batch, seq)
        if active is None or any(p in self._temporal_ids for p in active):
            out += self.temporal.process(batch, active)
        return out

    def advance(self, watermark: int) -> list[DerivedEvent]:
        out = self.patterns.advance(watermark) if self.patterns is not None else []
        return out + self.temporal.advance(watermark)

    def discard(self, plan_ids: Collection[str], partition: int) -> None:
        if self.patterns is not None:
            self.patterns.discard([p for p in plan_ids if p not in self._temporal_ids], partition)
        self.temporal.discard(plan_ids, partition)

    def overflows(self) -> dict[str, int]:
        # the temporal engine's arithmetic runs in Python (exact, unbounded)
        return self.patterns.overflows() if self.patterns is not None else {}

    def snapshot(self, partition: int) -> Any:
        return {"patterns": self.patterns.snapshot(partition) if self.patterns else None,
                "temporal": self.temporal.snapshot(partition)}

    def restore(self, partition: int, state: Any) -> None:
        if self.patterns is not None and state.get("patterns") is not None:
            self.patterns.restore(partition, state["patterns"])
        self.temporal.restore(partition, state["temporal"])
