"""ACEP on a real Kafka broker with the services as Ray actors: the
HyReminder example's rules and table-reading queries (the acep service:
one actor over every partition, the tables in its checkpointed state) give
the same derived events as the embedded pipeline (integration), also when
the acep actor is killed mid-stream (one Kafka transaction per batch across
its partitions: 0 lost, 0 duplicated, the same final tables)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from acep_models import COUNTER

import caesar
from caesar.codecs import make_codec
from caesar.examples.hospital_hygiene.generator import HygieneConfig, generate
from caesar.language import compile_model
from caesar.services.common.config import ServiceConfig
from caesar.services.embedded.bus_pipeline import produce_end, produce_inputs, read_alerts
from caesar.services.embedded.pipeline import EmbeddedPipeline
from caesar.services.ray_runtime.deployment import Deployment
from caesar.services.scheduler.acep.processor import AcepProcessor
from caesar.services.scheduler.acep.runner import TABLE_HISTORY
from caesar.settings import KafkaSettings, Settings, TopicSettings

pytestmark = pytest.mark.integration

MODEL = Path(caesar.__file__).parent / "examples" / "hospital_hygiene" / "hyreminder.caesar"


def _model_text(prefix: str) -> str:
    return MODEL.read_text(encoding="utf-8").replace('"hh-', f'"{prefix}-')


def acep_deployment(plan, kafka_bootstrap, unique_name):
    """The plan deployed on Kafka + Ray with one actor per service over 2
    partitions (not started), and the config to feed and read it."""
    p = unique_name("caesar")
    topics = TopicSettings.under(p, partitions=2)
    settings = Settings(kafka=KafkaSettings(bootstrap_servers=kafka_bootstrap, linger_ms=2,
                                            poll_timeout_s=0.1), topics=topics)
    cfg = ServiceConfig(plan, topics, make_codec(settings), (0, 1), "test")
    dep = Deployment(plan, settings, actors_per_service=1,
                     options={"group_prefix": p, "commit_interval_s": 0.3})
    return cfg, dep


def _setup(kafka_bootstrap, unique_name, embedded=None):
    prefix = unique_name("hh")
    plan = compile_model(_model_text(prefix))
    assert plan.acep is not None
    events = list(generate(HygieneConfig(workers=12, hours=3, seed=3, sanitize_before=0.6,
                                         sanitize_after=0.6)))
    pipe = EmbeddedPipeline(plan)
    # the versions the acep service keeps, here too (the oracle of --as-of)
    pipe.acep = AcepProcessor(plan.acep, history=TABLE_HISTORY)
    expected = pipe.run_values(events)
    if embedded is not None:
        embedded.update(pipe=pipe, prefix=prefix)
    assert {a.event_type for a in expected.alerts} >= {"HygieneAlert", "WardStatus"}
    cfg, dep = acep_deployment(plan, kafka_bootstrap, unique_name)
    return events, sorted(a.identity() for a in expected.alerts), cfg, dep


def _wait(kafka_bus, cfg, want, timeout_s=150.0):
    deadline = time.monotonic() + timeout_s
    have: list = []
    while time.monotonic() < deadline:
        have = sorted(a.identity() for a in read_alerts(kafka_bus, cfg))
        if set(have) >= set(want):
            time.sleep(1.0)
            return sorted(a.identity() for a in read_alerts(kafka_bus, cfg))
        time.sleep(1.0)
    return have


def test_hyreminder_on_kafka_and_ray_equals_embedded(
        kafka_bootstrap, kafka_bus, ray_session, unique_name):
    events, want, cfg, dep = _setup(kafka_bootstrap, unique_name)
    dep.start()
    try:
        assert "acep" in dep.actors and len(dep.actors["acep"]) == 1
        produce_inputs(kafka_bus, cfg, events, end=True)
        have = _wait(kafka_bus, cfg, want)
        missing = [a for a in want if a not in have]
        extra = [a for a in have if a not in want]
        assert have == want, f"missing {missing[:5]}, extra {extra[:5]}"
    finally:
        stats = dep.stop()
    assert all(s["error"] is None for ss in stats.values() for s in ss)


def test_a_killed_acep_actor_restores_its_tables(
        kafka_bootstrap, kafka_bus, ray_session, unique_name):
    events, want, cfg, dep = _setup(kafka_bootstrap, unique_name)
    half = len(events) // 2
    dep.start()
    try:
        produce_inputs(kafka_bus, cfg, events[:half])
        # No idle flush under exactly once, and ShiftEnd has not spoken yet
        # (it holds the release back): an input watermark at the cut releases
        # the first half (the input is in time order).
        produce_end(kafka_bus, cfg, events[half]["ts"])
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not read_alerts(kafka_bus, cfg):
            time.sleep(0.5)
        assert read_alerts(kafka_bus, cfg), "the first half released alerts before the kill"
        time.sleep(2.0)  # a commit (0.3 s) with tables in the checkpoint
        dep.kill("acep")
        produce_inputs(kafka_bus, cfg, events[half:], end=True)
        have = _wait(kafka_bus, cfg, want)
        # Exactly once: what the killed actor made after its last commit was
        # never visible; its restored tables go on from that commit.
        assert have == want, "alerts missing, repeated or wrong after the restart"
        assert dep.stats()["acep"][0]["restored_from"], "the acep actor restored a checkpoint"
    finally:
        dep.stop()


def test_caesar_tables_shows_the_deployments_tables(
        kafka_bootstrap, kafka_bus, ray_session, unique_name, tmp_path):
    """`caesar tables MODEL` (its own process, connecting to the session's
    Ray) prints the rows the embedded pipeline ends with; `--as-of` and the
    Python API read an older version the same as the embedded tables'."""
    import json
    import os
    import subprocess
    import sys

    import ray

    from caesar.cli.tables_view import rows_in_key_order

    embedded: dict = {}
    events, want, cfg, dep = _setup(kafka_bootstrap, unique_name, embedded)
    acep = embedded["pipe"].acep
    final = rows_in_key_order(acep.tables())
    assert final["hygiene"] and final["violations"], "the input leaves rows in both tables"
    older = list(acep.stamps)[len(acep.stamps) // 2]
    at_older = rows_in_key_order(acep.tables(older))
    assert at_older != final
    model = tmp_path / "hh.caesar"
    model.write_text(_model_text(embedded["prefix"]), encoding="utf-8")
    prefix = dep.prefix
    dep.start()
    try:
        produce_inputs(kafka_bus, cfg, events, end=True)
        assert _wait(kafka_bus, cfg, want) == want
        deadline = time.monotonic() + 60  # the checkpoint after the last batch
        while dep.tables() != final and time.monotonic() < deadline:
            time.sleep(0.5)
        env = dict(os.environ)  # the deployment's namespace: the settings' default, as here
        env.setdefault("RAY_AUTH_MODE", "disabled")  # the session's Ray has no token
        cli = subprocess.run(
            [sys.executable, "-m", "caesar.cli.main", "tables", str(model), "--format", "json",
             "--prefix", prefix, "--ray-address", ray.get_runtime_context().gcs_address],
            capture_output=True, text=True, env=env, timeout=180)
        assert cli.returncode == 0, cli.stderr
        printed: dict[str, list] = {name: [] for name in final}
        for line in cli.stdout.splitlines():
            item = json.loads(line)
            printed[item["table"]].append(item["row"])
        assert printed == final
        assert f"deployment {prefix!r}" in cli.stderr
        # The rich rendering, one table (in this process: its Ray is the session's).
        from typer.testing import CliRunner

        from caesar.cli.main import _register_all, app

        _register_all()
        view = CliRunner().invoke(app, ["tables", str(model), "--table", "violations",
                                        "--prefix", prefix, "--ray-address", "unused"])
        assert view.exit_code == 0, view.output
        assert f"violations ({len(final['violations'])} rows)" in view.stdout
        assert "hygiene (" not in view.stdout
        shown = dep.tables_at(older)
        assert (shown.ts, shown.tables) == (older, at_older)
        assert dep.tables_at(10**12).tables == final  # later than committed: the newest
    finally:
        stats = dep.stop()
    assert all(s["error"] is None for ss in stats.values() for s in ss)




def test_the_acep_actor_killed_mid_stream_loses_and_repeats_nothing(
        kafka_bootstrap, kafka_bus, ray_session, unique_name):
    """kill -9 of the acep actor (2 partitions) while input flows: the
    committed outputs are the embedded run's, each once, and the restored
    tables end equal to the embedded tables."""
    import random

    from caesar.cli.tables_view import rows_in_key_order

    plan = compile_model(COUNTER.replace('"ping"', f'"{unique_name("ping")}"'))
    rng = random.Random(7)
    events = [{"type": "Ping", "ts": t, "unit": rng.randrange(16), "v": rng.randrange(100)}
              for t in range(1, 2401)]
    pipe = EmbeddedPipeline(plan)
    want = sorted(a.identity() for a in pipe.run_values(events).alerts)
    assert pipe.acep is not None and len(want) == len(events)
    final = rows_in_key_order(pipe.acep.tables())
    cfg, dep = acep_deployment(plan, kafka_bootstrap, unique_name)
    dep.start()
    try:
        chunks = [events[i:i + 200] for i in range(0, len(events), 200)]
        killed_after = None
        for n, chunk in enumerate(chunks):
            # an input watermark after each chunk keeps the outputs flowing
            produce_inputs(kafka_bus, cfg, chunk)
            produce_end(kafka_bus, cfg, chunk[-1]["ts"] + 1)
            time.sleep(0.4)
            if killed_after is None and n >= 3 and dep.stats()["acep"][0]["commits"] >= 2:
                dep.kill("acep")  # mid-stream: input before and after it
                killed_after = n
        assert killed_after is not None and killed_after < len(chunks) - 1
        produce_end(kafka_bus, cfg)
        have = _wait(kafka_bus, cfg, want)
        lost = len(set(want) - set(have))
        duplicated = len(have) - len(set(have))
        print(f"acep killed after chunk {killed_after + 1}/{len(chunks)}: {len(have)} outputs, "
              f"{lost} lost, {duplicated} duplicated")
        assert (lost, duplicated) == (0, 0) and have == want
        deadline = time.monotonic() + 60  # the checkpoint after the last batch
        while dep.tables() != final and time.monotonic() < deadline:
            time.sleep(0.5)
        assert dep.tables() == final
        acep = dep.stats()["acep"][0]
        assert acep["restored_from"] and acep["error"] is None
    finally:
        dep.stop()
