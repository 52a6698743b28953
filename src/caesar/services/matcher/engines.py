"""One engine object for a StageGraph's stages: SEQ/Kleene pattern plans go
to the pattern engine the factory builds (Cython or reference), TPStream
plans to the temporal engine (services/matcher/tpstream/)."""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from caesar.events.batch import EventBatch, StringPool
from caesar.plans.engine import DerivedEvent, PatternEngine
from caesar.plans.functions import FunctionFailure
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

    def function_failures(self) -> list[tuple[str, FunctionFailure]]:
        # temporal queries call no user-defined functions (the checker says so)
        return self.patterns.function_failures() if self.patterns is not None else []

    # State per plan id, as the pattern engines keep it (StageGraph stores
    # each query's under its identity): the two engines' plans side by side.
    def snapshot(self, partition: int) -> dict[str, Any]:
        out = dict(self.patterns.snapshot(partition)) if self.patterns is not None else {}
        out.update(self.temporal.snapshot(partition)["plans"])
        return out

    def restore(self, partition: int, state: Mapping[str, Any],
                strings: StringPool | None = None) -> None:
        from caesar.services.matcher.tpstream.engine import STATE_VERSION

        patterns = {p: s for p, s in state.items() if p not in self._temporal_ids}
        if self.patterns is not None and patterns:
            self.patterns.restore(partition, patterns, strings)
        self.temporal.restore(partition, {"version": STATE_VERSION, "plans": {
            p: s for p, s in state.items() if p in self._temporal_ids}}, strings)


def engine_state_formats_read(engine: Any) -> frozenset[str]:
    """The engine formats this engine restores: its own, and the earlier
    layouts its module lists in STATE_FORMATS_READ."""
    if engine is None:
        return frozenset({""})
    if isinstance(engine, EngineSet):
        from caesar.services.matcher.tpstream.engine import STATE_VERSION

        return frozenset(f"{f}+TemporalEngine/{STATE_VERSION}"
                         for f in engine_state_formats_read(engine.patterns))
    module = sys.modules.get(type(engine).__module__)
    own = engine_state_format(engine)
    older = getattr(module, "STATE_FORMATS_READ", ())
    return frozenset({own} | {f"{type(engine).__name__}/{v}" for v in older})


def engine_state_format(engine: Any) -> str:
    """Which engine wrote a state, in which layout (the engine module's
    STATE_FORMAT or STATE_VERSION): restoring another engine's is refused."""
    if engine is None:
        return ""
    if isinstance(engine, EngineSet):
        from caesar.services.matcher.tpstream.engine import STATE_VERSION

        return f"{engine_state_format(engine.patterns)}+TemporalEngine/{STATE_VERSION}"
    module = sys.modules.get(type(engine).__module__)
    fmt = getattr(module, "STATE_FORMAT", None) or getattr(module, "STATE_VERSION", 1)
    return f"{type(engine).__name__}/{fmt}"
