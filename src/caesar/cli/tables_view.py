"""How shared tables (ACEP) are printed: `caesar run --tables` (embedded)
and `caesar tables` (a running deployment) show them the same way."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from caesar.plans.tables import AcepPlan

TableRows = Mapping[str, Sequence[Mapping[str, Any]]]


def rows_in_key_order(tables: Mapping[str, Mapping[Any, Mapping[str, Any]]]
                      ) -> dict[str, list[dict[str, Any]]]:
    """{table: {key: row}} (AcepProcessor.tables) as {table: [row, ...]} in
    key order, the shape `Session.tables()` and a deployment answer with."""
    return {name: [dict(row) for _, row in sorted(rows.items())]
            for name, rows in tables.items()}


def columns_of(plan: AcepPlan | None) -> dict[str, list[str]]:
    return {t.name: list(t.column_names()) for t in plan.tables} if plan else {}


def print_tables(console: Console, tables: TableRows, columns: Mapping[str, Sequence[str]],
                 *, as_json: bool = False) -> None:
    """One rich table per shared table (its columns in declaration order,
    headers even when empty), or with `as_json` one JSON object per row:
    {"table": name, "row": {column: value}}."""
    for name, rows in tables.items():
        cols = list(columns.get(name) or (list(rows[0]) if rows else []))
        if as_json:
            for row in rows:
                console.print(json.dumps({"table": name, "row": {c: row.get(c) for c in cols}},
                                         default=str),
                              markup=False, highlight=False, soft_wrap=True)
            continue
        title = f"{name} ({len(rows)} rows)"
        view = Table(title=title, min_width=len(title) + 4)  # a narrow table: one-line title
        for c in cols:
            view.add_column(c)
        for row in rows:
            view.add_row(*(str(row.get(c)) for c in cols))
        console.print(view)
