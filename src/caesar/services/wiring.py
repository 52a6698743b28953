"""How the four services are put onto a bus: their handlers, the topics a
deployment of a plan needs, and one runner loop per service. Embedded mode
(caesar.services.embedded) and the Ray actors (caesar.services.ray_runtime)
both build their loops here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from caesar.bus.protocol import Bus
from caesar.bus.records import TopicPartition, TopicSpec
from caesar.bus.topics import topic_specs
from caesar.plans.execution import ExecutionPlan
from caesar.plans.pattern import PatternPlan
from caesar.services.common.config import ServiceConfig
from caesar.services.common.loop import Handler, ServiceLoop
from caesar.services.deriver.runner import DeriverHandler
from caesar.services.matcher.runner import MatcherHandler
from caesar.services.router.runner import RouterHandler
from caesar.services.scheduler.acep.runner import AcepHandler
from caesar.services.scheduler.runner import SchedulerHandler
from caesar.services.store.checkpoint import CheckpointStore


class ServiceHandler(Handler, Protocol):
    """A service's handler, which knows every input partition it reads."""

    def inputs(self) -> list[TopicPartition]: ...


SERVICES: dict[str, Callable[[ServiceConfig], ServiceHandler]] = {
    "scheduler": SchedulerHandler, "deriver": DeriverHandler,
    "router": RouterHandler, "matcher": MatcherHandler}
# Services only some models need: "acep" for a model with shared tables.
OPTIONAL: dict[str, Callable[[ServiceConfig], ServiceHandler]] = {"acep": AcepHandler}


def service_plan(service: str, plan: ExecutionPlan) -> ExecutionPlan:
    """The plan a service runs: the matcher keeps the `_acep_*` stages of a
    model with tables to itself (the acep service runs them and publishes
    what the rules derive), so their matches do not leave as alerts."""
    if service != "matcher" or plan.acep is None:
        return plan
    internal = plan.acep.input_types()
    return replace(plan, matcher_stages=tuple(
        replace(s, output_topic=None) if isinstance(s.plan, PatternPlan) and s.plan.output
        is not None and s.plan.output.event_type in internal else s
        for s in plan.matcher_stages))


def services_of(plan: ExecutionPlan) -> list[str]:
    """The services a deployment of `plan` runs."""
    return list(SERVICES) + (["acep"] if plan.acep is not None else [])


def service_topics(cfg: ServiceConfig) -> list[TopicSpec]:
    """Every topic a deployment of this plan needs."""
    t = cfg.topics
    specs = topic_specs(t, [], stores=services_of(cfg.plan))
    for topic in cfg.input_topics():
        specs.append(TopicSpec(topic, t.partitions, t.replication_factor))
    specs.append(TopicSpec(cfg.routed_topic, t.partitions, t.replication_factor))
    stages = list(cfg.plan.matcher_stages) + list(cfg.plan.deriver_stages)
    for stage in stages:  # the model's own output topics (and ON TIMEOUT ones)
        for out in (stage.output_topic, stage.timeout_topic):
            if out:
                specs.append(TopicSpec(out, t.partitions_by_topic.get(out, t.partitions),
                                       t.replication_factor))
    acep = cfg.plan.acep
    for topic in {a.topic for actor in (acep.actors if acep else ()) for a in actor.actions
                  if a.topic}:  # where rules' and table-reading queries' events go
        specs.append(TopicSpec(topic, t.partitions_by_topic.get(topic, t.partitions),
                               t.replication_factor))
    unique: dict[str, TopicSpec] = {}
    for spec in specs:
        unique.setdefault(spec.name, spec)
    return list(unique.values())


def make_loop(service: str, cfg: ServiceConfig, bus: Bus, *, group_prefix: str = "caesar",
              batch_size: int = 2000, commit_interval_s: float = 1.0,
              poll_timeout_s: float = 0.2, checkpoints: bool = True) -> ServiceLoop:
    handler = (SERVICES | OPTIONAL)[service](replace(cfg, plan=service_plan(service, cfg.plan)))
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


