"""Checks of the pattern features Esper and Flink CEP users rely on (issue
16), kept apart from the base pattern checks (query_checks.py): quantifier
bounds, AND/OR of sub-patterns (as alternatives: one sequence each),
after-match skip strategies, timed-out partial matches (ON TIMEOUT), output
rate limiting (OUTPUT ... EVERY), `[attr] EXCEPT NOT`, and the spelling of
selection strategies."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from caesar.errors import SourcePosition
from caesar.language import ast
from caesar.language.errors import (
    DuplicateNameError,
    ModelStructureError,
    PatternError,
    UnknownNameError,
    WindowError,
)
from caesar.language.expressions import PatternEnv, Reading, default_alias
from caesar.plans import expr as ir
from caesar.plans.execution import OutputRate
from caesar.plans.pattern import RUN_STRATEGIES, STRATEGIES, Skip, Strategy, is_strategy

if TYPE_CHECKING:
    from caesar.language.semantics import ModelChecker

# AND of n items has up to n! orders: beyond this many alternatives a
# pattern is rejected (each alternative is a plan the engine runs).
MAX_ALTERNATIVES = 64
SKIP_KINDS: dict[str, Skip] = {"no_skip": "no_skip", "to_next": "to_next",
                               "past_last": "past_last", "to_first": "to_first",
                               "to_last": "to_last"}


def strategy_name(ck: ModelChecker, name: str, pos: SourcePosition) -> Strategy:
    """A selection strategy as written, or an error that says how to spell it."""
    norm = name.lower()
    if is_strategy(norm):
        return norm
    fixed = norm.replace("-", "_")
    if is_strategy(fixed):
        raise ck.err(PatternError, f"strategy names are written with underscores: {fixed}",
                     pos, found=name, expected=fixed)
    close = difflib.get_close_matches(fixed, STRATEGIES, n=1)
    raise ck.err(PatternError, f"unknown event selection strategy {name}", pos, found=name,
                 expected=close[0] if close else ", ".join(STRATEGIES))


def check_quantifier(ck: ModelChecker, c: ast.Component) -> None:
    if not c.kleene:
        return
    lo, hi = c.min_count, c.max_count
    text = f"{{{lo},{'' if hi is None else hi}}}"
    if hi is not None and hi < lo:
        raise ck.err(PatternError, "a repetition's maximum is below its minimum", c.pos,
                     found=text, expected=f"{{{lo},m}} with m >= {lo}")
    if hi == 0:
        raise ck.err(PatternError, "a repetition of at most 0 events matches nothing", c.pos,
                     found=text, expected="at least 1 as the maximum (T? for optional)")


def alternatives(ck: ModelChecker, pattern: ast.Pattern) -> tuple[tuple[int, ...], ...]:
    """AND/OR as alternative sequences of component indices (empty for a
    plain sequence); no negation inside AND/OR, no alternative that starts
    or ends with an optional component."""
    index = {id(c): i for i, c in enumerate(pattern.components)}
    comps = pattern.components
    if pattern.tree is None:
        alts = [list(range(len(comps)))]
    else:
        alts = list(_alternatives(ck, pattern.tree, index, inside=False))
    for alt in alts:
        positive = [comps[i] for i in alt if not comps[i].negated]
        if not positive:
            raise ck.err(PatternError, "an alternative of the pattern has no positive "
                         "component", pattern.pos, expected="a component that is not NOT")
        for c in (positive[0], positive[-1]):
            if c.kleene and c.min_count == 0:
                raise ck.err(PatternError, "an optional component cannot start or end a "
                             "pattern (or one of its AND/OR alternatives): a match needs "
                             "its first and last events", c.pos,
                             found=f"{c.types[0]}{'?' if c.max_count == 1 else '*'}",
                             expected="T+ or T{n,...} with n >= 1 there, or T? between two "
                             "components")
    if pattern.tree is None:
        return ()
    return tuple(tuple(a) for a in alts)


def _alternatives(ck: ModelChecker, node: ast.Component | ast.PatternGroup,
                  index: dict[int, int], inside: bool) -> Iterator[list[int]]:
    if isinstance(node, ast.Component):
        if node.negated and inside:
            raise ck.err(PatternError, "NOT inside AND(...) or OR(...) is not supported: the "
                         "interval it forbids events in would differ between the "
                         "alternatives", node.pos, found=f"NOT {node.types[0]}",
                         expected="NOT in the SEQ around the AND/OR")
        yield [index[id(node)]]
        return
    result: list[list[int]] = [[]]
    if node.op == "OR":
        result = [a for item in node.items for a in _alternatives(ck, item, index, True)]
    else:
        for item in node.items:
            subs = list(_alternatives(ck, item, index, inside or node.op == "AND"))
            if node.op == "SEQ":
                result = [a + b for a in result for b in subs]
            else:
                result = [m for a in result for b in subs for m in _interleavings(a, b)]
            if len(result) > MAX_ALTERNATIVES:
                break
    if len(result) > MAX_ALTERNATIVES:
        raise ck.err(PatternError, f"this pattern has more than {MAX_ALTERNATIVES} alternative "
                     "orders (AND of n parts has n! of them)", node.pos,
                     found=f"{node.op} of {len(node.items)} parts",
                     expected="fewer parts in AND(...), or a SEQ where the order is known")
    yield from result


def _interleavings(a: list[int], b: list[int]) -> Iterator[list[int]]:
    """Every merge of a and b that keeps the order within each."""
    if not a or not b:
        yield a + b
        return
    for rest in _interleavings(a[1:], b):
        yield [a[0]] + rest
    for rest in _interleavings(a, b[1:]):
        yield [b[0]] + rest


def check_alternatives_alone(ck: ModelChecker, q: ast.Query,
                             alts: tuple[tuple[int, ...], ...]) -> None:
    """AND/OR runs each alternative as its own sequence: an after-match skip
    or a timeout would act per alternative (a partial match of one
    alternative timing out while another matched), so they are not combined."""
    if not alts:
        return
    if q.skip is not None and q.skip.kind != "no_skip":
        raise ck.err(PatternError, "AFTER MATCH SKIP cannot be combined with AND(...)/OR(...):"
                     " each alternative is matched on its own", q.skip.pos,
                     found="AND/OR with AFTER MATCH SKIP",
                     expected="one query per alternative, or no skip strategy")
    if q.timeout is not None:
        raise ck.err(PatternError, "ON TIMEOUT cannot be combined with AND(...)/OR(...): each "
                     "alternative's partial matches would time out on their own",
                     q.timeout.pos, found="AND/OR with ON TIMEOUT",
                     expected="one query per alternative, or no ON TIMEOUT")


def equivalence_negated(ck: ModelChecker, where: ast.ExprNode | None,
                        parts: list[ast.ExprNode], strategy: Strategy = "skip_till_any_match",
                        negation: bool = False) -> bool:
    """False when the equivalence tests say EXCEPT NOT (all of them alike)."""
    tests = [p for p in parts if isinstance(p, ast.Equivalence)]
    kinds = {t.positive_only for t in tests}
    if len(kinds) > 1:
        t = next(t for t in tests if t.positive_only)
        raise ck.err(PatternError, "equivalence tests of one pattern either all compare the "
                     "negated events or none does", t.pos, found="[...] and [...] EXCEPT NOT",
                     expected="EXCEPT NOT on every [attr], or on none")
    if tests and tests[0].positive_only and negation and strategy == "partition_contiguity":
        # the negated events of every [attr] value would have to meet every
        # run, while partition contiguity keeps each value's runs apart
        raise ck.err(PatternError, "[attr] EXCEPT NOT with a negation is not supported with "
                     "partition_contiguity", tests[0].pos, found="[...] EXCEPT NOT",
                     expected="[attr] (negated events compared too)")
    return not (tests and tests[0].positive_only)


def skip_strategy(ck: ModelChecker, q: ast.Query, strategy: Strategy,
                  scope: dict[str, ast.Component]) -> tuple[Skip, str | None]:
    clause = q.skip
    if clause is None or clause.kind == "no_skip":
        return "no_skip", None
    if strategy not in RUN_STRATEGIES:
        raise ck.err(PatternError, "an after-match skip strategy needs a run-based strategy: "
                     "under skip_till_any_match partial matches are not kept one by one",
                     clause.pos, found=f"STRATEGY {strategy}",
                     expected="STRATEGY skip_till_next_match or STRATEGY strict_contiguity")
    if strategy == "partition_contiguity":
        # skip orders matches across the whole partition, while each [attr]
        # value's runs live on their own under partition contiguity
        raise ck.err(PatternError, "an after-match skip strategy is not supported with "
                     "partition_contiguity (its runs are kept per [attr] value)", clause.pos,
                     found="STRATEGY partition_contiguity",
                     expected="STRATEGY skip_till_next_match or STRATEGY strict_contiguity")
    if clause.var is not None:
        comp = scope.get(clause.var)
        if comp is None or comp.negated:
            positive = [v for v, c in scope.items() if not c.negated]
            raise ck.err(UnknownNameError, f"AFTER MATCH SKIP TO {clause.var}: not a positive "
                         "pattern variable", clause.pos, found=clause.var,
                         expected=", ".join(positive))
    comps = q.pattern.components if q.pattern is not None else ()
    if comps and comps[-1].negated:
        raise ck.err(PatternError, "an after-match skip strategy cannot be combined with a "
                     "negation at the end of the pattern (its matches are only final when "
                     "the window closes)", clause.pos, found="NOT at the end",
                     expected="no AFTER MATCH SKIP, or no end negation")
    return SKIP_KINDS[clause.kind], clause.var


def timeout_fields(ck: ModelChecker, q: ast.Query, env: PatternEnv, strategy: Strategy,
                   within: int | None) -> tuple[str | None, tuple[tuple[str, ir.Expr], ...],
                                                dict[str, str]]:
    """ON TIMEOUT DERIVE T(items): the type, its fields and their types."""
    clause = q.timeout
    if clause is None:
        return None, (), {}
    if within is None or strategy not in RUN_STRATEGIES:
        raise ck.err(PatternError, "ON TIMEOUT needs WITHIN and a run-based strategy (under "
                     "skip_till_any_match partial matches are not kept one by one)",
                     clause.pos, found="no WITHIN" if within is None else f"STRATEGY {strategy}",
                     expected="WITHIN <duration> STRATEGY skip_till_next_match")
    if clause.derive_type == q.derive_type:
        raise ck.err(ModelStructureError, "the timeout event needs a type of its own",
                     clause.pos, found=clause.derive_type, expected="another type name")
    fields: dict[str, ir.Expr] = {}
    types: dict[str, str] = {}
    for item in clause.items:
        ex, t = env.compile(item.expr, Reading(output=True))
        name = item.alias or default_alias(item.expr)
        if name is None:
            raise ck.err(ModelStructureError, "this ON TIMEOUT field needs a name", item.pos,
                         found="an expression", expected="<expr> AS <name>")
        if name in fields:
            raise ck.err(DuplicateNameError, f"ON TIMEOUT field {name} is given twice",
                         item.pos, found=name, expected="distinct field names (use AS)")
        fields[name] = ex
        types[name] = t
    return clause.derive_type, tuple(fields.items()), types


def output_rate(ck: ModelChecker, q: ast.Query) -> OutputRate | None:
    r = q.output_rate
    if r is None:
        return None
    every = ck.ticks(r.every, "OUTPUT EVERY")
    kind = {"ALL": "all", "FIRST": "first", "LAST": "last"}[r.kind]
    return OutputRate(kind, every)  # type: ignore[arg-type]


def count_or_session_window(ck: ModelChecker, w: ast.Window) -> tuple[int, int]:
    """(size, slide) of WINDOW COUNT n [EVERY m] (events) or (gap, gap) of
    WINDOW SESSION GAP d (ticks)."""
    if w.kind == "SESSION":
        gap = ck.ticks(w.size, "WINDOW SESSION GAP")
        return gap, gap
    size = w.size.amount
    slide = w.slide.amount if w.slide is not None else size
    for n, what in ((size, "WINDOW COUNT"), (slide, "WINDOW COUNT ... EVERY")):
        if n <= 0:
            raise ck.err(WindowError, f"{what} must be at least 1 event", w.pos, found=str(n),
                         expected="a count > 0")
    if slide > size:
        raise ck.err(WindowError, "a count window cannot slide by more than its size", w.pos,
                     found=f"EVERY {slide}", expected=f"at most {size} events")
    return size, slide
