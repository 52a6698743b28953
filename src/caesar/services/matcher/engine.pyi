# The Python-visible interface of the Cython engine (engine.pyx), for type
# checkers; scripts/test.sh checks it against the built module with stubtest.
from collections.abc import Collection, Sequence
from typing import Any

from typing_extensions import disjoint_base

from caesar.events.batch import EventBatch, StringPool
from caesar.plans.engine import DerivedEvent
from caesar.plans.functions import FunctionFailure
from caesar.plans.matches import MatchBatch
from caesar.plans.pattern import PatternPlan

STATE_FORMAT: int

@disjoint_base
class CythonEngine:
    sweep_min: int
    """Least parts a sweep slice visits per advance call (tests set 1)."""
    def __init__(self, plans: Sequence[PatternPlan], share_prefixes: bool = True) -> None: ...
    def shared_prefixes(self) -> dict[str, tuple[str, int]]:
        """{follower plan id: (leader plan id, shared components)}."""
    def process(self, batch: EventBatch,
                active: Collection[str] | None = None) -> list[DerivedEvent]: ...
    def advance(self, watermark: int) -> list[DerivedEvent]: ...
    def process_columns(self, batch: EventBatch,
                        active: Collection[str] | None = None) -> MatchBatch:
        """process, with the matches as a MatchBatch (NumPy columns per plan
        and output type, caesar.plans.matches) instead of one DerivedEvent
        each: the same matches in the same order (MatchBatch.events()),
        made without a Python object per match."""
    def advance_columns(self, watermark: int) -> MatchBatch:
        """advance, with the matches as a MatchBatch (see process_columns)."""
    def discard(self, plan_ids: Collection[str], partition: int) -> None: ...
    def snapshot(self, partition: int) -> dict[str, Any]: ...
    def restore(self, partition: int, state: dict[str, Any],
                strings: StringPool | None = None) -> None: ...
    def overflows(self) -> dict[str, int]:
        """{plan id: integer results outside 64 bits so far}."""
    def function_failures(self) -> list[tuple[str, FunctionFailure]]:
        """(plan id, failure) of user-defined function calls since the last call."""
    def state_size(self) -> int: ...
