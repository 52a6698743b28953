"""A result released late (a closed aggregation window) reaches only the
stages whose context held at the result's own timestamp, not at the step
that released it."""

from __future__ import annotations

from caesar.language import compile_model
from caesar.services.common.messages import Transaction, partition_id
from caesar.services.matcher.reference import ReferenceEngine
from caesar.services.matcher.stage_graph import StageGraph, output_type

MODEL = """MODEL m
TIME UNIT SECONDS
PARTITION BY seg
EVENT R(ts INT, seg INT, spd INT) FROM TOPIC "r"
DERIVE Avg(seg, avg(spd) AS lav) FROM R GROUP BY seg WINDOW TUMBLING 10 SECONDS
DEFAULT CONTEXT clear { SWITCH CONTEXT jam PATTERN R r WHERE r.spd = 0 }
CONTEXT jam {
  DERIVE Report(a.seg, a.lav) PATTERN Avg a
  SWITCH CONTEXT clear PATTERN R r WHERE r.spd = 99
}
"""
P = partition_id("1")


def run(active_at_5: str, active_at_12: str) -> list[dict]:
    plan = compile_model(MODEL)
    schemas = {t.name: dict(t.fields) for t in plan.event_types}
    graph = StageGraph(plan.matcher_stages, schemas, ReferenceEngine)
    every = frozenset(s.plan.plan_id for s in plan.matcher_stages
                      if "clear" in s.contexts)  # the aggregation runs everywhere
    jam = frozenset(s.plan.plan_id for s in plan.matcher_stages if "jam" in s.contexts)
    active = {"clear": every, "jam": jam}

    def txn(ts: int) -> Transaction:
        return Transaction(P, "1", ts, ({"type": "R", "ts": ts, "seg": 1, "spd": 10},))

    out = graph.step_transactions(5, [(txn(5), active[active_at_5])])
    out += graph.step_transactions(12, [(txn(12), active[active_at_12])])  # releases [0, 10) stamped 9
    return [o.record for o in out if output_type(o.stage) == "Report"]


def test_result_runs_in_the_context_of_its_timestamp():
    assert [(r["_ts"], r["lav"]) for r in run("jam", "clear")] == [(9, 10.0)]


def test_result_does_not_run_in_a_context_that_started_later():
    assert run("clear", "jam") == []
