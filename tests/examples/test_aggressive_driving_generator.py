"""The aggressive-driving generator at any scale: Listing 1's CarSensor
stream, one reading per car per second in time order, seeded; every matching
episode gives exactly one alert where the episode put A, B and C (as the
2-phase reference finds too), near misses none; and its fixed set is the
example's data file."""

from __future__ import annotations

import json
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from caesar.events.batch import EventBatch, StringPool
from caesar.examples import model_path
from caesar.examples.aggressive_driving.generator import (
    DATA,
    EPISODE_S,
    DrivingConfig,
    drive,
    fixed_set,
)
from caesar.language import compile_model
from caesar.plans.temporal import TemporalPlan
from caesar.services.embedded.pipeline import EmbeddedPipeline
from caesar.services.matcher.tpstream.reference import TwoPhaseReference

PLAN = compile_model(model_path("aggressive_driving"))
[TP] = [s.plan for s in PLAN.matcher_stages + PLAN.deriver_stages
        if isinstance(s.plan, TemporalPlan)]


def test_the_fixed_set_is_the_example_data_file():
    _, rows = fixed_set()
    assert [json.loads(line) for line in DATA.read_text().splitlines()] == rows


def test_readings_cover_every_car_every_second_in_time_order():
    cfg = DrivingConfig(cars=7, minutes=5, seed=3)
    eps, rows = drive(cfg)
    assert drive(cfg) == (eps, rows)  # seeded
    assert drive(DrivingConfig(cars=7, minutes=5, seed=4))[1] != rows
    assert {r["type"] for r in rows} == {"CarSensor"}
    assert [(r["ts"], r["car_id"]) for r in rows] == [
        (t, c) for t in range(300) for c in range(1, 8)]
    assert all(e.start + EPISODE_S <= 300 for e in eps)
    assert any(e.matches for e in eps) and not all(e.matches for e in eps)


@settings(max_examples=12, deadline=None)
@given(cars=st.integers(1, 8), minutes=st.floats(0.5, 8), seed=st.integers(0, 2**16),
       aggressive=st.sampled_from([0.0, 0.5, 2 / 3, 1.0]))
def test_one_alert_per_matching_episode(cars, minutes, seed, aggressive):
    eps, rows = drive(DrivingConfig(cars=cars, minutes=minutes, seed=seed,
                                    aggressive=aggressive))
    alerts = EmbeddedPipeline(PLAN).run_values(rows).alerts
    got = sorted((a.fields["id"], a.fields["A_ts"], a.fields["A_te"], a.fields["B_ts"],
                  a.fields["B_te"], a.fields["C_ts"]) for a in alerts)
    assert got == sorted((e.car, e.start + e.a[0], e.start + e.a[1], e.start + e.b[0],
                          e.start + e.b[1], e.start + e.c[0])
                         for e in eps if e.matches and e.a and e.b and e.c)
    ref = TwoPhaseReference(TP)
    if rows:
        ref.process(EventBatch.from_records(rows, TP.schemas, StringPool(),
                                            partition_of=lambda r: r["car_id"]))
    assert Counter((a.end_ts, a.fields["id"]) for a in alerts) == Counter(
        (m.end_ts, m.fields["id"]) for m in ref.matches())
