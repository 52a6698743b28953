"""What a service runner needs besides its processors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from caesar.codecs import Codec
    from caesar.logs import LogFormat
    from caesar.plans.engine import PatternEngine
    from caesar.plans.execution import ExecutionPlan
    from caesar.plans.pattern import PatternPlan
    from caesar.settings import TopicSettings

# Builds the pattern engine of a matcher from its plans (tests swap in the reference).
EngineFactory = Callable[[Sequence["PatternPlan"]], "PatternEngine"]


class RunnerOptions(TypedDict, total=False):
    """Options of a deployment's service loops (all optional)."""

    allowance: int  # out-of-orderness allowed in event time
    idle_flush_s: float | None  # scheduler: release everything after this much quiet
    engine_factory: EngineFactory | None
    group_prefix: str  # consumer groups and actor names start with it
    commit_interval_s: float
    log_level: str  # the actors log like the driver (caesar.logs)
    log_format: LogFormat


@dataclass
class ServiceConfig:
    """What a service runner needs besides its processors."""

    plan: ExecutionPlan
    topics: TopicSettings
    codec: Codec
    partitions: tuple[int, ...]  # Kafka partitions (of the internal topics) this actor owns
    actor_id: str
    allowance: int = 0
    idle_flush_s: float | None = None  # scheduler: release everything after this much quiet
    engine_factory: EngineFactory | None = None

    @property
    def routed_topic(self) -> str:
        return self.topics.transactions + ".routed"

    def input_topics(self) -> list[str]:
        return list(dict.fromkeys(t.topic or self.topics.input_topic(t.name)
                                  for t in self.plan.event_types if t.topic is not None))
