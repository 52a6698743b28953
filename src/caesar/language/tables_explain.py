"""Explain text of the ACEP part of a plan: shared tables, and per rule or
table-reading query its s-transaction step (rank, lock sets, table reads,
condition, actions)."""

from __future__ import annotations

from caesar.plans.expr import Expr, render
from caesar.plans.tables import AcepPlan, ActionPlan, TableRead


def _read(r: TableRead) -> str:
    text = f"{r.kind} {r.table}"
    if r.key is not None:
        text += "[" + ", ".join(render(k) for k in r.key) + "]"
    if r.value is not None:
        text += f" {render(r.value)}"
    if r.where is not None:
        text += f" where {render(r.where)}"
    return text


def _action(a: ActionPlan) -> str:
    if a.kind == "DERIVE":
        return f"DERIVE {a.derive_type}(" + ", ".join(
            f"{c} = {render(v)}" for c, v in zip(a.columns, a.values, strict=True)) + ")"
    sets = ", ".join(f"{c} = {render(v)}" for c, v in zip(a.columns, a.values, strict=True))
    text = f"{a.kind} {a.table}" + (f" ({sets})" if sets else "")
    if a.key is not None:
        text += " key [" + ", ".join(render(k) for k in a.key) + "]"
    if a.where is not None:
        text += f" where {render(a.where)}"
    return text


def render_acep(plan: AcepPlan) -> str:
    out = [f"table {t.name}(" + ", ".join(f"{c} {ty}" for c, ty in t.columns)
           + f") key ({', '.join(t.key)})" + (f", {len(t.initial)} initial rows"
                                              if t.initial else "") for t in plan.tables]
    for a in plan.actors:
        out.append(f"step {a.rank}: {a.kind} {a.name} on {a.input_type} "
                   f"reads [{', '.join(sorted(a.read_tables))}] "
                   f"writes [{', '.join(sorted(a.write_tables))}]")
        out.extend(f"  read ${i}: {_read(r)}" for i, r in enumerate(a.reads))
        conds: list[Expr] = list(a.condition)
        if conds:
            out.append("  if " + " AND ".join(render(c) for c in conds))
        for act in a.actions:
            out.extend(f"  read ${i}: {_read(r)}" for i, r in enumerate(act.reads))
            out.append(f"  do {_action(act)}")
    return "\n".join(out) + "\n"
