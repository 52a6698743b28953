"""The driver's endpoint over real HTTP, with stand-in statistics (no Ray):
Prometheus text that a Prometheus parser reads back, probes, the page, JSON."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from caesar.observe.server import Observer
from caesar.observe.timeline import ContextTimeline
from caesar.runtime.processes import free_port
from caesar.services.common.latency import LatencyHistogram


def actor(service: str, i: int, alive: bool = True) -> dict:
    hop = LatencyHistogram()
    for ms in (3, 40, 40, 700):
        hop.observe(ms)
    stats = {"service": service, "actor": f"{service}-{i}", "records_in": 100 + i,
             "records_out": 50, "batches": 5, "commits": 2, "alive": alive, "uptime_s": 9.0,
             "lag": 7, "state_bytes": 1234, "hop_ms": hop.as_dict()}
    if service == "scheduler":
        stats["dead_letters"] = 3
        stats["dead_letters_by_reason"] = {"late": 2, "schema": 1}
    if service == "router":
        stats["skipped_events"] = {"q4": 11}
    if service == "matcher":
        stats["alert_latency_ms"] = hop.as_dict()
    return stats


STATS = {s: [actor(s, 0), actor(s, 1)] for s in ("scheduler", "deriver", "router", "matcher")}


@pytest.fixture
def observer() -> Iterator[tuple[Observer, dict]]:
    current = {"stats": STATS}
    timeline = ContextTimeline()
    timeline.apply("0|0|7", 59, ("clear",))
    timeline.apply("0|0|7", 119, ("congestion",))
    obs = Observer(lambda: current["stats"], timeline, port=free_port(), model="lr").start()
    obs.stats.ttl_s = 0.0
    yield obs, current
    obs.stop()


def get(obs: Observer, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(obs.url + path, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_metrics_parse_as_prometheus_text(observer: tuple[Observer, dict]) -> None:
    status, text = get(observer[0], "/metrics")
    assert status == 200
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert samples[("caesar_records_in_total",
                    (("actor", "matcher-1"), ("service", "matcher")))] == 101
    assert samples[("caesar_dead_letters_total",
                    (("actor", "scheduler-0"), ("reason", "late"), ("service", "scheduler")))] == 2
    assert samples[("caesar_skipped_events_total",
                    (("actor", "router-0"), ("plan", "q4"), ("service", "router")))] == 11
    assert samples[("caesar_consumer_lag_records",
                    (("actor", "deriver-0"), ("service", "deriver")))] == 7
    hop = (("actor", "router-1"), ("le", "0.05"), ("service", "router"))
    assert samples[("caesar_hop_latency_seconds_bucket", hop)] == 3  # 3, 40, 40 ms
    assert samples[("caesar_alert_latency_seconds_count",
                    (("actor", "matcher-0"), ("service", "matcher")))] == 4


def test_probes(observer: tuple[Observer, dict]) -> None:
    obs, current = observer
    assert get(obs, "/healthz") == (200, "ok\n")
    assert get(obs, "/ready")[0] == 200
    current["stats"] = {**STATS, "router": [actor("router", 0, alive=False)]}
    status, body = get(obs, "/ready")
    assert status == 503 and json.loads(body)["down"] == ["router[0]"]


def test_page_and_json(observer: tuple[Observer, dict]) -> None:
    obs, _ = observer
    status, page = get(obs, "/")
    assert status == 200 and "live context view" in page
    timeline = json.loads(get(obs, "/api/timeline")[1])
    assert timeline["partitions"][0]["intervals"] == [
        {"context": "clear", "start": 59, "end": 119},
        {"context": "congestion", "start": 119, "end": None}]
    stats = json.loads(get(obs, "/api/stats")[1])["services"]
    assert stats["scheduler"]["records_in"] == 201 and stats["scheduler"]["dead_letters"] == 6
    assert stats["router"]["hop_p50_ms"] == 50 and stats["router"]["hop_p99_ms"] == 1000
    assert get(obs, "/nope")[0] == 404
