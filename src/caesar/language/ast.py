"""The model AST: what the parser produces, with a source position on every
node. Positions never take part in equality, so a model printed back with
`format_model` and parsed again compares equal to the original."""

from __future__ import annotations

from dataclasses import dataclass, field

from caesar.errors import SourcePosition

NOWHERE = SourcePosition("<model>", 0, 0)


def _pos() -> SourcePosition:
    return field(default=NOWHERE, compare=False, repr=False)


# ---- expressions -----------------------------------------------------------


@dataclass(frozen=True)
class Literal:
    value: int | float | str | bool
    pos: SourcePosition = _pos()


@dataclass(frozen=True)
class Ref:
    """`var.attr` (var set) or a bare `attr`."""

    var: str | None
    name: str
    pos: SourcePosition = _pos()


@dataclass(frozen=True)
class UnaryExpr:
    op: str  # "-" | "NOT"
    operand: ExprNode
    pos: SourcePosition = _pos()


@dataclass(frozen=True)
class BinaryExpr:
    op: str  # + - * / % = != < <= > >= AND OR
    left: ExprNode
    right: ExprNode
    pos: SourcePosition = _pos()


@dataclass(frozen=True)
class CallExpr:
    """Function or aggregate call: `abs(x)`, `avg(p.spd)`, `count(*)`,
    `count(DISTINCT vid)`."""

    func: str
    args: tuple[ExprNode, ...]
    distinct: bool = False
    star: bool = False
    pos: SourcePosition = _pos()


@dataclass(frozen=True)
class Equivalence:
    """SASE equivalence test `[attr, ...]`: the attributes are equal across
    all events of a match. Only allowed as a top-level WHERE conjunct."""

    attrs: tuple[str, ...]
    pos: SourcePosition = _pos()
    # `[attr] EXCEPT NOT`: compared among the positive events only
    positive_only: bool = False


@dataclass(frozen=True)
class TableRead:
    """ACEP: a read of a shared table inside an expression.

    - `(SELECT col FROM t [alias] WHERE ...)`: the column of the row the WHERE
      names by its whole primary key (lookup by key), or an aggregate
      `(SELECT count(*) | sum(c) | min(c) | max(c) | avg(c) FROM t WHERE ...)`
      over the rows matching the condition;
    - `EXISTS (SELECT * FROM t WHERE ...)` (`exists`)."""

    item: ExprNode | None  # None: `*` (EXISTS)
    table: str
    alias: str | None
    where: ExprNode | None
    exists: bool = False
    pos: SourcePosition = _pos()
    table_pos: SourcePosition = _pos()


ExprNode = Literal | Ref | UnaryExpr | BinaryExpr | CallExpr | Equivalence | TableRead


# ---- patterns --------------------------------------------------------------


@dataclass(frozen=True)
class Component:
    """One pattern component: `T v`, `ANY(T1, T2) v`, `T+ v FILTER(expr)`,
    `NOT T v` (inside SEQ). A quantified one (`kleene`: T+, T*, T?, T{n},
    T{n,m}, T{n,}) binds from `min_count` to `max_count` (None: no limit)
    events; `greedy` is written GREEDY after the quantifier."""

    types: tuple[str, ...]
    var: str | None
    negated: bool = False
    kleene: bool = False
    any_of: bool = False  # written as ANY(...), even with one type
    filter: ExprNode | None = None
    pos: SourcePosition = _pos()
    min_count: int = 1
    max_count: int | None = None
    greedy: bool = False


@dataclass(frozen=True)
class PatternGroup:
    """SEQ, AND or OR of sub-patterns, kept as written when a pattern uses
    AND/OR (nested SEQs flatten into their parent SEQ)."""

    op: str  # "SEQ" | "AND" | "OR"
    items: tuple[Component | PatternGroup, ...]
    pos: SourcePosition = _pos()


@dataclass(frozen=True)
class Pattern:
    """`PATTERN T v` (one component) or `PATTERN SEQ(...)` (flattened).
    `components` lists every component in textual order; `tree` is the
    AND/OR structure when the pattern has one (None: a plain sequence)."""

    components: tuple[Component, ...]
    is_seq: bool
    pos: SourcePosition = _pos()
    tree: PatternGroup | None = None


# ---- queries ---------------------------------------------------------------


@dataclass(frozen=True)
class Duration:
    amount: int
    unit: str | None  # normalised: "MILLISECONDS", "SECONDS", ... or None = ticks
    pos: SourcePosition = _pos()


@dataclass(frozen=True)
class DeriveItem:
    expr: ExprNode
    alias: str | None
    pos: SourcePosition = _pos()


@dataclass(frozen=True)
class Window:
    """TUMBLING/SLIDING: durations; COUNT: numbers of events (unit None);
    SESSION: `size` is the gap."""

    kind: str  # "TUMBLING" | "SLIDING" | "COUNT" | "SESSION"
    size: Duration
    slide: Duration | None
    pos: SourcePosition = _pos()


@dataclass(frozen=True)
class SkipClause:
    """AFTER MATCH ...: kind one of no_skip, to_next, past_last, to_first, to_last."""

    kind: str
    var: str | None = None
    pos: SourcePosition = _pos()


@dataclass(frozen=True)
class TimeoutClause:
    """ON TIMEOUT DERIVE T(items): what a partial match whose WITHIN expired derives."""

    derive_type: str
    items: tuple[DeriveItem, ...]
    pos: SourcePosition = _pos()


@dataclass(frozen=True)
class OutputRate:
    """OUTPUT [ALL | FIRST | LAST] EVERY d (Esper's output rate limiting)."""

    kind: str  # "ALL" | "FIRST" | "LAST"
    every: Duration
    pos: SourcePosition = _pos()


@dataclass(frozen=True)
class Query:
    """Any query. `kind` says which clauses are meaningful:

    - "window":    action + target context (INITIATE/SWITCH/TERMINATE CONTEXT c)
    - "retrieval": DERIVE type(items) PATTERN ...
    - "aggregate": DERIVE type(items) FROM source ... WINDOW ... GROUP BY ...
    - "temporal":  DERIVE type(items) [FROM ...] DEFINE ... PATTERN A rel B ...
      (TPStream; a "window" query may also carry `temporal` or `on_situation`)
    """

    kind: str
    action: str | None = None
    target: str | None = None
    derive_type: str | None = None
    items: tuple[DeriveItem, ...] = ()
    pattern: Pattern | None = None
    where: ExprNode | None = None
    within: Duration | None = None
    strategy: str | None = None
    contexts: tuple[str, ...] = ()  # explicit CONTEXT clause (may be empty)
    source: str | None = None
    source_var: str | None = None
    window: Window | None = None
    group_by: tuple[str, ...] = ()
    having: ExprNode | None = None
    # KEYED BY of a deriving query: the context instance it initiates/ends.
    instance_key: tuple[ExprNode, ...] = ()
    skip: SkipClause | None = None
    timeout: TimeoutClause | None = None
    output_rate: OutputRate | None = None
    pos: SourcePosition = _pos()
    key_pos: SourcePosition = _pos()
    contexts_pos: SourcePosition = _pos()
    target_pos: SourcePosition = _pos()
    strategy_pos: SourcePosition = _pos()
    # TPStream (section below): a temporal pattern, or a deriving query fired
    # by a model-level situation's start or end.
    temporal: TemporalPattern | None = None
    on_situation: SituationEdge | None = None


# ---- model -----------------------------------------------------------------


@dataclass(frozen=True)
class FieldDecl:
    name: str
    type: str  # normalised: "int" | "float" | "string" | "bool"
    pos: SourcePosition = _pos()


@dataclass(frozen=True)
class EventDecl:
    name: str
    fields: tuple[FieldDecl, ...]
    timestamp: str | None = None
    topic: str | None = None
    schema: str | None = None
    output_topic: str | None = None  # TO TOPIC: where derived events of this type go
    pos: SourcePosition = _pos()


@dataclass(frozen=True)
class ContextBlock:
    name: str
    default: bool
    queries: tuple[Query, ...]
    pos: SourcePosition = _pos()
    keyed: bool = False  # CONTEXT c KEYED: one instance per KEYED BY key


@dataclass(frozen=True)
class Model:
    name: str | None
    time_unit: str | None
    partition_by: tuple[str, ...]
    strategy: str | None
    events: tuple[EventDecl, ...]
    contexts: tuple[ContextBlock, ...]
    queries: tuple[Query, ...]  # top-level queries (outside any context block)
    file: str = field(default="<model>", compare=False)
    source: str = field(default="", compare=False, repr=False)
    pos: SourcePosition = _pos()
    strategy_pos: SourcePosition = _pos()
    partition_pos: SourcePosition = _pos()
    # CONTEXTS PER: contexts hold per value of these attributes in a partition.
    context_key: tuple[str, ...] = ()
    context_key_pos: SourcePosition = _pos()
    situations: tuple[SituationDef, ...] = ()  # model-level SITUATION declarations
    tables: tuple[TableDecl, ...] = ()  # ACEP shared tables
    rules: tuple[RuleDecl, ...] = ()  # ACEP active rules


# ---- TPStream: situations and temporal patterns ----------------------------


@dataclass(frozen=True)
class SituationDef:
    """`S AS condition [AT LEAST d | AT MOST d | BETWEEN d AND d]` (a model-level
    SITUATION or a DEFINE item); `condition` None: DEFINE names a SITUATION."""

    name: str
    condition: ExprNode | None = None
    at_least: Duration | None = None
    at_most: Duration | None = None
    between: bool = False  # written BETWEEN (both bounds), for printing back
    pos: SourcePosition = _pos()


@dataclass(frozen=True)
class TemporalSource:
    """`FROM Type [alias]` of a temporal pattern."""

    type: str
    alias: str | None
    pos: SourcePosition = _pos()


@dataclass(frozen=True)
class TemporalRelation:
    """`A relation B`, relation one of Allen's 13 (`met_by`, ... lower case)."""

    left: str
    relation: str
    right: str
    pos: SourcePosition = _pos()
    right_pos: SourcePosition = _pos()


@dataclass(frozen=True)
class TemporalConstraint:
    """Alternatives `A r1 B; A r2 B; ...` (one of them must hold)."""

    alternatives: tuple[TemporalRelation, ...]
    pos: SourcePosition = _pos()


@dataclass(frozen=True)
class TemporalPattern:
    """`[FROM ...] DEFINE ... PATTERN c1 AND c2 ... [WITHIN d]`."""

    sources: tuple[TemporalSource, ...]
    situations: tuple[SituationDef, ...]
    constraints: tuple[TemporalConstraint, ...]
    pos: SourcePosition = _pos()
    pattern_pos: SourcePosition = _pos()
    single: str | None = None  # `PATTERN S`: one situation, matched when it is certain


@dataclass(frozen=True)
class SituationEdge:
    """`ON START OF S` / `ON END OF S` of a context deriving query."""

    edge: str  # "START" | "END"
    situation: str
    pos: SourcePosition = _pos()


# ---- ACEP: shared tables and active rules ----------------------------------


@dataclass(frozen=True)
class ColumnDecl:
    name: str
    type: str  # normalised like FieldDecl.type
    pos: SourcePosition = _pos()


@dataclass(frozen=True)
class TableDecl:
    """`TABLE t(col type, ..., PRIMARY KEY (cols)) [FROM FILE "rows.csv"]`."""

    name: str
    columns: tuple[ColumnDecl, ...]
    key: tuple[str, ...]
    file: str | None = None  # initial rows (CSV with a header line)
    pos: SourcePosition = _pos()
    key_pos: SourcePosition = _pos()


@dataclass(frozen=True)
class Assignment:
    """`col = expr` of an UPDATE ... SET."""

    column: str
    expr: ExprNode
    pos: SourcePosition = _pos()


@dataclass(frozen=True)
class TableAction:
    """One action of a rule:

    - INSERT / UPSERT INTO t [(cols)] VALUES (exprs)  (`columns`, `values`)
    - UPDATE t SET c = e, ... [WHERE cond]            (`assignments`, `where`)
    - DELETE FROM t [WHERE cond]                      (`where`)
    - DERIVE T(items)                                 (`derive_type`, `items`)
    """

    kind: str  # "INSERT" | "UPSERT" | "UPDATE" | "DELETE" | "DERIVE"
    table: str | None = None
    columns: tuple[str, ...] = ()
    values: tuple[ExprNode, ...] = ()
    assignments: tuple[Assignment, ...] = ()
    where: ExprNode | None = None
    derive_type: str | None = None
    items: tuple[DeriveItem, ...] = ()
    pos: SourcePosition = _pos()
    table_pos: SourcePosition = _pos()


@dataclass(frozen=True)
class RuleDecl:
    """`RULE r ON pattern [WHERE c] [WITHIN d] [CONTEXT ...] DO action` or
    `DO BEGIN action; ...; END` (ACEP's ECA rule; the paper's section 3.1)."""

    name: str
    pattern: Pattern
    actions: tuple[TableAction, ...]
    where: ExprNode | None = None
    within: Duration | None = None
    contexts: tuple[str, ...] = ()
    pos: SourcePosition = _pos()
    contexts_pos: SourcePosition = _pos()
