"""SASE workload generator (SIGMOD 2006, section 5, Tables 1 and 2).

Events: 20 types E0..E19, 5 integer attributes attr1..attr5 with uniform
values in [0, V_i); one event per time unit (windows are counted in events,
as in the paper). Queries: SEQ(E_a, E_b, ...) of length L with equivalence
tests, window W and up to N negations.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from caesar.events.batch import EventBatch, StringPool, TypeColumns
from caesar.plans.expr import Attr, Binary, Const
from caesar.plans.pattern import PatternComponent, PatternPlan

NUM_TYPES = 20
ATTRS = ("attr1", "attr2", "attr3", "attr4", "attr5")
TYPE_NAMES = tuple(f"E{i}" for i in range(NUM_TYPES))
SCHEMAS = {t: {a: "int" for a in ATTRS} for t in TYPE_NAMES}


def batches(n_events: int, domains: tuple[int, ...] = (10_000, 1_000, 100, 100, 10),
            batch_size: int = 10_000, seed: int = 7,
            pool: StringPool | None = None) -> Iterator[EventBatch]:
    """The event stream as columnar batches (one partition)."""
    rng = np.random.default_rng(seed)
    pool = pool or StringPool()
    for start in range(0, n_events, batch_size):
        n = min(batch_size, n_events - start)
        types = rng.integers(0, NUM_TYPES, n)
        values = [rng.integers(0, d, n) for d in domains]
        ts = np.arange(start, start + n, dtype=np.int64)
        by_type = {}
        for t in range(NUM_TYPES):
            sel = np.nonzero(types == t)[0]
            if sel.size == 0:
                continue
            by_type[TYPE_NAMES[t]] = TypeColumns(
                ts=ts[sel], seq=ts[sel].copy(), partition=np.zeros(sel.size, dtype=np.int64),
                columns={a: values[i][sel].astype(np.int64) for i, a in enumerate(ATTRS)})
        yield EventBatch(by_type=by_type, strings=pool)


def seq_query(plan_id: str, types: list[int], within: int = 10_000,
              equivalence: tuple[str, ...] = ("attr1",), negated: tuple[int, ...] = (),
              where: tuple = ()) -> PatternPlan:
    """SEQ(E_t1, ..., !E_tk, ...) WHERE [equivalence] AND where WITHIN within;
    `negated` lists positions (in `types`) that are negated components."""
    comps = tuple(PatternComponent(var=f"v{i}", types=(TYPE_NAMES[t],), negated=i in negated)
                  for i, t in enumerate(types))
    return PatternPlan(plan_id=plan_id, components=comps, where=tuple(where),
                       equivalence=equivalence, within=within, schemas=SCHEMAS)


def random_queries(count: int, seed: int = 11, length: tuple[int, int] = (2, 6),
                   windows: tuple[int, int] = (10_000, 100_000), max_neg: int = 2,
                   const_domain: int = 100) -> list[PatternPlan]:
    """Table 2 style queries; each also carries a simple predicate
    `v0.attr3 = c` so that many registered queries are distinguishable (the
    constant index is what keeps 10,000 of them cheap)."""
    rng = np.random.default_rng(seed)
    plans = []
    for q in range(count):
        n = int(rng.integers(length[0], length[1] + 1))
        types = [int(t) for t in rng.choice(NUM_TYPES, n, replace=False)]
        nneg = int(rng.integers(0, max_neg + 1)) if n > 2 else 0
        negated = tuple(int(i) for i in rng.choice(np.arange(1, n - 1), min(nneg, n - 2),
                                                   replace=False)) if n > 2 else ()
        within = int(rng.integers(windows[0], windows[1] + 1))
        where = (Binary("=", Attr("v0", "attr3"), Const(int(rng.integers(0, const_domain)))),)
        plans.append(seq_query(f"q{q}", types, within, ("attr1",), negated, where))
    return plans


def shared_prefix_queries(count: int, types: tuple[int, int, int] = (1, 2, 3),
                          within: int = 10_000) -> list[PatternPlan]:
    """`count` queries SEQ(E_a, E_b, E_c) WHERE [attr1] AND v2.attr2 = i
    WITHIN `within`: one common prefix, differing only in the last
    component's constant (the prefix-sharing workload)."""
    return [seq_query(f"s{i}", list(types), within, ("attr1",),
                      where=(Binary("=", Attr("v2", "attr2"), Const(i)),))
            for i in range(count)]
