"""Equal runs (compile.equal_run, engine._equal_run_step): plans that ask for
n consecutive events of one type with equal attributes under partition
contiguity (LR's StoppedCar) keep the key's latest stretch in one stack.
Against the reference and against the general path of the same engine, on
tapes built to break stretches every way: other values, missing values,
NaN, strings against numbers, ties in time, the window, other keys, other
types, batch cuts, inactive spans, sweeps and snapshots."""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caesar.events.batch import StringPool
from caesar.plans.expr import Attr, Binary, Const
from caesar.services.matcher import compile as compile_mod
from caesar.services.matcher.compile import compile_plans, equal_run
from caesar.services.matcher.engine import CythonEngine

from .tapes import comp, multiset, plan
from .test_equivalence import _drive, assert_cython_equals_reference
from .test_equivalence import scenario as equivalence_scenario

SETTINGS = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
ATTRS = ("x", "s", "f", "y")


@st.composite
def equal_runs(draw):
    """SEQ(A v0, ..., A v{n-1}) WHERE [y]? AND v{i+1}.a = v{i}.a for a in X."""
    n = draw(st.integers(2, 4))
    names = [f"v{i}" for i in range(n)]
    same = draw(st.lists(st.sampled_from(["x", "s", "f"]), min_size=1, max_size=2, unique=True))
    where = []
    for i in range(n - 1):
        for a in same:
            pair = [Attr(names[i + 1], a), Attr(names[i], a)]
            if draw(st.booleans()):
                pair.reverse()
            where.append(Binary("=", *pair))
    fields = {f"o{k}": Attr(draw(st.sampled_from(names)), draw(st.sampled_from(ATTRS)))
              for k in range(draw(st.integers(0, 3)))}
    return plan("q", [comp(v, "A") for v in names], where=draw(st.permutations(where)),
                equivalence=draw(st.sampled_from([("y",), ("y",), ()])),
                within=draw(st.sampled_from([None, 2, 4, 8])),
                strategy="partition_contiguity", fields=fields)


@st.composite
def stretchy_tapes(draw, max_events: int = 30):
    """Mostly A events with few distinct values (so stretches form), ties
    and gaps in time, two keys, two partitions, a B now and then."""
    ts = 0
    rows = []
    for _ in range(draw(st.integers(3, max_events))):
        ts += draw(st.sampled_from([0, 1, 1, 1, 2, 5]))
        attrs = {
            "x": draw(st.sampled_from([1, 1, 1, 2, None])),
            "s": draw(st.sampled_from(["p", "p", "p", "q", None])),
            "f": draw(st.sampled_from([1.0, 1.0, 1.0, 2.0, float("nan"), None])),
            "y": draw(st.sampled_from([0, 0, 1])),
            "part": draw(st.sampled_from([0, 0, 0, 1])),
        }
        rows.append((draw(st.sampled_from("AAAAB")), ts, attrs))
    return rows


def scenario():
    """test_equivalence's scenario of equal runs over stretchy tapes."""
    return equivalence_scenario(None, plans_of=lambda _strategy: equal_runs(),
                                rows=stretchy_tapes(), max_cuts=3)


@SETTINGS
@given(data=st.data())
def test_equal_runs_equal_the_reference(data):
    drawn = data.draw(scenario())
    for p in drawn[0]:
        assert compile_plans(p)[0].equal_run  # the fast path is what runs
    assert_cython_equals_reference(data, drawn)


@SETTINGS
@given(data=st.data())
def test_equal_runs_equal_the_general_path(data):
    plans, rows, cuts, actives = data.draw(scenario())
    snap = data.draw(st.sampled_from([None, 0, 1]))
    fast = _drive(CythonEngine(plans), plans, rows, cuts, actives, StringPool(), snap)
    compile_mod.EQUAL_RUNS = False
    try:
        assert not compile_plans(plans[0])[0].equal_run
        general = _drive(CythonEngine(plans), plans, rows, cuts, actives, StringPool(), snap)
    finally:
        compile_mod.EQUAL_RUNS = True
    assert multiset(fast) == multiset(general)


def _plan(where, n=3, **kw):
    names = [f"v{i}" for i in range(n)]
    return plan("q", [comp(v, "A") for v in names], where=where, equivalence=("y",),
                strategy=kw.pop("strategy", "partition_contiguity"), **kw)


def eq(a, b, attr="x", attr2=None):
    return Binary("=", Attr(a, attr), Attr(b, attr2 or attr))


def test_only_the_shape_is_taken():
    chain = [eq("v1", "v0"), eq("v2", "v1")]
    assert equal_run(_plan(chain)) == ("x",)
    assert equal_run(_plan([eq("v0", "v1"), eq("v1", "v2"), eq("v1", "v0", "s"),
                            eq("v2", "v1", "s")])) == ("s", "x")
    refused = [
        _plan(chain, strategy="skip_till_next_match"),
        _plan(chain[:1]),                                   # a pair without its test
        _plan([eq("v1", "v0"), eq("v2", "v0")]),            # not consecutive
        _plan([eq("v1", "v0"), eq("v2", "v1", "x", "s")]),  # other attributes
        _plan([eq("v1", "v0"), eq("v2", "v1", "s")]),       # other sets per pair
        _plan(chain + [Binary("=", Attr("v0", "x"), Const(1))]),  # a filter
        _plan(chain + [Binary("!=", Attr("v2", "s"), Attr("v1", "s"))]),
        _plan([]),
    ]
    for p in refused:
        assert equal_run(p) is None, p.where
    neg = dataclasses.replace(_plan(chain), components=(
        comp("v0", "A"), comp("v1", "A"), comp("v2", "A"), comp("n", "A", neg=True)))
    assert equal_run(neg) is None
    mixed = dataclasses.replace(_plan(chain), components=(
        comp("v0", "A"), comp("v1", "A", "B"), comp("v2", "A")))
    assert equal_run(mixed) is None


def test_stopped_car_is_an_equal_run():
    from caesar.examples import model_path
    from caesar.language import compile_model

    p = compile_model(str(model_path("linear_road").with_name("model_per_segment.caesar")))
    stopped = [s.plan for s in p.deriver_stages + p.matcher_stages
               if getattr(s.plan, "output", None) is not None
               and s.plan.output.event_type == "StoppedCar"]
    assert stopped and equal_run(stopped[0]) == ("lane", "pos")


def test_sliding_matches_and_breaks():
    # four equal reports make a match from the fourth on, one per event; a
    # different value, a tie in time or a gap past the window starts over
    p = _plan([eq(f"v{i + 1}", f"v{i}") for i in range(3)], n=4, within=10,
              fields={"first": Attr("v0", "f"), "last": Attr("v3", "f")})
    rows = [("A", t, {"x": x, "y": 0, "f": float(t)})
            for t, x in [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5), (6, 6), (7, 6), (8, 6),
                         (9, 6), (9, 6), (10, 6), (11, 6), (12, 6), (13, 6), (30, 6)]]
    got = _drive(CythonEngine([p]), [p], rows, [7], [None], StringPool())
    assert sorted((d.fields["first"], d.fields["last"]) for d in got) == [
        (1.0, 4.0), (2.0, 5.0), (6.0, 9.0), (9.0, 12.0), (10.0, 13.0)]


@SETTINGS
@given(data=st.data())
def test_states_of_the_general_path_continue_as_equal_runs(data):
    """A state the general path wrote (an earlier version; its layouts are
    the equal run's when the outputs read only the run's attributes and the
    key) restored into an engine with equal runs: its longest run becomes
    the stretch, and the matches go on as if nothing had moved."""
    n = data.draw(st.integers(2, 4))
    names = [f"v{i}" for i in range(n)]
    p = plan("q", [comp(v, "A") for v in names],
             where=[eq(names[i + 1], names[i]) for i in range(n - 1)], equivalence=("y",),
             within=data.draw(st.sampled_from([None, 4])), strategy="partition_contiguity",
             fields={"first": Attr(names[0], "x"), "last": Attr(names[-1], "y")})
    rows = data.draw(stretchy_tapes())
    cut = data.draw(st.integers(0, len(rows)))
    compile_mod.EQUAL_RUNS = False
    try:
        general = CythonEngine([p])
        whole = _drive(CythonEngine([p]), [p], rows, [], [None], StringPool())
        pool = StringPool()
        before = _drive_open(general, rows[:cut], pool, 0)
        states = {part: general.snapshot(part) for part in (0, 1)}
    finally:
        compile_mod.EQUAL_RUNS = True
    fast = CythonEngine([p])
    assert compile_plans(p)[0].equal_run
    for part, state in states.items():
        fast.restore(part, state)
    after = _drive_open(fast, rows[cut:], pool, cut) + fast.advance(10**9)
    assert multiset(before + after) == multiset(whole)


def test_a_general_path_state_with_a_tie_continues_from_its_longest_run():
    # two events at one time: the second ends the first's run, but the
    # general path's trim keeps both rows (it prunes by time); the restored
    # stretch is the longest run, one event, not the stack
    p = _plan([eq("v1", "v0"), eq("v2", "v1")], fields={"last": Attr("v2", "x")})
    rows = [("A", t, {"x": 1, "y": 0}) for t in (0, 0, 1, 2)]
    compile_mod.EQUAL_RUNS = False
    try:
        general = CythonEngine([p])
        before = _drive_open(general, rows[:2], StringPool(), 0)
        state = general.snapshot(0)
    finally:
        compile_mod.EQUAL_RUNS = True
    fast = CythonEngine([p])
    fast.restore(0, state)
    got = before + _drive_open(fast, rows[2:], StringPool(), 2) + fast.advance(10**9)
    assert [d.event_seqs for d in got] == [(1, 2, 3)]


def _drive_open(engine, rows, pool, first_seq):
    from .tapes import tape

    if not rows:
        return []
    out = engine.process(tape(rows, pool, partition_key="part", first_seq=first_seq))
    return out + engine.advance(max(r[1] for r in rows))
