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

from caesar.plans.pattern import STRATEGIES

from .strategies import featured_patterns
from .test_equivalence import assert_cython_equals_reference, scenario

SETTINGS = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


def with_timeout_types(drawn):
    """Each plan's timeout events get a type of their own."""
    plans, rows, cuts, actives = drawn
    plans = [dataclasses.replace(p, timeout=dataclasses.replace(p.timeout,
                                                                event_type=f"{p.plan_id}_to"))
             if p.timeout is not None else p for p in plans]
    return plans, rows, cuts, actives


@pytest.mark.parametrize("strategy", STRATEGIES)
@SETTINGS
@given(data=st.data())
def test_cython_equals_reference_with_features(strategy, data):
    drawn = data.draw(scenario(strategy, plans_of=featured_patterns))
    assert_cython_equals_reference(data, with_timeout_types(drawn))
