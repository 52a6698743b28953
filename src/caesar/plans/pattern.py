"""The pattern part of a compiled plan: what the compiler hands to the matcher.

This is the contract between `src/caesar/language` (producer) and
`src/caesar/services/matcher` (the Cython engine and the reference matcher, consumers).
Both sides test against it; change it in one commit with both sides.

Semantics (SASE section 2/4, Cayuga chapter 3; see shared/DESIGN.md):
- A match binds each positive component, in order, to events with strictly
  increasing timestamps (`<`, never `<=`). Events of one timestamp can never
  follow each other in a sequence.
- `within` (in the model's time unit) bounds the span: last.ts - first.ts
  must be strictly less than `within` for positive components. A negation at
  the start looks back over the window before the last positive event; a
  negation at the end holds a candidate until the window after the first
  positive event has closed (its result is released only then).
- A negated component forbids any event of its types, strictly between the
  neighbouring positive events' timestamps (start/end: inside the window),
  that satisfies the conjuncts reading the negated variable.
- `equivalence` attributes (SASE `[attr]`) must be equal across all events of
  the match, negated candidates included.
- `where` is a conjunction. A conjunct reads either only positive variables,
  or exactly one negated variable plus positive ones (the compiler rejects
  anything else).
- A Kleene component (`kleene=True`) binds one or more events with strictly
  increasing timestamps; `iteration_filter` must hold for each of them (it may
  read earlier variables and the Kleene variable itself = the current event).
  Aggregates over it are `expr.Agg` nodes in `where` and in the output.
- Strategies: skip_till_any_match (SASE: every combination, events reusable),
  skip_till_next_match (per run, irrelevant events skipped, a relevant event
  is taken deterministically), strict_contiguity (components bind consecutive
  events of the partition's stream).
- The output event's interval is (first positive event's ts, last one's ts);
  its timestamp (used downstream) is the end.

Precise forms the matcher implements (SASE section 2.2 WITHIN and 3.3), all
intervals open: a middle negation forbids events in (prev.ts, next.ts) where
prev/next are the neighbouring positive events (a Kleene neighbour
contributes its last / first event); a start negation forbids events in
(last.ts - within, first.ts); an end negation forbids events in
(last.ts, first.ts + within), and the result is released by
`advance(watermark)` once watermark >= first.ts + within. Outside `Agg`, an
`Attr` of a Kleene variable reads its last bound event (inside its own
`iteration_filter`: the event being tested, and `Agg` folds over the events
bound before it). Under skip_till_next_match a run waiting in a Kleene
component prefers to close it with an event that binds the next component;
negation only filters finished candidates, it never steers a run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeGuard

from caesar.plans.expr import Expr

Strategy = Literal["skip_till_any_match", "skip_till_next_match", "strict_contiguity"]
STRATEGIES: tuple[Strategy, ...] = ("skip_till_any_match", "skip_till_next_match", "strict_contiguity")


def is_strategy(name: str) -> TypeGuard[Strategy]:
    return name in STRATEGIES


@dataclass(frozen=True)
class PatternComponent:
    var: str
    types: tuple[str, ...]  # more than one for ANY(T1, T2)
    negated: bool = False
    kleene: bool = False
    iteration_filter: Expr | None = None


@dataclass(frozen=True)
class OutputField:
    name: str
    expr: Expr


@dataclass(frozen=True)
class Output:
    """DERIVE Type(expr AS name, ...). For context deriving queries the
    compiler still fills it (type = the transition's marker type)."""

    event_type: str
    fields: tuple[OutputField, ...]


@dataclass(frozen=True)
class PatternPlan:
    plan_id: str
    components: tuple[PatternComponent, ...]
    where: tuple[Expr, ...] = ()
    equivalence: tuple[str, ...] = ()
    within: int | None = None
    strategy: Strategy = "skip_till_any_match"
    output: Output | None = None
    # Attribute types by event type, so engines can lay out columns:
    # {"PositionReport": {"vid": "int", "spd": "float", "lane": "int", "kind": "string"}}
    schemas: dict[str, dict[str, str]] = field(default_factory=dict, hash=False, compare=False)

    @property
    def positive(self) -> tuple[PatternComponent, ...]:
        return tuple(c for c in self.components if not c.negated)

    @property
    def negated(self) -> tuple[PatternComponent, ...]:
        return tuple(c for c in self.components if c.negated)
