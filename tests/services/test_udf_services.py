"""User-defined functions through the whole pipeline (scheduler, deriver,
router, matcher) on both engines: in a context transition (deriver), a
pattern, time / count window aggregations (argument, WHERE, GROUP BY output)
and HAVING; results against a hand recomputation, failures as dead letters
while the rest goes on, and runners writing them to the dead-letter topic."""

from __future__ import annotations

import re
from collections import Counter

import pytest

import caesar
from caesar.examples.geo import grid_cell, haversine_km

KM = "caesar.examples.geo:haversine_km"
MODEL = """
MODEL geo
PARTITION BY car
EVENT Pos(ts INT, car INT, lat DOUBLE, lon DOUBLE) FROM TOPIC "pos"

DEFAULT CONTEXT near {
  SWITCH CONTEXT away PATTERN Pos p WHERE km(p.lat, p.lon, 52.0, 13.0) > 100
}
CONTEXT away {
  SWITCH CONTEXT near PATTERN Pos p WHERE km(p.lat, p.lon, 52.0, 13.0) <= 100
  DERIVE Far(p.car, cell(p.lat, p.lon, 1.0) AS cell) PATTERN Pos p
}
DERIVE Spread(car, max(km(lat, lon, 52.0, 13.0)) AS top, count(*) AS n)
  FROM Pos WHERE km(lat, lon, 52.0, 13.0) > 1 WINDOW TUMBLING 10 GROUP BY car
  HAVING n > 1
DERIVE Last3(car, avg(km(lat, lon, 52.0, 13.0)) AS mean) FROM Pos WINDOW COUNT 3 GROUP BY car
"""
# (ts, lat): car 1 drives away and back; lat 99 makes km raise
TRACK = [(1, 52.0), (2, 53.0), (3, 54.0), (4, 99.0), (5, 52.1), (6, 55.0)]


def _events():
    return [{"type": "Pos", "ts": ts, "car": 1, "lat": lat, "lon": 13.0} for ts, lat in TRACK]


def _km(lat):
    return haversine_km(lat, 13.0, 52.0, 13.0)


@pytest.mark.parametrize("engine", ["cython", "reference"])
def test_functions_in_every_kind_of_query(engine):
    model = caesar.compile(MODEL, functions={"km": KM, "cell": grid_cell})
    alerts = list(model.session(engine=engine).run(_events()))
    by_type: dict[str, list] = {}
    for a in alerts:
        by_type.setdefault(a.event_type, []).append(a)
    # away after ts 2 (53.0 is 111 km off), near again after ts 5 (windows
    # are half-open, (ti, tt]: 5 is in away); at 99.0 km is missing, so no
    # transition fires there
    assert [(a.end_ts, a.fields["cell"]) for a in by_type["Far"]] == \
        [(3, "54:13"), (4, "99:13"), (5, "52:13")]
    # one tumbling window [0, 10): km > 1 holds at 2, 3, 5, 6 (4 is missing)
    (spread,) = by_type["Spread"]
    assert spread.fields["n"] == 4
    assert spread.fields["top"] == pytest.approx(max(_km(x) for x in (53.0, 54.0, 52.1, 55.0)))
    # count windows of 3: (1, 2, 3) and (4, 5, 6); avg skips the missing km
    means = [a.fields["mean"] for a in sorted(by_type["Last3"], key=lambda a: a.end_ts)]
    assert means == pytest.approx([(_km(52.0) + _km(53.0) + _km(54.0)) / 3,
                                   (_km(52.1) + _km(55.0)) / 2])


@pytest.mark.parametrize("engine", ["cython", "reference"])
def test_failures_become_dead_letters(engine):
    model = caesar.compile(MODEL, functions={"km": KM, "cell": grid_cell})
    session = model.session(engine=engine)
    out = session.push(_events())
    letters = out.dead_letters + session.finish().dead_letters
    assert letters and {d.reason for d in letters} == {"function"}
    assert all("km(99.0, 13.0, 52.0, 13.0) raised ValueError: latitude out of range"
               in d.detail for d in letters)
    # every query that evaluated it reports it: the transitions, the window
    # aggregations (argument and WHERE)
    assert len({d.detail.split(":")[0] for d in letters}) >= 3


def test_runners_write_dead_letters_to_their_topic():
    from caesar.codecs import make_codec
    from caesar.services.common.config import ServiceConfig
    from caesar.services.common.messages import DeadLetter
    from caesar.services.matcher.runner import dead_records
    from caesar.settings import Settings

    model = caesar.compile(MODEL, functions={"km": KM, "cell": grid_cell})
    settings = Settings()
    cfg = ServiceConfig(model.plan, settings.topics, make_codec(settings), (0,), "t")
    (rec,) = dead_records(cfg, [DeadLetter("function", "plan q1: km(...) raised", "", -1, -1)],
                          "matcher")
    assert rec.topic == settings.topics.dead_letters
    _, value = cfg.codec.decode(rec.value)
    assert value["reason"] == "PROCESSING_ERROR" and value["detail"].startswith("plan q1")
    assert value["service"] == "matcher"


def _cars():
    """Three cars driving TRACK side by side, in event-time order as a live
    feed is. (Car after car would put ts 1 behind ts 6 of the car before:
    the scheduler judges lateness record by record on each Kafka partition,
    so which of them are late would depend on how the cars fall on the
    partitions, and embedded mode has one partition.)"""
    return [dict(e, car=car) for e in _events() for car in (1, 2, 3)]


def _failed_calls(details):
    """Failed function calls per query from dead-letter details: a letter
    covers a query's failures in one release ("... (3 calls)"), so the
    letters depend on batching but the calls they count do not."""
    calls: Counter[str] = Counter()
    for d in details:
        m = re.fullmatch(r"plan (\S+): user-defined function .*?(?: \((\d+) calls\))?", d)
        assert m, d
        calls[m[1]] += int(m[2] or 1)
    return calls


def test_runners_on_two_partitions_equal_embedded():
    """The service runners (exactly-once loop, codecs, dead-letter records)
    over the in-memory bus, cars spread over two partitions, against
    embedded mode: the same alerts and the same failed calls per query."""
    from caesar.bus.memory import InMemoryBus
    from caesar.codecs import make_codec
    from caesar.services.common.config import ServiceConfig
    from caesar.services.embedded.bus_pipeline import (
        BusPipeline,
        produce_inputs,
        read_alerts,
        read_dead_letters,
        read_topic,
    )
    from caesar.services.embedded.pipeline import EmbeddedPipeline
    from caesar.settings import TopicSettings

    model = caesar.compile(MODEL, functions={"km": KM, "cell": grid_cell})
    expected = EmbeddedPipeline(model.plan).run_values(_cars())
    assert {d.reason for d in expected.dead_letters} == {"function"}
    topics = TopicSettings(partitions=2)
    cfg = ServiceConfig(model.plan, topics, make_codec(), (0, 1), "t")
    bus = InMemoryBus()
    pipe = BusPipeline(cfg, bus, poll_timeout_s=0.0, commit_interval_s=0.05)
    try:
        produce_inputs(bus, cfg, _cars(), end=True)
        pipe.run_until_quiet(quiet_s=0.3)
        got, dead = read_alerts(bus, cfg), read_dead_letters(bus, cfg)
        used = {r.partition for r in read_topic(bus, topics.transactions, 2)}
    finally:
        pipe.close()
    assert used == {0, 1} and len({a.key for a in got}) == 3
    assert sorted(a.identity() for a in got) == sorted(a.identity() for a in expected.alerts)
    assert {(d["reason"], d["service"]) for d in dead} == \
        {("PROCESSING_ERROR", "deriver"), ("PROCESSING_ERROR", "matcher")}
    assert _failed_calls(d["detail"] for d in dead) == \
        _failed_calls(d.detail for d in expected.dead_letters)


@pytest.mark.integration
def test_functions_on_kafka_and_ray_equal_embedded(kafka_bootstrap, kafka_bus, ray_session,
                                                   unique_name):
    """The actors get the plan with the functions' import paths and import
    them; alerts equal embedded mode, failures reach the dead-letter topic."""
    import time
    from dataclasses import replace

    from caesar.codecs import make_codec
    from caesar.services.common.config import ServiceConfig
    from caesar.services.embedded.bus_pipeline import (
        produce_inputs,
        read_alerts,
        read_dead_letters,
    )
    from caesar.services.embedded.pipeline import EmbeddedPipeline
    from caesar.services.ray_runtime.deployment import Deployment
    from caesar.settings import KafkaSettings, Settings, TopicSettings

    model = caesar.compile(MODEL, functions={"km": KM, "cell": grid_cell})
    def local_cell(lat: float, lon: float, size: float) -> str:
        return "x"

    with pytest.raises(caesar.CaesarError, match="local_cell|cell.*cannot be deployed"):
        Deployment(caesar.compile(MODEL, functions={"km": KM, "cell": local_cell}).plan,
                   Settings())
    # the input ends with watermarks at the end of time (produce_inputs(end=True)):
    # they close the last windows on Kafka as the end of input does in embedded mode
    events = _cars()
    expected = EmbeddedPipeline(model.plan).run_values(events)
    assert expected.alerts and expected.dead_letters
    want_calls = _failed_calls(d.detail for d in expected.dead_letters)
    p = unique_name("udf")
    plan = replace(model.plan, event_types=tuple(
        replace(t, topic=unique_name("pos")) if t.topic else t for t in model.plan.event_types))
    topics = TopicSettings.under(p, partitions=2)
    settings = Settings(kafka=KafkaSettings(bootstrap_servers=kafka_bootstrap, linger_ms=2,
                                            poll_timeout_s=0.1), topics=topics)
    cfg = ServiceConfig(plan, topics, make_codec(settings), (0, 1), "test")
    dep = Deployment(plan, settings, actors_per_service=1,
                     options={"group_prefix": p, "commit_interval_s": 0.3})
    want = sorted(a.identity() for a in expected.alerts)
    dep.start()
    try:
        produce_inputs(kafka_bus, cfg, events, end=True)
        deadline = time.monotonic() + 120
        got: list = []
        dead: list = []

        def calls() -> int:
            return sum(_failed_calls(d["detail"] for d in dead
                                     if d["reason"] == "PROCESSING_ERROR").values())

        while time.monotonic() < deadline and (len(got) < len(want)
                                               or calls() < want_calls.total()):
            time.sleep(1.0)
            got = sorted(a.identity() for a in read_alerts(kafka_bus, cfg))
            dead = read_dead_letters(kafka_bus, cfg)
    finally:
        stats = dep.stop()
    assert got == want
    assert dead and {d["reason"] for d in dead} == {"PROCESSING_ERROR"}
    assert all("raised ValueError: latitude out of range" in d["detail"] for d in dead)
    assert {d["service"] for d in dead} == {"deriver", "matcher"}
    assert _failed_calls(d["detail"] for d in dead) == want_calls
    assert all(s["error"] is None for ss in stats.values() for s in ss)
