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
  matcher keeps each stream partition's state apart;
- contexts: a context per key that E0 events open and close, the query
  running only while it holds: CAESAR contexts (SWITCH between a default
  and an active context, the whole embedded pipeline) against Esper's nested
  context (keyed segmented, then start/end).

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
ESPER_MR = "esper-mr"  # EPL match_recognize over one stream of every event
FLINK = "flink"  # Flink CEP Pattern API on a keyed stream
FORMS = (CAESAR, ESPER, ESPER_KEYED, ESPER_MR, FLINK)
ESPER_FORMS = (ESPER, ESPER_KEYED, ESPER_MR)


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
    num_types: int = NUM_TYPES
    # contexts: CAESAR runs `caesar_text` through the embedded pipeline
    # (scheduler, deriver, router, matcher); Esper runs `epl`
    caesar_text: str | None = None
    epl: str | None = None


def sweep() -> list[Workload]:
    base = "SEQ(E1,E2,E3) WHERE [attr1] WITHIN W"
    by_v1 = [Workload(f"V1={v1}", "sweep", [seq([1, 2, 3], 10_000)],
                      domains=(v1, *DEFAULT_DOMAINS[1:]),
                      forms=(CAESAR, ESPER, ESPER_KEYED, ESPER_MR, FLINK),
                      description=f"{base}, W=10K, V1={v1}")
             for v1 in (100, 1_000, 10_000)]
    by_w = [Workload(f"W={w // 1000}K", "sweep", [seq([1, 2, 3], w)],
                     forms=(CAESAR, ESPER, ESPER_MR, FLINK),
                     description=f"{base}, W={w // 1000}K, V1=10K")
            for w in (50_000, 100_000)]
    by_length = [Workload(f"L={n}", "sweep", [seq(list(range(1, n + 1)), 10_000)],
                          forms=(CAESAR, ESPER, ESPER_MR, FLINK),
                          description=f"SEQ of {n} types, [attr1], W=10K, V1=10K")
                 for n in (2, 4, 6)]
    return by_v1 + by_w + by_length


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
        Workload("100 queries", "many", random_queries(100), events=50_000,
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


CONTEXT_COLS = "ts INT, attr1 INT, attr2 INT, attr3 INT, attr4 INT, attr5 INT"
CONTEXT_MODEL = "\n".join([
    "MODEL peers_contexts", "TIME UNIT MILLISECONDS", "PARTITION BY attr1",
    *(f'EVENT E{t}({CONTEXT_COLS}) FROM TOPIC "E{t}"' for t in range(4)),
    "DEFAULT CONTEXT idle {",
    "  SWITCH CONTEXT active PATTERN E0 s WHERE s.attr5 < 3",
    "}",
    "CONTEXT active {",
    "  SWITCH CONTEXT idle PATTERN E0 e WHERE e.attr5 >= 7",
    # ts = seq in the benchmark stream: the projected timestamps name the match
    "  DERIVE M0(v0.ts AS s0, v1.ts AS s1, v2.ts AS s2)",
    "    PATTERN SEQ(E1 v0, E2 v1, E3 v2) WITHIN 10000 MILLISECONDS",
    "}", ""])
CONTEXT_EPL = "\n".join([
    "// flush=10001",
    "create context ByKeyActive",
    "  context ByKey partition by attr1 from E0, attr1 from E1, attr1 from E2, attr1 from E3,",
    "  context Active start E0(attr5 < 3) end E0(attr5 >= 7);",
    "@name('q0') context ByKeyActive select v0, v1, v2 from pattern "
    "[every v0=E1 -> (every v1=E2 -> every v2=E3) where timer:within(10000 msec)];", ""])


def contexts() -> list[Workload]:
    return [Workload(
        "contexts", "contexts", [seq([1, 2, 3], 10_000, equivalence=())],
        domains=(100, *DEFAULT_DOMAINS[1:]), events=20_000, num_types=4,
        forms=(CAESAR, ESPER), partition_by="attr1",
        caesar_text=CONTEXT_MODEL, epl=CONTEXT_EPL,
        unsupported={FLINK: "Flink CEP has no context windows"},
        description="per attr1 key (V1=100), E0 with attr5 < 3 opens a context and one with "
                    "attr5 >= 7 closes it; SEQ(E1,E2,E3) WITHIN 10K runs only inside "
                    "(4 types). CAESAR: DEFAULT CONTEXT + SWITCH, the embedded pipeline "
                    "(scheduler, deriver, router, matcher); Esper: nested context "
                    "(partition by attr1, then start/end)")]


# The order of the report. Later groups (TPStream, ACEP) plug in here.
GROUPS: dict[str, Callable[[], list[Workload]]] = {
    "sweep": sweep,
    "negation": negation,
    "kleene": kleene,
    "many": many,
    "keyed": keyed,
    "contexts": contexts,
}
