# The Python-visible interface of the Cython engine (engine.pyx), for type
# checkers; scripts/test.sh checks it against the built module with stubtest.
from collections.abc import Collection, Sequence

from typing_extensions import disjoint_base

from caesar.events.batch import EventBatch
from caesar.plans.engine import DerivedEvent
from caesar.plans.pattern import PatternPlan

@disjoint_base
class CythonEngine:
    def __init__(self, plans: Sequence[PatternPlan], share_prefixes: bool = True) -> None: ...
    def shared_prefixes(self) -> dict[str, tuple[str, int]]:
        """{follower plan id: (leader plan id, shared components)}."""
    def process(self, batch: EventBatch,
                active: Collection[str] | None = None) -> list[DerivedEvent]: ...
    def advance(self, watermark: int) -> list[DerivedEvent]: ...
    def discard(self, plan_ids: Collection[str], partition: int) -> None: ...
    def snapshot(self, partition: int) -> bytes: ...
    def restore(self, partition: int, state: bytes) -> None: ...
    def overflows(self) -> dict[str, int]:
        """{plan id: integer results outside 64 bits so far}."""
    def state_size(self) -> int: ...
