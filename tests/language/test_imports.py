"""Which matcher stages the deriver's copies stand for (language/imports.py):
only those whose results cannot differ between the two services."""

from __future__ import annotations

import pytest

from caesar.language import compile_model
from caesar.language.independent import context_independent

HEAD = """MODEL m
TIME UNIT SECONDS
PARTITION BY k
EVENT E(ts INT, k INT, v INT) FROM TOPIC "e"
"""
# A chain both services need: Hi feeds the transition and a processing query.
CHAIN = HEAD + """
DERIVE Hi(a.k, a.v) PATTERN SEQ(E a, E b) WHERE [k] AND a.v < b.v WITHIN 5 SECONDS
DERIVE Out(h.k, e.v) PATTERN SEQ(Hi h, E e) WHERE h.k = e.k WITHIN 5 SECONDS
INITIATE CONTEXT up PATTERN Hi h
DEFAULT CONTEXT calm { }
CONTEXT up { }
"""


def matcher_ids(plan) -> list[str]:
    return [s.plan.plan_id for s in plan.matcher_stages]


def test_a_chain_of_every_context_comes_from_the_deriver():
    plan = compile_model(CHAIN)
    assert plan.imports == ("Hi",)
    assert [plan_output for plan_output in plan.exports] == ["q1"]
    assert "q1" not in matcher_ids(plan)
    assert "q1" in matcher_ids(compile_model(CHAIN, import_derived=False))


@pytest.mark.parametrize("change", [
    # an end negation holds its results until the window closes
    ("PATTERN SEQ(E a, E b) WHERE [k] AND a.v < b.v WITHIN 5 SECONDS",
     "PATTERN SEQ(E a, NOT E b) WHERE [k] AND a.v < b.v WITHIN 5 SECONDS"),
    # ON TIMEOUT derives when time passes
    ("PATTERN SEQ(E a, E b) WHERE [k] AND a.v < b.v WITHIN 5 SECONDS",
     "PATTERN SEQ(E a, E b) WHERE [k] AND a.v < b.v WITHIN 5 SECONDS STRATEGY skip_till_next_match ON TIMEOUT DERIVE Late(a.k)"),
    # a processing query that reads it in one context only
    ("DERIVE Out(h.k, e.v) PATTERN SEQ(Hi h, E e) WHERE h.k = e.k WITHIN 5 SECONDS\n", ""),
])
def test_results_that_could_differ_stay_in_the_matcher(change):
    old, new = change
    text = CHAIN.replace(old, new)
    if not new:
        text = text.replace("CONTEXT up { }", "CONTEXT up {\n  DERIVE Out(h.k) PATTERN Hi h\n}")
    plan = compile_model(text)
    assert plan.imports == () and "q1" in matcher_ids(plan)


def test_an_aggregate_upstream_keeps_the_chain_in_the_matcher():
    text = HEAD + """
DERIVE Avg(k, avg(v) AS m) FROM E GROUP BY k WINDOW TUMBLING 10 SECONDS
DERIVE Hi(a.k, a.m) PATTERN SEQ(Avg a, E b) WHERE a.k = b.k AND a.m < b.v WITHIN 20 SECONDS
DERIVE Out(h.k, e.v) PATTERN SEQ(Hi h, E e) WHERE h.k = e.k WITHIN 5 SECONDS
INITIATE CONTEXT up PATTERN Hi h
DEFAULT CONTEXT calm { }
CONTEXT up { }
"""
    plan = compile_model(text)
    assert plan.imports == ()
    assert len(plan.matcher_stages) == 3


def test_a_taken_stage_with_a_topic_is_written_by_the_deriver():
    text = CHAIN.replace('EVENT E(ts INT, k INT, v INT) FROM TOPIC "e"\n',
                         'EVENT E(ts INT, k INT, v INT) FROM TOPIC "e"\n'
                         'EVENT Hi(k INT, v INT) TO TOPIC "his"\n')
    before = compile_model(text, import_derived=False)
    assert [s.output_topic for s in before.matcher_stages if s.plan.plan_id == "q1"] == ["his"]
    assert [s.output_topic for s in before.deriver_stages if s.plan.plan_id == "q1"] == [None]
    plan = compile_model(text)
    assert [s.output_topic for s in plan.deriver_stages if s.plan.plan_id == "q1"] == ["his"]
    assert "q1" not in matcher_ids(plan)


def test_the_context_independent_plan_keeps_the_imports():
    plan = compile_model(CHAIN, context_aware=False)
    assert plan.imports == ("Hi",) and plan == context_independent(compile_model(CHAIN))
