"""User-defined functions in pattern plans: the Cython engine (its VM calls
into Python) produces exactly the reference's output for random patterns
that call them in WHERE (pushed-down filters, cross-variable checks,
negation checks), in DERIVE fields and in Kleene aggregates, including calls
that raise or return a wrong type (missing values, reported as failures)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caesar.events.batch import StringPool
from caesar.plans.expr import Agg, Attr, Binary, Call, Const, Expr
from caesar.plans.functions import FunctionFailure, define
from caesar.plans.pattern import STRATEGIES, Output, OutputField, PatternPlan
from caesar.services.matcher.engine import CythonEngine
from caesar.services.matcher.reference import ReferenceEngine

from .strategies import patterns, tapes
from .tapes import comp, multiset, plan, tape
from .test_equivalence import _drive

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


def mix(x: int, f: float) -> float:
    if x == 3:
        raise ValueError("three")
    return x * 2.0 - f


def tag(x: int, s: str) -> str:
    if x == 2:
        wrong: Any = 7  # a wrong type: the call fails
        return wrong  # type: ignore[no-any-return]
    return f"{s}{x}"


def even(x: int) -> bool:
    return x % 2 == 0


MIX, TAG, EVEN = define("mix", mix), define("tag", tag), define("even", even)


def _mix(a: str, b: str) -> Expr:
    return Call("mix", (Attr(a, "x"), Attr(b, "f")), MIX)


@st.composite
def udf_plans(draw, strategy: str) -> PatternPlan:
    base = draw(patterns(strategy))
    plain = [c.var for c in base.components if not c.negated and not c.kleene]
    kleene = [c.var for c in base.components if c.kleene]
    negated = [c.var for c in base.components if c.negated]
    where = list(base.where)
    fields = list(base.output.fields) if base.output else []
    if plain:
        v = draw(st.sampled_from(plain))
        w = draw(st.sampled_from(plain))
        where += draw(st.lists(st.sampled_from([
            Binary(">", _mix(v, v), Const(0.5)),
            Call("even", (Attr(v, "x"),), EVEN),
            Binary("=", Call("tag", (Attr(v, "x"), Attr(v, "s")), TAG), Const("p1")),
            Binary("<", _mix(v, w), _mix(w, v)),
        ]), max_size=2))
        fields += [OutputField("u", _mix(v, w)),
                   OutputField("t", Call("tag", (Attr(w, "x"), Attr(v, "s")), TAG))]
    if negated and plain and draw(st.booleans()):
        n = draw(st.sampled_from(negated))
        where.append(Binary(">", _mix(n, n), Const(1.0)))
    if kleene:
        k = kleene[0]
        fields.append(OutputField("k", Agg("sum", k, _mix(k, k))))
    out = Output(base.output.event_type if base.output else f"{base.plan_id}_out",
                 tuple(fields))
    return dataclasses.replace(base, where=tuple(where), output=out)


@pytest.mark.parametrize("strategy", STRATEGIES)
@SETTINGS
@given(data=st.data())
def test_cython_equals_reference_with_functions(strategy, data):
    plans = [dataclasses.replace(data.draw(udf_plans(strategy)), plan_id=f"q{i}")
             for i in range(data.draw(st.integers(1, 2)))]
    rows = data.draw(tapes())
    cuts = sorted(data.draw(st.lists(st.integers(0, len(rows)), max_size=2)))
    actives = [None]
    snap = data.draw(st.sampled_from([None, 0]))
    expected = _drive(ReferenceEngine(plans), plans, rows, cuts, actives, StringPool())
    got = _drive(CythonEngine(plans), plans, rows, cuts, actives, StringPool(), snap)
    assert multiset(got) == multiset(expected)


@pytest.mark.parametrize("engine", [CythonEngine, ReferenceEngine])
def test_failures_are_missing_values_and_reported(engine):
    """mix raises on x = 3, tag returns an int on x = 2: those calls are
    missing (the conjunct does not hold, the field is null) and reported
    with the function, its arguments and the reason; the rest match."""
    p = plan("q", [comp("a", "A"), comp("b", "B")],
             where=[Binary(">", _mix("a", "b"), Const(0.0))],
             fields={"u": _mix("b", "a"), "t": Call("tag", (Attr("b", "x"), Attr("a", "s")), TAG)},
             strategy="skip_till_any_match")
    eng = engine([p])
    rows = [("A", 1, {"x": 1, "s": "p", "f": 0.5, "y": 0}),
            ("A", 2, {"x": 3, "s": "p", "f": 0.5, "y": 0}),  # mix(3, .) raises
            ("B", 3, {"x": 2, "s": "q", "f": 1.0, "y": 0}),  # tag(2, .) is wrong
            ("B", 4, {"x": 3, "s": "q", "f": 1.0, "y": 0})]  # mix(3, .) raises
    out = eng.process(tape(rows, StringPool()), None) + eng.advance(10**9)
    got = sorted(((d.fields["u"], d.fields["t"]) for d in out), key=repr)
    # a=1 with b at 3 and 4 (mix(1, 1.0) = 1.0 > 0); a=3 fails (missing: no match)
    assert got == [(3.5, None), (None, "p3")]
    failures = eng.function_failures()
    assert failures and all(pid == "q" and isinstance(f, FunctionFailure) for pid, f in failures)
    reasons = {f.reason for _, f in failures}
    assert "mix(3, 1.0) raised ValueError: three" in reasons
    assert "tag(2, 'p') returned int 7, declared STRING" in reasons
    assert eng.function_failures() == []  # taken
