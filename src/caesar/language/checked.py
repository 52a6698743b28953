"""The checked model: what semantic analysis (semantics.py) hands to phases 1
and 2. Each query is a `CheckedQuery`: what every query has (contexts, output)
plus its body, a pattern or a windowed aggregation, and for context deriving
queries the transition it makes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeGuard, get_args

from caesar.errors import SourcePosition
from caesar.language import ast
from caesar.plans import expr as ir
from caesar.plans.aggregate import WindowKind
from caesar.plans.execution import OutputRate
from caesar.plans.pattern import PatternComponent, Skip, Strategy
from caesar.plans.temporal import SituationSpec, TemporalConstraint

IMPLICIT_DEFAULT = "default"
Action = Literal["INITIATE", "SWITCH", "TERMINATE"]
ACTIONS: tuple[Action, ...] = get_args(Action)


def is_action(word: str | None) -> TypeGuard[Action]:
    return word in ACTIONS


@dataclass(frozen=True)
class EventType:
    name: str
    fields: dict[str, str] = field(hash=False)
    ts_field: str
    topic: str | None
    schema_file: str | None
    derived: bool
    pos: SourcePosition
    output_topic: str | None = None
    # The Avro schema SCHEMA names, read at compile time: the plan carries it, so
    # services never look for files (they run elsewhere, from an installed package).
    schema_json: str | None = field(default=None, hash=False, compare=False)


@dataclass(frozen=True)
class Conjunct:
    expr: ir.Expr
    pos: SourcePosition
    # The pattern variable a per-component FILTER attached it to (None: WHERE).
    component: str | None = None


@dataclass(frozen=True)
class Transition:
    """What a context deriving query does when it matches."""

    action: Action
    target: str  # the context it initiates, switches to or terminates


@dataclass(frozen=True)
class PatternBody:
    components: tuple[PatternComponent, ...]
    conjuncts: tuple[Conjunct, ...]
    equivalence: tuple[str, ...]
    within: int | None
    strategy: Strategy
    # AND/OR: component indices of each alternative (empty: one, in order)
    alternatives: tuple[tuple[int, ...], ...] = ()
    skip: Skip = "no_skip"
    skip_var: str | None = None
    timeout_type: str | None = None  # ON TIMEOUT DERIVE type and fields
    timeout_fields: tuple[tuple[str, ir.Expr], ...] = ()
    equivalence_negated: bool = True  # False: [attr] EXCEPT NOT


@dataclass(frozen=True)
class AggregateBody:
    size: int  # window size in ticks (count: events; session: the gap)
    slide: int  # ticks; = size for tumbling windows (count: events)
    group_by: tuple[str, ...]
    aggregates: tuple[tuple[str, ir.AggFunc, ir.Expr | None], ...]  # (name, func, arg)
    conjuncts: tuple[Conjunct, ...]  # WHERE on the source events
    having: tuple[ir.Expr, ...]
    window: WindowKind = "time"


@dataclass(frozen=True)
class TemporalBody:
    """TPStream (temporal_checks.py): situations and the constraints between them."""

    situations: tuple[SituationSpec, ...]
    constraints: tuple[TemporalConstraint, ...]
    within: int | None
    emit: Literal["match", "end"] = "match"


@dataclass(frozen=True)
class CheckedQuery:
    qid: str
    source: ast.Query
    home: str | None  # the context block it is written in (None: top level)
    contexts: tuple[str, ...]  # explicit after phase 1
    output_type: str
    output_fields: tuple[tuple[str, ir.Expr], ...]
    input_types: tuple[str, ...]
    body: PatternBody | AggregateBody | TemporalBody
    transition: Transition | None = None  # set for context deriving queries
    output_schema: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    output_rate: OutputRate | None = None  # OUTPUT ... EVERY
    # ON TIMEOUT DERIVE: the timeout type's fields and their types
    timeout_schema: dict[str, str] = field(default_factory=dict, hash=False, compare=False)

    @property
    def deriving(self) -> bool:
        """A context deriving query (INITIATE / SWITCH / TERMINATE)."""
        return self.transition is not None


@dataclass(frozen=True)
class ContextInfo:
    name: str
    default: bool
    pos: SourcePosition
    keyed: bool = False


@dataclass(frozen=True)
class CheckedModel:
    name: str
    time_unit: str
    partition_by: tuple[str, ...]
    event_types: dict[str, EventType] = field(hash=False)
    contexts: tuple[ContextInfo, ...]
    queries: tuple[CheckedQuery, ...]
    source: ast.Model = field(hash=False, compare=False, repr=False)
    context_key: tuple[str, ...] = ()  # CONTEXTS PER

    @property
    def default_context(self) -> str:
        return next(c.name for c in self.contexts if c.default)

    def context_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.contexts)


def marker_type(action: str, target: str) -> str:
    """Output type of a context deriving query (the transition's marker)."""
    return f"_{action.lower()}_{target}"
