"""What the matcher takes from the deriver instead of deriving it again.

A query that both a context transition and a processing query need is
compiled into both services (physical.py). When it runs in every context in
both, both copies see the same events and derive the same results, so the
matcher need not run it: the deriver sends the results (the types named in
`ExecutionPlan.imports`) and the router adds them to the routed transactions
of their timestamp. On Linear Road this is the accident chain (StoppedCar ->
AccidentCar -> Accident -> AccidentCleared), a third of the matcher's engine
work and most of its state, which the accident context's transitions need
anyway.

A stage is taken over only when that cannot change what the matcher derives:

- it and every stage it depends on is a pattern that derives each result
  while processing the event completing it (`PatternPlan.derives_on_arrival`:
  no aggregate, end negation, ON TIMEOUT or after-match skip upstream), so
  every result is stamped with the transaction that derived it and reaches
  the router before the deriver's progress covering that transaction;
- it runs in every context in both services, with no context filter and no
  output rate, so no context switch suspends or discards it in either;
- every matcher stage reading its type runs in every context too (those see
  whole stream partitions, so where a result is placed does not change what
  they see), and the two services derive the type by the same stages.

A time-windowed aggregate over input events is taken over too (Linear
Road's segment statistics, which the congestion transitions and the tolls
both read). Its results are not derived on arrival but released when event
time passes the window's end, stamped end - 1 (or end); the deriver
releases them before its progress passes that stamp, so they still reach
the router before the transactions after them. They go to the matcher with
the transactions of their stamp, or on their own once the router's progress
passes it (router/processor.py). Where the matcher derived them itself they
came after the events of their stamp; imported, they come with them. Only
readers to which that cannot matter may stay in the matcher: aggregates and
skip_till_any_match patterns (a sequence or an iteration never binds two
events of one timestamp in order, and a negation ignores one at its bounds'
timestamp; contiguity and next-match runs take the first to arrive).
Patterns after such an aggregate stay in the matcher.
"""

from __future__ import annotations

from dataclasses import replace

from caesar.plans.aggregate import AggregatePlan
from caesar.plans.execution import ExecutionPlan, Stage, plan_output, plan_reads
from caesar.plans.pattern import PatternPlan


def import_from_deriver(plan: ExecutionPlan) -> ExecutionPlan:
    """`plan` with the matcher stages the deriver also runs taken out, their
    consumed results listed in `imports` (and their output topics, if any,
    written by the deriver instead)."""
    if not plan.contexts:
        return plan
    find = _Takeover(plan)
    taken = find.taken()
    if not taken:
        return plan
    kept = [s for s in plan.matcher_stages if s.plan.plan_id not in taken]
    imports = tuple(dict.fromkeys(  # in plan order: the plan's version digests it
        t for s in plan.matcher_stages if s.plan.plan_id in taken
        and (t := plan_output(s.plan)) is not None and any(t in plan_reads(k.plan) for k in kept)))
    topics = {pid: find.matcher[pid].output_topic for pid in taken
              if find.matcher[pid].output_topic}
    deriver_stages = tuple(replace(s, output_topic=topics[s.plan.plan_id])
                           if s.plan.plan_id in topics else s for s in plan.deriver_stages)
    return replace(plan, matcher_stages=tuple(kept), deriver_stages=deriver_stages,
                   imports=tuple(dict.fromkeys(plan.imports + imports)))


class _Takeover:
    """Which matcher stages the deriver's copies can stand for."""

    def __init__(self, plan: ExecutionPlan) -> None:
        self.plan = plan
        self.every = {c.name for c in plan.contexts}
        self.deriver = {s.plan.plan_id: s for s in plan.deriver_stages}
        self.matcher = {s.plan.plan_id: s for s in plan.matcher_stages}
        self._memo: dict[str, bool] = {}

    def taken(self) -> set[str]:
        taken = {pid for pid in self.matcher if self.qualifies(pid)}
        while back := {pid for pid in taken if self.held_back(pid, taken)}:
            # what they read must then stay too
            stack = list(back)
            while stack:
                pid = stack.pop()
                if pid in taken:
                    taken.discard(pid)
                    stack += [d for t in plan_reads(self.matcher[pid].plan)
                              for d in self.producers(self.matcher, t)]
        return taken

    @staticmethod
    def producers(stages: dict[str, Stage], t: str) -> set[str]:
        return {pid for pid, s in stages.items() if plan_output(s.plan) == t}

    def everywhere(self, stage: Stage) -> bool:
        return set(stage.contexts) >= self.every and \
            stage.plan.plan_id not in self.plan.context_filters

    def plain(self, pid: str) -> bool:
        """The stage alone: the same plan in both services, deriving on
        arrival (or a time-windowed aggregate), in every context, without an
        output rate."""
        s, d = self.matcher.get(pid), self.deriver.get(pid)
        return (s is not None and d is not None and s.plan == d.plan
                and (_on_arrival(s.plan) or _windowed(s.plan))
                and self.everywhere(s) and self.everywhere(d)
                and s.output_rate is None and d.output_rate is None)

    def qualifies(self, pid: str) -> bool:
        """The stage and everything upstream of it in the deriver: patterns
        after patterns; an aggregate over input events only."""
        if pid not in self._memo:
            self._memo[pid] = False  # (a plan has no cycles; this guards the recursion)
            if self.plain(pid):
                plan = self.deriver[pid].plan
                deps = [d for t in plan_reads(plan) for d in self.producers(self.deriver, t)]
                self._memo[pid] = not deps if _windowed(plan) else all(
                    self.qualifies(d) and _on_arrival(self.deriver[d].plan) for d in deps)
        return self._memo[pid]

    def held_back(self, pid: str, taken: set[str]) -> bool:
        """A kept stage reads its results in a way an import cannot give:
        a reader outside every context, or a type not derived by the same
        taken stages in both services."""
        t = plan_output(self.matcher[pid].plan)
        readers = [s for s in self.matcher.values() if s.plan.plan_id not in taken
                   and t is not None and t in plan_reads(s.plan)]
        if not readers or t is None:
            return False
        made_by = self.producers(self.matcher, t)
        released = any(_windowed(self.matcher[m].plan) for m in made_by)
        return any(not self.everywhere(s) for s in readers) or \
            made_by != self.producers(self.deriver, t) or not made_by <= taken or \
            (released and not all(_order_free(s.plan) for s in readers))


def _on_arrival(plan: object) -> bool:
    return isinstance(plan, PatternPlan) and plan.derives_on_arrival


def _windowed(plan: object) -> bool:
    return isinstance(plan, AggregatePlan) and plan.window == "time"


def _order_free(plan: object) -> bool:
    """Does the reader derive the same whichever of two events of one
    timestamp comes first? (See the module docstring.)"""
    if isinstance(plan, AggregatePlan):
        return True
    return isinstance(plan, PatternPlan) and all(
        p.strategy == "skip_till_any_match" for p in plan.expanded())
