"""Per-service execution plans: the compiler's final output (step 5 of the
pipeline in shared/DESIGN.md), consumed by the deriver, router and matcher.

Owned by the compiler (src/caesar/language); the services read it. Everything here
is plain frozen data so it pickles to Ray actors and prints in `caesar explain`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from caesar.plans.aggregate import AggregatePlan
from caesar.plans.functions import Function
from caesar.plans.pattern import PatternPlan
from caesar.plans.tables import AcepPlan
from caesar.plans.temporal import TemporalPlan

Action = Literal["INITIATE", "SWITCH", "TERMINATE"]
Plan = PatternPlan | AggregatePlan | TemporalPlan


@dataclass(frozen=True)
class FieldCheck:
    """What the scheduler checks on an input field besides its type: from the
    model (NOT NULL, BETWEEN lo AND hi) or the Avro schema (a field that is
    not a union with null; `minimum` / `maximum` attributes)."""

    not_null: bool = False
    low: int | float | None = None
    high: int | float | None = None


@dataclass(frozen=True)
class EventTypeDef:
    name: str
    fields: dict[str, str]  # attribute -> "int" | "float" | "string" | "bool"
    ts_field: str
    topic: str | None  # input topic; None for derived-only types
    schema_file: str | None  # as the model wrote it (for explain)
    schema_json: str | None = None  # the Avro schema it names, read by the compiler
    checks: dict[str, FieldCheck] = field(default_factory=dict)


@dataclass(frozen=True)
class ContextDef:
    name: str
    bit: int  # position in the context bit vector
    default: bool
    # Keyed context (KEYED BY): holds while at least one instance is open.
    keyed: bool = False


@dataclass(frozen=True)
class OutputRate:
    """Output rate limiting of a stage (Esper's output clause): its outputs
    are grouped per partition into intervals [k * every, (k+1) * every) of
    event time. ALL: every output of an interval, released when the interval
    closes; LAST: only the interval's last output, then; FIRST: the first
    output of each interval, at once, the rest dropped. Released outputs are
    stamped with the interval's last tick."""

    kind: Literal["all", "first", "last"]
    every: int  # ticks


@dataclass(frozen=True)
class Stage:
    """One executable query: a pattern or aggregation plan with the contexts
    it runs in (after push-down: it receives events only while one holds)."""

    plan: Plan
    contexts: tuple[str, ...]
    # Types this stage's output feeds inside the same service (combined plans).
    feeds: tuple[str, ...] = ()
    # Output topic for alerts / derived events leaving the service; None = internal.
    output_topic: str | None = None
    # The query's stable identity: its @name, else a fingerprint of its text
    # ("" = the plan id). Its state is stored under it, so reordering the
    # model's queries or adding others never mixes their states up.
    identity: str = ""
    output_rate: OutputRate | None = None
    # ON TIMEOUT: the topic its timed-out partial matches go to.
    timeout_topic: str | None = None


@dataclass(frozen=True)
class TransitionStage:
    """A context deriving query: when `stage` matches for a partition, apply
    `action` to `context` (SWITCH = terminate the current context(s) of
    `stage.contexts` and initiate `context`).

    `key_fields` (KEYED BY) name the output fields that identify the instance
    of a keyed context this transition opens (INITIATE/SWITCH into it) or
    closes (TERMINATE/SWITCH out of it). A keyed context starts with its first
    instance and ends with its last (the CAESAR paper, section 3.3: "the
    context window accident holds until all of them are cleared"); a SWITCH
    out of it that leaves instances open only closes its own instance."""

    stage: Stage
    action: Action
    context: str
    key_fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExecutionPlan:
    model: str
    partition_by: tuple[str, ...]
    event_types: tuple[EventTypeDef, ...]
    contexts: tuple[ContextDef, ...]
    # Deriver: helper stages (aggregations/patterns feeding transitions) in
    # topological order, then the transitions.
    deriver_stages: tuple[Stage, ...]
    transitions: tuple[TransitionStage, ...]
    # Matcher: context processing stages in topological order.
    matcher_stages: tuple[Stage, ...]
    # Grouped context windows (section 5.3): original context -> group ids;
    # partial matches survive between windows of one group.
    context_groups: dict[str, tuple[str, ...]]
    # Grouped window id -> the original contexts holding in it (added by the
    # compiler; a non-overlapping context is its own group).
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Query dropped by sub-plan sharing -> the plan id that computes it.
    shared: dict[str, str] = field(default_factory=dict)
    # Context-independent baseline only (src/caesar/language/independent.py):
    # matcher plan id -> the contexts its outputs are filtered to. Empty in a
    # context-aware plan.
    context_filters: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Milliseconds per event-time tick (the model's TIME UNIT); 1 = milliseconds.
    time_unit_ms: int = 1
    # ACEP: shared tables and the rules / table-reading queries run by the
    # stream-transaction scheduler on the matcher's `_acep_*` outputs.
    acep: AcepPlan | None = None
    # User-defined functions the model calls (their plans' Call nodes hold
    # them too); a deployment needs each importable (Function.target).
    functions: tuple[Function, ...] = ()
    # CONTEXTS PER: contexts hold per (stream partition, these attributes).
    # Transactions and context vectors are kept per such "context partition"
    # (partition_by + context_key); the stages that run in every context see
    # the whole stream partition (partition_by), the others only their key's
    # events. A transition's output carries the key of its last event.
    context_key: tuple[str, ...] = ()
    # Derived types the matcher takes from the deriver instead of deriving
    # them again (src/caesar/language/imports.py): the deriver sends the
    # results of its stages that produce them, the router adds them to the
    # routed transactions of their timestamp.
    imports: tuple[str, ...] = ()

    @property
    def exports(self) -> frozenset[str]:
        """The deriver stages whose results go to the matcher (`imports`)."""
        return frozenset(s.plan.plan_id for s in self.deriver_stages
                         if plan_output(s.plan) in self.imports)

    @property
    def transaction_key(self) -> tuple[str, ...]:
        """The attributes a stream transaction (and a context vector) is kept per."""
        return self.partition_by + self.context_key


def plan_reads(plan: Plan) -> tuple[str, ...]:
    """The event types a plan reads, in the order its inputs name them."""
    if isinstance(plan, AggregatePlan):
        return (plan.source_type,)
    if isinstance(plan, TemporalPlan):
        return plan.source_types
    return tuple(dict.fromkeys(t for c in plan.components for t in c.types))


def plan_output(plan: Plan) -> str | None:
    """The event type a plan derives (None: a pattern without an output)."""
    if isinstance(plan, AggregatePlan):
        return plan.output_type
    return plan.output.event_type if plan.output is not None else None
