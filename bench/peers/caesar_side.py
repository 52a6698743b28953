"""CAESAR side of the peer benchmark: the model text of the queries,
compiled by the real compiler, run on the Cython engine over the same event
stream as columnar batches (process + advance per batch, as the matcher
service drives it); a model with contexts runs through the embedded
pipeline instead (the deriver and router decide what the matcher sees)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from bench.peers.events import ATTRS, Stream, max_ts
from bench.peers.patterns import Query, caesar_model
from caesar.events.batch import EventBatch
from caesar.language import compile_model
from caesar.plans.engine import DerivedEvent
from caesar.plans.matches import MatchBatch
from caesar.plans.pattern import PatternPlan
from caesar.plans.temporal import TemporalPlan
from caesar.services.embedded.pipeline import EmbeddedPipeline
from caesar.services.matcher.engine import CythonEngine
from caesar.services.matcher.tpstream.engine import TemporalEngine

END_OF_TIME = 2**62


@dataclass
class CaesarResult:
    wall_ns: int
    thread_cpu_ns: int
    process_cpu_ns: int
    matches: int
    setup_ns: int
    found: list[tuple[int, tuple[int, ...]]] | None = None


def plans_for(queries: Sequence[Query], partition_by: str | None = None,
              ) -> tuple[list[PatternPlan], dict[str, int]]:
    """Compile the queries' CAESAR model; plan id -> query index."""
    plan = compile_model(caesar_model(list(queries), partition_by))
    plans: list[PatternPlan] = []
    index: dict[str, int] = {}
    for stage in plan.matcher_stages:
        p = stage.plan
        assert isinstance(p, PatternPlan) and p.output is not None
        plans.append(p)
        index[p.plan_id] = int(p.output.event_type[1:])  # M<i>
    return plans, index


def run_caesar(plans: list[PatternPlan], index: dict[str, int], batches: list[EventBatch],
               record: bool = False, columnar: bool = True) -> CaesarResult:
    """Feed every batch (process, then advance to its last timestamp) and
    flush at the end; wall and CPU times cover exactly that. columnar: the
    engine returns each call's matches as a MatchBatch (NumPy columns);
    otherwise one DerivedEvent per match."""
    t0 = time.perf_counter_ns()
    engine = CythonEngine(plans)
    process, advance = ((engine.process_columns, engine.advance_columns) if columnar
                        else (engine.process, engine.advance))
    setup = time.perf_counter_ns() - t0
    outs: list[MatchBatch] | list[list[DerivedEvent]] | None = [] if record else None
    count = 0
    p0, c0, w0 = time.process_time_ns(), time.thread_time_ns(), time.perf_counter_ns()
    for b in batches:
        out = process(b)
        out += advance(max_ts(b))
        count += len(out)
        if outs is not None:
            outs.append(out)
    out = advance(END_OF_TIME)
    count += len(out)
    wall = time.perf_counter_ns() - w0
    cpu = time.thread_time_ns() - c0
    proc = time.process_time_ns() - p0
    found = None
    if outs is not None:
        outs.append(out)
        found = [m for o in outs for m in _named(o, index)]
    return CaesarResult(wall, cpu, proc, count, setup, found)


def _named(out: MatchBatch | list[DerivedEvent], index: dict[str, int],
           ) -> list[tuple[int, tuple[int, ...]]]:
    """Each match as (query index, event seqs)."""
    if isinstance(out, MatchBatch):
        return [(index[c.plan_id], c.event_seqs(i)) for c in out for i in range(len(c))]
    return [(index[d.plan_id], d.event_seqs) for d in out]


def stream_values(stream: Stream) -> list[dict[str, int | str]]:
    """The stream as the decoded input values the scheduler reads."""
    out: list[dict[str, int | str]] = []
    for i in range(len(stream)):
        value: dict[str, int | str] = {"type": f"E{int(stream.type[i])}", "ts": int(stream.ts[i])}
        for j, a in enumerate(ATTRS):
            value[a] = int(stream.attrs[i, j])
        out.append(value)
    return out


def run_pipeline(model_text: str, values: list[dict[str, int | str]],
                 record: bool = False, batch_size: int = 10_000) -> CaesarResult:
    """The whole embedded pipeline (scheduler, deriver, router, matcher,
    direct wiring) on decoded values. A match is named by its projected
    timestamps s0, s1, ... (ts = seq in the benchmark streams)."""
    t0 = time.perf_counter_ns()
    plan = compile_model(model_text)
    pipeline = EmbeddedPipeline(plan, batch_size=batch_size)
    setup = time.perf_counter_ns() - t0
    p0, c0, w0 = time.process_time_ns(), time.thread_time_ns(), time.perf_counter_ns()
    result = pipeline.run_values(values)
    wall = time.perf_counter_ns() - w0
    cpu = time.thread_time_ns() - c0
    proc = time.process_time_ns() - p0
    if result.dead_letters:
        raise RuntimeError(f"{len(result.dead_letters)} dead letters, e.g. "
                           f"{result.dead_letters[0]}")
    alerts = [a for a in result.alerts if a.event_type.startswith("M")]
    found = None
    if record:
        found = [(int(a.event_type[1:]),
                  tuple(int(a.fields[f"s{i}"]) for i in range(len(a.fields))))
                 for a in alerts]
    return CaesarResult(wall, cpu, proc, len(alerts), setup, found)


def run_temporal(model_text: str, batches: list[EventBatch], record: bool = False
                 ) -> CaesarResult:
    """The model's TPStream query on the temporal engine (Cython) over the
    columnar batches, fed and advanced per batch as the matcher service
    does. A match is named by its projected s0, s1, ... (ts = seq)."""
    t0 = time.perf_counter_ns()
    plan = compile_model(model_text)
    temporal = [s.plan for s in plan.matcher_stages if isinstance(s.plan, TemporalPlan)]
    engine = TemporalEngine(temporal)
    setup = time.perf_counter_ns() - t0
    out: list[DerivedEvent] = []
    p0, c0, w0 = time.process_time_ns(), time.thread_time_ns(), time.perf_counter_ns()
    for b in batches:
        out += engine.process(b)
        out += engine.advance(max_ts(b))
    out += engine.advance(END_OF_TIME)
    wall = time.perf_counter_ns() - w0
    cpu = time.thread_time_ns() - c0
    proc = time.process_time_ns() - p0
    found = None
    if record:
        found = [(int(d.event_type[1:]), _match_of(d.fields)) for d in out]
    return CaesarResult(wall, cpu, proc, len(out), setup, found)


def _match_of(fields: dict) -> tuple[int, ...]:
    """s0, s1, ...: the projected timestamps that name a match."""
    names = sorted((f for f in fields if f[:1] == "s" and f[1:].isdigit()), key=lambda f: int(f[1:]))
    return tuple(int(fields[f]) for f in names)
