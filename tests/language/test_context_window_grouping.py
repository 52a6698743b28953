"""Context window grouping beyond MAX_EXACT overlapping contexts (the
paper's Figure 14 has 45): single contexts and overlapping pairs, and the
sharing decision they feed equals the one every clique would give."""

from __future__ import annotations

from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

from caesar.language.optimizer.context_window_grouping import MAX_EXACT, grouped_windows


def _cliques(comp: list[str], overlaps: set[frozenset[str]]) -> list[frozenset[str]]:
    return [frozenset(sub) for k in range(1, len(comp) + 1) for sub in combinations(comp, k)
            if all(frozenset(p) in overlaps for p in combinations(sub, 2))]


def _together(groups: list[frozenset[str]], a: frozenset[str], b: frozenset[str]) -> bool:
    # shared_subplans.share_subplans' test
    return a == b or any(g & a and g & b for g in groups)


def test_45_overlapping_contexts_give_singles_and_pairs() -> None:
    comp = [f"w{i}" for i in range(45)]
    overlaps = {frozenset(p) for p in combinations(comp, 2)}
    found = grouped_windows(comp, None, overlaps)  # type: ignore[arg-type]  # qs unused here
    assert len(found) == 45 + 45 * 44 // 2
    assert {len(g) for g in found} == {1, 2}


@settings(max_examples=60, deadline=None)
@given(st.integers(MAX_EXACT + 1, 9).flatmap(
    lambda n: st.tuples(st.just(n), st.sets(st.tuples(st.integers(0, n - 1),
                                                       st.integers(0, n - 1))),
                        st.lists(st.sets(st.integers(0, n - 1), min_size=1), min_size=2,
                                 max_size=2))))
def test_sharing_decision_equals_the_cliques_one(case: tuple[int, set[tuple[int, int]],
                                                             list[set[int]]]) -> None:
    n, pairs, (a, b) = case
    comp = [f"c{i}" for i in range(n)]
    overlaps = {frozenset((comp[x], comp[y])) for x, y in pairs if x != y}
    groups = [frozenset(g) for g in grouped_windows(comp, None, overlaps)]  # type: ignore[arg-type]
    fa, fb = frozenset(comp[i] for i in a), frozenset(comp[i] for i in b)
    assert _together(groups, fa, fb) == _together(_cliques(comp, overlaps), fa, fb)
