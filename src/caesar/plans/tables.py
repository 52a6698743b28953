"""ACEP execution plans: shared tables, and the actors (active rules and
queries that read tables) the stream-transaction scheduler runs
(src/caesar/services/scheduler/acep/). Plain frozen data, like execution.py.

Expressions use the engine IR (plans/expr.py) with three reserved variables:
- `Attr(EVENT, alias)`: a field of the matched event (the pattern part of the
  rule/query runs in the matcher and derives it under `ActorPlan.input_type`);
- `Attr(ROW, column)`: a column of the table row being read or changed;
- `Attr(READ, "i")`: the value of table read number i of the same unit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from caesar.plans.expr import Expr

EVENT = "$event"
ROW = "$row"
READ = "$read"

ReadKind = Literal["lookup", "exists", "count", "sum", "min", "max", "avg"]
ActionKind = Literal["INSERT", "UPSERT", "UPDATE", "DELETE", "DERIVE"]
Value = int | float | str | bool | None


@dataclass(frozen=True)
class TableSchema:
    name: str
    columns: tuple[tuple[str, str], ...]  # (name, "int" | "float" | "string" | "bool")
    key: tuple[str, ...]
    initial: tuple[tuple[Value, ...], ...] = ()  # rows in column order (FROM FILE)

    def column_names(self) -> tuple[str, ...]:
        return tuple(c for c, _ in self.columns)


@dataclass(frozen=True)
class TableRead:
    """One read of a table at the reading step's timestamp.

    lookup: the `value` of the row whose key is `key` (None when absent or
    `where` fails); exists: some row passes `where` (only the row `key` names,
    when the condition fixes the whole key); count/sum/min/max/avg: over the
    rows passing `where` (`value` the aggregated column expression)."""

    table: str
    kind: ReadKind
    value: Expr | None = None
    key: tuple[Expr, ...] | None = None  # in key column order; event expressions
    where: Expr | None = None


@dataclass(frozen=True)
class ActionPlan:
    kind: ActionKind
    table: str | None
    columns: tuple[str, ...]  # INSERT/UPSERT: the columns given; UPDATE: the SET columns;
                              # DERIVE: the output field names
    values: tuple[Expr, ...]  # one per column
    where: Expr | None = None  # UPDATE / DELETE: which rows (row + event scope)
    key: tuple[Expr, ...] | None = None  # UPDATE / DELETE whose WHERE fixes the whole key
    reads: tuple[TableRead, ...] = ()  # READ slots of `values` / `where`
    derive_type: str | None = None
    topic: str | None = None
    where_text: str = ""  # "file:line:col" of the action, for dead letters


@dataclass(frozen=True)
class ActorPlan:
    """A rule (`kind` "rule") or a table-reading query ("query"): consumes the
    matches the matcher derives as `input_type`, then (in its s-transaction
    step) evaluates `condition` with `reads`, and runs `actions` in order."""

    name: str
    kind: Literal["rule", "query"]
    rank: int  # declaration order: the order of steps inside one s-transaction
    input_type: str
    reads: tuple[TableRead, ...]
    condition: tuple[Expr, ...]
    actions: tuple[ActionPlan, ...]
    read_tables: frozenset[str]
    write_tables: frozenset[str]
    position: str = ""


@dataclass(frozen=True)
class AcepPlan:
    tables: tuple[TableSchema, ...]
    actors: tuple[ActorPlan, ...]

    def input_types(self) -> frozenset[str]:
        return frozenset(a.input_type for a in self.actors)
