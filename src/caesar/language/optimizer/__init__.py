"""The optimizer: one rule per module, each `rule(plan) -> plan`, run in the
order of RULES (section 5 of the CAESAR paper plus classic filter rules)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from caesar.language.algebra import AlgebraPlan
from caesar.language.optimizer.context_window_grouping import group_context_windows
from caesar.language.optimizer.context_window_pushdown import push_down_context_windows
from caesar.language.optimizer.filter_merge import merge_filters
from caesar.language.optimizer.filter_pushdown import push_down_filters
from caesar.language.optimizer.shared_subplans import share_subplans
from caesar.language.optimizer.view_merging import merge_views

Rule = Callable[[AlgebraPlan], AlgebraPlan]

# Order: views are merged into their readers first (their filters then go
# through push-down and merge with the readers' own); filters are normalised
# next so identical queries look identical; grouping decides which contexts
# may share; sharing merges identical queries of a grouped window (widening
# their context windows); push-down runs last, so a shared query's producers
# are narrowed to the widened contexts.
RULES: tuple[tuple[str, Rule], ...] = (
    ("view_merging", merge_views),
    ("filter_pushdown", push_down_filters),
    ("filter_merge", merge_filters),
    ("context_window_grouping", group_context_windows),
    ("shared_subplans", share_subplans),
    ("context_window_pushdown", push_down_context_windows),
)


def optimize(plan: AlgebraPlan, rules: Sequence[tuple[str, Rule]] = RULES) -> AlgebraPlan:
    from dataclasses import replace

    for name, rule in rules:
        plan = rule(plan)
        plan = replace(plan, applied=plan.applied + (name,))
    return plan
