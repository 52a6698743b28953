"""The driver's endpoint on a running Linear Road deployment (real broker,
real Ray): Prometheus scrape, readiness, and the live context view opened in
headless Chromium, which must show the contexts the model derived."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from caesar.codecs import make_codec
from caesar.examples import model_path
from caesar.examples.linear_road.partitioning import model_inputs
from caesar.examples.linear_road.records import SAMPLE, position_reports, read_lr
from caesar.language import compile_model
from caesar.observe import observe
from caesar.plans.execution import ExecutionPlan
from caesar.runtime.processes import free_port
from caesar.services.common.config import ServiceConfig
from caesar.services.embedded.bus_pipeline import produce_inputs, read_alerts
from caesar.services.embedded.pipeline import EmbeddedPipeline
from caesar.services.ray_runtime.deployment import Deployment
from caesar.settings import KafkaSettings, Settings, TopicSettings

pytestmark = pytest.mark.integration
DOC_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "live-context-view.png"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Flags for a headless Chromium on a machine without network beyond localhost.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


def _reports(plan: ExecutionPlan, until_s: int) -> list[dict]:
    return model_inputs(plan, itertools.takewhile(lambda r: r.time < until_s,
                                                  position_reports(read_lr(SAMPLE))))


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed "
                    "(scripts/setup.sh installs it when run as root)")
def test_metrics_readiness_and_live_view_of_linear_road(
        kafka_bootstrap, kafka_bus, ray_session, unique_name, tmp_path: Path) -> None:
    lr = compile_model(model_path("linear_road"))
    events = _reports(lr, until_s=600)  # the sample's accident is detected at 520 s
    expected = EmbeddedPipeline(lr).run_values(events)
    derived = {c for change in expected.context_changes for c in change.contexts}
    assert {"congestion", "accident"} <= derived  # the sample derives both
    p = unique_name("obs")
    topic = unique_name("lr")
    outputs = {name: unique_name(name)
               for name in ("lr-tolls", "lr-accident-alerts", "lr-toll-charges")}
    lr = replace(lr, event_types=tuple(replace(t, topic=topic) if t.topic else t
                                       for t in lr.event_types),
                 matcher_stages=tuple(replace(s, output_topic=outputs.get(s.output_topic))
                                      if s.output_topic else s for s in lr.matcher_stages))
    topics = TopicSettings.under(p, partitions=2)
    settings = Settings(kafka=KafkaSettings(bootstrap_servers=kafka_bootstrap, linger_ms=2,
                                            poll_timeout_s=0.1), topics=topics)
    cfg = ServiceConfig(lr, topics, make_codec(settings), (0, 1), "test")
    dep = Deployment(lr, settings, actors_per_service=1,
                     options={"group_prefix": p, "commit_interval_s": 0.5})
    dep.start()
    observation = observe(dep, port=free_port())
    try:
        produce_inputs(kafka_bus, cfg, events, end=True)
        deadline = time.monotonic() + 420
        while len(read_alerts(kafka_bus, cfg)) < len(expected.alerts):
            assert time.monotonic() < deadline, \
                f"{len(read_alerts(kafka_bus, cfg))} of {len(expected.alerts)} alerts"
            time.sleep(1.0)
        url = observation.url

        assert _get(f"{url}/ready")[0] == 200
        time.sleep(1.2)  # past the statistics cache
        samples = {(s.name, s.labels.get("service")): s.value
                   for family in text_string_to_metric_families(_get(f"{url}/metrics")[1])
                   for s in family.samples if s.labels.get("service")}
        for service in ("scheduler", "deriver", "router", "matcher"):
            assert samples[("caesar_records_in_total", service)] > 0, service
            assert samples[("caesar_hop_latency_seconds_count", service)] > 0, service
        assert samples[("caesar_alert_latency_seconds_count", "matcher")] > 0

        deadline = time.monotonic() + 60
        while True:
            timeline = json.loads(_get(f"{url}/api/timeline")[1])
            shown = {i["context"] for part in timeline["partitions"] for i in part["intervals"]}
            if shown >= derived or time.monotonic() > deadline:
                break
            time.sleep(1.0)
        assert shown == derived

        # The page as a browser renders it (its script fetches the JSON above).
        dom = _chromium(["--virtual-time-budget=10000", "--dump-dom", url + "/"],
                        tmp_path / "profile-dom")
        assert dom.returncode == 0, dom.stderr[-2000:]
        rendered = set(re.findall(r'<rect [^>]*data-context="([^"]+)"', dom.stdout))
        assert rendered == derived
        assert set(re.findall(r'data-legend="([^"]+)"', dom.stdout)) == derived
        assert set(re.findall(r'<tr data-service="([^"]+)"', dom.stdout)) == \
            {"scheduler", "deriver", "router", "matcher"}
        shot = tmp_path / "view.png"
        png = _chromium(["--virtual-time-budget=10000", "--window-size=1280,900",
                         f"--screenshot={shot}", url + "/"], tmp_path / "profile-png")
        assert png.returncode == 0 and shot.stat().st_size > 10_000, png.stderr[-2000:]
        if os.environ.get("CAESAR_UPDATE_SCREENSHOT") == "1":
            shutil.copy(shot, DOC_SCREENSHOT)
    finally:
        observation.stop()
        dep.stop()
