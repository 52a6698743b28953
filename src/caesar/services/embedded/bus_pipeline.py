"""The four service runners over one bus, driven round-robin in this process:
with InMemoryBus it is embedded mode through the real runners, codecs and
commit protocol; with KafkaBus it runs against a broker without Ray (the Ray
deployment runs the very same loops, one per actor: caesar.services.wiring)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from caesar.bus.protocol import Bus
from caesar.bus.reading import read_all
from caesar.bus.records import OutRecord, Record, TopicPartition
from caesar.plans.execution import ExecutionPlan
from caesar.services.common.config import EngineFactory, ServiceConfig
from caesar.services.common.loop import ServiceLoop
from caesar.services.common.messages import END_OF_TIME, Alert
from caesar.services.common.wire import (
    DEAD,
    DERIVED,
    alert_from,
    register_input_schemas,
    register_model_schemas,
)
from caesar.services.scheduler.runner import ERROR_HEADER, watermark_record
from caesar.services.wiring import create_service_topics, make_loop, services_of


def produce_inputs(bus: Bus, cfg: ServiceConfig, values: Iterable[Mapping[str, Any]],
                   *, key_of: Callable[[Mapping[str, Any]], str] | None = None,
                   end: bool = False) -> int:
    """Encode input events (Avro, the model's input schemas) onto the input topics,
    keyed by the stream partition key. A value that does not encode goes as its
    JSON text with the reason in a `caesar.error` header (the scheduler
    dead-letters it, as a Kafka producer's garbage would be). `end`: then an
    input watermark at the end of time on every partition (a bounded input)."""
    from caesar.services.common.messages import partition_key

    repo = cfg.codec.repository
    names = register_input_schemas(repo, cfg.plan)
    names.update(register_model_schemas(repo, cfg.plan))  # what its producers use
    types = {t.name: t for t in cfg.plan.event_types}
    default_topic = cfg.input_topics()[0] if cfg.input_topics() else None
    producer = bus.producer()
    batch: list[OutRecord] = []
    n = 0
    for v in values:
        etype = types.get(str(v.get("type", "")))
        topic = (etype.topic or cfg.topics.input_topic(etype.name)) if etype else default_topic
        if topic is None:
            raise ValueError("the model has no input topic")
        key = (key_of(v) if key_of else partition_key(v, cfg.plan.partition_by)).encode()
        try:
            if etype is None:
                raise ValueError(f"unknown event type {v.get('type')!r}")
            body = {k: val for k, val in v.items() if k != "type"}
            batch.append(OutRecord(topic, cfg.codec.encode(names[etype.name], body), key))
        except Exception as exc:  # noqa: BLE001 - any encoding failure is the record's fault
            text = json.dumps(v, default=str).encode()
            batch.append(OutRecord(topic, text, key, (
                (ERROR_HEADER, f"does not encode as {etype.name if etype else 'an input type'}: "
                               f"{exc}".encode()),)))
        n += 1
        if len(batch) >= 5000:
            producer.produce(batch)
            batch = []
    producer.produce(batch)
    producer.flush()
    producer.close()
    if end:
        produce_end(bus, cfg)
    return n


def produce_end(bus: Bus, cfg: ServiceConfig, ts: int = END_OF_TIME) -> None:
    """An input watermark `ts` on every partition of every input topic: no event
    below it follows (END_OF_TIME: the input is complete)."""
    producer = bus.producer()
    producer.produce([watermark_record(topic, j, ts) for topic in cfg.input_topics()
                      for j in range(cfg.topics.partitions_by_topic.get(topic,
                                                                        cfg.topics.partitions))])
    producer.flush()
    producer.close()


def read_topic(bus: Bus, topic: str, partitions: int, timeout_s: float = 30.0) -> list[Record]:
    """Every committed record now in `topic` (all partitions)."""
    return read_all(bus, [TopicPartition(topic, j) for j in range(partitions)],
                    timeout_s=timeout_s)


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
        create_service_topics(bus, cfg)
        self.loops: dict[str, ServiceLoop] = {}
        for name in services_of(cfg.plan):
            scfg = replace(cfg, actor_id=f"{name}-{cfg.actor_id}")
            self.loops[name] = make_loop(name, scfg, bus, **loop_options)
        for loop in self.loops.values():
            loop.start()

    def run_until_quiet(self, quiet_s: float = 1.0, timeout_s: float = 120.0) -> None:
        """Drive every loop until nothing moves for `quiet_s`; an idle loop
        commits at once (downstream reads committed data only). Polls wait
        only in the round after an idle one: while anything moves, a loop
        with nothing to read must not hold up the others."""
        deadline = time.monotonic() + timeout_s
        quiet_since = None
        moved = 1
        while time.monotonic() < deadline:
            wait = not moved
            moved = sum(loop.run_once(wait) for loop in self.loops.values())
            if not moved:
                for loop in self.loops.values():
                    if loop.pending():
                        loop.commit()
                        moved += 1
            if moved:
                quiet_since = None
            else:
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= quiet_s:
                    break
        for loop in self.loops.values():
            loop.commit()

    def finish(self, quiet_s: float = 0.2, timeout_s: float = 600.0) -> None:
        """Bounded input: mark its end on every input partition, drain."""
        produce_end(self.bus, self.cfg)
        self.run_until_quiet(quiet_s, timeout_s)

    def close(self) -> None:
        for loop in self.loops.values():
            loop.close()


def run_on_memory_bus(plan: ExecutionPlan,
                      decoded: Iterable[tuple[Mapping[str, Any] | None, str | None, bytes]],
                      *, allowance: int = 0, engine_factory: EngineFactory | None = None,
                      max_ahead: int | None = None) -> tuple[list[Alert], list[dict[str, Any]]]:
    """`caesar run --bus memory`: the service runners over InMemoryBus.
    Returns (alerts, dead letters)."""
    from caesar.bus.memory import InMemoryBus
    from caesar.codecs import make_codec
    from caesar.settings import TopicSettings

    cfg = ServiceConfig(plan=plan, topics=TopicSettings(partitions=1), codec=make_codec(),
                        partitions=(0,), actor_id="run", allowance=allowance,
                        max_ahead=max_ahead, engine_factory=engine_factory)
    bus = InMemoryBus()
    pipe = BusPipeline(cfg, bus, poll_timeout_s=0.0, commit_interval_s=1.0, batch_size=5000)
    topic = cfg.input_topics()[0]
    values: list[Mapping[str, Any]] = []
    producer = bus.producer()
    for value, error, raw in decoded:
        if value is None or error is not None:  # unreadable line: in as it was, with why
            produce_inputs(bus, cfg, values)
            values = []
            producer.produce([OutRecord(topic, raw or b"", None,
                                        ((ERROR_HEADER, (error or "no value").encode()),),
                                        partition=0)])
        else:
            values.append(value)
    produce_inputs(bus, cfg, values)
    pipe.finish()
    alerts, dead = read_alerts(bus, cfg), read_dead_letters(bus, cfg)
    pipe.close()
    return alerts, dead
