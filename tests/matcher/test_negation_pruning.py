"""Runs killed by a middle negation (issue 11, the soak's TollCharge state):
with skip_till_next_match, an event of a middle negation that passes its
checks against a run waiting at it blocks every completion of that run when
the checks read only events bound before it and constants, so the engine
drops the run and keeps negated events only while a run waits; otherwise it
keeps today's behaviour. Property tests against the reference engine (random
patterns of that shape, random tapes, batch cuts, snapshots), and the state
of a TollCharge-like stream stays bounded by the live runs."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caesar.events.batch import StringPool
from caesar.plans.expr import Attr, Binary, Const
from caesar.services.matcher.compile import compile_plan
from caesar.services.matcher.engine import CythonEngine
from caesar.services.matcher.reference import ReferenceEngine

from .strategies import TYPES, predicate, tapes
from .tapes import comp, multiset, plan, tape
from .test_equivalence import _drive

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def toll_charge(**kw):
    """SEQ(A n, NOT B x, C v) WHERE [y] AND n.x > 0: the LR TollCharge shape."""
    return plan("toll", [comp("n", "A"), comp("x", "B", neg=True), comp("v", "C")],
                where=[Binary(">", Attr("n", "x"), Const(0)), *kw.pop("where", [])],
                equivalence=("y",), within=kw.pop("within", 10**9),
                strategy="skip_till_next_match", fields={"toll": Attr("n", "x")}, **kw)


def kills(p) -> list[bool]:
    return [c.kills_waiting for c in compile_plan(p).comps]


def test_which_negations_kill_the_runs_waiting_at_them():
    assert kills(toll_charge()) == [False, True, False]
    # the check reads x and an earlier event: still provable
    earlier = Binary("=", Attr("x", "x"), Attr("n", "x"))
    assert kills(toll_charge(where=[earlier])) == [False, True, False]
    # it reads the later event v: a later v may let the run pass, keep it
    later = Binary("<", Attr("x", "x"), Attr("v", "x"))
    assert kills(toll_charge(where=[later])) == [False, False, False]
    for strategy in ("skip_till_any_match", "strict_contiguity"):
        assert kills(dataclasses.replace(toll_charge(), strategy=strategy))[1] is False
    # the positive before it may still grow (Kleene): its interval moves
    kleene = plan("k", [comp("n", "A", kleene=True), comp("x", "B", neg=True), comp("v", "C")],
                  equivalence=("y",), within=10, strategy="skip_till_next_match")
    assert kills(kleene)[1] is False


@st.composite
def middle_negation_patterns(draw, strategy: str = "skip_till_next_match"):
    """2-3 positive components (a Kleene one sometimes), a negation in the
    middle, its check reading earlier events, later ones or none."""
    npos = draw(st.integers(2, 3))
    kleene_at = draw(st.sampled_from([None, None, *range(npos)]))
    comps = [comp(f"p{i}", *draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=2,
                                          unique=True)), kleene=i == kleene_at)
             for i in range(npos)]
    at = draw(st.integers(1, npos - 1))
    comps.insert(at, comp("n0", draw(st.sampled_from(TYPES)), neg=True))
    earlier = [f"p{i}" for i in range(at) if i != kleene_at]
    later = [f"p{i}" for i in range(at, npos) if i != kleene_at]
    where = []
    kind = draw(st.sampled_from(["earlier", "earlier", "later", "own", "none"]))
    if kind == "earlier" and earlier:
        where.append(draw(predicate(["n0", *earlier], [], 0)))
    elif kind == "later" and later:
        where.append(draw(predicate(["n0", *later], [], 0)))
    elif kind == "own":
        where.append(draw(predicate(["n0"], [], 0)))
    if draw(st.booleans()):
        where.append(Binary(draw(st.sampled_from([">", "<="])), Attr("p0", "x"),
                            Const(draw(st.integers(0, 2)))))
    return plan(draw(st.sampled_from(["q1", "q2"])), comps, where=where,
                equivalence=draw(st.sampled_from([(), ("y",), ("y",)])),
                within=draw(st.sampled_from([None, 4, 10])),
                strategy=strategy,
                fields={"first": Attr("p0", "x"), "last": Attr(f"p{npos - 1}", "x")})


@SETTINGS
@given(data=st.data())
def test_pruned_engine_equals_reference(data):
    plans = [dataclasses.replace(data.draw(middle_negation_patterns()), plan_id=f"q{i}")
             for i in range(data.draw(st.integers(1, 2)))]
    rows = data.draw(tapes(max_events=30))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(rows)), max_size=3)))
    snap = data.draw(st.sampled_from([None, 0, 1]))
    actives = [None]
    expected = _drive(ReferenceEngine(plans), plans, rows, cuts, actives, StringPool())
    got = _drive(CythonEngine(plans), plans, rows, cuts, actives, StringPool(), snap)
    assert multiset(got) == multiset(expected)


def gates(p) -> list[int]:
    return [c.gate for c in compile_plan(p).comps]


def accident_cleared(**kw):
    """SEQ(A a, NOT B o, B m) WHERE o.y = a.y AND m.y = a.y AND o.x != a.x
    AND m.x != a.x: LR's AccidentCleared shape (a car of the accident
    reported away from its place, with no such report in between)."""
    away = [Binary("=", Attr(v, "y"), Attr("a", "y")) for v in ("o", "m")] + \
        [Binary("!=", Attr(v, "x"), Attr("a", "x")) for v in ("o", "m")]
    return plan("cleared", [comp("a", "A"), comp("o", "B", neg=True), comp("m", "B")],
                where=[*away, *kw.pop("where", [])], within=kw.pop("within", 10**9),
                strategy="skip_till_any_match", fields={"t": Attr("m", "x")}, **kw)


def test_which_negations_need_an_earlier_instance():
    assert gates(accident_cleared()) == [-1, 0, -1]
    # a check reading a later event: an o may block a later m alone, keep every o
    later = Binary("<", Attr("o", "x"), Attr("m", "x"))
    assert gates(accident_cleared(where=[later])) == [-1, -1, -1]
    # checks reading only the negated event are filters: no gate to open
    own = plan("own", [comp("a", "A"), comp("o", "B", neg=True), comp("m", "B")],
               where=[Binary(">", Attr("o", "x"), Const(0))], within=10,
               strategy="skip_till_any_match")
    assert gates(own) == [-1, -1, -1]
    # runs have their own pruning (kills_waiting); keyless plans check [attr] while matching
    for strategy in ("skip_till_next_match", "strict_contiguity"):
        assert gates(dataclasses.replace(accident_cleared(), strategy=strategy))[1] == -1
    two = plan("two", [comp("a", "A"), comp("b", "C"), comp("o", "B", neg=True), comp("m", "B")],
               where=[Binary("=", Attr("o", "y"), Attr("a", "y")),
                      Binary("=", Attr("o", "x"), Attr("b", "x"))],
               within=10, strategy="skip_till_any_match")
    assert gates(two)[2] == -1  # two earlier components read: no single one to ask
    assert gates(dataclasses.replace(two, where=two.where[:1]))[2] == 0


@st.composite
def gated_patterns(draw):
    """Middle negation patterns under skip_till_any_match; most with a check
    comparing the negated event with one earlier positive (a gate)."""
    if draw(st.integers(0, 3)) == 0:
        return draw(middle_negation_patterns("skip_till_any_match"))
    npos = draw(st.integers(2, 3))
    at = draw(st.integers(1, npos - 1))
    names = ["g", *(f"p{i}" for i in range(1, npos))]
    comps = [comp(v, *draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=2,
                                    unique=True))) for v in names]
    comps.insert(at, comp("n0", draw(st.sampled_from(TYPES)), neg=True))
    earlier = draw(st.sampled_from(names[:at]))
    attr = draw(st.sampled_from(["x", "y"]))
    where = [Binary(draw(st.sampled_from(["=", "!=", "<", ">="])), Attr("n0", attr),
                    Attr(earlier, attr))]
    if draw(st.booleans()):
        where.append(draw(predicate(["n0", earlier], [], 1)))
    if draw(st.booleans()):
        where.append(draw(predicate(names, [], 0)))
    return plan(draw(st.sampled_from(["q1", "q2"])), comps, where=where,
                equivalence=draw(st.sampled_from([(), ("y",)])),
                within=draw(st.sampled_from([None, 4, 10])), strategy="skip_till_any_match",
                fields={"first": Attr("g", "x"), "last": Attr(names[-1], "x")})


@SETTINGS
@given(data=st.data())
def test_gated_engine_equals_reference(data):
    """skip_till_any_match with a middle negation whose check reads earlier
    events: events of it passing no check with an earlier instance are not
    kept, and the matches stay the reference's."""
    plans = [dataclasses.replace(data.draw(gated_patterns()), plan_id=f"q{i}")
             for i in range(data.draw(st.integers(1, 2)))]
    rows = data.draw(tapes(max_events=30))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(rows)), max_size=3)))
    snap = data.draw(st.sampled_from([None, 0, 1]))
    expected = _drive(ReferenceEngine(plans), plans, rows, cuts, [None], StringPool())
    got = _drive(CythonEngine(plans), plans, rows, cuts, [None], StringPool(), snap)
    assert multiset(got) == multiset(expected)


def test_state_of_an_accident_cleared_stream_holds_only_the_accident_s_cars():
    """Before: once an A existed, every B stayed for the whole window (a day
    in LR: 74 MB of position reports after 10 minutes of the peak); now only
    the Bs of the accident's car (y) away from its place (x) are kept."""
    p = accident_cleared()
    engine, reference = CythonEngine([p]), ReferenceEngine([p])
    pool = StringPool()
    rows = [("A", 1, {"x": 5, "y": 7, "part": 0})]
    ts = 1
    for _ in range(20):  # 60 cars report, car 7 stays at x = 5
        ts += 1
        rows += [("B", ts, {"x": 5 if car == 7 else car % 9, "y": car, "part": 0})
                 for car in range(60)]
    got = engine.process(tape(rows, pool, partition_key="part"))
    expected = reference.process(tape(rows, pool, partition_key="part"))
    assert multiset(got) == multiset(expected) and not got
    held = engine.state_size()
    assert held <= 2, held  # the A (and nothing of the 1,200 Bs)
    ts += 1  # car 7 moves: cleared once, later moves are blocked by this one
    more = [("B", ts, {"x": 6, "y": 7, "part": 0}), ("B", ts + 1, {"x": 8, "y": 7, "part": 0})]
    got = engine.process(tape(more, pool, partition_key="part", first_seq=len(rows)))
    expected = reference.process(tape(more, pool, partition_key="part", first_seq=len(rows)))
    assert multiset(got) == multiset(expected)
    assert [d.fields["t"] for d in got] == [6]


def toll_stream(vehicles: int, rounds: int, toll: int) -> list[tuple]:
    """Per round each vehicle (y) gets a toll notification A (x = toll), then
    enters the next segment B, then leaves it C, one second apart: with a
    positive toll each A's run is killed by the B after it, so no C ever
    completes one (every C follows a B)."""
    rows = []
    ts = 0
    for _ in range(rounds):
        for t in ("A", "B", "C"):
            ts += 1
            rows += [(t, ts, {"x": toll, "y": v, "s": "p", "f": 1.0, "part": 0})
                     for v in range(vehicles)]
    return rows


@pytest.mark.parametrize("toll", [0, 5])
def test_state_of_a_toll_charge_stream_stays_bounded(toll):
    """Before: every B stayed in its vehicle's part for the whole window (a
    day in LR), so the state grew with every vehicle ever seen (the engine
    of 27adb32: 5 rows more per vehicle and batch with toll 0, 15 with toll 5);
    now it holds only what a live run can still use: nothing here."""
    p = toll_charge()
    engine, reference = CythonEngine([p]), ReferenceEngine([p])
    pool = StringPool()
    sizes, got, expected = [], [], []
    for r in range(4):
        rows = toll_stream(100, 5, toll)
        batch = [(t, ts + r * 100, {**a, "y": a["y"] + 300 * r}) for t, ts, a in rows]
        got += engine.process(tape(batch, pool, partition_key="part", first_seq=r * 10**5))
        expected += reference.process(tape(batch, pool, partition_key="part",
                                           first_seq=r * 10**5))
        sizes.append(engine.state_size())
    assert multiset(got) == multiset(expected) and not got  # every run was killed
    assert sizes == [0, 0, 0, 0], sizes


def test_a_run_completing_at_the_negation_s_timestamp_still_matches():
    """SASE's interval is open: a B at the same timestamp as the C does not
    block it, so the run waiting at B must survive until time moves on."""
    p = toll_charge()
    rows = [("A", 1, {"x": 3, "y": 7}), ("B", 2, {"x": 0, "y": 7}), ("C", 2, {"x": 0, "y": 7}),
            ("A", 3, {"x": 4, "y": 7}), ("B", 4, {"x": 0, "y": 7}), ("C", 5, {"x": 0, "y": 7})]
    engine, reference = CythonEngine([p]), ReferenceEngine([p])
    got = engine.process(tape(rows, StringPool()))
    expected = reference.process(tape(rows, StringPool()))
    assert multiset(got) == multiset(expected)
    assert [d.fields["toll"] for d in got] == [3]
    assert engine.state_size() == 0
