"""Context window grouping (CAESAR paper section 5.3, Listing 1).

Which contexts may overlap is inferred from the deriving queries: a context
entered (INITIATE, or SWITCH into it) by a query running in context s while
s is not terminated starts inside s's window, so the two overlap; whatever
overlaps s also overlaps a context initiated from s (fixpoint). The default
context never overlaps: initiating any context ends it.

For each set of mutually overlapping contexts the compile-time order of
window starts is known (the initiating context starts first); the order of
window ends is not, so Listing 1 runs on every order of ends and the grouped
windows it produces are collected. Each grouped window is identified by the
set of original contexts holding in it and carries their queries with
duplicates dropped. Non-overlapping contexts keep one window each.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import permutations

from caesar.language.algebra import AlgebraPlan, ContextGroup
from caesar.language.phase1 import QuerySet

MAX_EXACT = 6  # beyond this many overlapping contexts: single contexts and pairs only


@dataclass(frozen=True)
class UserWindow:
    name: str
    start: int
    end: int
    queries: tuple[str, ...]


@dataclass(frozen=True)
class GroupedWindow:
    start: int
    end: int
    queries: tuple[str, ...]
    contexts: tuple[str, ...]


def listing1(windows: list[UserWindow]) -> list[GroupedWindow]:
    """Listing 1 of the paper, over concrete window bounds."""
    overlapping = [w for w in windows
                   if any(o is not w and o.start < w.end and w.start < o.end for o in windows)]
    # line 4: non-overlapping windows stay as they are
    groups: list[GroupedWindow] = [GroupedWindow(w.start, w.end, w.queries, (w.name,))
                                   for w in windows if w not in overlapping]
    ws = sorted(overlapping, key=lambda w: w.start)  # line 5
    merged: dict[tuple[int, int], UserWindow] = {}  # line 6: identical windows merge
    for w in ws:
        key = (w.start, w.end)
        if key in merged:
            old = merged[key]
            merged[key] = UserWindow(old.name + "+" + w.name, w.start, w.end,
                                     old.queries + w.queries)
        else:
            merged[key] = w
    ws = list(merged.values())
    bounds = sorted({b for w in ws for b in (w.start, w.end)})
    active: list[UserWindow] = []
    previous = None
    for nxt in bounds:  # lines 8-19
        starting = [w for w in ws if w.start == nxt]
        ending = [w for w in ws if w.end == nxt]
        if active:
            queries = tuple(q for w in active for q in w.queries)
            names = tuple(n for w in active for n in w.name.split("+"))
            assert previous is not None
            groups.append(GroupedWindow(previous, nxt, queries, names))
        active = [w for w in active if w not in ending] + starting
        previous = nxt
    return [replace(g, queries=tuple(dict.fromkeys(g.queries))) for g in groups]  # lines 20-22


def infer_overlaps(qs: QuerySet) -> set[frozenset[str]]:
    default = qs.model.default_context
    overlaps: set[frozenset[str]] = set()
    changed = True
    while changed:
        changed = False
        for q in qs.deriving:
            assert q.transition is not None
            if q.transition.action == "TERMINATE":
                continue
            t = q.transition.target
            for s in q.contexts:
                if s in (default, t):
                    continue
                cands = {x for pair in overlaps if s in pair for x in pair if x != s}
                if q.transition.action == "INITIATE":
                    cands.add(s)
                for x in cands:
                    pair = frozenset((x, t))
                    if default in pair:  # the default holds only when nothing else does
                        continue
                    if x != t and pair not in overlaps:
                        overlaps.add(pair)
                        changed = True
    return overlaps


def _components(names: list[str], overlaps: set[frozenset[str]]) -> list[list[str]]:
    seen: set[str] = set()
    comps = []
    for n in names:
        if n in seen:
            continue
        stack, comp = [n], []
        while stack:
            x = stack.pop()
            if x in seen:
                continue
            seen.add(x)
            comp.append(x)
            stack.extend(y for pair in overlaps if x in pair for y in pair if y != x)
        comps.append(sorted(comp, key=names.index))
    return comps


def _start_order(comp: list[str], qs: QuerySet) -> list[str]:
    # s before t when a query running in s enters t (t's window starts inside s's).
    after: dict[str, set[str]] = {c: set() for c in comp}
    for q in qs.deriving:
        assert q.transition is not None
        target = q.transition.target
        if q.transition.action != "TERMINATE" and target in after:
            for s in q.contexts:
                if s in after and s != target:
                    after[target].add(s)
    order: list[str] = []
    pending = list(comp)
    while pending:
        ready = [c for c in pending if not (after[c] - set(order))] or [pending[0]]
        order.append(ready[0])
        pending.remove(ready[0])
    return order


def grouped_windows(comp: list[str], qs: QuerySet,
                    overlaps: set[frozenset[str]]) -> list[tuple[str, ...]]:
    """The sets of contexts that can hold together in a component."""
    found: list[tuple[str, ...]] = []
    if len(comp) > MAX_EXACT:
        # Every clique would be 2^n sets when n contexts all overlap (45
        # overlapping windows in the paper's Figure 14). Sharing needs only
        # which contexts can hold together (shared_subplans), and the runtime
        # keeps one bit per original context, so the windows of single
        # contexts and of overlapping pairs are enough here.
        found.extend((c,) for c in comp)
        found.extend((a, b) for i, a in enumerate(comp) for b in comp[i + 1:]
                     if frozenset((a, b)) in overlaps)
        return found
    starts = _start_order(comp, qs)
    n = len(comp)
    for ends in permutations(starts):
        windows = [UserWindow(c, starts.index(c), n + ends.index(c), (c,)) for c in comp]
        for g in listing1(windows):
            key = tuple(c for c in comp if c in g.contexts)
            # The scenario's ends are free, but contexts that never overlap (one
            # switches to the other) cannot hold together: keep cliques only.
            clique = all(frozenset((a, b)) in overlaps
                         for i, a in enumerate(key) for b in key[i + 1:])
            if clique and key not in found:
                found.append(key)
    return found


def group_context_windows(plan: AlgebraPlan) -> AlgebraPlan:
    qs = plan.query_set
    names = list(qs.model.context_names())
    overlaps = infer_overlaps(qs)
    groups: list[ContextGroup] = []
    for comp in _components(names, overlaps):
        for ctxs in grouped_windows(comp, qs, overlaps):
            queries = tuple(q.qid for q in qs.queries if set(q.contexts) & set(ctxs))
            groups.append(ContextGroup("+".join(ctxs), ctxs, queries))
    pairs = tuple(sorted(_in_model_order(p, names) for p in overlaps))
    return replace(plan, groups=tuple(groups), overlaps=pairs)


def _in_model_order(pair: frozenset[str], names: list[str]) -> tuple[str, str]:
    a, b = sorted(pair, key=names.index)
    return a, b
