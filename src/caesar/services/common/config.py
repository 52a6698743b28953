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
    from caesar.services.common.plans import PlanBook
    from caesar.settings import TopicSettings

# Seconds between two checkpoints of a replayable service's partition state.
DEFAULT_CHECKPOINT_INTERVAL_S = 10.0
# Writing those states takes at most this share of a loop's time (loop.py).
DEFAULT_CHECKPOINT_SHARE = 0.05

# Builds the pattern engine of a matcher from its plans (tests swap in the reference).
EngineFactory = Callable[[Sequence["PatternPlan"]], "PatternEngine"]


class RunnerOptions(TypedDict, total=False):
    """Options of a deployment's service loops (all optional)."""

    allowance: int  # out-of-orderness allowed in event time
    max_ahead: int | None  # scheduler: see ServiceConfig.max_ahead
    ahead_confirm: int
    engine_factory: EngineFactory | None
    group_prefix: str  # consumer groups and actor names start with it
    commit_interval_s: float
    max_commit_share: float  # commits use at most this share of a loop's time
    # the deriver's and matcher's states go out at most this often (0: with
    # every commit); a restore replays their inputs since (loop.py)
    checkpoint_interval_s: float
    max_checkpoint_share: float  # longer intervals when states are big (0: no stretching)
    log_level: str  # the actors log like the driver (caesar.logs)
    log_format: LogFormat
    stall_timeout_s: float  # a loop step running longer restarts the actor (watchdog.py)


@dataclass
class ServiceConfig:
    """What a service runner needs besides its processors."""

    plan: ExecutionPlan
    topics: TopicSettings
    codec: Codec
    partitions: tuple[int, ...]  # Kafka partitions (of the internal topics) this actor owns
    actor_id: str
    allowance: int = 0  # scheduler: out-of-orderness allowed, in event-time ticks
    # scheduler: events this far (ticks) ahead of their partition's event time
    # are held, then dead-lettered unless `ahead_confirm` such arrive in a row
    # (None = one day of event time, 0 = no limit)
    max_ahead: int | None = None
    ahead_confirm: int = 100
    engine_factory: EngineFactory | None = None
    # The plan versions this actor may meet (model upgrades); None = `plan` only.
    plan_book: PlanBook | None = None

    @property
    def routed_topic(self) -> str:
        return self.topics.transactions + ".routed"

    def input_topics(self) -> list[str]:
        return list(dict.fromkeys(t.topic or self.topics.input_topic(t.name)
                                  for t in self.plan.event_types if t.topic is not None))
