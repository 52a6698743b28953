"""Hypothesis strategies for TPStream: random per-partition event streams
(instants with gaps, repeated timestamps, two event types, nulls) and random
temporal plans over 2-4 situations (random relation sets, duration bounds,
WITHIN, output aggregates)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from caesar.events.batch import EventBatch, StringPool
from caesar.plans.expr import Agg, Attr, Binary, Const
from caesar.plans.pattern import Output, OutputField
from caesar.plans.temporal import (
    ALLEN,
    PREFIX_GROUPS,
    SituationSpec,
    TemporalConstraint,
    TemporalPlan,
)

SCHEMAS = {"E": {"s0": "int", "s1": "int", "s2": "int", "s3": "int", "v": "float",
                 "k": "string"},
           "F": {"s0": "int", "s1": "int", "s2": "int", "s3": "int", "v": "float",
                 "k": "string"}}
Event = dict[str, Any]


@st.composite
def streams(draw, partitions: int = 2, max_instants: int = 40) -> list[Event]:
    """Events of every partition interleaved in timestamp order. Each situation
    i holds while attribute s{i} is 1; runs are made long enough to overlap."""
    out: list[Event] = []
    for p in range(draw(st.integers(1, partitions))):
        n = draw(st.integers(0, max_instants))
        t = draw(st.integers(0, 3))
        bits = [draw(st.integers(0, 1)) for _ in range(4)]
        for _ in range(n):
            t += draw(st.sampled_from([1] * 10 + [2, 2, 3, 6, 20]))
            # runs: flip some situations' conditions together (shared endpoints
            # give meets / starts / finishes / equals), or none
            for i in draw(st.sampled_from([(), (), (), (0,), (1,), (2,), (3,), (0, 1),
                                           (1, 2), (0, 2), (0, 1, 2), (0, 1, 2, 3), (2, 3)])):
                bits[i] ^= 1
            for _ in range(draw(st.sampled_from([1, 1, 1, 1, 2]))):
                ev: Event = {"type": draw(st.sampled_from(["E", "E", "E", "F"])), "ts": t,
                             "p": p, "v": draw(st.sampled_from([0.5, 1.0, 2.0, 4.0, None])),
                             "k": draw(st.sampled_from(["x", "y", None]))}
                for i in range(4):
                    flip = draw(st.integers(0, 40)) == 0  # a stray event of the instant
                    ev[f"s{i}"] = bits[i] ^ 1 if flip else bits[i]
                out.append(ev)
    out.sort(key=lambda e: e["ts"])  # stable: arrival order within a timestamp kept
    return out


def batches(events: list[Event], cuts: list[int]) -> list[EventBatch]:
    """Split at instant boundaries (a batch holds whole instants), one pool."""
    pool = StringPool()
    times = sorted({e["ts"] for e in events})
    bounds = sorted({times[c % len(times)] for c in cuts}) if times else []
    out, start = [], 0
    seq = 0
    for b in bounds + [None]:
        chunk = [e for e in events[start:] if b is None or e["ts"] < b]
        start += len(chunk)
        if chunk:
            out.append(EventBatch.from_records(chunk, SCHEMAS, pool,
                                               partition_of=lambda r: r["p"], first_seq=seq))
            seq += len(chunk)
    return out


def _relations(draw) -> tuple[str, ...]:
    kind = draw(st.integers(0, 3))
    if kind == 0:  # a whole prefix group, maybe plus more
        rels = set(draw(st.sampled_from(PREFIX_GROUPS)))
        rels |= set(draw(st.lists(st.sampled_from(ALLEN), max_size=2)))
    elif kind == 1:
        rels = {draw(st.sampled_from(ALLEN))}
    else:
        rels = set(draw(st.lists(st.sampled_from(ALLEN), min_size=1, max_size=10)))
    return tuple(r for r in ALLEN if r in rels)


def _durations(draw) -> tuple[int | None, int | None]:
    """Duration bounds: none, AT LEAST, AT MOST or BETWEEN (none most often)."""
    bound = draw(st.integers(0, 5))
    lo = hi = None
    if bound == 1:
        lo = draw(st.integers(1, 4))
    elif bound == 2:
        hi = draw(st.integers(1, 6))
    elif bound == 3:
        lo = draw(st.integers(1, 3))
        hi = lo + draw(st.integers(0, 4))
    return lo, hi


def _situation(draw, i: int, name: str, sources: tuple[str, ...]) -> SituationSpec:
    """Situation i holds while s{i} = 1 (sometimes also v > 0.7, with nulls)."""
    lo, hi = _durations(draw)
    src = draw(st.sampled_from(sources))
    cond = Binary("=", Attr(name, f"s{i}"), Const(1))
    if draw(st.integers(0, 4)) == 0:  # a condition with nulls in play
        cond = Binary("AND", cond, Binary(">", Attr(name, "v"), Const(0.7)))
    return SituationSpec(name, src, cond, lo, hi)


def _pairs(draw, names: list[str]) -> list[tuple[str, str]]:
    """A random spanning tree, plus maybe extra pairs (one constraint per pair)."""
    pairs = []
    for i in range(1, len(names)):
        j = draw(st.integers(0, i - 1))
        pairs.append((names[j], names[i]) if draw(st.booleans()) else (names[i], names[j]))
    for _ in range(draw(st.integers(0, 2))):
        a, b = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        if a != b and (a, b) not in pairs and (b, a) not in pairs:
            pairs.append((a, b))
    return pairs


def _aggregate(func: str, sym: str) -> Agg:
    if func == "count":
        return Agg("count", sym, None)
    if func == "countv":
        return Agg("count", sym, Attr(sym, "v"))
    if func == "firstk":
        return Agg("first", sym, Attr(sym, "k"))
    return Agg(func, sym, Attr(sym, "v"))  # type: ignore[arg-type]


def _fields(draw, names: list[str]) -> list[OutputField]:
    """Up to 3 aggregates, maybe an expression over two."""
    fields = []
    for k, func in enumerate(draw(st.lists(st.sampled_from(
            ["count", "sum", "avg", "min", "max", "first", "last", "countv", "firstk"]),
            max_size=3))):
        fields.append(OutputField(f"f{k}", _aggregate(func, draw(st.sampled_from(names)))))
    if draw(st.booleans()):
        fields.append(OutputField("expr", Binary("+", Agg("count", names[0], None),
                                                 Agg("max", names[-1], Attr(names[-1], "v")))))
    return fields


@st.composite
def plans(draw, sources: tuple[str, ...] = ("E", "E", "E", "F")) -> TemporalPlan:
    n = draw(st.integers(2, 4))
    names = [f"S{i}" for i in range(n)]
    sits = [_situation(draw, i, name, sources) for i, name in enumerate(names)]
    constraints = tuple(TemporalConstraint(a, b, _relations(draw)) for a, b in _pairs(draw, names))
    fields = _fields(draw, names)
    return TemporalPlan("tp", tuple(sits), constraints, within=draw(st.integers(4, 60)),
                        output=Output("M", tuple(fields)), schemas=SCHEMAS)


def key(d) -> tuple:
    """A derived event, comparable across engines (floats rounded)."""
    fields = tuple(sorted((k, round(v, 6) if isinstance(v, float) else v)
                          for k, v in d.fields.items()))
    return (d.plan_id, d.partition, d.start_ts, d.end_ts, fields)


@st.composite
def scenarios(draw, partitions: int = 2) -> tuple[TemporalPlan, list[Event]]:
    """A stream and a plan; half the time the plan's constraints are seeded
    with the relations of situations that occur in the stream (plus random
    alternatives), so that most examples have matches."""
    from dataclasses import replace

    from caesar.plans.temporal import OPEN, allen
    from caesar.services.matcher.tpstream.reference import TwoPhaseReference

    events = draw(streams(partitions))
    plan = draw(plans())
    if not events or draw(st.booleans()):
        return plan, events
    ref = TwoPhaseReference(plan)
    for b in batches(events, []):
        ref.process(b)
    part = draw(st.sampled_from(sorted(ref.events)))
    sits = ref.situations(part)
    if not all(sits[s.name] for s in plan.situations):
        return plan, events
    chosen = {s.name: draw(st.sampled_from(sits[s.name])) for s in plan.situations}
    constraints = []
    for c in plan.constraints:
        x, y = chosen[c.left], chosen[c.right]
        rel = allen(x.ts, OPEN if x.te is None else x.te, y.ts,
                    OPEN + 1 if y.te is None else y.te)
        constraints.append(replace(c, relations=tuple(r for r in ALLEN
                                                      if r == rel or r in c.relations)))
    return replace(plan, constraints=tuple(constraints)), events
