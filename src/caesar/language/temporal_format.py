"""Printing the TPStream parts of a model back to text (used by formatter.py;
`parse(format_model(m)) == m`)."""

from __future__ import annotations

from collections.abc import Callable

from caesar.language import ast
from caesar.language.temporal_parse import ALLEN_SPELLING


def format_situation(s: ast.SituationDef, expr: Callable[[ast.ExprNode], str],
                     duration: Callable[[ast.Duration], str]) -> str:
    if s.condition is None:
        return s.name
    text = f"{s.name} AS {expr(s.condition)}"
    if s.between and s.at_least is not None and s.at_most is not None:
        return text + f" BETWEEN {duration(s.at_least)} AND {duration(s.at_most)}"
    if s.at_least is not None:
        text += f" AT LEAST {duration(s.at_least)}"
    if s.at_most is not None:
        text += f" AT MOST {duration(s.at_most)}"
    return text


def format_relation(r: ast.TemporalRelation) -> str:
    return f"{r.left} {ALLEN_SPELLING[r.relation]} {r.right}"


def temporal_lines(t: ast.TemporalPattern, expr: Callable[[ast.ExprNode], str],
                   duration: Callable[[ast.Duration], str]) -> list[str]:
    """FROM / DEFINE / PATTERN lines of a temporal query (WITHIN is printed by the caller)."""
    lines = []
    if t.sources:
        lines.append("FROM " + ", ".join(s.type + (f" {s.alias}" if s.alias else "")
                                         for s in t.sources))
    defs = [format_situation(s, expr, duration) for s in t.situations]
    lines += [("DEFINE " if i == 0 else "  ") + d + ("," if i < len(defs) - 1 else "")
              for i, d in enumerate(defs)]
    if t.single is not None:
        lines.append(f"PATTERN {t.single}")
    for i, c in enumerate(t.constraints):
        alts = "; ".join(format_relation(r) for r in c.alternatives)
        lines.append(("PATTERN " if i == 0 else "  AND ") + alts)
    return lines


def format_edge(e: ast.SituationEdge) -> str:
    return f"ON {e.edge} OF {e.situation}"
