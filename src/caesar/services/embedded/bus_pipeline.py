"""The four service runners over one bus, driven round-robin in this process:
with InMemoryBus it is embedded mode through the real runners, codecs and
commit protocol; with KafkaBus it runs against a broker without Ray (the Ray
deployment runs the very same loops, one per actor: caesar.services.wiring)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from caesar.bus.protocol import Bus
from caesar.bus.records import OutRecord, Record, TopicPartition
from caesar.plans.execution import ExecutionPlan
from caesar.services.common.config import EngineFactory, ServiceConfig
from caesar.services.common.loop import ServiceLoop
from caesar.services.common.messages import Alert
from caesar.services.common.wire import (
    DEAD,
    DERIVED,
    alert_from,
    register_input_schemas,
    register_model_schemas,
)
from caesar.services.scheduler.runner import SchedulerHandler
from caesar.services.wiring import SERVICES, make_loop, service_topics


def produce_inputs(bus: Bus, cfg: ServiceConfig, values: Iterable[Mapping[str, Any]],
                   *, key_of: Callable[[Mapping[str, Any]], str] | None = None) -> int:
    """Encode input events (Avro, the model's input schemas) onto the input topics,
    keyed by the stream partition key."""
    from caesar.services.common.messages import partition_key
    repo = cfg.codec.repository
    names = register_input_schemas(repo, cfg.plan)
    names.update(register_model_schemas(repo, cfg.plan))  # what its producers use
    types = {t.name: t for t in cfg.plan.event_types}
    producer = bus.producer()
    batch: list[OutRecord] = []
    n = 0
    for v in values:
        etype = types[v["type"]]
        topic = etype.topic or cfg.topics.input_topic(etype.name)
        body = {k: val for k, val in v.items() if k != "type"}
        key = (key_of(v) if key_of else partition_key(v, cfg.plan.partition_by)).encode()
        batch.append(OutRecord(topic, cfg.codec.encode(names[etype.name], body), key))
        n += 1
        if len(batch) >= 5000:
            producer.produce(batch)
            batch = []
    producer.produce(batch)
    producer.flush()
    producer.close()
    return n


def read_topic(bus: Bus, topic: str, partitions: int, timeout_s: float = 10.0) -> list[Record]:
    """Every record currently in `topic` (all partitions), read to the end offsets."""
    tps = [TopicPartition(topic, j) for j in range(partitions)]
    end = bus.end_offsets(tps)
    consumer = bus.consumer(f"reader-{topic}-{time.monotonic_ns()}")
    consumer.assign(tps, {tp: 0 for tp in tps})
    out: list[Record] = []
    got = {tp: 0 for tp in tps}
    deadline = time.monotonic() + timeout_s
    try:
        while any(got[tp] < end[tp] for tp in tps) and time.monotonic() < deadline:
            for r in consumer.poll(5000, 0.5):
                got[TopicPartition(r.topic, r.partition)] = r.offset + 1
                out.append(r)
    finally:
        consumer.close()
    return out


def read_alerts(bus: Bus, cfg: ServiceConfig) -> list[Alert]:
    records = read_topic(bus, cfg.topics.alerts, cfg.topics.partitions)
    return [alert_from(cfg.codec.decode_as(DERIVED, r.value)) for r in records
            if r.value is not None]


def read_dead_letters(bus: Bus, cfg: ServiceConfig) -> list[dict[str, Any]]:
    records = read_topic(bus, cfg.topics.dead_letters, cfg.topics.partitions)
    return [cfg.codec.decode_as(DEAD, r.value) for r in records if r.value is not None]


class BusPipeline:
    """All four services on `bus` in this process (one loop per service)."""

    def __init__(self, cfg: ServiceConfig, bus: Bus, **loop_options: Any) -> None:
        self.cfg, self.bus = cfg, bus
        bus.create_topics(service_topics(cfg))
        self.loops: dict[str, ServiceLoop] = {}
        for name in SERVICES:
            scfg = replace(cfg, actor_id=f"{name}-{cfg.actor_id}")
            self.loops[name] = make_loop(name, scfg, bus, **loop_options)
        for loop in self.loops.values():
            loop.start()

    def run_until_quiet(self, quiet_s: float = 1.0, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        quiet_since = None
        while time.monotonic() < deadline:
            moved = sum(loop.run_once() for loop in self.loops.values())
            if moved:
                quiet_since = None
            else:
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= quiet_s:
                    break
        for loop in self.loops.values():
            loop.commit()

    def finish(self, quiet_s: float = 0.2, timeout_s: float = 600.0) -> None:
        """Bounded input: process what is there, flush the scheduler, drain."""
        self.run_until_quiet(quiet_s, timeout_s)
        scheduler = self.loops["scheduler"]
        assert isinstance(scheduler.handler, SchedulerHandler)
        scheduler.producer.produce(scheduler.handler.flush_all())
        scheduler.commit()
        self.run_until_quiet(quiet_s, timeout_s)

    def close(self) -> None:
        for loop in self.loops.values():
            loop.close()


def run_on_memory_bus(plan: ExecutionPlan,
                      decoded: Iterable[tuple[Mapping[str, Any] | None, str | None, bytes]],
                      *, allowance: int = 0, engine_factory: EngineFactory | None = None
                      ) -> tuple[list[Alert], list[dict[str, Any]]]:
    """`caesar run --bus memory`: the service runners over InMemoryBus.
    Returns (alerts, dead letters)."""
    from caesar.bus.memory import InMemoryBus
    from caesar.codecs import make_codec
    from caesar.settings import TopicSettings

    cfg = ServiceConfig(plan=plan, topics=TopicSettings(partitions=1), codec=make_codec(),
                        partitions=(0,), actor_id="run", allowance=allowance,
                        engine_factory=engine_factory)
    bus = InMemoryBus()
    pipe = BusPipeline(cfg, bus, poll_timeout_s=0.0, commit_interval_s=1.0, batch_size=5000)
    values: list[Mapping[str, Any]] = []
    junk: list[bytes] = []
    for value, error, raw in decoded:
        if value is None or error is not None or "type" not in value:
            junk.append(raw or b"")
        else:
            values.append(value)
    produce_inputs(bus, cfg, values)
    if junk:
        producer = bus.producer()
        producer.produce([OutRecord(cfg.input_topics()[0], raw, None, partition=0)
                          for raw in junk])
    pipe.finish()
    alerts, dead = read_alerts(bus, cfg), read_dead_letters(bus, cfg)
    pipe.close()
    return alerts, dead
