"""Partition contiguity against the reference, on patterns built to exercise
what sets it apart: every plan keyed by [y] (so other keys' events pass its
runs by), single-variable conditions the engine pushes into component
filters (so an event of the key that no component takes must still reach
the plan and end its runs), and tapes of few keys and types."""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caesar.plans.expr import Attr, Binary, Const

from .strategies import TYPES, featured_patterns, patterns, tapes
from .test_equivalence import assert_cython_equals_reference

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def keyed_filtered(draw, strategy: str, featured: bool = False):
    base = draw((featured_patterns if featured else patterns)(strategy)
                .filter(lambda p: len(p.positive) >= 2))
    if draw(st.booleans()):
        base = dataclasses.replace(base, where=())  # random conjuncts rarely hold
    conds = []
    for c in base.components:
        if c.negated or draw(st.integers(0, 2)) == 0:
            continue
        field, values = draw(st.sampled_from([("x", st.integers(0, 3)),
                                              ("s", st.sampled_from(["p", "q"]))]))
        conds.append(Binary(draw(st.sampled_from(["=", "!=", "<", ">="])) if field == "x"
                            else draw(st.sampled_from(["=", "!="])),
                            Attr(c.var, field), Const(draw(values))))
    return dataclasses.replace(base, equivalence=("y",), where=base.where + tuple(conds))


@st.composite
def keyed_scenario(draw, featured: bool = False, max_events: int = 16):
    """test_equivalence's scenario with tapes of the plans' own types (and
    sometimes one more), keys 0/1: runs meet events of their key they
    cannot take, and events of the other key."""
    plans = [dataclasses.replace(draw(keyed_filtered("partition_contiguity", featured)),
                                 plan_id=f"q{i}") for i in range(draw(st.integers(1, 2)))]
    types = sorted({t for p in plans for c in p.components for t in c.types})
    types += draw(st.lists(st.sampled_from(TYPES), max_size=1))
    rows = [(draw(st.sampled_from(types)), ts, attrs)
            for _t, ts, attrs in draw(tapes(max_events))]
    cuts = sorted(draw(st.lists(st.integers(0, len(rows)), max_size=2)))
    ids = [p.plan_id for p in plans]
    actives = draw(st.lists(st.one_of(st.none(), st.sets(st.sampled_from(ids))),
                            min_size=1, max_size=3))
    return plans, rows, cuts, actives


@SETTINGS
@given(data=st.data())
def test_keyed_filtered_patterns(data):
    assert_cython_equals_reference(data, data.draw(keyed_scenario()))


@SETTINGS
@given(data=st.data())
def test_keyed_filtered_featured_patterns(data):
    assert_cython_equals_reference(data, data.draw(keyed_scenario(featured=True)))


@SETTINGS
@given(data=st.data())
def test_long_keyed_tapes(data):
    # longer tapes: runs of one key meet many events of the other key
    assert_cython_equals_reference(data, data.draw(keyed_scenario(max_events=30)))
