"""Hypothesis strategies: random patterns from the supported constructs and
random event tapes (small domains, repeated timestamps, nulls, partitions)."""

from __future__ import annotations

from hypothesis import strategies as st

from caesar.plans.expr import Agg, Attr, Binary, Call, Const, Expr, Unary
from caesar.plans.pattern import STRATEGIES, PatternPlan

from .tapes import comp, plan

TYPES = ("A", "B", "C", "D")


@st.composite
def scalar_expr(draw, vars_: list[str], depth: int = 2) -> Expr:
    """Numeric-ish expression over the given variables."""
    leaves = [st.builds(Const, st.integers(-2, 4)),
              st.builds(Const, st.sampled_from([0.5, 2.0, -1.5]))]
    if vars_:
        leaves.append(st.builds(Attr, st.sampled_from(vars_), st.sampled_from(["x", "y", "f"])))
    if depth <= 0:
        return draw(st.one_of(leaves))
    kind = draw(st.integers(0, 5))
    if kind <= 2:
        return draw(st.one_of(leaves))
    if kind == 3:
        op = draw(st.sampled_from(["+", "-", "*", "/", "%"]))
        return Binary(op, draw(scalar_expr(vars_, depth - 1)), draw(scalar_expr(vars_, depth - 1)))
    if kind == 4:
        func = draw(st.sampled_from(["abs", "floor", "ceil", "least", "greatest"]))
        n = 2 if func in ("least", "greatest") else 1
        return Call(func, tuple(draw(scalar_expr(vars_, depth - 1)) for _ in range(n)))
    return Unary("-", draw(scalar_expr(vars_, depth - 1)))


@st.composite
def predicate(draw, vars_: list[str], kleene: list[str], depth: int = 1) -> Expr:
    kind = draw(st.integers(0, 9))
    if kind == 0 and depth > 0:
        op = draw(st.sampled_from(["AND", "OR"]))
        return Binary(op, draw(predicate(vars_, kleene, depth - 1)),
                      draw(predicate(vars_, kleene, depth - 1)))
    if kind == 1 and depth > 0:
        return Unary("NOT", draw(predicate(vars_, kleene, depth - 1)))
    if kind == 2 and vars_:
        v = draw(st.sampled_from(vars_))
        return Binary(draw(st.sampled_from(["=", "!="])), Attr(v, "s"),
                      Const(draw(st.sampled_from(["p", "q"]))))
    if kind == 3 and kleene:
        k = draw(st.sampled_from(kleene))
        func = draw(st.sampled_from(["count", "count_distinct", "sum", "avg", "min", "max",
                                     "first", "last"]))
        arg = None if func == "count" and draw(st.booleans()) else Attr(k, draw(
            st.sampled_from(["x", "y", "f", "s"] if func in ("count", "count_distinct",
                                                          "first", "last") else ["x", "f"])))
        agg = Agg(func, k, arg)
        if arg is not None and arg.name == "s":
            return Binary("=", agg, Const("p")) if func in ("first", "last") else \
                Binary(">=", agg, Const(draw(st.integers(0, 3))))
        return Binary(draw(st.sampled_from(["<", "<=", ">", ">=", "=", "!="])), agg,
                      Const(draw(st.integers(0, 5))))
    op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
    return Binary(op, draw(scalar_expr(vars_, 1)), draw(scalar_expr(vars_, 1)))


@st.composite
def patterns(draw, strategy: str | None = None) -> PatternPlan:
    npos = draw(st.integers(1, 3))
    kleene_at = draw(st.sampled_from([None, None] + list(range(npos))))
    comps = []
    pos_vars = []
    for i in range(npos):
        types = tuple(draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=2, unique=True)))
        var = f"p{i}"
        filt = None
        if i == kleene_at and draw(st.booleans()):
            filt = draw(predicate(pos_vars + [var], [var] if draw(st.booleans()) else [], 0))
        comps.append(comp(var, *types, kleene=(i == kleene_at), filt=filt))
        pos_vars.append(var)
    # negations anywhere (start, middle, end)
    nneg = draw(st.integers(0, 2))
    neg_vars = []
    for j in range(nneg):
        at = draw(st.integers(0, len(comps)))
        var = f"n{j}"
        comps.insert(at, comp(var, draw(st.sampled_from(TYPES)), neg=True))
        neg_vars.append(var)
    kleene_vars = [f"p{kleene_at}"] if kleene_at is not None else []
    where = draw(st.lists(predicate(pos_vars, kleene_vars), max_size=2))
    if draw(st.booleans()):
        where = where[:1]
    for nv in neg_vars:
        if draw(st.booleans()):
            where.append(draw(predicate([nv] + pos_vars, [], 0)))
    equivalence = draw(st.sampled_from([(), (), ("y",)]))
    has_edge_neg = any(c.negated for c in (comps[0], comps[-1]))
    within = draw(st.integers(2, 10)) if has_edge_neg or draw(st.booleans()) else None
    fields = {"first": Attr("p0", "x"), "v": draw(scalar_expr(pos_vars, 1))}
    if kleene_vars:
        fields["n"] = Agg("count", kleene_vars[0], None)
        fields["m"] = Agg(draw(st.sampled_from(["sum", "max", "first", "last", "avg"])),
                          kleene_vars[0], Attr(kleene_vars[0], "x"))
    return plan(draw(st.sampled_from(["q1", "q2"])), comps, where=where,
                equivalence=equivalence, within=within,
                strategy=strategy or draw(st.sampled_from(STRATEGIES)), fields=fields)


@st.composite
def tapes(draw, max_events: int = 14) -> list[tuple]:
    n = draw(st.integers(3, max_events))
    ts = 0
    rows = []
    for _ in range(n):
        ts += draw(st.sampled_from([0, 1, 1, 1, 2, 3]))
        attrs = {
            "x": draw(st.one_of(st.integers(0, 3), st.none())) if draw(st.integers(0, 9)) == 0
            else draw(st.integers(0, 3)),
            "y": draw(st.integers(0, 1)),
            "s": draw(st.sampled_from(["p", "q", None])),
            "f": draw(st.sampled_from([0.5, 1.0, 2.5, None])),
            "part": draw(st.sampled_from([0, 0, 0, 1])),
        }
        rows.append((draw(st.sampled_from(TYPES)), ts, attrs))
    return rows
