"""How the four services are put onto a bus: their handlers, the topics a
deployment of a plan needs, and one runner loop per service. Embedded mode
(caesar.services.embedded) and the Ray actors (caesar.services.ray_runtime)
both build their loops here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from caesar.bus.errors import BusError
from caesar.bus.protocol import Bus
from caesar.bus.records import TopicPartition, TopicSpec
from caesar.bus.topics import topic_specs
from caesar.plans.execution import ExecutionPlan
from caesar.services import names
from caesar.services.common.config import (
    DEFAULT_CHECKPOINT_INTERVAL_S,
    DEFAULT_CHECKPOINT_SHARE,
    ServiceConfig,
)
from caesar.services.common.loop import DEFAULT_BATCH_BYTES, Handler, ServiceLoop
from caesar.services.common.plans import PlanBook, plan_loader
from caesar.services.deriver.runner import DeriverHandler
from caesar.services.matcher.runner import MatcherHandler
from caesar.services.router.runner import RouterHandler
from caesar.services.scheduler.acep.runner import AcepHandler
from caesar.services.scheduler.runner import SchedulerHandler
from caesar.services.store.checkpoint import StateStore


class ServiceHandler(Handler, Protocol):
    """A service's handler, which knows every input partition it reads."""

    def inputs(self) -> list[TopicPartition]: ...


SERVICES: dict[str, Callable[[ServiceConfig], ServiceHandler]] = dict(
    zip(names.PIPELINE, (SchedulerHandler, DeriverHandler, RouterHandler, MatcherHandler),
        strict=True))
OPTIONAL: dict[str, Callable[[ServiceConfig], ServiceHandler]] = dict(
    zip(names.OPTIONAL, (AcepHandler,), strict=True))


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


def create_service_topics(bus: Bus, cfg: ServiceConfig) -> list[str]:
    """Create what `service_topics` lists that is missing (returns those), and
    refuse topics that exist with partition counts this deployment cannot
    use: fewer than it writes to (producing to partition j fails, and the
    loops retry forever), or an input topic with more than it reads (the
    records in the extra partitions would never be read)."""
    specs = service_topics(cfg)
    created = bus.create_topics(specs)
    have = bus.list_topics()
    inputs = set(cfg.input_topics())
    wrong = [f"{s.name} has {have[s.name]} partitions, this deployment needs {s.partitions}"
             for s in specs if s.name in have and (
                 have[s.name] < s.partitions or (s.name in inputs and have[s.name] > s.partitions))]
    if wrong:
        raise BusError("topics created earlier with other partition counts: "
                       + "; ".join(wrong) + ". Set topics.partitions (or partitions_by_topic) "
                       "to match, or delete those topics (their data goes with them).")
    return created


def make_loop(service: str, cfg: ServiceConfig, bus: Bus, *, group_prefix: str = "caesar",
              batch_size: int = 2000, commit_interval_s: float = 1.0,
              poll_timeout_s: float = 0.2, checkpoints: bool = True,
              max_commit_share: float = 0.25,
              transaction_timeout_s: float | None = None,
              checkpoint_interval_s: float = DEFAULT_CHECKPOINT_INTERVAL_S,
              max_checkpoint_share: float = DEFAULT_CHECKPOINT_SHARE,
              batch_bytes: int = DEFAULT_BATCH_BYTES) -> ServiceLoop:
    """One runner loop; its transactional ids name the service and each Kafka
    partition, so the next owner of a partition fences the one it replaces.
    With the bus's `transaction_timeout_s`, a transaction is committed within
    a third of it (the rest is left for the commit itself)."""
    if cfg.plan_book is None:  # plan versions: the deployment's, else from the plans topic
        cfg = replace(cfg, plan_book=PlanBook(cfg.plan, plan_loader(bus, cfg.topics.plans)))
    store = None
    if checkpoints:  # one changelog partition per Kafka partition, whichever actor owns it
        store = StateStore(bus, cfg.codec, changelog_topic=cfg.topics.changelog_topic(service),
                           checkpoints_topic=cfg.topics.checkpoints, service=service)
    loop = ServiceLoop(bus=bus, group_id=f"{group_prefix}-{service}",
                       transactional_prefix=f"{group_prefix}-{service}",
                       handler_factory=lambda: (SERVICES | OPTIONAL)[service](cfg),
                       partitions=cfg.partitions, store=store, batch_size=batch_size,
                       poll_timeout_s=poll_timeout_s, commit_interval_s=commit_interval_s,
                       max_commit_share=max_commit_share,
                       checkpoint_interval_s=checkpoint_interval_s,
                       max_checkpoint_share=max_checkpoint_share, max_batch_bytes=batch_bytes,
                       max_open_s=None if transaction_timeout_s is None
                       else transaction_timeout_s / 3)
    loop.plan_book = cfg.plan_book
    return loop
