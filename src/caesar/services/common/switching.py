"""The plan each Kafka partition of a handler runs, and switching it.

A model upgrade reaches a partition as a PlanSwitch record in its input (the
scheduler starts it at a transaction boundary; every service passes it on).
Records before it are processed with the previous plan, records after it
with the new one: the partition's processor is rebuilt for the new plan and
given the old one's state, which it takes over by query identity (services
keep state per query identity, see services/store/state_format.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, Protocol, TypeVar

from caesar.plans.execution import ExecutionPlan
from caesar.services.common.config import ServiceConfig
from caesar.services.common.messages import PlanSwitch
from caesar.services.common.plans import PlanBook


class Stateful(Protocol):
    def snapshot(self) -> Any: ...

    def restore(self, state: Any) -> None: ...


P = TypeVar("P", bound=Stateful)


class PartitionPlans(Generic[P]):
    """Processor and plan version per Kafka partition."""

    def __init__(self, cfg: ServiceConfig, make: Callable[[ExecutionPlan], P],
                 view: Callable[[ExecutionPlan], ExecutionPlan] | None = None) -> None:
        # `view`: the part of a plan version this service runs (versions are
        # fingerprints of whole plans, the same in every service)
        self.book = cfg.plan_book or PlanBook(cfg.plan)
        self.view = view or (lambda plan: plan)
        self.make = make
        self.versions = {j: self.book.initial for j in cfg.partitions}
        first = self._get(self.book.initial)
        self.procs: dict[int, P] = {j: make(first) for j in cfg.partitions}

    def _get(self, version: str) -> ExecutionPlan:
        return self.view(self.book.get(version))

    def plan(self, j: int) -> ExecutionPlan:
        return self._get(self.versions[j])

    def switch(self, j: int, version: str) -> None:
        """Partition j runs `version` from now on, with the state it had."""
        if self.versions[j] == version:
            return
        proc = self.make(self._get(version))
        proc.restore(self.procs[j].snapshot())
        self.procs[j] = proc
        self.versions[j] = version

    def restore(self, j: int, version: str | None, state: Any) -> None:
        """Partition j's checkpoint, with the processor of the plan that wrote it."""
        if version is not None and version != self.versions[j]:
            self.procs[j] = self.make(self._get(version))
            self.versions[j] = version
        self.procs[j].restore(state)


T = TypeVar("T")


def segments(items: Sequence[T | PlanSwitch]) -> Iterator[tuple[list[T], PlanSwitch | None]]:
    """Items between plan switches: (items, the switch after them or None)."""
    chunk: list[T] = []
    for item in items:
        if isinstance(item, PlanSwitch):
            yield chunk, item
            chunk = []
        else:
            chunk.append(item)
    yield chunk, None
