"""Model versions in a running deployment.

A deployment keeps every execution plan it ran on the plans topic (compacted,
key = the plan's version fingerprint, value = the plan as JSON data). An
actor knows its plans through a PlanBook: the plan it was started with, the
ones the driver staged for an upgrade, and any other read back from the
plans topic (a restarted actor whose checkpoint was written by a later plan).

`check_upgrade` says whether a running model can become another one without
stopping: queries are matched by identity (services/store: state is stored
per query identity, with the fingerprint of the plan that wrote it). An
unchanged query keeps its state, a removed one drops it, a new one starts
empty; a query renamed without other change keeps its state; a query that
keeps its name but changes its plan cannot carry its state over, and the
upgrade is refused naming it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from caesar.bus.errors import BusError
from caesar.bus.protocol import Bus
from caesar.bus.reading import read_all
from caesar.bus.records import OutRecord, TopicPartition
from caesar.errors import CaesarError
from caesar.plans.execution import ExecutionPlan, Stage
from caesar.plans.serialize import plan_from_json, plan_json, plan_version, stage_identity
from caesar.plans.serialize import state_fingerprint as fingerprint


class UpgradeError(CaesarError):
    """The running model cannot become the new one without losing state."""


class PlanBook:
    """Plan versions an actor may run, by version fingerprint. `requested`:
    the version the driver asked the scheduler to switch to (kept here, not in
    a handler, so an in-process rewind does not forget it)."""

    def __init__(self, initial: ExecutionPlan,
                 loader: Callable[[str], ExecutionPlan | None] | None = None) -> None:
        self.initial = plan_version(initial)
        self.plans: dict[str, ExecutionPlan] = {self.initial: initial}
        self.loader = loader
        self.requested: str | None = None
        self._lock = threading.Lock()

    def add(self, plan: ExecutionPlan) -> str:
        version = plan_version(plan)
        with self._lock:
            self.plans.setdefault(version, plan)
        return version

    def known(self) -> list[ExecutionPlan]:
        """Every plan this book holds (staged or loaded so far)."""
        with self._lock:
            return list(self.plans.values())

    def get(self, version: str) -> ExecutionPlan:
        with self._lock:
            plan = self.plans.get(version)
        if plan is None and self.loader is not None:
            plan = self.loader(version)
            if plan is not None:
                with self._lock:
                    self.plans[version] = plan
        if plan is None:
            raise UpgradeError(f"plan version {version} is not known here (not staged, not on "
                               "the plans topic)")
        return plan


def publish_plan(bus: Bus, topic: str, plan: ExecutionPlan) -> str:
    """Put the plan on the plans topic (idempotent); returns its version."""
    version = plan_version(plan)
    producer = bus.producer()
    producer.produce([OutRecord(topic, plan_json(plan).encode(), version.encode(), partition=0)])
    producer.flush()
    producer.close()
    return version


def plan_loader(bus: Bus, topic: str, timeout_s: float = 60.0
                ) -> Callable[[str], ExecutionPlan | None]:
    """Reads a plan version back from the plans topic."""

    def load(version: str) -> ExecutionPlan | None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                records = read_all(bus, [TopicPartition(topic, 0)], timeout_s=timeout_s)
                break
            except BusError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        found = [r for r in records if r.key == version.encode() and r.value]
        return plan_from_json(found[-1].value or b"") if found else None

    return load


@dataclass
class UpgradePlan:
    """What an upgrade does to the queries (by identity)."""

    old: str  # plan versions
    new: str
    kept: list[str] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)  # old identity -> new
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def summary(self) -> str:
        parts = [f"{len(self.kept)} kept"]
        if self.renamed:
            parts.append("renamed " + ", ".join(f"{a} -> {b}" for a, b in self.renamed.items()))
        if self.added:
            parts.append("added " + ", ".join(self.added))
        if self.removed:
            parts.append("removed " + ", ".join(self.removed))
        return "; ".join(parts)


def _stages(plan: ExecutionPlan) -> dict[str, Stage]:
    stages = [*plan.deriver_stages, *(t.stage for t in plan.transitions), *plan.matcher_stages]
    return {stage_identity(s): s for s in stages}


def check_upgrade(old: ExecutionPlan, new: ExecutionPlan) -> UpgradePlan:
    """The queries' fate, or UpgradeError naming the first query whose state
    cannot be carried over."""
    if tuple(old.partition_by) != tuple(new.partition_by):
        raise UpgradeError(f"PARTITION BY changed ({', '.join(old.partition_by)} -> "
                           f"{', '.join(new.partition_by)}): every state is per stream "
                           "partition; deploy the new model on fresh topics instead")
    before, after = _stages(old), _stages(new)
    out = UpgradePlan(plan_version(old), plan_version(new))
    for ident, stage in after.items():
        was = before.get(ident)
        if was is None:
            continue
        if fingerprint(was.plan) != fingerprint(stage.plan):
            raise UpgradeError(
                f"query {ident!r} changed, and its state was built by the old version: keep it "
                "as it was, or give the changed query a new @name (it then starts empty and "
                "the old one's state is dropped)")
        out.kept.append(ident)
    gone = {i: fingerprint(s.plan) for i, s in before.items() if i not in after}
    new_ids = {i: fingerprint(s.plan) for i, s in after.items() if i not in before}
    for ident, fp in gone.items():
        olds = [i for i, f in gone.items() if f == fp]
        news = [i for i, f in new_ids.items() if f == fp]
        if len(olds) == 1 and len(news) == 1:
            out.renamed[ident] = news[0]
    out.added = sorted(i for i in new_ids if i not in out.renamed.values())
    out.removed = sorted(i for i in gone if i not in out.renamed)
    out.kept.sort()
    return out
