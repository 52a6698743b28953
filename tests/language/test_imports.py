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


AGG_CHAIN = HEAD + """
DERIVE Avg(k, avg(v) AS m) FROM E GROUP BY k WINDOW TUMBLING 10 SECONDS
DERIVE Hi(a.k, a.m) PATTERN SEQ(Avg a, E b) WHERE a.k = b.k AND a.m < b.v WITHIN 20 SECONDS
DERIVE Out(h.k, e.v) PATTERN SEQ(Hi h, E e) WHERE h.k = e.k WITHIN 5 SECONDS
INITIATE CONTEXT up PATTERN Hi h
DEFAULT CONTEXT calm { }
CONTEXT up { }
"""


def test_an_aggregate_comes_from_the_deriver_and_the_chain_after_it_stays():
    """A windowed aggregate's results are released when time passes, not
    derived on arrival: it is taken over, what reads it is not."""
    plan = compile_model(AGG_CHAIN)
    assert plan.imports == ("Avg",) and sorted(plan.exports) == ["q1"]
    assert matcher_ids(plan) == ["q2", "q3"]


@pytest.mark.parametrize("strategy", ["skip_till_next_match", "strict_contiguity",
                                      "partition_contiguity"])
def test_an_aggregate_read_in_arrival_order_stays_in_the_matcher(strategy):
    """Imported, an aggregate's results come with the events of their
    timestamp instead of after them: a reader that takes the first of two
    events of one timestamp could bind another."""
    text = AGG_CHAIN.replace("AND a.m < b.v WITHIN 20 SECONDS",
                             f"AND a.m < b.v WITHIN 20 SECONDS STRATEGY {strategy}")
    plan = compile_model(text)
    assert plan.imports == () and matcher_ids(plan) == ["q1", "q2", "q3"]


def test_only_time_windows_are_taken():
    """A session window's result is stamped with its last event, which the
    deriver's progress may have passed when the gap closes it."""
    text = AGG_CHAIN.replace("WINDOW TUMBLING 10 SECONDS", "WINDOW SESSION GAP 10 SECONDS")
    assert compile_model(text).imports == ()


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
