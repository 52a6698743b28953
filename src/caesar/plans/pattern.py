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
  events of the partition's stream), partition_contiguity (SASE+; Flink CEP's
  `next()` on a keyed stream: components bind consecutive events of the
  substream of the pattern's event types whose `equivalence` values are the
  run's; a run dies on such an event it cannot take, events of other types
  or other values pass it by).
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
component prefers to close it with an event that binds the next component
(reluctant; `greedy`: it extends the component while it can); negation only
filters finished candidates, it never steers a run.

Issue 16 (docs/language.md has the user's view): a Kleene component binds
`min_count`..`max_count` events; one with min_count 0 (optional) may bind
none, is never first or last, reads as missing, and a negation next to it
reaches the nearest positive event that did bind. `alternatives` run as
separate sequences under one plan id (`expanded`). With `skip` (run-based
strategies only) complete matches wait for earlier-started runs and are
emitted in the order of their first event, each discarding runs and waiting
matches that started at/before (to_next: its first event; past_last: its
last) or before (to_first/to_last: the first/last event of `skip_var`) a
seq. A run whose window ends before it completes derives `timeout` with
interval (first.ts, first.ts + within). `equivalence_negated=False` leaves
negated events out of `[attr]`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal, TypeGuard

from caesar.plans.expr import Expr, variables

Strategy = Literal["skip_till_any_match", "skip_till_next_match", "strict_contiguity",
                   "partition_contiguity"]
STRATEGIES: tuple[Strategy, ...] = ("skip_till_any_match", "skip_till_next_match",
                                    "strict_contiguity", "partition_contiguity")
RUN_STRATEGIES: tuple[Strategy, ...] = ("skip_till_next_match", "strict_contiguity",
                                        "partition_contiguity")

# After-match skip (Flink CEP's AfterMatchSkipStrategy; SQL's AFTER MATCH SKIP)
Skip = Literal["no_skip", "to_next", "past_last", "to_first", "to_last"]
SKIPS: tuple[Skip, ...] = ("no_skip", "to_next", "past_last", "to_first", "to_last")


def is_strategy(name: str) -> TypeGuard[Strategy]:
    return name in STRATEGIES


@dataclass(frozen=True)
class PatternComponent:
    var: str
    types: tuple[str, ...]  # more than one for ANY(T1, T2)
    negated: bool = False
    kleene: bool = False  # quantified (T+, T*, T?, T{n,m}): binds a list of events
    iteration_filter: Expr | None = None
    # Quantifier bounds of a Kleene component: at least `min_count` events
    # (0: optional, it may bind none), at most `max_count` (None: unbounded).
    # A plain component binds exactly one event (1, 1).
    min_count: int = 1
    max_count: int | None = None
    # Under run-based strategies: an event that can both extend this
    # component and bind the next one extends it (greedy) or binds the next
    # one (reluctant, the default). Irrelevant under skip_till_any_match.
    greedy: bool = False

    @property
    def optional(self) -> bool:
        return self.kleene and self.min_count == 0


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
    # AND/OR of sub-patterns: each alternative is a sequence of component
    # indices; the plan matches what any alternative matches (a bag union).
    # Empty: one alternative, every component in order.
    alternatives: tuple[tuple[int, ...], ...] = ()
    # After-match skip (run-based strategies only); `skip_var` for to_first/to_last.
    skip: Skip = "no_skip"
    skip_var: str | None = None
    # Timed-out partial matches (run-based strategies, WITHIN): the event a
    # partial match derives when its window expires before it completes.
    timeout: Output | None = None
    # False: `[attr]` holds among the positive events only (negated events
    # are not compared; `[attr] EXCEPT NOT` in the language).
    equivalence_negated: bool = True

    @property
    def positive(self) -> tuple[PatternComponent, ...]:
        return tuple(c for c in self.components if not c.negated)

    @property
    def negated(self) -> tuple[PatternComponent, ...]:
        return tuple(c for c in self.components if c.negated)

    @property
    def derives_on_arrival(self) -> bool:
        """Whether each result is derived while the event that completes it is
        processed, never later on `advance`: end negations, ON TIMEOUT and
        after-match skips hold results until time passes."""
        return self.timeout is None and self.skip == "no_skip" and not any(
            alt.components and alt.components[-1].negated for alt in self.expanded())

    def expanded(self) -> tuple[PatternPlan, ...]:
        """One plan per alternative (the plan itself when it has none): the
        engines run each alternative as a plain sequence under the same plan
        id. Conditions and outputs reading a variable an alternative does not
        bind see it as bound to nothing (missing; aggregates over no events);
        a condition reading only such variables does not apply to it."""
        if not self.alternatives:
            return (self,)
        out = []
        for alt in self.alternatives:
            comps = tuple(self.components[i] for i in alt)
            own = {c.var for c in comps}
            # a condition on other alternatives' variables only is theirs
            where = tuple(c for c in self.where if not variables(c) or variables(c) & own)
            out.append(replace(self, components=comps, where=where, alternatives=()))
        return tuple(out)

    def variables(self) -> frozenset[str]:
        return frozenset(c.var for c in self.components)
