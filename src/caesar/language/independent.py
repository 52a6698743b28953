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

The filter also applies before a filtered stage's outputs feed other matcher
stages (the matcher drops a muted stage's outputs there too), so a consumer
sees exactly what the context-aware plan would give it.
"""

from __future__ import annotations

from dataclasses import replace

from caesar.plans.execution import ExecutionPlan


def context_independent(plan: ExecutionPlan) -> ExecutionPlan:
    every = tuple(c.name for c in plan.contexts)
    stages = []
    filters: dict[str, tuple[str, ...]] = dict(plan.context_filters)
    for stage in plan.matcher_stages:
        if set(stage.contexts) >= set(every) or not every:
            stages.append(stage)
            continue
        filters[stage.plan.plan_id] = stage.contexts
        stages.append(replace(stage, contexts=every))
    return replace(plan, matcher_stages=tuple(stages), context_filters=filters)
