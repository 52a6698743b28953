"""TPStream queries in the services: the Listing 1 example end to end in
embedded mode and through the runners (Avro, checkpoints) on the in-memory
bus, situations driving contexts, a temporal query suspended outside its
context, and bounded state on a long stream of changing partitions."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from caesar.bus.memory import InMemoryBus
from caesar.codecs import make_codec
from caesar.events.batch import EventBatch, StringPool
from caesar.examples import model_path
from caesar.language import compile_model
from caesar.plans.execution import ExecutionPlan
from caesar.plans.temporal import TemporalPlan
from caesar.services.common.config import ServiceConfig
from caesar.services.embedded.bus_pipeline import BusPipeline, produce_inputs, read_alerts
from caesar.services.embedded.pipeline import EmbeddedPipeline
from caesar.services.matcher.tpstream.engine import TemporalEngine
from caesar.services.matcher.tpstream.reference import TwoPhaseReference
from caesar.settings import TopicSettings

EXAMPLE = model_path("aggressive_driving")
DATA = EXAMPLE.parent / "data" / "car_sensors.jsonl"
CONTEXTS = """MODEL ctx
TIME UNIT SECONDS
PARTITION BY car_id
EVENT CarSensor(ts INT, car_id INT, speed FLOAT, accel FLOAT) FROM TOPIC "cs"
SITUATION Speeding AS CarSensor.speed > 70 AT LEAST 3 SECONDS
DEFAULT CONTEXT normal {
  INITIATE CONTEXT speeding ON START OF Speeding
}
CONTEXT speeding {
  TERMINATE CONTEXT speeding ON END OF Speeding
  DERIVE HardBrake(min(C.accel) AS hardest, count(C) AS readings)
    DEFINE C AS CarSensor.accel < -9 AT LEAST 2 SECONDS
    PATTERN C
}
"""


def events() -> list[dict]:
    return [{"type": "CarSensor", **json.loads(line)} for line in DATA.read_text().splitlines()]


def temporal_plans(plan: ExecutionPlan) -> list[TemporalPlan]:
    stages = plan.deriver_stages + plan.matcher_stages + tuple(t.stage for t in plan.transitions)
    return [s.plan for s in stages if isinstance(s.plan, TemporalPlan)]


def reference(plan: TemporalPlan, evs: list[dict]) -> TwoPhaseReference:
    ref = TwoPhaseReference(plan)
    if evs:
        ref.process(EventBatch.from_records(
            evs, plan.schemas, StringPool(), partition_of=lambda r: r["car_id"]))
    return ref


def key(ts: int, car: int, fields: dict) -> tuple:
    return (ts, car, tuple(sorted((k, round(v, 6) if isinstance(v, float) else v)
                                  for k, v in fields.items())))


def test_listing1_example_finds_each_alternative_once_as_the_reference_does() -> None:
    plan = compile_model(EXAMPLE)
    (tp,) = temporal_plans(plan)
    evs = events()
    result = EmbeddedPipeline(plan).run_values(evs)
    got = Counter(key(a.end_ts, int(a.key), a.fields) for a in result.alerts)
    want = Counter(key(d.end_ts, d.partition, d.fields) for d in reference(tp, evs).matches())
    assert got == want
    # cars 1-16 each drive one combination of alternatives; 17-24 are near misses
    assert sorted(a.fields["id"] for a in result.alerts) == list(range(1, 17))
    assert all(a.topic == "aggressive_driving.AggressiveDriver" for a in result.alerts)
    # early detection: where C is still running at detection, its end is open
    open_c = {a.fields["id"] for a in result.alerts if a.fields["C_te"] is None}
    assert open_c == {3, 4, 7, 8, 11, 12, 15, 16}  # B OVERLAPS C, B MEETS C
    assert result.dead_letters == []


def test_example_through_the_runners_on_the_memory_bus_equals_embedded() -> None:
    """Avro on the wire (open ends are nulls), commit protocol, checkpoints."""
    plan = compile_model(EXAMPLE)
    evs = events()
    expected = EmbeddedPipeline(plan).run_values(evs)
    cfg = ServiceConfig(plan=plan, topics=TopicSettings(partitions=2), codec=make_codec(),
                        partitions=(0, 1), actor_id="t", idle_flush_s=0.2)
    bus = InMemoryBus()
    pipe = BusPipeline(cfg, bus, commit_interval_s=0.05, poll_timeout_s=0.01, batch_size=200)
    produce_inputs(bus, cfg, evs)
    pipe.run_until_quiet(quiet_s=0.5)
    got = read_alerts(bus, cfg)
    pipe.close()
    assert sorted(a.identity() for a in got) == sorted(a.identity() for a in expected.alerts)


def test_situation_edges_drive_a_context_and_its_temporal_query_only_sees_the_windows() -> None:
    plan = compile_model(CONTEXTS)
    evs = events()
    result = EmbeddedPipeline(plan).run_values(evs)
    speeding = next(p for p in temporal_plans(plan) if p.plan_id == "Speeding.start")
    brake = next(p for p in temporal_plans(plan) if p.output and p.output.event_type == "HardBrake")
    # Independently: the windows of `speeding` are (visible_at, te] of each
    # Speeding situation (context windows are half-open, (ti, tt]); the query
    # sees exactly the events inside them and starts afresh in each.
    sits = reference(speeding, evs)
    want: Counter = Counter()
    changes = set()
    for car in sits.events:
        for s in sits.situations(car)["Speeding"]:
            assert s.visible_at is not None
            changes.add((str(car), s.visible_at, ("speeding",)))
            if s.te is not None:
                changes.add((str(car), s.te, ("normal",)))
            inside = [e for e in evs if e["car_id"] == car and s.visible_at < e["ts"]
                      and (s.te is None or e["ts"] <= s.te)]
            for d in reference(brake, inside).matches():
                want[key(d.end_ts, car, d.fields)] += 1
    assert {(c.key, c.ts, c.contexts) for c in result.context_changes} == changes
    got = Counter(key(a.end_ts, int(a.key), a.fields) for a in result.alerts)
    assert got == want and sum(want.values()) >= 10


def test_state_stays_bounded_on_a_long_stream_of_changing_partitions() -> None:
    """200,000 instants over cars that come and go: ended situations are
    released once WITHIN has passed, and cars holding nothing are forgotten."""
    plan = next(iter(temporal_plans(compile_model(EXAMPLE))))
    engine = TemporalEngine([plan])
    pool = StringPool()
    schema = plan.schemas
    peak_buffered = peak_partitions = 0
    matches = 0
    for minute in range(100):
        recs = []
        for second in range(60):
            t = minute * 60 + second
            for lane in range(30):  # 30 cars at a time, a new set of ids every 5 minutes
                car = (minute // 5) * 1000 + lane
                phase = (t + lane * 7) % 40
                recs.append({"type": "CarSensor", "ts": t, "car_id": car,
                             "speed": 80.0 if 10 <= phase < 30 else 50.0,
                             "accel": 9.0 if 4 <= phase < 10 else -10.0 if 20 <= phase < 24
                             else 0.0})
        batch = EventBatch.from_records(recs, schema, pool, partition_of=lambda r: r["car_id"])
        matches += len(engine.process(batch))
        engine.advance(minute * 60 + 60)
        peak_buffered = max(peak_buffered, engine.buffered())
        peak_partitions = max(peak_partitions, engine.partitions())
    assert matches > 1000
    assert peak_partitions <= 60  # the current 30 cars and the 30 of the previous set
    # WITHIN 5 MINUTES: at most ~8 situations of each kind per car in 300 s, 3 kinds
    assert peak_buffered <= 60 * 3 * 9
    assert Path(DATA).exists()
