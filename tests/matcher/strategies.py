"""Hypothesis strategies: random patterns from the supported constructs and
random event tapes (small domains, repeated timestamps, nulls, partitions)."""

from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from caesar.errors import PlanError
from caesar.plans.expr import Agg, Attr, Binary, Call, Const, Expr, Unary
from caesar.plans.pattern import RUN_STRATEGIES, STRATEGIES, Output, OutputField, PatternPlan
from caesar.services.matcher.reference import validate_plan

from .tapes import comp, plan

TYPES = ("A", "B", "C", "D")

# Wide domains (issue 16): integers where doubles collide (around 2**53) and
# at the ends of the 64-bit range (overflow), DOUBLEs that equal some of them.
P53 = 2**53
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
WIDE_INTS = (0, 1, 3, P53 - 1, P53, P53 + 1, P53 + 2, -P53 - 1, 2**62, 2**62 + 1,
             I64_MAX - 1, I64_MAX, I64_MIN, I64_MIN + 1)
WIDE_FLOATS = (0.5, 1.0, float(P53), float(P53 + 2), 9.2e18, -9.3e18, 2.0**63, 1e300)
WIDE_KEYS = (0, 1, P53, P53 + 1, I64_MIN, I64_MAX)


@st.composite
def scalar_expr(draw, vars_: list[str], depth: int = 2, wide: bool = False) -> Expr:
    """Numeric-ish expression over the given variables."""
    leaves = [st.builds(Const, st.integers(-2, 4)),
              st.builds(Const, st.sampled_from([0.5, 2.0, -1.5]))]
    if wide:
        leaves += [st.builds(Const, st.sampled_from(WIDE_INTS)),
                   st.builds(Const, st.sampled_from(WIDE_FLOATS))]
    if vars_:
        leaves.append(st.builds(Attr, st.sampled_from(vars_), st.sampled_from(["x", "y", "f"])))
    if depth <= 0:
        return draw(st.one_of(leaves))
    kind = draw(st.integers(0, 5))
    if kind <= 2:
        return draw(st.one_of(leaves))
    if kind == 3:
        op = draw(st.sampled_from(["+", "-", "*", "/", "%"]))
        return Binary(op, draw(scalar_expr(vars_, depth - 1, wide)),
                      draw(scalar_expr(vars_, depth - 1, wide)))
    if kind == 4:
        func = draw(st.sampled_from(["abs", "floor", "ceil", "least", "greatest"]))
        n = 2 if func in ("least", "greatest") else 1
        return Call(func, tuple(draw(scalar_expr(vars_, depth - 1, wide)) for _ in range(n)))
    return Unary("-", draw(scalar_expr(vars_, depth - 1, wide)))


@st.composite
def predicate(draw, vars_: list[str], kleene: list[str], depth: int = 1,
              wide: bool = False) -> Expr:
    kind = draw(st.integers(0, 9))
    if kind == 0 and depth > 0:
        op = draw(st.sampled_from(["AND", "OR"]))
        return Binary(op, draw(predicate(vars_, kleene, depth - 1, wide)),
                      draw(predicate(vars_, kleene, depth - 1, wide)))
    if kind == 1 and depth > 0:
        return Unary("NOT", draw(predicate(vars_, kleene, depth - 1, wide)))
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
        bound = draw(st.sampled_from(WIDE_INTS + WIDE_FLOATS)) if wide and draw(st.booleans()) \
            else draw(st.integers(0, 5))
        return Binary(draw(st.sampled_from(["<", "<=", ">", ">=", "=", "!="])), agg,
                      Const(bound))
    op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
    return Binary(op, draw(scalar_expr(vars_, 1, wide)), draw(scalar_expr(vars_, 1, wide)))


@st.composite
def patterns(draw, strategy: str | None = None, wide: bool = False) -> PatternPlan:
    npos = draw(st.integers(1, 3))
    kleene_at = draw(st.sampled_from([None, None] + list(range(npos))))
    comps = []
    pos_vars = []
    for i in range(npos):
        types = tuple(draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=2, unique=True)))
        var = f"p{i}"
        filt = None
        if i == kleene_at and draw(st.booleans()):
            filt = draw(predicate(pos_vars + [var], [var] if draw(st.booleans()) else [], 0,
                                  wide))
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
    where = draw(st.lists(predicate(pos_vars, kleene_vars, wide=wide), max_size=2))
    if draw(st.booleans()):
        where = where[:1]
    for nv in neg_vars:
        if draw(st.booleans()):
            where.append(draw(predicate([nv] + pos_vars, [], 0, wide)))
    equivalence = draw(st.sampled_from([(), ("y",), ("y",)] if wide else [(), (), ("y",)]))
    has_edge_neg = any(c.negated for c in (comps[0], comps[-1]))
    within = draw(st.integers(2, 10)) if has_edge_neg or draw(st.booleans()) else None
    fields = {"first": Attr("p0", "x"), "v": draw(scalar_expr(pos_vars, 1, wide))}
    if kleene_vars:
        fields["n"] = Agg("count", kleene_vars[0], None)
        fields["m"] = Agg(draw(st.sampled_from(["sum", "max", "first", "last", "avg"])),
                          kleene_vars[0], Attr(kleene_vars[0], "x"))
        if wide:
            fields["mf"] = Agg(draw(st.sampled_from(["sum", "min", "avg", "count_distinct"])),
                               kleene_vars[0], Attr(kleene_vars[0], draw(st.sampled_from("xf"))))
    return plan(draw(st.sampled_from(["q1", "q2"])), comps, where=where,
                equivalence=equivalence, within=within,
                strategy=strategy or draw(st.sampled_from(STRATEGIES)), fields=fields)


# Quantifier bounds a Kleene component may get: T+, T*, T?, T{2}, T{1,2}, T{2,}, T{2,3}
BOUNDS = [(1, None), (0, None), (0, 1), (2, 2), (1, 2), (2, None), (2, 3)]


def _quantify(draw, comps: list) -> list:
    """Quantifier bounds and GREEDY on Kleene components; some plain inner
    components become optional (T?)."""
    pos = [i for i, c in enumerate(comps) if not c.negated]
    for k, i in enumerate(pos):
        c = comps[i]
        edge = k in (0, len(pos) - 1)
        if c.kleene:
            lo, hi = draw(st.sampled_from([b for b in BOUNDS if not (edge and b[0] == 0)]))
            comps[i] = dataclasses.replace(c, min_count=lo, max_count=hi,
                                           greedy=draw(st.booleans()))
            if k + 1 < len(pos) and draw(st.booleans()):
                # the next component takes the Kleene's types too: events that
                # can both extend it and bind the next one (greedy matters)
                nxt = comps[pos[k + 1]]
                comps[pos[k + 1]] = dataclasses.replace(
                    nxt, types=tuple(dict.fromkeys(nxt.types + c.types)))
        elif not edge and draw(st.integers(0, 3)) == 0:  # T? (no aggregates read it)
            comps[i] = dataclasses.replace(c, kleene=True, min_count=0, max_count=1)
    return comps


def _run_options(draw, plan: PatternPlan) -> PatternPlan:
    """After-match skip and ON TIMEOUT (run-based strategies)."""
    comps = plan.components
    pos = [i for i, c in enumerate(comps) if not c.negated]
    skip = draw(st.sampled_from(["no_skip", "to_next", "past_last", "to_first", "to_last"]))
    var = draw(st.sampled_from([comps[i].var for i in pos])) \
        if skip in ("to_first", "to_last") else None
    plan = dataclasses.replace(plan, skip=skip, skip_var=var)
    if plan.within is not None and draw(st.booleans()):
        fields = (OutputField("first", Attr("p0", "x")),
                  OutputField("last", Attr(comps[pos[-1]].var, "x")))
        plan = dataclasses.replace(plan, timeout=Output(f"{plan.plan_id}_timeout", fields))
    return plan


@st.composite
def featured_patterns(draw, strategy: str | None = None) -> PatternPlan:
    """A random pattern decorated with the issue-16 features: quantifier
    bounds, optional components, GREEDY, AND/OR alternatives, [attr] EXCEPT
    NOT, and for run-based strategies after-match skip and ON TIMEOUT."""
    base = draw(patterns(strategy))
    comps = _quantify(draw, list(base.components))
    plan = dataclasses.replace(base, components=tuple(comps))
    if draw(st.integers(0, 2)) == 0 and len(comps) > 1:
        # AND/OR: the plan itself plus a reordering or a sub-sequence of it
        order = draw(st.permutations(range(len(comps))))
        if draw(st.booleans()):
            order = order[:draw(st.integers(1, len(comps)))]
        plan = dataclasses.replace(plan, alternatives=(tuple(range(len(comps))), tuple(order)))
    if plan.equivalence and draw(st.booleans()):
        plan = dataclasses.replace(plan, equivalence_negated=False)
    if plan.strategy in RUN_STRATEGIES:
        plan = _run_options(draw, plan)
    try:
        validate_plan(plan)
    except PlanError:
        # an alternative starts or ends optional, or a skip meets an end
        # negation: drop the alternatives / skip rather than the example
        plan = dataclasses.replace(plan, alternatives=())
        try:
            validate_plan(plan)
        except PlanError:
            plan = dataclasses.replace(plan, skip="no_skip", skip_var=None)
            try:
                validate_plan(plan)
            except PlanError:  # partition contiguity meets [attr] EXCEPT NOT
                plan = dataclasses.replace(plan, equivalence_negated=True)
    validate_plan(plan)
    return plan


@st.composite
def tapes(draw, max_events: int = 14, wide: bool = False) -> list[tuple]:
    """Event rows. `wide`: x from WIDE_INTS (or any int64), y (the
    equivalence attribute) from keys that collide as doubles, f from
    WIDE_FLOATS, so exactness over the whole 64-bit range is exercised."""
    n = draw(st.integers(3, max_events))
    ts = 0
    rows = []
    xs = st.one_of(st.sampled_from(WIDE_INTS), st.integers(I64_MIN, I64_MAX)) if wide \
        else st.integers(0, 3)
    ys = st.sampled_from(WIDE_KEYS) if wide else st.integers(0, 1)
    fs = st.sampled_from(WIDE_FLOATS + (None, 2.5)) if wide \
        else st.sampled_from([0.5, 1.0, 2.5, None])
    for _ in range(n):
        ts += draw(st.sampled_from([0, 1, 1, 1, 2, 3]))
        attrs = {
            "x": draw(st.one_of(xs, st.none())) if draw(st.integers(0, 9)) == 0
            else draw(xs),
            "y": draw(ys),
            "s": draw(st.sampled_from(["p", "q", None])),
            "f": draw(fs),
            "part": draw(st.sampled_from([0, 0, 0, 1])),
        }
        rows.append((draw(st.sampled_from(TYPES)), ts, attrs))
    return rows
