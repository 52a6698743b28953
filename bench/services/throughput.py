"""Events/s through the full Kafka + Ray pipeline for a model and an input.

    python -m bench.services.throughput MODEL EVENTS.jsonl --bootstrap HOST:PORT \
        --partitions 1 --partitions 4

For each partition count: fresh topics, the services deployed as Ray actors
(one per service and partition), then all input events produced at once and
the clock runs until every alert the embedded run finds is on the alert
topic. The embedded run of the same input is the baseline in the same run.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from pathlib import Path
from typing import Any

from caesar.codecs import make_codec
from caesar.plans.execution import ExecutionPlan
from caesar.services.common.config import ServiceConfig
from caesar.services.embedded.bus_pipeline import produce_inputs, read_alerts, read_dead_letters
from caesar.services.embedded.pipeline import EmbeddedPipeline
from caesar.services.ray_runtime.deployment import Deployment
from caesar.settings import KafkaSettings, Settings, TopicSettings


def measure(plan: ExecutionPlan, events: list[dict[str, Any]], bootstrap: str, partitions: int,
            expected: int, timeout_s: float = 600.0) -> dict[str, Any]:
    from caesar.bus.kafka import KafkaBus

    p = f"tp-{uuid.uuid4().hex[:6]}"
    topics = TopicSettings.under(p, partitions=partitions)
    plan = _with_input_topics(plan, p)
    settings = Settings(kafka=KafkaSettings(bootstrap_servers=bootstrap, linger_ms=5,
                                            poll_timeout_s=0.05, consume_batch_size=5000),
                        topics=topics)
    cfg = ServiceConfig(plan, topics, make_codec(settings), tuple(range(partitions)), "bench")
    dep = Deployment(plan, settings, actors_per_service=partitions,
                     options={"group_prefix": p, "commit_interval_s": 1.0})
    bus = KafkaBus(settings.kafka)
    dep.start()
    dep.stats()  # every actor is up
    started = time.perf_counter()
    produce_inputs(bus, cfg, events, end=True)  # a bounded input: its end is marked
    produced = time.perf_counter()
    got: list = []
    while time.perf_counter() - started < timeout_s:
        got = read_alerts(bus, cfg)
        if len(got) >= expected:
            break
        time.sleep(0.25)
    done = time.perf_counter()
    dead = read_dead_letters(bus, cfg)
    final = dep.stop()
    bus.close()
    restarts = sum(1 for stats in final.values() for st in stats if st["restored_from"])
    elapsed = done - started
    return {"partitions": partitions, "events": len(events), "alerts": len(got),
            "expected_alerts": expected, "seconds": round(elapsed, 2),
            "produce_seconds": round(produced - started, 2),
            "events_per_s": round(len(events) / elapsed, 1), "restarted_actors": restarts,
            "dead_letters": len(dead), "dead_letter_example": dead[0]["detail"] if dead else None}


def _with_input_topics(plan: ExecutionPlan, prefix: str) -> ExecutionPlan:
    from dataclasses import replace

    types = tuple(replace(t, topic=f"{prefix}.{t.topic}") if t.topic else t
                  for t in plan.event_types)
    return replace(plan, event_types=types)


def main(argv: list[str] | None = None) -> None:
    import ray

    from caesar.language import compile_model

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("model", type=Path)
    ap.add_argument("events", type=Path, help="JSON lines")
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--partitions", type=int, action="append", default=[])
    args = ap.parse_args(argv)
    plan = compile_model(args.model)
    default_type = plan.event_types[0].name
    events = [{"type": default_type, **json.loads(line)} for line in args.events.open()]
    t0 = time.perf_counter()
    baseline = EmbeddedPipeline(plan).run_values(events)
    embedded_s = time.perf_counter() - t0
    print(json.dumps({"mode": "embedded", "events": len(events), "alerts": len(baseline.alerts),
                      "seconds": round(embedded_s, 2),
                      "events_per_s": round(len(events) / embedded_s, 1)}))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        for n in args.partitions or [1, 4]:
            result = measure(plan, events, args.bootstrap, n, len(baseline.alerts))
            result["ratio_to_embedded"] = round(result["events_per_s"] * embedded_s / len(events), 3)
            print(json.dumps({"mode": "kafka+ray", **result}))
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
