"""How the four services are put onto a bus: their handlers, the topics a
deployment of a plan needs, and one runner loop per service. Embedded mode
(caesar.services.embedded) and the Ray actors (caesar.services.ray_runtime)
both build their loops here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from caesar.bus.protocol import Bus
from caesar.bus.records import TopicPartition, TopicSpec
from caesar.bus.topics import topic_specs
from caesar.services.common.config import ServiceConfig
from caesar.services.common.loop import Handler, ServiceLoop
from caesar.services.deriver.runner import DeriverHandler
from caesar.services.matcher.runner import MatcherHandler
from caesar.services.router.runner import RouterHandler
from caesar.services.scheduler.runner import SchedulerHandler
from caesar.services.store.checkpoint import CheckpointStore


class ServiceHandler(Handler, Protocol):
    """A service's handler, which knows every input partition it reads."""

    def inputs(self) -> list[TopicPartition]: ...


SERVICES: dict[str, Callable[[ServiceConfig], ServiceHandler]] = {
    "scheduler": SchedulerHandler, "deriver": DeriverHandler,
    "router": RouterHandler, "matcher": MatcherHandler}


def service_topics(cfg: ServiceConfig) -> list[TopicSpec]:
    """Every topic a deployment of this plan needs."""
    t = cfg.topics
    specs = topic_specs(t, [], stores=list(SERVICES))
    for topic in cfg.input_topics():
        specs.append(TopicSpec(topic, t.partitions, t.replication_factor))
    specs.append(TopicSpec(cfg.routed_topic, t.partitions, t.replication_factor))
    stages = list(cfg.plan.matcher_stages) + list(cfg.plan.deriver_stages)
    for stage in stages:  # the model's own output topics (and ON TIMEOUT ones)
        for out in (stage.output_topic, stage.timeout_topic):
            if out:
                specs.append(TopicSpec(out, t.partitions_by_topic.get(out, t.partitions),
                                       t.replication_factor))
    unique: dict[str, TopicSpec] = {}
    for spec in specs:
        unique.setdefault(spec.name, spec)
    return list(unique.values())


def make_loop(service: str, cfg: ServiceConfig, bus: Bus, *, group_prefix: str = "caesar",
              batch_size: int = 2000, commit_interval_s: float = 1.0,
              poll_timeout_s: float = 0.2, checkpoints: bool = True) -> ServiceLoop:
    handler = SERVICES[service](cfg)
    stores: dict[int, CheckpointStore] = {}
    if checkpoints:  # one keyed state per Kafka partition, whichever actor owns it
        stores = {j: CheckpointStore(bus, cfg.codec,
                                     changelog_topic=cfg.topics.changelog_topic(service),
                                     checkpoints_topic=cfg.topics.checkpoints, service=service,
                                     actor=f"{group_prefix}-{service}-p{j}")
                  for j in cfg.partitions}
    return ServiceLoop(bus=bus, group_id=f"{group_prefix}-{service}", inputs=handler.inputs(),
                       handler=handler, stores=stores, batch_size=batch_size,
                       poll_timeout_s=poll_timeout_s, commit_interval_s=commit_interval_s)


