"""Context-independent compilation: the baseline of the CAESAR paper's
evaluation (section 7.3), where every query runs all the time and its context
is an ordinary filter instead of a reason to suspend it.

`context_independent(plan)` keeps every matcher stage active in every context
and records, per stage that had narrower contexts, the contexts its outputs
are filtered to (`ExecutionPlan.context_filters`). The router then routes every
transaction to every stage and names the stages whose context does not hold
(`RoutedTransaction.muted`); the matcher drops their outputs. No partial match
is ever discarded (no stage's window ends). The deriver is unchanged: context
derivation is the same work in both modes.

The output filter is exact only for a stage whose outputs leave the service:
a filtered stage feeding another matcher stage would pass its unfiltered
outputs on before the filter, so such plans are refused.
"""

from __future__ import annotations

from dataclasses import replace

from caesar.errors import PlanError
from caesar.plans.execution import ExecutionPlan


def context_independent(plan: ExecutionPlan) -> ExecutionPlan:
    every = tuple(c.name for c in plan.contexts)
    stages = []
    filters: dict[str, tuple[str, ...]] = dict(plan.context_filters)
    for stage in plan.matcher_stages:
        if set(stage.contexts) >= set(every) or not every:
            stages.append(stage)
            continue
        if stage.feeds:
            raise PlanError(f"context-independent mode: stage {stage.plan.plan_id} runs in "
                            f"{list(stage.contexts)} and feeds {list(stage.feeds)}; only "
                            "stages whose outputs leave the matcher can be filtered")
        filters[stage.plan.plan_id] = stage.contexts
        stages.append(replace(stage, contexts=every))
    return replace(plan, matcher_stages=tuple(stages), context_filters=filters)
