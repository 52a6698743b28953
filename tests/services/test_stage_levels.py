"""The stage graph runs its stages level by level (stage_levels), several
independent stages in one engine call; the reference runs them one stage
per call in stage order, what the level schedule must not change: the same
alerts, context changes and dead letters for any input, context-aware or
not (their order within a step may differ: a stage's results come with
its level's call)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from caesar.examples import model_path
from caesar.language import compile_model
from caesar.plans.aggregate import AggregatePlan
from caesar.services.embedded.pipeline import EmbeddedPipeline
from caesar.services.matcher.stage_graph import StageGraph, plan_id, stage_levels
from tests.services.test_matcher_fast_paths import MODEL, _key, _run, events

LR = model_path("linear_road").with_name("model_per_segment.caesar")


def one_stage_per_call(graph: StageGraph) -> None:
    graph._levels = [([plan_id(s)], []) if isinstance(s.plan, AggregatePlan) else
                     ([], [plan_id(s)]) for s in graph.stages]


def _pipelines(model: str, aware: bool) -> tuple[EmbeddedPipeline, EmbeddedPipeline]:
    plan = compile_model(model, context_aware=aware)
    fast, ref = EmbeddedPipeline(plan), EmbeddedPipeline(plan)
    for graph in (ref.matcher.graph, ref.deriver.graph):
        one_stage_per_call(graph)
    return fast, ref


def _same(fast: EmbeddedPipeline, ref: EmbeddedPipeline, raw: list[dict[str, Any]]) -> None:
    got, want = _run(fast, raw), _run(ref, raw)
    assert sorted(map(_key, got), key=repr) == sorted(map(_key, want), key=repr)
    assert sorted(map(repr, fast.result.context_changes)) == \
        sorted(map(repr, ref.result.context_changes))
    assert sorted(map(repr, fast.result.dead_letters)) == sorted(map(repr, ref.result.dead_letters))


@settings(max_examples=60, deadline=None)
@given(events, st.booleans())
def test_levels_equal_one_stage_per_call(raw: list[dict[str, Any]], aware: bool) -> None:
    _same(*_pipelines(MODEL, aware), raw)


def test_levels_group_independent_stages() -> None:
    """What the levels change: the test model's three pattern stages on R
    share a call; LR's LeftSegment runs with SegmentEntry, not in a pass of
    its own (fewer calls, no measurable gain: bench/linear_road/README.md,
    session 34)."""
    graph = EmbeddedPipeline(compile_model(MODEL)).matcher.graph
    first = graph._levels[0]
    assert len([p for p in first[1] if graph._consumes[p] == {"R"}]) == 3
    lr = EmbeddedPipeline(compile_model(LR)).matcher.graph
    level_of = {p: i for i, (aggs, pats) in enumerate(lr._levels) for p in (*aggs, *pats)}
    entry, left = (next(plan_id(s) for s in lr.stages if lr._produces[plan_id(s)] == t)
                   for t in ("SegmentEntry", "LeftSegment"))
    assert level_of[entry] == level_of[left] == 0
    assert len(lr._levels) < len([s for s in lr.stages if not isinstance(s.plan, AggregatePlan)])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sets(st.sampled_from("ABCDE"), min_size=1, max_size=2),
                          st.sampled_from("ABCDE"), st.booleans()), min_size=1, max_size=8))
def test_levels_keep_what_each_stage_sees(spec: list[tuple[set[str], str, bool]]) -> None:
    """For any stage list (reads, makes, aggregate?): a pattern stage comes
    a level after the earlier pattern stages making a type it reads, and
    not after a later one making such a type (it must not see those
    results, as in stage order; at one level aggregates run first and a
    call's results feed only later calls); every stage once."""

    ids = [f"q{i}" for i in range(len(spec))]
    aggregates = {f"q{i}" for i, (_r, _m, agg) in enumerate(spec) if agg}
    consumes = {f"q{i}": frozenset(sorted(r)[:1] if agg else r)
                for i, (r, _m, agg) in enumerate(spec)}
    produces = {f"q{i}": m for i, (_r, m, _agg) in enumerate(spec)}
    levels = stage_levels(ids, aggregates, consumes, produces)
    at = {p: (i, k) for i, (aggs, pats) in enumerate(levels) for k, p in
          [(0, q) for q in aggs] + [(1, q) for q in pats]}
    assert sorted(at) == sorted(consumes)
    for i in range(len(spec)):
        mine = f"q{i}"
        for j, (_r, made, agg) in enumerate(spec):
            if agg or made not in consumes[mine] or j == i:
                continue
            maker = f"q{j}"
            if j < i:
                assert at[maker][0] < at[mine][0]
            else:  # a later maker: its results come after this stage ran
                assert at[maker] >= at[mine]
