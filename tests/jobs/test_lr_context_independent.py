"""The context-independent compilation of the Linear Road model (every query
running all the time, its context an output filter; the baseline of
bench/linear_road) derives the same tolls and alerts as the context-aware
plan, and both equal the oracle. A model whose context-specific query feeds
another query is refused in that mode (its filter would not be exact)."""

from __future__ import annotations

from collections import Counter

import pytest

from caesar.errors import PlanError
from caesar.examples import model_path
from caesar.examples.linear_road.generator import GeneratorConfig, generate
from caesar.examples.linear_road.oracle import ALERT_FIELDS, TOLL_FIELDS, expected_outputs
from caesar.examples.linear_road.partitioning import wire_records
from caesar.language import compile_model
from caesar.services.embedded.pipeline import EmbeddedPipeline

MODEL = model_path("linear_road")
FIELDS = {"TollNotification": TOLL_FIELDS, "AccidentAlert": ALERT_FIELDS}


def outputs(plan, values) -> tuple[Counter, int]:
    pipe = EmbeddedPipeline(plan)
    result = pipe.run_values(values, topic="lr-position-reports")
    assert result.dead_letters == []
    got = Counter((a.event_type, tuple(int(a.fields[f]) for f in FIELDS[a.event_type]))
                  for a in result.alerts)
    return got, sum(pipe.router.skipped_events.values())


def test_context_independent_plan_equals_context_aware_and_oracle() -> None:
    reports = list(generate(GeneratorConfig(xways=1, duration_s=600, cars_per_direction=300,
                                            seed=1)))
    expected = expected_outputs(reports)
    want = Counter([("TollNotification", tuple(r)) for r in expected.tolls]
                   + [("AccidentAlert", tuple(r)) for r in expected.alerts])
    assert any(t.toll > 0 for t in expected.tolls) and expected.alerts
    values = [rec for r in reports for _, rec in wire_records(r, fanout=True)]
    aware = compile_model(MODEL)
    independent = compile_model(MODEL, context_aware=False)
    assert independent.context_filters and not aware.context_filters
    assert all(len(s.contexts) == len(independent.contexts)
               for s in independent.matcher_stages)
    got_aware, skipped_aware = outputs(aware, values)
    got_independent, skipped_independent = outputs(independent, values)
    assert got_aware == want
    assert got_independent == want
    # The context-aware run suspended stages; the baseline never does.
    assert skipped_aware > 0 and skipped_independent == 0


def test_filtered_stage_feeding_another_is_refused() -> None:
    model = """MODEL m
PARTITION BY k
EVENT E(ts INT, k INT, v INT) TIMESTAMP ts FROM TOPIC "e"
EVENT Out(k INT, v INT) TO TOPIC "out"
DEFAULT CONTEXT calm {
  SWITCH CONTEXT busy PATTERN E e WHERE e.v > 10
}
CONTEXT busy {
  DERIVE Mid(e.k, e.v) PATTERN E e WHERE e.v > 20
  DERIVE Out(m.k, m.v) PATTERN Mid m
  SWITCH CONTEXT calm PATTERN E e WHERE e.v < 5
}
"""
    compile_model(model)
    with pytest.raises(PlanError, match="feeds"):
        compile_model(model, context_aware=False)
