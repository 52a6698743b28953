"""What every pattern engine offers (the Cython matcher and the reference).

The matcher service drives an engine like this, per batch of routed events:

    engine = CythonEngine(plans)             # or ReferenceEngine(plans)
    out = engine.process(batch, active)      # active: plan ids that may see it
    out += engine.advance(watermark)         # releases end-negation results,
                                             # prunes state older than windows
    engine.discard(plan_ids, partition)      # a context window ended: drop
                                             # those plans' partial matches

Context awareness lives outside the engine (deriver + router decide `active`
and when to `discard`); the engine only has to honour those calls.
Per-partition run state is separable for the store (`snapshot` / `restore`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from caesar.events.batch import EventBatch
from caesar.plans.pattern import PatternPlan


@dataclass(frozen=True)
class DerivedEvent:
    """One match, projected to the plan's output (or an empty field map)."""

    plan_id: str
    event_type: str
    partition: int
    start_ts: int
    end_ts: int
    fields: dict[str, Any] = field(hash=False)
    # Arrival seq numbers of the positive events, in component order (a
    # Kleene component contributes all of its events); identifies the match.
    event_seqs: tuple[int, ...] = ()


class PatternEngine(Protocol):
    def __init__(self, plans: Sequence[PatternPlan]) -> None: ...

    def process(self, batch: EventBatch,
                active: Collection[str] | None = None) -> list[DerivedEvent]:
        """Feed a batch (events in ts order within each partition). `active`
        None means every plan sees it."""
        ...

    def advance(self, watermark: int) -> list[DerivedEvent]:
        """Event time has reached `watermark`: no later event has ts < it."""
        ...

    def discard(self, plan_ids: Collection[str], partition: int) -> None:
        """Drop partial matches (and pending end-negation results) of these
        plans for this partition."""
        ...

    def overflows(self) -> dict[str, int]:
        """{plan id: integer results outside 64 bits so far}; each was
        treated as a missing value (src/caesar/plans/expr.py)."""
        ...

    def snapshot(self, partition: int) -> bytes: ...

    def restore(self, partition: int, state: bytes) -> None: ...
