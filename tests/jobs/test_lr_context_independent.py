"""The context-independent compilation of the Linear Road model (every query
running all the time, its context an output filter; the baseline of
bench/linear_road) derives the same outputs as the context-aware plan, and
both equal the oracle. The filter applies before a context-specific query
feeds another one (the toll notifications feed the toll charges)."""

from __future__ import annotations

from collections import Counter

from caesar.examples import model_path
from caesar.examples.linear_road.oracle import (
    ALERT_FIELDS,
    CHARGE_FIELDS,
    TOLL_FIELDS,
    expected_outputs,
)
from caesar.examples.linear_road.partitioning import wire_records
from caesar.examples.linear_road.records import position_reports, read_lr
from caesar.language import compile_model
from caesar.services.embedded.pipeline import EmbeddedPipeline

from .test_lr_model_exact import SAMPLE

MODEL = model_path("linear_road")
FIELDS = {"TollNotification": TOLL_FIELDS, "AccidentAlert": ALERT_FIELDS,
          "TollCharge": CHARGE_FIELDS}


def outputs(plan, values) -> tuple[Counter, int]:
    pipe = EmbeddedPipeline(plan)
    result = pipe.run_values(values, topic="lr-position-reports")
    assert result.dead_letters == []
    got = Counter((a.event_type, tuple(int(a.fields[f]) for f in FIELDS[a.event_type]))
                  for a in result.alerts)
    return got, sum(pipe.router.skipped_events.values())


def test_context_independent_plan_equals_context_aware_and_oracle() -> None:
    reports = list(position_reports(read_lr(SAMPLE)))
    expected = expected_outputs(reports)
    want = Counter([("TollNotification", tuple(r)) for r in expected.tolls]
                   + [("AccidentAlert", tuple(r)) for r in expected.alerts]
                   + [("TollCharge", tuple(r)) for r in expected.charges])
    assert expected.charges and expected.alerts
    values = [{**rec, "type": "PositionReport"} for _, rec in wire_records(reports, fanout=True)]
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


def test_a_filtered_stage_feeds_its_consumers_only_in_its_context() -> None:
    model = """MODEL m
PARTITION BY k
EVENT E(ts INT, k INT, v INT) TIMESTAMP ts FROM TOPIC "e"
EVENT Out(k INT, v INT) TO TOPIC "out"
DEFAULT CONTEXT calm {
  SWITCH CONTEXT busy PATTERN E e WHERE e.v > 10
  DERIVE Mid(e.k, 0 AS v) PATTERN E e WHERE e.v > 100
}
CONTEXT busy {
  DERIVE Mid(e.k, e.v) PATTERN E e WHERE e.v > 5
  SWITCH CONTEXT calm PATTERN E e WHERE e.v < 5
}
DERIVE Out(m.k, m.v) PATTERN Mid m
"""
    values = [{"type": "E", "ts": t, "k": 1, "v": v}
              for t, v in enumerate([7, 12, 8, 9, 3, 6, 11, 6])]
    got = []
    for plan in (compile_model(model), compile_model(model, context_aware=False)):
        result = EmbeddedPipeline(plan).run_values(values, topic="e")
        got.append(sorted((a.fields["v"],) for a in result.alerts if a.event_type == "Out"))
    # busy holds after 12 (ts 1) until 3 (ts 4), and after 11: Mid = 8, 9, 6.
    assert got[0] == got[1] == [(6,), (8,), (9,)]
