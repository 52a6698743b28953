"""Hand-derived examples of the issue-16 pattern features on both engines:
counted and optional repetition, AND/OR alternatives, timed-out partial
matches, [attr] EXCEPT NOT (the property tests in test_features.py cover
the rest)."""

from __future__ import annotations

import dataclasses

import pytest

from caesar.plans.expr import Agg, Attr
from caesar.plans.pattern import Output, OutputField
from caesar.services.matcher.engine import CythonEngine
from caesar.services.matcher.reference import ReferenceEngine

from .tapes import attr, cmp, comp, plan, run, seqs, tape

ENGINES = [ReferenceEngine, CythonEngine]
END = 10**9


@pytest.fixture(params=ENGINES, ids=["reference", "cython"])
def engine(request):
    return request.param


def quantified(var, *types, lo=1, hi=None, greedy=False):
    return dataclasses.replace(comp(var, *types, kleene=True), min_count=lo, max_count=hi,
                               greedy=greedy)


def test_counted_repetition(engine):
    # SEQ(A a, B{2} b, C c): exactly two B between A and C (any two, any match)
    p = plan("n", [comp("a", "A"), quantified("b", "B", lo=2, hi=2), comp("c", "C")])
    rows = [("A", 1), ("B", 2), ("B", 3), ("B", 4), ("C", 5)]
    assert seqs(run(engine([p]), [tape(rows)], END)) == {(0, 1, 2, 4), (0, 1, 3, 4),
                                                          (0, 2, 3, 4)}


def test_at_least(engine):
    p = plan("n", [comp("a", "A"), quantified("b", "B", lo=2), comp("c", "C")],
             strategy="skip_till_next_match")
    rows = [("A", 1), ("B", 2), ("C", 3), ("B", 4), ("C", 5)]
    # a run needs two B before C closes it: the first C is skipped
    assert seqs(run(engine([p]), [tape(rows)], END)) == {(0, 1, 3, 4)}


def test_optional_component(engine):
    # SEQ(A a, B? b, C c): with or without a B in between; b reads as null
    p = plan("o", [comp("a", "A"), quantified("b", "B", lo=0, hi=1), comp("c", "C")],
             fields={"bx": attr("b", "x"), "n": Agg("count", "b", None)})
    rows = [("A", 1, {"x": 0}), ("B", 2, {"x": 5}), ("C", 3, {"x": 0})]
    got = {(d.event_seqs, d.fields["bx"], d.fields["n"]) for d in
           run(engine([p]), [tape(rows)], END)}
    assert got == {((0, 2), None, 0), ((0, 1, 2), 5, 1)}


def test_optional_neighbour_of_a_negation(engine):
    # SEQ(A a, B? b, NOT D d, C c): without b, the negation covers (a, c)
    p = plan("on", [comp("a", "A"), quantified("b", "B", lo=0, hi=1), comp("d", "D", neg=True),
                    comp("c", "C")], within=10)
    rows = [("A", 1), ("D", 2), ("B", 3), ("C", 4)]
    assert seqs(run(engine([p]), [tape(rows)], END)) == {(0, 2, 3)}


def test_or_is_the_union_of_its_alternatives(engine):
    # SEQ(A a, OR(B b, C c)) WHERE b.x > 1: the condition on b only constrains
    # the alternative that binds b
    p = plan("or", [comp("a", "A"), comp("b", "B"), comp("c", "C")],
             where=[cmp(">", attr("b", "x"), 1)])
    p = dataclasses.replace(p, alternatives=((0, 1), (0, 2)))
    rows = [("A", 1, {"x": 0}), ("B", 2, {"x": 0}), ("B", 3, {"x": 2}), ("C", 4, {"x": 0})]
    out = run(engine([p]), [tape(rows)], END)
    assert {d.event_seqs for d in out} == {(0, 2), (0, 3)}
    assert {d.plan_id for d in out} == {"or"}


def test_and_in_any_order(engine):
    # SEQ(A a, AND(B b, C c), D d)
    p = plan("and", [comp("a", "A"), comp("b", "B"), comp("c", "C"), comp("d", "D")])
    p = dataclasses.replace(p, alternatives=((0, 1, 2, 3), (0, 2, 1, 3)))
    rows = [("A", 1), ("C", 2), ("B", 3), ("D", 4), ("B", 5), ("C", 6), ("D", 7)]
    # seqs in each alternative's component order: b first, or c first
    assert seqs(run(engine([p]), [tape(rows)], END)) == {
        (0, 2, 5, 6), (0, 4, 5, 6), (0, 1, 2, 3), (0, 1, 2, 6), (0, 1, 4, 6)}


def test_timed_out_partial_matches(engine):
    # SEQ(O o, P p) WHERE [x] WITHIN 5: an order without payment in time
    # derives Unpaid(o.x) at o.ts + 5, once event time passes it
    p = plan("pay", [comp("o", "A"), comp("p", "B")], equivalence=["x"], within=5,
             strategy="skip_till_next_match", fields={"x": attr("o", "x")})
    p = dataclasses.replace(p, timeout=Output("Unpaid", (OutputField("x", Attr("o", "x")),
                                                         OutputField("px", Attr("p", "x")))))
    rows = [("A", 1, {"x": 1}), ("A", 2, {"x": 2}), ("B", 3, {"x": 1}), ("A", 9, {"x": 3})]
    e = engine([p])
    out = run(e, [tape(rows)])  # o@2 times out by ts 7: at the latest when
    out += e.advance(8)           # the watermark passes 7
    assert sorted((d.event_type, d.event_seqs) for d in out) == [("Unpaid", (1,)),
                                                                ("pay_out", (0, 2))]
    out += e.advance(END)
    timeouts = sorted((d.start_ts, d.end_ts, d.fields["x"], d.fields["px"])
                      for d in out if d.event_type == "Unpaid")
    assert timeouts == [(2, 7, 2, None), (9, 14, 3, None)]


def test_equivalence_over_positive_events_only(engine):
    # SEQ(A a, NOT C n, B b) WHERE [y] EXCEPT NOT: any C between blocks
    p = plan("ex", [comp("a", "A"), comp("n", "C", neg=True), comp("b", "B")],
             equivalence=["y"], within=10)
    positive = dataclasses.replace(p, equivalence_negated=False)
    rows = [("A", 1, {"y": 1}), ("C", 2, {"y": 2}), ("B", 3, {"y": 1})]
    assert seqs(run(engine([p]), [tape(rows)], END)) == {(0, 2)}
    assert seqs(run(engine([positive]), [tape(rows)], END)) == set()
