"""Model upgrade of a running Kafka + Ray deployment (integration): input
keeps flowing while `caesar deploy --update` swaps the model; kept and
renamed queries go on as if nothing changed, the removed one stops, the added
one starts at the switch, an incompatible model is refused by name."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest
from test_upgrade import V1, V2, outputs, stream

from caesar.bus.partitioner import partition_for_key
from caesar.codecs import make_codec
from caesar.language import compile_model
from caesar.services.common.config import ServiceConfig
from caesar.services.common.plans import UpgradeError
from caesar.services.common.wire import SWITCH
from caesar.services.embedded.bus_pipeline import (
    produce_end,
    produce_inputs,
    read_alerts,
    read_topic,
)
from caesar.services.embedded.pipeline import EmbeddedPipeline
from caesar.services.matcher.reference import ReferenceEngine
from caesar.services.ray_runtime.deployment import Deployment
from caesar.settings import KafkaSettings, Settings, TopicSettings

pytestmark = pytest.mark.integration


def _on_topic(plan, topic):
    return replace(plan, event_types=tuple(replace(t, topic=topic) if t.topic else t
                                           for t in plan.event_types))


def test_update_a_running_deployment_while_input_flows(kafka_bootstrap, kafka_bus,
                                                       ray_session, unique_name):
    from typer.testing import CliRunner

    from caesar.cli.main import _register_all, app

    topic = unique_name("pos")
    v1, v2 = _on_topic(compile_model(V1), topic), _on_topic(compile_model(V2), topic)
    p = unique_name("up")
    topics = TopicSettings.under(p, partitions=2)
    settings = Settings(kafka=KafkaSettings(bootstrap_servers=kafka_bootstrap, linger_ms=2,
                                            poll_timeout_s=0.05), topics=topics)
    cfg = ServiceConfig(v1, topics, make_codec(settings), (0, 1), "test")
    dep = Deployment(v1, settings, options={"engine_factory": ReferenceEngine,
                                            "group_prefix": p, "commit_interval_s": 0.2})
    events = stream(900, seed=8)
    first = 300
    dep.start()
    try:
        dep.stats()
        produce_inputs(kafka_bus, cfg, events[:first])
        # the switch must fall mid-stream (else v1 never ran): the scheduler has
        # read the first part (its consumer joins the group a few s after start)
        deadline = time.monotonic() + 60
        while sum(s["records_in"] for s in dep.stats()["scheduler"]) < first:
            assert time.monotonic() < deadline, dep.stats()["scheduler"]
            time.sleep(0.2)
        flowing = threading.Thread(target=lambda: [
            (produce_inputs(kafka_bus, cfg, events[i:i + 30]), time.sleep(0.05))
            for i in range(first, len(events), 30)])
        flowing.start()  # the input does not stop for the upgrade
        with pytest.raises(UpgradeError, match="query 'pairs' changed"):
            dep.update(_on_topic(compile_model(V1.replace("b.spd > a.spd", "b.spd >= a.spd")),
                                 topic))
        # the CLI, from "another process": attach by name, swap
        path = f"/tmp/{unique_name('v2')}.caesar"
        with open(path, "w") as fh:
            fh.write(V2.replace('FROM TOPIC "pos"', f'FROM TOPIC "{topic}"'))
        _register_all()
        env = {f"CAESAR_TOPICS__{k.upper()}": v for k, v in topics.model_dump().items()
               if isinstance(v, str)}
        env["CAESAR_TOPICS__PARTITIONS"] = "2"
        env["CAESAR_KAFKA__BOOTSTRAP_SERVERS"] = kafka_bootstrap
        # the actors are named in the settings' Ray namespace (the default here)
        result = CliRunner().invoke(app, ["deploy", path, "--update", "--prefix", p], env=env)
        assert result.exit_code == 0, result.output
        assert "renamed pairs -> pairs2" in " ".join(result.output.split())
        flowing.join()
        produce_end(kafka_bus, cfg)
        stats = dep.stats()
        assert all(set(s["plans"].values()) == {stats["matcher"][0]["plans"][0]}
                   for ss in stats.values() for s in ss)
        only_v1 = outputs(EmbeddedPipeline(v1, engine_factory=ReferenceEngine)
                          .run_values(events).alerts)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            got = outputs(read_alerts(kafka_bus, cfg))
            if got.get("Pair") == only_v1["Pair"] and got.get("Avg") == only_v1["Avg"] \
                    and len(got.get("Toll", [])) >= len(only_v1["Toll"]):
                break
            time.sleep(1.0)
        for kind in ("Pair", "Avg", "Toll"):
            assert got[kind] == only_v1[kind], kind
        # each Kafka partition switched at its own watermark (the PlanSwitch record):
        # the removed query's outputs stop there, the added one's start there
        only_v2 = outputs(EmbeddedPipeline(v2, engine_factory=ReferenceEngine)
                          .run_values(events).alerts)
        switches = [r for r in read_topic(kafka_bus, topics.transactions, 2)
                    if cfg.codec.decode(r.value or b"")[0] == SWITCH]
        at = {r.partition: cfg.codec.decode(r.value or b"")[1]["watermark"] for r in switches}
        assert len(switches) == 2 and set(at) == {0, 1}

        def part(key: str) -> int:
            return partition_for_key(key.encode(), 2)

        assert got.get("Fast", []) == [a for a in only_v1["Fast"] if a[2] < at[part(a[0])]]
        assert got.get("Slow", []) == [a for a in only_v2["Slow"] if a[1] >= at[part(a[0])]]
        assert got["Slow"] and got["Fast"]
    finally:
        dep.stop()
