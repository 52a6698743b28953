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

from bench.peers.events import DEFAULT_DOMAINS, NUM_TYPES, Stream, situation_stream
from bench.peers.patterns import NEXT, Comp, Cond, Query, seq

# engine forms: how each engine states a workload
CAESAR = "caesar"
# the same engine returning one DerivedEvent per match (the matcher service's
# form) instead of columns: what the per-match Python objects cost
CAESAR_OBJECTS = "caesar-objects"
CAESAR_FORMS = (CAESAR, CAESAR_OBJECTS)  # run in this process
ESPER = "esper"  # EPL pattern, equivalence as filters
ESPER_KEYED = "esper-keyed"  # EPL pattern in a keyed segmented context
ESPER_MR = "esper-mr"  # EPL match_recognize over one stream of every event
FLINK = "flink"  # Flink CEP Pattern API on a keyed stream
# TPStream's two Esper formulations (its section 1, "straw man's approach"):
ESPER_2PHASE = "esper-2phase"  # Esper-1: situations by match_recognize, then a pattern over them
ESPER_LOWLAT = "esper-lowlat"  # Esper-2: one match_recognize over the events, conditions ANDed
FORMS = (CAESAR, CAESAR_OBJECTS, ESPER, ESPER_KEYED, ESPER_MR, ESPER_2PHASE, ESPER_LOWLAT, FLINK)
ESPER_FORMS = (ESPER, ESPER_KEYED, ESPER_MR, ESPER_2PHASE, ESPER_LOWLAT)


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
    # "pipeline": caesar_text through the embedded pipeline; "temporal": its
    # TPStream query on the temporal engine over columnar batches (as the
    # matcher service drives it)
    caesar_runner: str = "pipeline"
    # EPL per Esper form, where a workload states each form itself
    epl_forms: dict[str, str] = field(default_factory=dict)
    # the stream (n events); None: the SASE stream of `domains`, `num_types`
    stream: Callable[[int], Stream] | None = None


def sweep() -> list[Workload]:
    base = "SEQ(E1,E2,E3) WHERE [attr1] WITHIN W"
    by_v1 = [Workload(f"V1={v1}", "sweep", [seq([1, 2, 3], 10_000)],
                      domains=(v1, *DEFAULT_DOMAINS[1:]),
                      forms=(CAESAR, CAESAR_OBJECTS, ESPER, ESPER_KEYED, ESPER_MR, FLINK),
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
                            forms=(CAESAR, CAESAR_OBJECTS, ESPER_KEYED), partition_by="attr1",
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


TP_WITHIN = 10_000
TPSTREAM_MODEL = "\n".join([
    "MODEL peers_tpstream", "TIME UNIT MILLISECONDS", "PARTITION BY attr1",
    f'EVENT E1({CONTEXT_COLS}) FROM TOPIC "E1"',
    # ts = seq in the benchmark stream: the situations' first timestamps name the match
    "DERIVE M0(first(A.ts) AS s0, first(B.ts) AS s1)",
    "  FROM E1 X",
    "  DEFINE A AS X.attr2 > 50, B AS X.attr3 > 50",
    "  PATTERN A OVERLAPS B",
    f"  WITHIN {TP_WITHIN} MILLISECONDS", ""])
# Esper-1: each situation a maximal run (!S S+ !S) by match_recognize, into
# its own stream at its end; then A, followed by the B that ends after it,
# started inside it. Reports at B's end.
TPSTREAM_2PHASE = "\n".join([
    "// flush=1", "// stream=Ev",
    *(f"insert into Sit{s} select s, te, k from Ev match_recognize (partition by attr1 "
      "measures x.firstOf() as s, n1.ts as te, n1.attr1 as k after match skip to current row "
      f"pattern (n0 x+ n1) define n0 as not (n0.{a} > 50), x as x.{a} > 50, "
      f"n1 as not (n1.{a} > 50));" for s, a in (("A", "attr2"), ("B", "attr3"))),
    "@name('q0') select a.s as s0, b.s as s1 from pattern [every a=SitA -> b=SitB(k = a.k "
    "and s.ts > a.s.ts and s.ts < a.te and te > a.te) "
    f"where timer:within({TP_WITHIN} msec)];", ""])
# Esper-2: one row pattern over the events, A's and B's conditions combined:
# !A, A*, A and !B (the row before B starts), A and B+, then !A and B (A
# ends while B holds). Reports at A's end, as TPStream does.
TPSTREAM_LOWLAT = "\n".join([
    "// flush=1", "// stream=Ev",
    "@name('q0') select s0, s1 from Ev match_recognize (partition by attr1 "
    "measures coalesce(aany.firstOf(), aonly) as s0, both.firstOf() as s1 "
    "after match skip to current row pattern (na aany* aonly both+ bonly) "
    "define na as not (na.attr2 > 50), aany as aany.attr2 > 50, "
    "aonly as aonly.attr2 > 50 and not (aonly.attr3 > 50), "
    "both as both.attr2 > 50 and both.attr3 > 50, "
    "bonly as not (bonly.attr2 > 50) and bonly.attr3 > 50);", ""])


def tpstream() -> list[Workload]:
    return [Workload(
        "tpstream overlaps", "tpstream", [seq([1], TP_WITHIN, equivalence=())],
        forms=(CAESAR, ESPER_2PHASE, ESPER_LOWLAT), partition_by="attr1",
        caesar_text=TPSTREAM_MODEL, caesar_runner="temporal",
        epl_forms={ESPER_2PHASE: TPSTREAM_2PHASE, ESPER_LOWLAT: TPSTREAM_LOWLAT},
        stream=situation_stream,
        unsupported={FLINK: "not rendered: situations need a maximal-run operator "
                            "(Flink CEP's oneOrMore with a following negation per situation)"},
        description="TPStream `A OVERLAPS B` WITHIN 10K per attr1 key (100 keys), "
                    "A: attr2 > 50, B: attr3 > 50, situations of 1-15 events; CAESAR: the "
                    "temporal engine; Esper: the paper's 2-phase (Esper-1) and low-latency "
                    "(Esper-2) formulations")]


ACEP_MODEL = "\n".join([
    "MODEL peers_acep", "TIME UNIT MILLISECONDS", "PARTITION BY attr1",
    *(f'EVENT E{t}({CONTEXT_COLS}) FROM TOPIC "E{t}"' for t in range(4)),
    "TABLE t0(k INT, v INT, PRIMARY KEY (k))",
    "TABLE t1(k INT, v INT, PRIMARY KEY (k))",
    "RULE w0 ON E0 e DO UPSERT INTO t0 VALUES (e.attr1, e.attr2)",
    "RULE w1 ON E1 e DO UPSERT INTO t1 VALUES (e.attr1, e.attr2)",
    # a table-reading query, and a query-rule pair that reads one table and writes the other
    "DERIVE M0(e.ts AS s0) PATTERN E2 e",
    "  WHERE (SELECT v FROM t0 WHERE k = e.attr1) > (SELECT v FROM t1 WHERE k = e.attr1)",
    "RULE r3 ON E3 e WHERE (SELECT v FROM t0 WHERE k = e.attr1) < e.attr2 DO BEGIN",
    "  UPSERT INTO t1 VALUES (e.attr1, e.attr2); DERIVE M1(e.ts AS s0); END", ""])
# Esper tables: `on ... merge` upserts, `t[key].v` reads one row (null when
# missing, as CAESAR's read of a missing row); events apply one by one, the
# serial order CAESAR's schedulers must equal.
ACEP_EPL = "\n".join([
    "create table t0 (k long primary key, v long);",
    "create table t1 (k long primary key, v long);",
    *(f"on E{i} e merge t{i} t where t.k = e.attr1 when matched then update set v = e.attr2 "
      "when not matched then insert select e.attr1 as k, e.attr2 as v;" for i in (0, 1)),
    "@name('q0') select e from E2 e where t0[e.attr1].v > t1[e.attr1].v;",
    "@name('q1') select e from E3 e where t0[e.attr1].v < e.attr2;",
    "on E3 e merge t1 t where t.k = e.attr1 "
    "when matched and t0[e.attr1].v < e.attr2 then update set v = e.attr2 "
    "when not matched and t0[e.attr1].v < e.attr2 then insert select e.attr1 as k, "
    "e.attr2 as v;", ""])


def acep() -> list[Workload]:
    return [Workload(
        "acep tables", "acep", [seq([2], 1, equivalence=()), seq([3], 1, equivalence=())],
        domains=(100, 1_000, 100, 100, 10), events=20_000, num_types=4,
        forms=(CAESAR, ESPER), caesar_text=ACEP_MODEL, epl=ACEP_EPL,
        unsupported={FLINK: "Flink CEP has no shared tables"},
        description="ACEP: E0/E1 upsert tables t0/t1 (key attr1, V1=100); E2 derives when "
                    "t0[attr1] > t1[attr1]; a rule on E3 reads t0 and writes t1. CAESAR: "
                    "TABLE + RULE through the embedded pipeline (LWM scheduler); Esper: "
                    "tables with on-merge")]


# The order of the report.
GROUPS: dict[str, Callable[[], list[Workload]]] = {
    "sweep": sweep,
    "negation": negation,
    "kleene": kleene,
    "many": many,
    "keyed": keyed,
    "contexts": contexts,
    "tpstream": tpstream,
    "acep": acep,
}
