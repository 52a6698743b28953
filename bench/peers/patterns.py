"""One pattern description, three renderings: CAESAR model text, Esper EPL,
and the Flink CEP harness's spec line.

A `Query` is a sequence of components over the SASE event types E0..E19
with SASE equivalence tests, a window and a selection strategy; conditions
are `var.attr op (constant | earlier_var.attr)`. That covers the peer
workloads and the random differential cases, and it is what all three
engines can state. The EPL forms are the idiomatic ones (Esper reference,
chapter "EPL Patterns"):

- skip_till_any_match: `every a=E1 -> (every b=E2(..) -> every c=E3(..))
  where timer:within(W msec)`: `every` on each later component produces every
  combination; the guard ends the whole instance W after `a`.
- skip_till_next_match: the same without `every` after the first component
  (followed-by takes the first later event that passes its filter).
- middle negation: `(every b=E2(..) and not N(..))`: the `not` ends the
  instance when N arrives before b;
- end negation: after the last positive component,
  `(timer:schedule(date: a.ts + W) and not N(..))` waits until the window
  after `a` has closed (strict: a timer at a.ts + W fires before events of
  that time, as CAESAR's open interval);
- start negation: a correlated `not exists` subquery over `N#time(W msec)`
  when the match is reported (the window then holds N events with
  ts > last.ts - W);
- Kleene (skip_till_next_match only): `bf=E2(..) -> (b=E2(..) until c=E3(..))`
  (first element, then zero or more until the next component);
- keyed context: `create context ByKey partition by attr1 from E1, ...` and
  the pattern without equality filters (Esper evaluates per key).

With `strict_ts`, every later component also gets `ts > previous.ts` so that
events of one timestamp never follow each other, as in CAESAR; without it the
stream must have distinct timestamps (the benchmark streams do).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.peers.events import ATTRS, NUM_TYPES

OPS = ("=", "!=", "<", "<=", ">", ">=")
ANY = "skip_till_any_match"
NEXT = "skip_till_next_match"


@dataclass(frozen=True)
class Cond:
    """`<owner>.attr op rhs`; rhs is a constant or (var, attr) of an earlier
    positive component."""

    attr: str
    op: str
    rhs: int | tuple[str, str]


@dataclass(frozen=True)
class Comp:
    var: str
    type: int
    negated: bool = False
    kleene: bool = False
    conds: tuple[Cond, ...] = ()


@dataclass(frozen=True)
class Query:
    comps: tuple[Comp, ...]
    within: int
    equivalence: tuple[str, ...] = ("attr1",)
    strategy: str = ANY
    # project aggregates over the Kleene component (count, sum of attr2)
    aggregates: bool = False
    name: str = ""
    positives: tuple[Comp, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "positives", tuple(c for c in self.comps if not c.negated))
        if not self.positives:
            raise ValueError("a query needs a positive component")
        for c in self.comps:
            if c.kleene and (c.negated or self.strategy != NEXT):
                raise ValueError("Kleene components are rendered for skip_till_next_match only")


def seq(types: list[int], within: int, negated: tuple[int, ...] = (),
        equivalence: tuple[str, ...] = ("attr1",), strategy: str = ANY,
        first_conds: tuple[Cond, ...] = ()) -> Query:
    """SEQ(E_t0, ..., !E_tk, ...) (the SASE workload's query shape)."""
    comps = tuple(Comp(var=f"v{i}", type=t, negated=i in negated,
                       conds=first_conds if i == 0 else ())
                  for i, t in enumerate(types))
    return Query(comps=comps, within=within, equivalence=equivalence, strategy=strategy)


# ---------------------------------------------------------------- CAESAR

def _rhs(rhs: int | tuple[str, str]) -> str:
    return str(rhs) if isinstance(rhs, int) else f"{rhs[0]}.{rhs[1]}"


def caesar_query(q: Query, index: int) -> str:
    parts = []
    for c in q.comps:
        t = f"E{c.type}{'+' if c.kleene else ''} {c.var}"
        if c.kleene and c.conds:
            t += " FILTER(" + " AND ".join(f"{c.var}.{k.attr} {k.op} {_rhs(k.rhs)}"
                                           for k in c.conds) + ")"
        parts.append(("NOT " if c.negated else "") + t)
    where = [f"[{', '.join(q.equivalence)}]"] if q.equivalence else []
    for c in q.comps:
        if not c.kleene:
            where += [f"{c.var}.{k.attr} {k.op} {_rhs(k.rhs)}" for k in c.conds]
    first = q.positives[0].var
    fields = [f"{first}.attr2 AS x"]
    kleene = [c for c in q.positives if c.kleene]
    if q.aggregates and kleene:
        k = kleene[0].var
        fields += [f"count({k}) AS n", f"sum({k}.attr2) AS total"]
    text = f"DERIVE M{index}({', '.join(fields)}) PATTERN SEQ({', '.join(parts)})"
    if where:
        text += " WHERE " + " AND ".join(where)
    text += f" WITHIN {q.within} MILLISECONDS"
    if q.strategy != ANY:
        text += f" STRATEGY {q.strategy}"
    return text


def caesar_model(queries: list[Query], partition_by: str | None = None) -> str:
    """A CAESAR model with every type the queries read and one DERIVE per
    query (output type M<i>, i = the query's index)."""
    used = sorted({c.type for q in queries for c in q.comps})
    cols = ", ".join(["ts INT", *(f"{a} INT" for a in ATTRS)])
    lines = ["MODEL peers", "TIME UNIT MILLISECONDS"]
    if partition_by:
        lines.append(f"PARTITION BY {partition_by}")
    lines += [f'EVENT E{t}({cols}) FROM TOPIC "E{t}"' for t in used]
    lines += [caesar_query(q, i) for i, q in enumerate(queries)]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- Esper

def _conds(q: Query, c: Comp, prev: Comp | None, *, strict_ts: bool, keyed: bool) -> list[str]:
    """The filter conditions of component c; `prev` = the positive component
    before it (ts guard)."""
    first = q.positives[0]
    conds = []
    if c is not first and not keyed:
        conds += [f"{a} = {first.var}.{a}" for a in q.equivalence]
    conds += [f"{k.attr} {k.op} {_rhs(k.rhs)}" for k in c.conds]
    if strict_ts and prev is not None:
        conds.append(f"ts > {prev.var}.ts")
    return conds


def _filter(q: Query, c: Comp, prev: Comp | None, *, strict_ts: bool, keyed: bool,
            extra: tuple[str, ...] = ()) -> str:
    conds = _conds(q, c, prev, strict_ts=strict_ts, keyed=keyed) + list(extra)
    return f"E{c.type}({', '.join(conds)})"


class _EplPattern:
    """The EPL pattern text of one query: `every <first> -> (<chain>) where
    timer:within(W)`, then the end negation's timer; a Kleene atom consumes
    the positive after it."""

    def __init__(self, q: Query, *, strict_ts: bool, keyed: bool) -> None:
        self.q, self.strict_ts, self.keyed = q, strict_ts, keyed
        self.comps = list(q.comps)
        self.pos_idx = [i for i, c in enumerate(self.comps) if not c.negated]
        self.any_match = q.strategy == ANY

    def _filter(self, c: Comp, prev: Comp | None, *, ts: bool = True,
                extra: tuple[str, ...] = ()) -> str:
        return _filter(self.q, c, prev, strict_ts=self.strict_ts and ts, keyed=self.keyed,
                       extra=extra)

    def _conds(self, c: Comp, prev: Comp | None, *, ts: bool = True) -> list[str]:
        return _conds(self.q, c, prev, strict_ts=self.strict_ts and ts, keyed=self.keyed)

    def _kleene(self, k: int, c: Comp, prev: Comp | None) -> str:
        nxt = self.comps[self.pos_idx[k + 1]]
        head = f"{c.var}_f={self._filter(c, prev)}"
        # CAESAR closes the iteration with an event that binds the next
        # component; Esper's until would let it count for both
        close = self._conds(nxt, None, ts=False)
        extra = (f"not ({' and '.join(close) or 'true'})",) if nxt.type == c.type else ()
        more = f"{c.var}={self._filter(c, None, ts=False, extra=extra)}"
        tail = f"{nxt.var}={self._filter(nxt, None, ts=False)}"
        return f"{head} -> ({more} until {tail})"

    def _middle_negations(self, k: int, c: Comp, prev: Comp | None) -> str:
        negs = self.comps[self.pos_idx[k - 1] + 1:self.pos_idx[k]]
        if not negs:
            return ""
        # An event that passes both c's filter and N's makes Esper's `not`
        # false on that very event; in CAESAR it binds c (the negation
        # interval is open). Under skip_till_next_match it can only bind c,
        # so N's filter excludes it; under skip_till_any_match it also
        # forbids later c's, which no filter states (docs/language.md,
        # "Esper side by side").
        own = self._conds(c, prev)
        return " and ".join(
            "not " + self._filter(n, prev, extra=(
                (f"not ({' and '.join(own) or 'true'})",)
                if not self.any_match and n.type == c.type else ()))
            for n in negs)

    def atom(self, k: int) -> str:
        """Positive component pos_idx[k], with the negations before it (middle)."""
        c = self.comps[self.pos_idx[k]]
        prev = self.comps[self.pos_idx[k - 1]] if k > 0 else None
        if c.kleene:
            text = self._kleene(k, c, prev)
        else:
            every = "every " if (self.any_match and k > 0) else ""
            text = f"{every}{c.var}={self._filter(c, prev)}"
        nots = self._middle_negations(k, c, prev) if k > 0 else ""
        if nots:
            text = f"({text}) and {nots}"
        return f"({text})"

    def text(self) -> str:
        q, comps, pos_idx = self.q, self.comps, self.pos_idx
        chain: list[str] = []
        k = 1
        while k < len(pos_idx):
            chain.append(self.atom(k))
            k += 2 if comps[pos_idx[k]].kleene else 1
        first = comps[pos_idx[0]]
        if first.kleene:
            raise ValueError("a Kleene first component has no EPL pattern form here")
        rest = f"({' -> '.join(chain)}) where timer:within({q.within} msec)" if chain else None
        end_neg = comps[pos_idx[-1] + 1:]
        if end_neg:
            last = comps[pos_idx[-1]]
            nots = " and ".join(f"not {self._filter(n, last)}" for n in end_neg)
            tail = f"(timer:schedule(date: {first.var}.ts + {q.within}) and {nots})"
            rest = f"({rest}) -> {tail}" if rest else tail
        head = f"every {self.atom(0)[1:-1]}"
        return f"{head} -> ({rest})" if rest else head


def esper_statement(q: Query, index: int, *, strict_ts: bool = False,
                    context: str | None = None) -> str:
    """One EPL statement named q<index> whose select list is the tagged
    positive events in component order (a Kleene component is `<v>_f`, its
    first event, then the array `<v>`)."""
    pattern = _EplPattern(q, strict_ts=strict_ts, keyed=context is not None).text()
    cols = []
    for c in q.positives:
        cols += [f"{c.var}_f", c.var] if c.kleene else [c.var]
    kleene = [c for c in q.positives if c.kleene]
    if q.aggregates and kleene:
        v = kleene[0].var
        cols += [f"{v}.countOf() + 1 as n", f"{v}_f.attr2 + {v}.sumOf(x => x.attr2) as total"]
    stmt = f"@name('q{index}') "
    if context:
        stmt += f"context {context} "
    stmt += f"select {', '.join(cols)} from pattern [{pattern}]"
    pos = [i for i, c in enumerate(q.comps) if not c.negated]
    start_neg, end_neg = q.comps[:pos[0]], q.comps[pos[-1] + 1:]
    if start_neg:
        stmt += " as m where " + " and ".join(
            _not_exists(q, n, delayed=bool(end_neg)) for n in start_neg)
    return stmt


def _not_exists(q: Query, n: Comp, *, delayed: bool) -> str:
    """Start negation: no N in (last.ts - W, first.ts) when the match is
    reported. Reported at last.ts, N#time(W) holds exactly ts > last.ts - W;
    a match `delayed` by an end negation is reported up to W later, so the
    window is doubled and the lower bound stated."""
    first, last = q.positives[0], q.positives[-1]
    refs = {c.var: f"m.{c.var}" for c in q.positives}
    conds = [f"n.{a} = m.{first.var}.{a}" for a in q.equivalence]
    for k in n.conds:
        rhs = str(k.rhs) if isinstance(k.rhs, int) else f"{refs[k.rhs[0]]}.{k.rhs[1]}"
        conds.append(f"n.{k.attr} {k.op} {rhs}")
    conds.append(f"n.ts < m.{first.var}.ts")
    span = q.within
    if delayed:
        conds.append(f"n.ts > m.{last.var}.ts - {q.within}")
        span *= 2
    return (f"not exists (select * from E{n.type}#time({span} msec) as n "
            f"where {' and '.join(conds)})")


def esper_module(queries: list[Query], *, strict_ts: bool = False, keyed_by: str | None = None,
                 flush: int | None = None) -> str:
    """An EPL module: with `keyed_by`, a keyed segmented context over that
    attribute (the queries' equivalence filters are then left out), then one
    statement per query. `flush` = how far the harness advances time after
    the last event (default: the largest window + 1)."""
    flush = flush if flush is not None else max(q.within for q in queries) + 1
    lines = [f"// flush={flush}"]
    context = None
    if keyed_by is not None:
        if any(q.equivalence not in ((), (keyed_by,)) for q in queries):
            raise ValueError(f"a context keyed by {keyed_by} covers [{keyed_by}] only")
        used = sorted({c.type for q in queries for c in q.comps})
        context = "ByKey"
        lines.append("create context ByKey partition by "
                     + ", ".join(f"{keyed_by} from E{t}" for t in used) + ";")
    lines += [esper_statement(q, i, strict_ts=strict_ts, context=context) + ";"
              for i, q in enumerate(queries)]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- Flink CEP

def flink_spec(queries: list[Query]) -> str:
    """Spec lines for FlinkHarness.java:
    `q <index> <within> <key attr or -> <any|next> <comp> ...`, comp =
    `[!]<type>:<var>[:<attr><op><const>...]` (constant conditions only)."""
    lines = []
    for i, q in enumerate(queries):
        if len(q.equivalence) > 1:
            raise ValueError("the Flink harness keys by at most one attribute")
        toks = []
        for c in q.comps:
            if c.kleene:
                raise ValueError("Kleene components are not rendered for Flink")
            tok = f"{'!' if c.negated else ''}{c.type}:{c.var}"
            for k in c.conds:
                if not isinstance(k.rhs, int):
                    raise ValueError("the Flink harness takes constant conditions only")
                tok += f":{k.attr}{k.op}{k.rhs}"
            toks.append(tok)
        key = q.equivalence[0] if q.equivalence else "-"
        strategy = "any" if q.strategy == ANY else "next"
        lines.append(f"q {i} {q.within} {key} {strategy} {' '.join(toks)}")
    return "\n".join(lines) + "\n"


def type_count() -> int:
    return NUM_TYPES


def esper_match_recognize(q: Query, index: int = 0) -> str:
    """The row-pattern form of a plain sequence (no negation, Kleene or
    conditions; at most one equivalence attribute), one EPL module over the
    single stream `Ev` of every event: `partition by` the equivalence
    attribute, `S*` rows skipped between components, the window as `define`
    conditions. skip_till_any_match: `all matches` with greedy skips and
    `after match skip to current row`; skip_till_next_match: reluctant skips,
    `after match skip to next row` (the first B after each A, then the first
    C)."""
    if any(c.negated or c.kleene or c.conds for c in q.comps) or len(q.equivalence) > 1:
        raise ValueError("match_recognize is rendered for plain sequences only")
    names = [f"A{i}" for i in range(len(q.comps))]
    first = names[0]
    skip = "S*" if q.strategy == ANY else "S*?"
    pattern = f" {skip} ".join(names)
    defines = [f"{first} as {first}.type = {q.comps[0].type}"]
    defines += [f"{n} as {n}.type = {c.type} and {n}.ts - {first}.ts < {q.within}"
                for n, c in zip(names[1:], q.comps[1:], strict=True)]
    defines.append(f"S as S.ts - {first}.ts < {q.within}")
    measures = ", ".join(f"{n} as {c.var}" for n, c in zip(names, q.comps, strict=True))
    after = ("all matches after match skip to current row" if q.strategy == ANY
             else "after match skip to next row")
    partition = f"partition by {q.equivalence[0]} " if q.equivalence else ""
    return (f"// flush={q.within + 1}\n// stream=Ev\n"
            f"@name('q{index}') select {', '.join(c.var for c in q.comps)} "
            f"from Ev match_recognize ({partition}"
            f"measures {measures} {after} pattern ({pattern}) "
            f"define {', '.join(defines)});\n")
