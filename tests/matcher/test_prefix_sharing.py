"""Prefix sharing across registered plans (Cayuga thesis ch. 4): plans with
identical leading components share those components' stacks. Property:
the engine with sharing produces exactly the reference's matches, also when
`active` sets or `discard` split a sharing group (the engine then unshares)
and across snapshot/restore."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from caesar.events.batch import StringPool
from caesar.plans.expr import Attr, Binary, Const
from caesar.services.matcher.engine import CythonEngine
from caesar.services.matcher.reference import ReferenceEngine

from .strategies import TYPES, scalar_expr, tapes
from .tapes import comp, multiset, plan
from .test_equivalence import _drive, discard_halfway

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def sharing_plans(draw):
    """2-4 skip-till-any-match plans with one common prefix of 1-2 positive
    components (same types, same pushed filter), each then diverging at a
    component with its own `attr = const` filter, an optional middle
    negation and further components, and where clauses of its own."""
    nprefix = draw(st.integers(1, 2))
    prefix = [comp(f"p{i}", *draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=2,
                                            unique=True)))
              for i in range(nprefix)]
    prefix_where = []
    if draw(st.booleans()):
        prefix_where.append(Binary("!=", Attr("p0", "s"), Const(draw(st.sampled_from("pq")))))
    equivalence = draw(st.sampled_from([(), ("y",)]))
    within = draw(st.one_of(st.none(), st.integers(2, 10)))
    plans = []
    for i in range(draw(st.integers(2, 4))):
        comps = list(prefix)
        ntail = draw(st.integers(1, 2))
        tail_vars = [f"t{j}" for j in range(ntail)]
        comps.extend(comp(v, *draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=2,
                                            unique=True)))
                     for v in tail_vars)
        if draw(st.booleans()):
            comps.insert(draw(st.integers(nprefix, len(comps) - 1)),
                         comp("n0", draw(st.sampled_from(TYPES)), neg=True))
        if draw(st.booleans()):
            const = Binary("=", Attr("t0", "x"), Const(draw(st.integers(0, 3))))
        else:
            const = Binary("=", Attr("t0", "s"), Const(draw(st.sampled_from("pq"))))
        where = [*prefix_where, const]
        vars_ = [c.var for c in prefix] + tail_vars
        if draw(st.booleans()):
            where.append(Binary(draw(st.sampled_from(["=", "<", ">=", "!="])),
                                draw(scalar_expr(vars_, 1)),
                                Attr(draw(st.sampled_from(tail_vars)), "x")))
        w = within
        if any(c.negated for c in comps[-1:]) and w is None:
            w = 5
        if draw(st.integers(0, 5)) == 0:
            w = (w or 5) + 1  # a different window: must not share
        fields = {"first": Attr("p0", "x"), "v": draw(scalar_expr(vars_, 1))}
        plans.append(plan(f"q{i}", comps, where=where, equivalence=equivalence, within=w,
                          fields=fields))
    return plans


@st.composite
def scenario(draw):
    plans = draw(sharing_plans())
    rows = draw(tapes(max_events=16))
    cuts = sorted(draw(st.lists(st.integers(0, len(rows)), max_size=2)))
    ids = [p.plan_id for p in plans]
    # mostly all fed together; sometimes split groups (the engine unshares)
    actives = draw(st.one_of(
        st.just([None]),
        st.lists(st.one_of(st.none(), st.sets(st.sampled_from(ids))), min_size=1, max_size=3)))
    return plans, rows, cuts, actives


def test_identical_prefix_is_shared():
    plans = [plan(f"q{i}", [comp("a", "A"), comp("b", "B"), comp("c", "C")],
                  where=[Binary("=", Attr("c", "x"), Const(i))], within=5)
             for i in range(3)]
    assert CythonEngine(plans).shared_prefixes() == {"q1": ("q0", 2), "q2": ("q0", 2)}
    assert CythonEngine(plans, share_prefixes=False).shared_prefixes() == {}
    other = plans + [plan("w", [comp("a", "A"), comp("b", "B"), comp("c", "C")],
                          where=[Binary("=", Attr("c", "x"), Const(1))], within=6)]
    assert "w" not in CythonEngine(other).shared_prefixes()


@SETTINGS
@given(data=st.data())
def test_sharing_equals_reference(data):
    plans, rows, cuts, actives = data.draw(scenario())
    snap = data.draw(st.sampled_from([None, None, 0, 1]))
    engine = CythonEngine(plans)
    # Not every scenario shares: plans whose tails begin alike share further,
    # up to a component without an `attr = const` filter, and then not at
    # all (_plan_sharing); test_identical_prefix_is_shared pins that sharing
    # happens, the statistics (--hypothesis-show-statistics) how often here.
    event("shared" if engine.shared_prefixes() else "not shared")
    expected = _drive(ReferenceEngine(plans), plans, rows, cuts, actives, StringPool())
    got = _drive(engine, plans, rows, cuts, actives, StringPool(), snap)
    assert multiset(got) == multiset(expected)


@SETTINGS
@given(data=st.data())
def test_split_active_sets(data):
    # contexts that feed only part of a sharing group: the engine must stop
    # sharing before the first such batch
    plans, rows, cuts, _actives = data.draw(scenario())
    ids = [p.plan_id for p in plans]
    cuts = sorted(data.draw(st.lists(st.integers(1, len(rows)), min_size=1, max_size=2)))
    actives = [None] + data.draw(st.lists(st.sets(st.sampled_from(ids), min_size=1),
                                          min_size=1, max_size=2))
    expected = _drive(ReferenceEngine(plans), plans, rows, cuts, actives, StringPool())
    got = _drive(CythonEngine(plans), plans, rows, cuts, actives, StringPool())
    assert multiset(got) == multiset(expected)


@SETTINGS
@given(data=st.data())
def test_discard_of_part_of_a_group(data):
    plans, rows, _cuts, _actives = data.draw(scenario())
    drop = data.draw(st.sets(st.sampled_from([p.plan_id for p in plans]), min_size=1))
    outs = [multiset(discard_halfway(engine, rows, sorted(drop)))
            for engine in (ReferenceEngine(plans), CythonEngine(plans))]
    assert outs[0] == outs[1]


@pytest.mark.slow
@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_sharing_equals_reference_many(data):
    plans, rows, cuts, actives = data.draw(scenario())
    expected = _drive(ReferenceEngine(plans), plans, rows, cuts, actives, StringPool())
    got = _drive(CythonEngine(plans), plans, rows, cuts, actives, StringPool())
    assert multiset(got) == multiset(expected)
