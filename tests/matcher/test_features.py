"""Property tests for the pattern features of issue 16 (quantifier bounds,
optional components, GREEDY, AND/OR alternatives, [attr] EXCEPT NOT,
after-match skip strategies, timed-out partial matches): the Cython engine
produces exactly the reference's output for random patterns over random
tapes, for every selection strategy, across batch boundaries, watermarks,
`active` sets and snapshot/restore."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caesar.events.batch import StringPool
from caesar.plans.pattern import STRATEGIES
from caesar.services.matcher.engine import CythonEngine
from caesar.services.matcher.reference import ReferenceEngine

from .strategies import featured_patterns, tapes
from .tapes import multiset
from .test_equivalence import _drive

SETTINGS = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


@st.composite
def scenario(draw, strategy):
    plans = [dataclasses.replace(draw(featured_patterns(strategy)), plan_id=f"q{i}")
             for i in range(draw(st.integers(1, 2)))]
    plans = [dataclasses.replace(p, timeout=dataclasses.replace(p.timeout,
                                                                event_type=f"{p.plan_id}_to"))
             if p.timeout is not None else p for p in plans]
    rows = draw(tapes())
    cuts = sorted(draw(st.lists(st.integers(0, len(rows)), max_size=2)))
    ids = [p.plan_id for p in plans]
    actives = draw(st.lists(st.one_of(st.none(), st.sets(st.sampled_from(ids))),
                            min_size=1, max_size=3))
    return plans, rows, cuts, actives


@pytest.mark.parametrize("strategy", STRATEGIES)
@SETTINGS
@given(data=st.data())
def test_cython_equals_reference_with_features(strategy, data):
    plans, rows, cuts, actives = data.draw(scenario(strategy))
    snap = data.draw(st.sampled_from([None, 0, 1]))
    expected = _drive(ReferenceEngine(plans), plans, rows, cuts, actives, StringPool())
    got = _drive(CythonEngine(plans), plans, rows, cuts, actives, StringPool(), snap)
    assert multiset(got) == multiset(expected)
