"""The Cython temporal engine against the 2-phase reference (the paper's
first straw man), on random streams and random patterns; each detection time
checked by brute force to be the first instant the match is certain."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caesar.plans.temporal import TemporalPlan
from caesar.services.matcher.tpstream.engine import TemporalEngine
from caesar.services.matcher.tpstream.reference import (
    TwoPhaseReference,
    certain_at,
    derived_event,
    detection_time,
)

from .strategies import batches, key, scenarios

SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def run_engine(plan: TemporalPlan, bs) -> list:
    engine = TemporalEngine([plan])
    out = []
    for b in bs:
        out += engine.process(b)
        out += engine.advance(max(int(c.ts.max()) for c in b.by_type.values()))
    return out


def run_reference(plan: TemporalPlan, bs) -> TwoPhaseReference:
    ref = TwoPhaseReference(plan)
    for b in bs:
        ref.process(b)
    return ref


@SETTINGS
@given(case=scenarios(), cuts=st.lists(st.integers(0, 100), max_size=4))
def test_engine_matches_reference(case, cuts) -> None:
    plan, events = case
    bs = batches(events, cuts)
    got = Counter(key(d) for d in run_engine(plan, bs))
    want = Counter(key(d) for d in run_reference(plan, bs).matches())
    assert got == want


@SETTINGS
@given(case=scenarios(partitions=1))
def test_detection_time_is_the_first_certain_instant(case) -> None:
    """The paper's low-latency analysis (Table 2 + duration bounds) gives the
    first instant at which the match is certain given the stream so far:
    certain there, not certain at the instant before."""
    plan, events = case
    ref = run_reference(plan, batches(events, []))
    for part in ref.events:
        times = ref.instants_of(part)
        for m in ref.found():
            if m.partition != part:
                continue
            td = detection_time(plan, m.config)
            assert td == m.detected and td in times
            assert certain_at(plan, m.config, td)
            before = [t for t in times if t < td]
            if before:
                assert not certain_at(plan, m.config, before[-1])


@SETTINGS
@given(case=scenarios(partitions=1))
def test_every_certain_configuration_is_found(case) -> None:
    """Completeness of the reference itself: any configuration certain at some
    instant (and within the window there) is a match, detected then."""
    import itertools

    plan, events = case
    ref = run_reference(plan, batches(events, []))
    for part in ref.events:
        times = ref.instants_of(part)
        sits = ref.situations(part)
        names = [s.name for s in plan.situations]
        found = {tuple(s.ts for s in m.config.values()): m.detected
                 for m in ref.found() if m.partition == part}
        for combo in itertools.product(*[sits[n] for n in names]):
            config = dict(zip(names, combo, strict=True))
            first = next((t for t in times if certain_at(plan, config, t)), None)
            starts = tuple(s.ts for s in combo)
            if first is None or first - min(starts) >= plan.within:
                assert starts not in found
            else:
                assert found.get(starts) == first


@SETTINGS
@given(case=scenarios(), cut=st.integers(0, 100))
def test_snapshot_restore_mid_stream(case, cut) -> None:
    """State as plain data: a fresh engine restored from a snapshot continues
    exactly like the original."""
    plan, events = case
    bs = batches(events, [cut])
    whole = Counter(key(d) for d in run_engine(plan, bs))
    if len(bs) < 2:
        return
    first = TemporalEngine([plan])
    out = first.process(bs[0])
    parts = {int(p) for c in bs[0].by_type.values() for p in c.partition}
    states = {p: first.snapshot(p) for p in parts}
    second = TemporalEngine([plan])
    for p, s in states.items():
        second.restore(p, s)
    for b in bs[1:]:
        out += second.process(b)
    assert Counter(key(d) for d in out) == whole


def test_reference_output_of_a_hand_checked_case() -> None:
    """A overlaps B (paper Table 2: detected at A.te, B still open) and
    A before B (detected at B.ts)."""
    from caesar.events.batch import EventBatch, StringPool
    from caesar.plans.expr import Agg, Attr, Binary, Const
    from caesar.plans.pattern import Output, OutputField
    from caesar.plans.temporal import SituationSpec, TemporalConstraint

    a = SituationSpec("A", "E", Binary("=", Attr("A", "s0"), Const(1)))
    b = SituationSpec("B", "E", Binary("=", Attr("B", "s1"), Const(1)))
    plan = TemporalPlan("p", (a, b), (TemporalConstraint("A", "B", ("overlaps", "before")),),
                        within=100, output=Output("M", (OutputField("n", Agg("count", "B", None)),)))
    # ts:    0  1  2  3  4  5  6  7  8  9
    s0 = [0, 1, 1, 1, 0, 0, 0, 0, 0, 0]
    s1 = [0, 0, 1, 1, 1, 0, 0, 1, 1, 0]
    recs = [{"type": "E", "ts": t, "s0": x, "s1": y} for t, (x, y) in enumerate(zip(s0, s1, strict=True))]
    batch = EventBatch.from_records(recs, {"E": {"s0": "int", "s1": "int"}}, StringPool())
    engine = TemporalEngine([plan])
    got = sorted((d.end_ts, d.fields["A_ts"], d.fields["A_te"], d.fields["B_ts"],
                  d.fields["B_te"], d.fields["n"]) for d in engine.process(batch))
    # A=[1,4) overlaps B=[2,5): certain at 4 (A ends, B runs: 3 events of B so far);
    # A before B'=[7,9): certain at 7 (B' starts).
    assert got == [(4, 1, 4, 2, None, 3), (7, 1, 4, 7, None, 1)]
    ref = TwoPhaseReference(plan)
    ref.process(batch)
    assert sorted(key(d) for d in ref.matches()) == sorted(
        key(derived_event(plan, m)) for m in ref.found())
