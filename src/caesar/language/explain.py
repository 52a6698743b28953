"""Explain output: readable text trees and Graphviz dot of the plan before
and after optimization (used by `caesar explain` and the golden tests)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from caesar.language.algebra import AlgebraPlan, Op, children, label, render_plan
from caesar.language.phase1 import render_query_set
from caesar.language.tables_explain import render_acep
from caesar.plans.execution import ExecutionPlan

if TYPE_CHECKING:
    from caesar.language import Compilation


def render_execution(plan: ExecutionPlan) -> str:
    out = [f"execution plan {plan.model} (partition by {', '.join(plan.partition_by) or '-'})",
           "contexts: " + ", ".join(f"{c.name}{' (default)' if c.default else ''}"
                                    f"{' (keyed)' if c.keyed else ''} bit {c.bit}"
                                    for c in plan.contexts)]
    exports = plan.exports
    for title, stages in (("deriver", plan.deriver_stages), ("matcher", plan.matcher_stages)):
        out.extend(f"{title}: {s.plan.plan_id} in [{', '.join(s.contexts)}]"
                   + (f" feeds {', '.join(s.feeds)}" if s.feeds else "")
                   + (f" -> topic {s.output_topic}" if s.output_topic else "")
                   + (" -> matcher" if s.plan.plan_id in exports else "")
                   for s in stages)
    if plan.imports:  # language/imports.py
        out.append(f"matcher imports from the deriver: {', '.join(plan.imports)}")
    out.extend(f"transition: {t.stage.plan.plan_id} in [{', '.join(t.stage.contexts)}] "
               f"{t.action} {t.context}"
               + (f" keyed by {', '.join(t.key_fields)}" if t.key_fields else "")
               for t in plan.transitions)
    for c, gids in plan.context_groups.items():
        out.append(f"context {c}: grouped windows {', '.join(gids)}")
    return "\n".join(out) + "\n"


def explain_text(compiled: Compilation) -> str:
    parts = [
        "== phase 1: query set ==", render_query_set(compiled.query_set),
        "== phase 2: plan before optimization ==", render_plan(compiled.unoptimized),
        "== plan after optimization ==", render_plan(compiled.optimized),
        "== execution ==", render_execution(compiled.execution),
    ]
    if compiled.acep is not None:
        parts += ["== stream transactions (shared tables and rules) ==",
                  render_acep(compiled.acep)]
    return "\n".join(parts)


def _dot_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def plan_dot(plan: AlgebraPlan, name: str, out: list[str]) -> None:
    counter = [0]
    out.append(f'  subgraph "cluster_{name}" {{')
    out.append(f'    label="{name}";')

    def node(op: Op) -> str:
        counter[0] += 1
        nid = f"{name}_{counter[0]}"
        shape = "box" if type(op).__name__ in ("Stream",) else "ellipse"
        out.append(f'    {nid} [label="{_dot_escape(label(op))}", shape={shape}];')
        for k in children(op):
            child = node(k)  # writes the child's subtree first
            out.append(f"    {child} -> {nid};")  # edges follow the event flow
        return nid

    for qid, root in plan.roots:
        top = node(root)
        out.append(f'    {name}_{qid} [label="{qid}", shape=plaintext];')
        out.append(f"    {top} -> {name}_{qid};")
    out.append("  }")


def explain_dot(compiled: Compilation) -> str:
    out = ["digraph caesar {", "  rankdir=BT;", '  node [fontname="Helvetica"];']
    plan_dot(compiled.unoptimized, "before", out)
    plan_dot(compiled.optimized, "after", out)
    out.append("}")
    return "\n".join(out) + "\n"
