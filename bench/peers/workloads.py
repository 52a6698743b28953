"""The peer benchmark's workloads: which queries, on which stream, run by
which engines (and why an engine sits one out).

Groups:
- sweep: the SASE workload `SEQ(E1,E2,E3) WHERE [attr1] WITHIN W` over
  V1 (attr1 cardinality), W and the pattern length L (SIGMOD 2006, section 5);
- negation at the start, in the middle and at the end;
- Kleene closure with an aggregate (skip_till_next_match; count and sum of
  the iterated events projected into every match);
- many queries: 100 and 10,000 registered patterns (bench/matcher's Table 2
  generator: lengths 2-6, up to 2 middle negations, W 10K-100K, [attr1] and
  `v0.attr3 = c`);
- keyed: the basic query with Esper's idiomatic keyed segmented context
  (`partition by attr1`) against CAESAR with `PARTITION BY attr1`, where the
  matcher keeps each stream partition's state apart.

Hook for later workloads (TPStream situations, ACEP rules): add a function
returning `Workload`s to `GROUPS` below; an engine without a rendering for a
workload lists it in `unsupported` with the reason, and the table says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from bench.peers.events import DEFAULT_DOMAINS, NUM_TYPES
from bench.peers.patterns import NEXT, Comp, Cond, Query, seq

# engine forms: how each engine states a workload
CAESAR = "caesar"
ESPER = "esper"  # EPL pattern, equivalence as filters
ESPER_KEYED = "esper-keyed"  # EPL pattern in a keyed segmented context
FLINK = "flink"  # Flink CEP Pattern API on a keyed stream
FORMS = (CAESAR, ESPER, ESPER_KEYED, FLINK)


@dataclass
class Workload:
    name: str
    group: str
    queries: list[Query]
    domains: tuple[int, ...] = DEFAULT_DOMAINS
    events: int | None = None  # None: the run's --events
    forms: tuple[str, ...] = (CAESAR, ESPER, FLINK)
    # CAESAR: stream partition attribute (PARTITION BY); the engine keys by it
    partition_by: str | None = None
    unsupported: dict[str, str] = field(default_factory=dict)
    description: str = ""


def sweep() -> list[Workload]:
    out = []
    base = "SEQ(E1,E2,E3) WHERE [attr1] WITHIN W"
    for v1 in (100, 1_000, 10_000):
        out.append(Workload(f"V1={v1}", "sweep", [seq([1, 2, 3], 10_000)],
                            domains=(v1, *DEFAULT_DOMAINS[1:]),
                            forms=(CAESAR, ESPER, ESPER_KEYED, FLINK),
                            description=f"{base}, W=10K, V1={v1}"))
    for w in (50_000, 100_000):
        out.append(Workload(f"W={w // 1000}K", "sweep", [seq([1, 2, 3], w)],
                            description=f"{base}, W={w // 1000}K, V1=10K"))
    for length in (2, 4, 6):
        out.append(Workload(f"L={length}", "sweep", [seq(list(range(1, length + 1)), 10_000)],
                            description=f"SEQ of {length} types, [attr1], W=10K, V1=10K"))
    return out


def negation() -> list[Workload]:
    v1 = (1_000, *DEFAULT_DOMAINS[1:])
    return [
        Workload("neg start", "negation", [seq([1, 2, 3], 10_000, negated=(0,))], domains=v1,
                 unsupported={FLINK: "Flink CEP cannot start a pattern with notFollowedBy"},
                 description="SEQ(!E1, E2, E3) WHERE [attr1] WITHIN 10K, V1=1000"),
        Workload("neg middle", "negation", [seq([1, 2, 3], 10_000, negated=(1,))], domains=v1,
                 description="SEQ(E1, !E2, E3) WHERE [attr1] WITHIN 10K, V1=1000"),
        Workload("neg end", "negation", [seq([1, 2, 3], 10_000, negated=(2,))], domains=v1,
                 description="SEQ(E1, E2, !E3) WHERE [attr1] WITHIN 10K, V1=1000"),
    ]


def kleene() -> list[Workload]:
    q = Query(comps=(Comp("a", 1), Comp("b", 2, kleene=True,
                                         conds=(Cond("attr2", ">", ("a", "attr2")),)),
                     Comp("c", 3)),
              within=10_000, strategy=NEXT, aggregates=True)
    return [Workload("kleene+agg", "kleene", [q], domains=(1_000, *DEFAULT_DOMAINS[1:]),
                     unsupported={FLINK: "not rendered: Flink's oneOrMore() enumerates "
                                         "subsets, not the next-match run compared here"},
                     description="SEQ(E1 a, E2+ b FILTER(b.attr2 > a.attr2), E3 c) "
                                 "WHERE [attr1] WITHIN 10K STRATEGY skip_till_next_match, "
                                 "projecting count(b), sum(b.attr2); V1=1000")]


def random_queries(count: int, seed: int = 11) -> list[Query]:
    """bench/matcher's Table 2 generator, as `Query`s."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        n = int(rng.integers(2, 7))
        types = [int(t) for t in rng.choice(NUM_TYPES, n, replace=False)]
        nneg = int(rng.integers(0, 3)) if n > 2 else 0
        neg = tuple(int(i) for i in rng.choice(np.arange(1, n - 1), min(nneg, n - 2),
                                               replace=False)) if n > 2 else ()
        within = int(rng.integers(10_000, 100_001))
        out.append(seq(types, within, negated=neg,
                       first_conds=(Cond("attr3", "=", int(rng.integers(0, 100))),)))
    return out


def many() -> list[Workload]:
    return [
        Workload("100 queries", "many", random_queries(100), events=100_000,
                 description="100 random SEQ queries (L 2-6, <=2 negations, W 10K-100K, "
                             "[attr1] AND v0.attr3 = c)"),
        Workload("10000 queries", "many", random_queries(10_000), events=20_000,
                 forms=(CAESAR, ESPER),
                 unsupported={FLINK: "one CEP operator per pattern: 10,000 operators in one "
                                     "job is not a deployment anyone runs"},
                 description="10,000 random SEQ queries (as above)"),
    ]


def keyed() -> list[Workload]:
    out = []
    for v1 in (100, 10_000):
        q = seq([1, 2, 3], 10_000, equivalence=())
        out.append(Workload(f"keyed V1={v1}", "keyed", [q], domains=(v1, *DEFAULT_DOMAINS[1:]),
                            forms=(CAESAR, ESPER_KEYED), partition_by="attr1",
                            unsupported={FLINK: "keyBy is how every Flink row above runs"},
                            description="SEQ(E1,E2,E3) WITHIN 10K per attr1 key: CAESAR "
                                        "PARTITION BY attr1, Esper `create context ... "
                                        f"partition by attr1`; V1={v1}"))
    return out


# The order of the report. Later groups (TPStream, ACEP) plug in here.
GROUPS: dict[str, Callable[[], list[Workload]]] = {
    "sweep": sweep,
    "negation": negation,
    "kleene": kleene,
    "many": many,
    "keyed": keyed,
}
