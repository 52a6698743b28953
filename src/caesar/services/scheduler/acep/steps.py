"""One step of an s-transaction: actor `rank` at timestamp `ts` handles the
matches its pattern produced at `ts` (the paper's Definition 7: all changes
one input timestamp triggers form one s-transaction; its steps are ordered
by the model's declaration order, the order Definition 6 (4) leaves to the
application).

A step is a generator: before it touches a table it yields the request
(`Read(t)` / `Write(t)`) and waits to be resumed; the executor resumes it
once the scheduler grants it. The work itself is a pure function of the
matches and what the view returns, so any executor gets the same results
from the same reads.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from caesar.plans import tables as tp
from caesar.plans.expr import Expr, variables
from caesar.services.matcher.expr_eval import MISSING, aggregate, evaluate, holds
from caesar.services.scheduler.acep.tables import Key, Row, TableView

Match = Mapping[str, Any]  # fields of the matched event (`_acep_*` fields)


@dataclass(frozen=True)
class Read:
    table: str
    key: Key | None = None  # the row, when the match alone names it (tuple-level locks)


@dataclass(frozen=True)
class Write:
    table: str
    key: Key | None = None


Request = Read | Write
Step = Generator[Request, None, None]


@dataclass(frozen=True)
class Output:
    """A derived event of a rule's DERIVE action or a table-reading query."""

    actor: str
    event_type: str
    ts: int
    fields: dict[str, Any]
    topic: str | None = None
    order: tuple[int, int, int, int] = (0, 0, 0, 0)  # (ts, rank, match, action)


@dataclass(frozen=True)
class ActionError:
    """An action that would break its table's key or schema: skipped, and
    reported (dead-lettered) with the reason."""

    actor: str
    where: str
    ts: int
    reason: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class StepResult:
    outputs: list[Output] = field(default_factory=list)
    errors: list[ActionError] = field(default_factory=list)


class _Scope:
    """Attribute lookup for the expression evaluator: event fields, the
    current row, and the READ slots of the unit being evaluated."""

    def __init__(self, match: Match) -> None:
        self.match = match
        self.row: Row | None = None
        self.slots: list[Any] = []

    def __call__(self, var: str | None, name: str) -> Any:
        if var == tp.EVENT:
            return self.match.get(name)
        if var == tp.ROW:
            return None if self.row is None else self.row.get(name)
        if var == tp.READ:
            value = self.slots[int(name)]
            return None if value is MISSING else value
        return None


def _value(expr: Expr, scope: _Scope) -> Any:
    v = evaluate(expr, scope)
    return None if v is MISSING else v


def run_step(actor: tp.ActorPlan, ts: int, matches: Sequence[Match], view: TableView,
             result: StepResult) -> Step:
    """The step generator (see the module docstring)."""
    for m_index, match in enumerate(matches):
        scope = _Scope(match)
        scope.slots = []
        for read in actor.reads:
            yield Read(read.table, read_key(read, scope))
            scope.slots.append(table_read(read, view, scope))
        if not all(holds(c, scope) for c in actor.condition):
            continue
        for a_index, action in enumerate(actor.actions):
            scope.slots = []
            for read in action.reads:
                yield Read(read.table, read_key(read, scope))
                scope.slots.append(table_read(read, view, scope))
            if action.kind == "DERIVE":
                assert action.derive_type is not None
                result.outputs.append(Output(
                    actor.name, action.derive_type, ts,
                    {c: _value(v, scope) for c, v in zip(action.columns, action.values, strict=True)},
                    action.topic, (ts, actor.rank, m_index, a_index)))
                continue
            assert action.table is not None
            yield Write(action.table, write_key(action, view.schemas[action.table], scope))
            reason = apply(action, view, scope)
            if reason is not None:
                result.errors.append(ActionError(actor.name, action.where_text, ts, reason,
                                                 dict(match)))


def _static(exprs: Sequence[Expr]) -> bool:
    """Expressions of the matched event alone (no table read, no row)."""
    return not any(v in (tp.READ, tp.ROW) for e in exprs for v in variables(e))


def _key(exprs: Sequence[Expr], scope: _Scope) -> Key | None:
    if not _static(exprs):
        return None
    key = tuple(_value(k, scope) for k in exprs)
    return None if None in key else key


def read_key(read: tp.TableRead, scope: _Scope) -> Key | None:
    """The one row a read touches, if the match names it (else None: the table)."""
    return _key(read.key, scope) if read.key is not None else None


def write_key(action: tp.ActionPlan, schema: tp.TableSchema, scope: _Scope) -> Key | None:
    if action.kind in ("INSERT", "UPSERT"):
        values = dict(zip(action.columns, action.values, strict=True))
        return _key([values[k] for k in schema.key], scope)
    return _key(action.key, scope) if action.key is not None else None


def resources(actor: tp.ActorPlan, matches: Sequence[Match],
              schemas: Mapping[str, tp.TableSchema]) -> tuple[set[tuple[str, Key | None]],
                                                               set[tuple[str, Key | None]]]:
    """What a step may read and write, row by row where its matches name
    the row (lock insertion at tuple granularity, the paper's lockG = tuple)."""
    reads: set[tuple[str, Key | None]] = set()
    writes: set[tuple[str, Key | None]] = set()
    for match in matches:
        scope = _Scope(match)
        reads.update((r.table, read_key(r, scope)) for r in actor.reads)
        for a in actor.actions:
            reads.update((r.table, read_key(r, scope)) for r in a.reads)
            if a.table is not None:
                writes.add((a.table, write_key(a, schemas[a.table], scope)))
    return reads, writes


def table_read(read: tp.TableRead, view: TableView, scope: _Scope) -> Any:
    if read.kind == "exists" and read.key is not None:
        key = tuple(_value(k, scope) for k in read.key)
        row = None if None in key else view.get(read.table, key)
        if row is None:
            return False
        scope.row = row
        try:
            return read.where is None or holds(read.where, scope)
        finally:
            scope.row = None
    if read.kind == "lookup":
        assert read.key is not None and read.value is not None
        key = tuple(_value(k, scope) for k in read.key)
        row = None if None in key else view.get(read.table, key)
        if row is None:
            return MISSING
        scope.row = row
        try:
            if read.where is not None and not holds(read.where, scope):
                return MISSING
            return evaluate(read.value, scope)
        finally:
            scope.row = None
    values: list[Any] = []
    try:
        for _, row in view.rows(read.table):
            scope.row = row
            if read.where is not None and not holds(read.where, scope):
                continue
            if read.kind == "exists":
                return True
            values.append(True if read.value is None else evaluate(read.value, scope))
    finally:
        scope.row = None
    if read.kind == "exists":
        return False
    return aggregate(read.kind, values)


def apply(action: tp.ActionPlan, view: TableView, scope: _Scope) -> str | None:
    """Run one table action; the reason it cannot run (nothing written) or None."""
    assert action.table is not None
    schema = view.schemas[action.table]
    if action.kind in ("INSERT", "UPSERT"):
        row: Row = {c: _value(v, scope) for c, v in zip(action.columns, action.values, strict=True)}
        key = tuple(row[k] for k in schema.key)
        if None in key:
            return f"{action.kind} INTO {action.table}: a primary key value is missing"
        old = view.get(action.table, key)
        if action.kind == "INSERT" and old is not None:
            return f"INSERT INTO {action.table}: key {_show(key)} exists already"
        full: Row = dict.fromkeys(schema.column_names()) if old is None else dict(old)
        full.update(row)
        view.put(action.table, key, _typed(schema, full))
        return None
    targets: list[tuple[Key, Row]]
    if action.key is not None:
        key = tuple(_value(k, scope) for k in action.key)
        row_ = None if None in key else view.get(action.table, key)
        targets = [] if row_ is None else [(key, row_)]
    else:
        targets = list(view.rows(action.table))
    for key, old in targets:
        scope.row = old
        try:
            if action.where is not None and not holds(action.where, scope):
                continue
            if action.kind == "DELETE":
                view.put(action.table, key, None)
                continue
            new = dict(old)
            for c, v in zip(action.columns, action.values, strict=True):
                new[c] = _value(v, scope)
        finally:
            scope.row = None
        view.put(action.table, key, _typed(schema, new))
    return None


def _typed(schema: tp.TableSchema, row: Row) -> Row:
    types = dict(schema.columns)
    return {c: float(v) if types[c] == "float" and isinstance(v, int) and
            not isinstance(v, bool) else v for c, v in row.items()}


def _show(key: Key) -> str:
    return ", ".join(repr(k) for k in key)
