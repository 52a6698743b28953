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
Per-partition run state is separable for the store (`snapshot` / `restore`):
plain data only (None, bool, int, float, str, bytes, lists, dicts: what
services/store/state_format.py stores), keyed by plan id, so the state of
each query is stored and carried over on its own. An engine says which
layout it writes with a module-level STATE_FORMAT; a stored state of another
layout is refused, never misread.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from caesar.events.batch import EventBatch, StringPool
from caesar.plans.functions import FunctionFailure
from caesar.plans.pattern import PatternPlan


@dataclass(frozen=True, slots=True)
class DerivedEvent:
    """One match, projected to the plan's output (or an empty field map).
    Slots: engines make one per match, and with dense matches building and
    freeing them is most of the matcher's work (bench/peers)."""

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

    def function_failures(self) -> list[tuple[str, FunctionFailure]]:
        """(plan id, failure) of user-defined function calls that raised or
        returned a wrong value since the last call (each made the value
        missing); the caller turns them into dead letters."""
        ...

    def snapshot(self, partition: int) -> dict[str, Any]:
        """{plan id: plain data} of the plans holding state for this partition."""
        ...

    def restore(self, partition: int, state: dict[str, Any],
                strings: StringPool | None = None) -> None:
        """Replace this partition's state; plans absent from `state` start
        empty. `strings`: the pool of the batches that made the state (an
        engine keeping string values as their codes reads them, and its
        string constants, by it until the next batch)."""
        ...
