"""Checks of one query's body, a pattern (SASE/Cayuga: components, WHERE,
equivalence, WITHIN, strategy, Kleene aggregates) or a windowed aggregation,
producing its `CheckedQuery`. The model-level checker (semantics.py) calls
these once a query's input types are known."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from caesar.language import ast
from caesar.language import pattern_features as features
from caesar.language.checked import (
    AggregateBody,
    CheckedQuery,
    Conjunct,
    EventType,
    PatternBody,
    Transition,
    marker_type,
)
from caesar.language.errors import (
    DuplicateNameError,
    ModelStructureError,
    ModelTypeError,
    PatternError,
    UnknownNameError,
    WindowError,
)
from caesar.language.expressions import (
    AGGREGATES,
    AggregateEnv,
    OutputEnv,
    PatternEnv,
    Reading,
    default_alias,
    describe,
    split_and,
)
from caesar.plans import expr as ir
from caesar.plans.pattern import PatternComponent

if TYPE_CHECKING:
    from caesar.language.semantics import ModelChecker


def expected_names(names: Iterable[str]) -> str:
    listed = sorted(set(names))
    return ", ".join(listed) if listed else "a declared name"


def check_pattern(ck: ModelChecker, qid: str, q: ast.Query, home: str | None,
                  contexts: tuple[str, ...], transition: Transition | None,
                  types: dict[str, EventType]) -> CheckedQuery:
    assert q.pattern is not None
    comps = q.pattern.components
    scope = pattern_scope(ck, q.pattern, types)
    within = pattern_within(ck, q)
    alts = features.alternatives(ck, q.pattern)
    env = PatternEnv(ck, scope, list(scope), types)
    built, conjuncts = component_filters(env, scope)
    where, equivalence = where_conjuncts(env, q.where)
    conjuncts += where
    check_negated_reads(ck, conjuncts, {v for v, c in scope.items() if c.negated})
    strategy = ck.strategy(q.strategy, q.strategy_pos) if q.strategy else ck.default_strategy
    skip, skip_var = features.skip_strategy(ck, q, strategy, scope)
    features.check_alternatives_alone(ck, q, alts)
    timeout_type, timeout, timeout_schema = features.timeout_fields(ck, q, env, strategy, within)
    if transition is not None:
        output_type = marker_type(transition.action, transition.target)
        fields = key_fields(q, env)
    else:
        output_type = q.derive_type or ""
        fields = output_fields(ck, q, env)
    body = PatternBody(components=tuple(built), conjuncts=tuple(conjuncts),
                       equivalence=tuple(equivalence), within=within, strategy=strategy,
                       alternatives=alts, skip=skip, skip_var=skip_var,
                       timeout_type=timeout_type, timeout_fields=timeout,
                       equivalence_negated=features.equivalence_negated(
                           ck, q.where, split_and(q.where), strategy,
                           any(c.negated for c in comps)))
    return CheckedQuery(qid=qid, source=q, home=home, contexts=contexts,
                        output_type=output_type, output_fields=fields,
                        input_types=tuple(dict.fromkeys(t for c in comps for t in c.types)),
                        body=body, transition=transition, output_schema=dict(env.output_types),
                        output_rate=features.output_rate(ck, q), timeout_schema=timeout_schema)


def pattern_scope(ck: ModelChecker, pattern: ast.Pattern,
                  types: dict[str, EventType]) -> dict[str, ast.Component]:
    """The pattern's variables (named after the type where not written), in
    component order; at least one positive."""
    scope: dict[str, ast.Component] = {}
    for i, c in enumerate(pattern.components):
        var = c.var or (c.types[0] if len(c.types) == 1 and not c.any_of else f"any{i + 1}")
        if var in scope:
            raise ck.err(DuplicateNameError, f"pattern variable {var} is bound twice", c.pos,
                         found=var, expected="a distinct variable per component "
                         "(write e.g. SEQ(A a1, A a2))")
        for t in c.types:
            if t not in types:
                raise ck.err(UnknownNameError, f"unknown event type {t}", c.pos, found=t,
                             expected=expected_names(list(types)))
        if c.negated and c.kleene:
            raise ck.err(PatternError, "a negated component cannot be a Kleene closure",
                         c.pos, found=f"NOT {'/'.join(c.types)}+", expected="NOT T v")
        features.check_quantifier(ck, c)
        scope[var] = c
    if all(c.negated for c in pattern.components):
        raise ck.err(PatternError, "a pattern needs at least one positive component",
                     pattern.pos, found="only negated components", expected="SEQ(..., T v, ...)")
    return scope


def pattern_within(ck: ModelChecker, q: ast.Query) -> int | None:
    """WITHIN in ticks; required when a negation starts or ends the sequence."""
    assert q.pattern is not None
    comps = q.pattern.components
    within = ck.ticks(q.within, "WITHIN") if q.within is not None else None
    if within is None and (comps[0].negated or comps[-1].negated):
        c = comps[0] if comps[0].negated else comps[-1]
        raise ck.err(PatternError, "a negation at the start or end of a sequence needs WITHIN "
                     "to bound the time it covers", c.pos, found="no WITHIN",
                     expected="WITHIN <duration>")
    return within


def component_filters(env: PatternEnv, scope: dict[str, ast.Component]
                      ) -> tuple[list[PatternComponent], list[Conjunct]]:
    """The components with their FILTERs: a Kleene component's is checked on
    every iteration; any other's are conjuncts on its variable."""
    built: list[PatternComponent] = []
    conjuncts: list[Conjunct] = []
    for var, c in scope.items():
        iteration_filter = None
        if c.filter is not None and c.kleene:
            ex, t = env.compile(c.filter, Reading(iteration_of=var))
            env.expect_bool(t, c.filter)
            iteration_filter = ex
        elif c.filter is not None:
            for part in split_and(c.filter):
                ex, t = env.compile(part)
                env.expect_bool(t, part)
                conjuncts.append(Conjunct(ex, part.pos, var))
        built.append(PatternComponent(var=var, types=c.types, negated=c.negated,
                                      kleene=c.kleene, iteration_filter=iteration_filter,
                                      min_count=c.min_count if c.kleene else 1,
                                      max_count=c.max_count if c.kleene else None,
                                      greedy=c.greedy))
    return built, conjuncts


def where_conjuncts(env: PatternEnv, where: ast.ExprNode | None
                    ) -> tuple[list[Conjunct], list[str]]:
    """WHERE split on AND: the conditions and the equivalence tests [attr]."""
    conjuncts: list[Conjunct] = []
    equivalence: list[str] = []
    for part in split_and(where):
        if isinstance(part, ast.Equivalence):
            for attr in part.attrs:
                env.check_equivalence(attr, part)
                if attr not in equivalence:
                    equivalence.append(attr)
            continue
        ex, t = env.compile(part)
        env.expect_bool(t, part)
        conjuncts.append(Conjunct(ex, part.pos))
    return conjuncts, equivalence


def check_negated_reads(ck: ModelChecker, conjuncts: list[Conjunct], negated: set[str]) -> None:
    """A condition is checked against one candidate event of a negation."""
    for cj in conjuncts:
        read = ir.variables(cj.expr) & negated
        if len(read) > 1:
            raise ck.err(PatternError, "a WHERE conjunct reads more than one negated variable, "
                         "so it cannot be checked against one candidate event", cj.pos,
                         found=", ".join(sorted(read)),
                         expected="at most one negated variable per AND-separated condition")


def key_fields(q: ast.Query, env: PatternEnv) -> tuple[tuple[str, ir.Expr], ...]:
    """KEYED BY: the instance key, carried as the marker's fields key1, key2, ..."""
    out = []
    for i, node in enumerate(q.instance_key, start=1):
        ex, t = env.compile(node, Reading(output=True))
        env.output_types[f"key{i}"] = t
        out.append((f"key{i}", ex))
    return tuple(out)


def output_fields(ck: ModelChecker, q: ast.Query, env: PatternEnv) -> tuple[tuple[str, ir.Expr], ...]:
    out: dict[str, ir.Expr] = {}
    for item in q.items:
        ex, t = env.compile(item.expr, Reading(output=True))
        name = item.alias or default_alias(item.expr)
        if name is None:
            raise ck.err(ModelStructureError, "this DERIVE field needs a name", item.pos,
                           found="an expression", expected="<expr> AS <name>")
        if name in out:
            raise ck.err(DuplicateNameError, f"DERIVE field {name} is given twice", item.pos,
                           found=name, expected="distinct field names (use AS)")
        out[name] = ex
        env.output_types[name] = t
    return tuple(out.items())


def check_aggregate(ck: ModelChecker, qid: str, q: ast.Query, home: str | None,
                    contexts: tuple[str, ...], types: dict[str, EventType]) -> CheckedQuery:
    assert q.source is not None and q.window is not None
    source = types[q.source]
    if q.window.kind in ("COUNT", "SESSION"):
        size, slide = features.count_or_session_window(ck, q.window)
    else:
        size, slide = window_ticks(ck, q.window)
    for g in q.group_by:
        if g not in source.fields:
            raise ck.err(UnknownNameError, f"GROUP BY attribute {g} is not an attribute of "
                         f"{source.name}", q.pos, found=g,
                         expected=", ".join(source.fields))
    env = AggregateEnv(ck, source, q.source_var)
    where: list[Conjunct] = []
    for part in split_and(q.where):
        ex, t = env.compile(part)
        env.expect_bool(t, part)
        where.append(Conjunct(ex, part.pos))
    aggs, out_types = aggregate_outputs(ck, q, env, source)
    having = having_conditions(ck, q.having, out_types)
    fields = tuple((n, ir.Attr(None, n)) for n in out_types)
    window = {"COUNT": "count", "SESSION": "session"}.get(q.window.kind, "time")
    body = AggregateBody(size=size, slide=slide, group_by=q.group_by, aggregates=tuple(aggs),
                         conjuncts=tuple(where), having=tuple(having),
                         window=window)  # type: ignore[arg-type]
    return CheckedQuery(qid=qid, source=q, home=home, contexts=contexts,
                        output_type=q.derive_type or "", output_fields=fields,
                        input_types=(source.name,), body=body, output_schema=out_types,
                        output_rate=features.output_rate(ck, q))


def window_ticks(ck: ModelChecker, w: ast.Window) -> tuple[int, int]:
    """(size, slide) of a WINDOW in ticks; a tumbling window slides by its size."""
    size = ck.ticks(w.size, "WINDOW size")
    slide = ck.ticks(w.slide, "WINDOW slide") if w.slide is not None else size
    if slide > size:
        raise ck.err(WindowError, "a sliding window cannot slide by more than its size",
                     w.slide.pos if w.slide else w.pos, found=f"EVERY {slide} ticks",
                     expected=f"at most {size} ticks")
    return size, slide


def aggregate_outputs(ck: ModelChecker, q: ast.Query, env: AggregateEnv, source: EventType
                      ) -> tuple[list[tuple[str, ir.AggFunc, ir.Expr | None]], dict[str, str]]:
    """The aggregates (name, function, argument) and the output fields' types:
    the GROUP BY attributes, then the aggregates."""
    aggs: list[tuple[str, ir.AggFunc, ir.Expr | None]] = []
    out_types: dict[str, str] = {g: source.fields[g] for g in q.group_by}
    for item in q.items:
        name = item.alias or default_alias(item.expr)
        e = item.expr
        if isinstance(e, ast.Ref) and e.name in q.group_by and \
                (e.var is None or e.var == q.source_var):
            if name != e.name:
                raise ck.err(ModelStructureError, "a GROUP BY attribute keeps its name in the "
                             "output", item.pos, found=f"AS {name}", expected=e.name)
            continue
        if not (isinstance(e, ast.CallExpr) and e.func in AGGREGATES - {"first", "last"}):
            raise ck.err(ModelStructureError, "an aggregation query derives aggregates and "
                         "GROUP BY attributes only", item.pos, found=describe(e),
                         expected="count(*), count(DISTINCT a), sum(a), avg(a), min(a), "
                         "max(a) or a GROUP BY attribute")
        if name is None:
            raise ck.err(ModelStructureError, "this aggregate needs a name", item.pos,
                         expected="<aggregate> AS <name>")
        if name in out_types:
            raise ck.err(DuplicateNameError, f"output field {name} is given twice", item.pos,
                         found=name, expected="distinct output names")
        func, arg, typ = env.aggregate(e)
        aggs.append((name, func, arg))
        out_types[name] = typ
    return aggs, out_types


def having_conditions(ck: ModelChecker, having: ast.ExprNode | None,
                      out_types: dict[str, str]) -> list[ir.Expr]:
    """HAVING split on AND, over the output fields."""
    out: list[ir.Expr] = []
    for part in split_and(having):
        ex, t = OutputEnv(ck, out_types).compile(part)
        if t != "bool":
            raise ck.err(ModelTypeError, "HAVING must be a condition", part.pos, found=t,
                         expected="bool")
        out.append(ex)
    return out
