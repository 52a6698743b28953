"""Random differential cases: a pattern (as bench/peers/patterns.Query) and
a small stream crafted so that matches, near misses and negations happen.

Each case draws, from its own seed:
- 1-4 positive components over types E1..E4 (repeats allowed), negations at
  the start, between positives and at the end (at most one per gap);
- strategy skip_till_any_match or skip_till_next_match; under the latter a
  middle positive component may be a Kleene closure with an iteration filter
  and the count/sum aggregates projected;
- equivalence [], [attr1] or [attr1, attr2]; conditions `attr op constant`
  and `attr op earlier.attr` on components (on a negated one they read the
  positives bound before it; at the start of the pattern any positive);
- a window of 4-40 ticks;
- 30-160 events of types E1..E5 (E5 never in a pattern), small attribute
  domains, timestamps rising by 0-3 (ties) or by 1-3 when the pattern has a
  middle negation or a Kleene component (see docs/language.md, "Compared
  with Esper", for why ties are left out there).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench.peers.events import Stream
from bench.peers.patterns import ANY, NEXT, OPS, Comp, Cond, Query


@dataclass(frozen=True)
class Case:
    seed: int
    query: Query
    stream: Stream
    ties: bool


def _cond(rng: np.random.Generator, earlier: list[str]) -> Cond:
    attr = f"attr{int(rng.integers(1, 4))}"
    op = OPS[int(rng.integers(0, len(OPS)))]
    if earlier and rng.random() < 0.5:
        other = earlier[int(rng.integers(0, len(earlier)))]
        return Cond(attr, op, (other, f"attr{int(rng.integers(1, 4))}"))
    return Cond(attr, op, int(rng.integers(0, 4)))


def _negation_gaps(rng: np.random.Generator, npos: int, kleene_at: int) -> list[bool]:
    """Whether a negation sits in gap g, before positive g (g = npos: at the end)."""
    neg_in = [rng.random() < 0.25 for _ in range(npos + 1)]
    if npos == 1:
        neg_in[1] = neg_in[1] and not neg_in[0]
    if kleene_at >= 0:  # no negation next to a Kleene component
        neg_in[kleene_at] = neg_in[kleene_at + 1] = False
    return neg_in


def _components(rng: np.random.Generator, npos: int, kleene_at: int) -> list[Comp]:
    comps: list[Comp] = []
    bound: list[str] = []
    neg_in = _negation_gaps(rng, npos, kleene_at)
    for g in range(npos + 1):
        if neg_in[g]:
            # a start negation's conditions are drawn once the positives exist
            conds = (() if g == 0 else
                     tuple(_cond(rng, bound) for _ in range(int(rng.integers(0, 2)))))
            comps.append(Comp(var=f"n{g}", type=int(rng.integers(1, 5)), negated=True,
                              conds=conds))
        if g == npos:
            break
        conds = tuple(_cond(rng, bound) for _ in range(int(rng.integers(0, 3))))
        comps.append(Comp(var=f"p{g}", type=int(rng.integers(1, 5)), kleene=g == kleene_at,
                          conds=conds))
        if g != kleene_at:  # a Kleene variable is read through aggregates only
            bound.append(f"p{g}")
    if neg_in[0]:
        n0 = comps[0]
        conds = tuple(_cond(rng, bound) for _ in range(int(rng.integers(0, 2))))
        comps[0] = Comp(var=n0.var, type=n0.type, negated=True, conds=conds)
    return comps


def _bridge_any_match(comps: list[Comp]) -> None:
    """The one difference left (docs/language.md, "Esper side by side"): a
    middle negation of the type of the positive after it; change its type."""
    for i in range(1, len(comps) - 1):
        c, nxt = comps[i], comps[i + 1]
        if c.negated and not nxt.negated and c.type == nxt.type:
            comps[i] = Comp(var=c.var, type=c.type % 4 + 1, negated=True, conds=c.conds)


def random_query(rng: np.random.Generator) -> Query:
    npos = int(rng.integers(1, 5))
    strategy = ANY if rng.random() < 0.6 else NEXT
    kleene_at = -1
    if strategy == NEXT and npos >= 3 and rng.random() < 0.5:
        kleene_at = int(rng.integers(1, npos - 1))
    comps = _components(rng, npos, kleene_at)
    if strategy == ANY:
        _bridge_any_match(comps)
    equivalence = [(), ("attr1",), ("attr1", "attr2")][int(rng.integers(0, 3))]
    return Query(comps=tuple(comps), within=int(rng.integers(4, 41)),
                 equivalence=equivalence, strategy=strategy,
                 aggregates=kleene_at >= 0 and rng.random() < 0.5)


def needs_distinct_ts(q: Query) -> bool:
    pos = [i for i, c in enumerate(q.comps) if not c.negated]
    middle_neg = any(c.negated and pos[0] < i < pos[-1] for i, c in enumerate(q.comps))
    return middle_neg or any(c.kleene for c in q.comps)


def random_stream(rng: np.random.Generator, ties: bool) -> Stream:
    n = int(rng.integers(30, 161))
    steps = rng.integers(0 if ties else 1, 4, n)
    ts = np.cumsum(steps).astype(np.int64)
    types = rng.integers(1, 6, n).astype(np.int64)
    attrs = np.stack([rng.integers(0, d, n) for d in (3, 4, 4, 3, 3)], axis=1).astype(np.int64)
    return Stream(seq=np.arange(n, dtype=np.int64), ts=ts, type=types, attrs=attrs)


def case(seed: int) -> Case:
    rng = np.random.default_rng(seed)
    q = random_query(rng)
    ties = not needs_distinct_ts(q)
    return Case(seed, q, random_stream(rng, ties), ties)
