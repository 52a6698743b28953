"""The Linear Road account model (accounts.caesar: a shared table of toll
accounts per car, updated by rules on TollCharge and read by the Type 2
queries) on a real Kafka broker with the services as Ray actors, the table
in the acep service: every account balance and daily expenditure of the
committed standard-load sample equals the oracle's (which equals the public
LR validator) and the Spark SQL validator's (integration).

Its input is what model.caesar sends it on that sample (the toll charges,
equal to the oracle's: tests/jobs/test_lr_model_exact.py) with the queries
and historical tolls as the producer sends them (check_model.query_records).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from test_acep_ray_kafka import acep_deployment

from caesar.examples.linear_road import oracle
from caesar.examples.linear_road.check_model import ACCOUNTS, KEYS, OUTPUTS, query_records
from caesar.examples.linear_road.partitioning import MS_PER_S
from caesar.examples.linear_road.records import (
    SAMPLE,
    BalanceQuery,
    ExpenditureQuery,
    read_historical,
    read_lr,
)
from caesar.language import compile_model
from caesar.services.embedded.bus_pipeline import produce_inputs, read_alerts

pytestmark = pytest.mark.integration

ANSWERS = ("AccountBalance", "DailyExpenditure")


def _inputs() -> tuple[list[dict[str, Any]], oracle.Expected]:
    records = list(read_lr(SAMPLE))
    askers = {q.vid for q in records if isinstance(q, ExpenditureQuery)}
    historical = read_historical(SAMPLE.with_name(SAMPLE.name + ".tolls.dat"), vids=askers)
    expected = oracle.expected_outputs(records, historical)
    queries = [r for r in records if isinstance(r, BalanceQuery | ExpenditureQuery)]
    # a charge at its report's second (ts = 1000 time + k, k < 999: before the
    # queries of that second, at its last millisecond)
    charges = [{"type": "TollCharge", "ts": c.time * MS_PER_S, "vid": c.vid, "time": c.time,
                "toll": c.toll} for c in expected.charges]
    events = query_records(queries, historical) + charges
    events.sort(key=lambda r: r["ts"])
    return events, expected


def _answers(alerts) -> dict[str, set[tuple]]:
    return {name: {tuple(a.fields[f] for f in OUTPUTS[name]) for a in alerts
                   if a.event_type == name} for name in ANSWERS}


def test_account_table_on_kafka_and_ray_equals_the_oracle(
        kafka_bootstrap, kafka_bus, ray_session, unique_name):
    events, expected = _inputs()
    want = {"AccountBalance": set(expected.balances),
            "DailyExpenditure": set(expected.expenditures)}
    # the sample: 34 charges, a positive balance, cars asking with no account
    assert len(expected.charges) > 30 and any(b.balance > 0 for b in expected.balances)
    assert any(b.balance == 0 for b in expected.balances) and expected.expenditures
    prefix = unique_name("lr")
    text = ACCOUNTS.read_text(encoding="utf-8").replace('"lr-', f'"{prefix}-')
    plan = compile_model(text, str(ACCOUNTS))
    assert plan.acep is not None and [t.name for t in plan.acep.tables] == ["accounts"]
    cfg, dep = acep_deployment(plan, kafka_bootstrap, unique_name)
    dep.start()
    try:
        assert len(dep.actors["acep"]) == 1
        produce_inputs(kafka_bus, cfg, events, end=True)
        deadline = time.monotonic() + 150
        have = _answers(read_alerts(kafka_bus, cfg))
        while time.monotonic() < deadline and any(have[n] != want[n] for n in ANSWERS):
            time.sleep(1.0)
            have = _answers(read_alerts(kafka_bus, cfg))
        alerts = read_alerts(kafka_bus, cfg)
        for name in ANSWERS:
            ids = [tuple(a.fields[k] for k in KEYS[name]) for a in alerts
                   if a.event_type == name]
            assert len(ids) == len(set(ids)), f"{name}: an answer went out twice"
            assert have[name] == want[name], (
                f"{name}: missing {sorted(want[name] - have[name])[:5]}, "
                f"extra {sorted(have[name] - want[name])[:5]}")
        # the accounts the table ends with: every car's charges summed
        totals: dict[int, int] = {}
        for c in expected.charges:
            totals[c.vid] = totals.get(c.vid, 0) + c.toll
        deadline = time.monotonic() + 30  # the checkpoint after the last batch
        rows: Any = None
        while time.monotonic() < deadline:
            rows = {r["vid"]: r["balance"] for r in dep.tables().get("accounts", [])}
            if rows == totals:
                break
            time.sleep(0.5)
        assert rows == totals
    finally:
        stats = dep.stop()
    assert all(s["error"] is None for ss in stats.values() for s in ss)
