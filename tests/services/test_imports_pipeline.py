"""The matcher taking results from the deriver (ExecutionPlan.imports,
src/caesar/language/imports.py) must derive exactly what it derives when it
runs those stages itself: same alerts, same context changes, however the
bus cuts the streams into batches and interleaves the router's two inputs."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caesar.errors import PlanError
from caesar.language import compile_model
from caesar.services.common.columnar import chunks, routed_chunks, routed_from, routed_record
from caesar.services.common.messages import Imports, InputRecord, Progress, TxnBatch
from caesar.services.deriver.processor import DeriverProcessor
from caesar.services.embedded.pipeline import EmbeddedPipeline
from caesar.services.matcher.processor import MatcherProcessor
from caesar.services.router.processor import RouterProcessor
from caesar.services.scheduler.processor import SchedulerProcessor

# A stop is two reports of a car at speed 0; a jam two cars' stops at one
# place with no report of the first car between; it is gone when its first
# car moves. Stop, Jam and Gone run in every context in both services (the
# transitions need them); Again reads Stop in one context only, so Stop stays
# in the matcher while Jam and Gone come from the deriver.
MODEL = """MODEL shared
TIME UNIT SECONDS
PARTITION BY road
CONTEXTS PER seg
EVENT Car(ts INT, road INT, seg INT, vid INT, spd INT) FROM TOPIC "cars"

DERIVE Stop(s.road, s.seg, s.vid)
  PATTERN SEQ(Car a, Car s)
  WHERE [vid] AND a.spd = 0 AND s.spd = 0
  WITHIN 10 SECONDS
DERIVE Jam(b.road, b.seg, a.vid AS first, b.vid AS second)
  PATTERN SEQ(Stop a, NOT Car m, Stop b)
  WHERE a.seg = b.seg AND a.vid != b.vid AND m.vid = a.vid
  WITHIN 10 SECONDS
DERIVE Gone(m.road, j.seg)
  PATTERN SEQ(Jam j, Car m)
  WHERE m.vid = j.first AND m.spd > 0
  WITHIN 30 SECONDS
DERIVE Behind(c.road, c.seg, c.vid, j.seg AS at)
  PATTERN SEQ(Jam j, NOT Gone g, Car c)
  WHERE g.seg = j.seg AND c.seg = j.seg AND c.vid != j.first
  WITHIN 60 SECONDS

SWITCH CONTEXT jammed PATTERN Jam j

DEFAULT CONTEXT free { }
CONTEXT jammed {
  DERIVE Again(s.vid, s.seg) PATTERN Stop s
  SWITCH CONTEXT free PATTERN Gone g
}
"""
# The same without CONTEXTS PER: contexts and results per road.
PER_ROAD = MODEL.replace("CONTEXTS PER seg\n", "")
# A segment's speed statistics (a sliding window, released when time passes
# its end) decide its context and are read by a processing query in every
# context, as Linear Road's tolls read them: Speed comes from the deriver.
# Windows of 2 s end every 2 s, so draws often put cars at a window's last
# second (where the imported results land among them) and leave a window
# to be closed by the deriver's progress alone.
STATS = """MODEL stats
TIME UNIT SECONDS
PARTITION BY road
CONTEXTS PER seg
EVENT Car(ts INT, road INT, seg INT, vid INT, spd INT) FROM TOPIC "cars"

DERIVE Speed(seg, sum(spd) AS total, count(*) AS n)
  FROM Car c
  GROUP BY seg
  WINDOW SLIDING 4 SECONDS EVERY 2 SECONDS
DERIVE Toll(c.road, c.seg, c.vid, s.total, s.n)
  PATTERN SEQ(Speed s, Car c)
  WHERE [seg]
  WITHIN 2 SECONDS
DERIVE Free(c.road, c.seg, c.vid)
  PATTERN SEQ(NOT Speed s, Car c)
  WHERE [seg]
  WITHIN 2 SECONDS

DEFAULT CONTEXT free {
  SWITCH CONTEXT jammed PATTERN Speed s WHERE s.total < 10 * s.n
}
CONTEXT jammed {
  DERIVE Slow(c.vid, c.seg) PATTERN Car c
  SWITCH CONTEXT free PATTERN Speed s WHERE s.total >= 10 * s.n
}
"""
STATS_PER_ROAD = STATS.replace("CONTEXTS PER seg\n", "")
# Speed written to a topic too, and a matcher aggregate of it (Worst): a
# result that reached the matcher after its progress had passed the
# result's timestamp would be late for Worst, and one never routed missing.
WORST = STATS.replace('FROM TOPIC "cars"\n', 'FROM TOPIC "cars"\nEVENT Speed(seg INT, total INT, n INT) TO TOPIC "speeds"\n').replace(
    "DEFAULT CONTEXT", """DERIVE Worst(seg, min(total) AS low, count(*) AS n)
  FROM Speed s
  GROUP BY seg
  WINDOW TUMBLING 4 SECONDS

DEFAULT CONTEXT""")


def car(ts: int, road: int, seg: int, vid: int, spd: int) -> dict:
    return {"type": "Car", "ts": ts, "road": road, "seg": seg, "vid": vid, "spd": spd}


def jam_scene() -> list[dict]:
    """Cars 1 and 2 stop at segment 3 of road 0, car 3 comes by, car 1 leaves."""
    return [car(1, 0, 3, 1, 0), car(2, 0, 3, 2, 0), car(3, 0, 3, 1, 0), car(4, 0, 3, 2, 0),
            car(5, 0, 3, 3, 40), car(6, 0, 3, 2, 0), car(9, 0, 3, 1, 30), car(10, 0, 3, 3, 40)]


# (ts step, road, seg, vid, spd): few cars, mostly standing, mostly on one
# road, so that about one draw in six holds a jam (the first draws held one
# in a hundred and could not tell a matcher that drops its imports)
cars = st.lists(st.tuples(st.integers(0, 2), st.sampled_from([0, 0, 0, 1]), st.integers(0, 1),
                          st.integers(1, 3), st.sampled_from([0, 0, 0, 0, 30])),
                min_size=1, max_size=60)


def stream(draws: list[tuple[int, int, int, int, int]]) -> list[dict]:
    """Draws as (ts step, road, seg, vid, spd), in time order."""
    out, ts = [], 0
    for step, road, seg, vid, spd in draws:
        ts += step
        out.append(car(ts, road, seg, vid, spd))
    return out


def outputs(model: str, events: list[dict], *, import_derived: bool, batch_size: int = 2000):
    plan = compile_model(model, import_derived=import_derived)
    pipe = EmbeddedPipeline(plan, batch_size=batch_size)
    result = pipe.run_values(events, topic="cars")
    assert not result.dead_letters
    return (sorted(a.identity() for a in result.alerts),
            [(c.key, c.ts, c.contexts) for c in result.context_changes])


def test_the_plan_takes_what_only_every_context_reads():
    plan = compile_model(MODEL)
    assert plan.imports == ("Jam", "Gone")
    assert sorted(s.plan.plan_id for s in plan.matcher_stages) == ["q1", "q4", "q6"]
    assert sorted(plan.exports) == ["q2", "q3"]
    assert not compile_model(MODEL, import_derived=False).imports


def test_a_jam_scene_derives_the_same_alerts_from_imports():
    found = outputs(MODEL, jam_scene(), import_derived=True)
    assert found == outputs(MODEL, jam_scene(), import_derived=False)
    types = [a[1] for a in found[0]]
    # (the scene is made so that every kind of result occurs; fails if it drifts)
    assert "Behind" in types and "Again" in types, types
    assert [c[2] for c in found[1]] == [("jammed",), ("free",)]


def test_the_plan_takes_an_aggregate_both_services_compute():
    plan = compile_model(STATS)
    assert plan.imports == ("Speed",) and sorted(plan.exports) == ["q1"]
    assert sorted(s.plan.plan_id for s in plan.matcher_stages) == ["q2", "q3", "q5"]


def worst_of(speeds: list[tuple]) -> list[tuple]:
    """Worst computed from the Speed alerts (identity tuples): min(total)
    and count per (context key, 4-second window)."""
    windows: dict[tuple, list[int]] = {}
    for a in speeds:
        fields = dict(a[5])
        windows.setdefault((a[2], a[4] // 4, fields["seg"]), []).append(fields["total"])
    return sorted((key, w * 4 + 3, seg, min(t), len(t)) for (key, w, seg), t in windows.items())


def worst_found(alerts: list[tuple]) -> list[tuple]:
    return sorted((a[2], a[4], dict(a[5])["seg"], dict(a[5])["low"], dict(a[5])["n"])
                  for a in alerts if a[1] == "Worst")


def test_the_last_windows_reach_the_matcher_without_a_transaction_after_them():
    """Windows closed by the end of the input (the deriver's progress, no
    transaction after them): their imported results are routed on their own."""
    plan = compile_model(WORST)
    assert plan.imports == ("Speed",)
    found, changes = outputs(WORST, [car(1, 0, 0, 1, 0), car(2, 0, 0, 2, 0), car(3, 0, 0, 1, 30)],
                             import_derived=True)
    assert [c[2] for c in changes] == [("jammed",), ("free",)]
    speeds = [a for a in found if a[1] == "Speed"]
    assert worst_found(found) == worst_of(speeds) and len(worst_of(speeds)) == 2


@settings(max_examples=40, deadline=None)
@given(cars, st.lists(st.integers(0, 300), max_size=8), st.lists(st.integers(0, 300), max_size=8),
       st.lists(st.integers(0, 300), max_size=8), st.integers(0, 1000), st.sampled_from([1, 2, 1000]))
def test_an_aggregate_of_imported_results_sees_every_one_in_time(draws, cuts_d, cuts_r, cuts_m,
                                                                  seed, rows):
    """However the bus cuts and interleaves the streams, every imported
    result reaches the matcher before its progress passes the result's ts."""
    found = by_hand(WORST, stream(draws), cuts_d, cuts_r, cuts_m, seed, rows)
    assert worst_found(found) == worst_of([a for a in found if a[1] == "Speed"])


@settings(max_examples=60, deadline=None)
@given(cars, st.sampled_from([MODEL, PER_ROAD, STATS, STATS_PER_ROAD]),
       st.sampled_from([1, 3, 2000]))
def test_imports_derive_what_the_matcher_derived_itself(draws, model, batch_size):
    events = stream(draws)
    assert outputs(model, events, import_derived=True, batch_size=batch_size) == \
        outputs(model, events, import_derived=False)


def cut(items: list, cuts: list[int]) -> list[list]:
    bounds = sorted({c % (len(items) + 1) for c in cuts} | {0, len(items)})
    return [items[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def by_hand(model: str, events: list[dict], cuts_d: list[int], cuts_r: list[int],
            cuts_m: list[int], seed: int, rows: int) -> list:
    """The alerts of the processors wired as the runners wire them on Kafka: transaction
    batches of at most `rows` events (columnar.chunks, which may cut between
    two partitions' transactions of one timestamp, and routed_chunks for the
    router's output, which goes through its topic's record); the router reads them
    and the deriver's output (changes, imports, progress, in order) as two
    streams interleaved in some order."""
    plan = compile_model(model)
    sched = SchedulerProcessor(plan)
    released = sched.process([InputRecord("cars", 0, i, e) for i, e in enumerate(events)]
                             ).transactions + sched.flush().transactions
    txns = [piece for item in released for piece in
            (chunks(item, rows) if isinstance(item, TxnBatch) else [item])]
    deriver = DeriverProcessor(plan)
    derived: list = []
    alerts = []
    for part in cut(txns, cuts_d):
        out = deriver.process(part)
        alerts += out.alerts
        derived += out.changes
        if out.imports is not None:
            derived.append(Imports(out.imports))
        if out.progress is not None:
            derived.append(out.progress)
    merged, i, j = [], 0, 0
    rnd = random.Random(seed)
    while i < len(txns) or j < len(derived):
        if j >= len(derived) or (i < len(txns) and rnd.random() < 0.5):
            merged.append(txns[i])
            i += 1
        else:
            merged.append(derived[j])
            j += 1
    router = RouterProcessor(plan)
    matcher = MatcherProcessor(plan)
    routed = []
    for part in cut(merged, cuts_r):
        # through the routed topic's record, in pieces, as the runners send it
        routed += [piece if isinstance(piece, Progress) else
                   routed_from(routed_record(piece, 0), matcher.graph.strings)[0]
                   for item in router.process(part).routed
                   for piece in ([item] if isinstance(item, Progress) else
                                 routed_chunks(item, rows))]
    for part in cut(routed, cuts_m):
        alerts += matcher.process(part).alerts
    return sorted(a.identity() for a in alerts)


@settings(max_examples=40, deadline=None)
@given(cars, st.lists(st.integers(0, 300), max_size=8), st.lists(st.integers(0, 300), max_size=8),
       st.lists(st.integers(0, 300), max_size=8), st.integers(0, 1000),
       st.sampled_from([MODEL, PER_ROAD, STATS, STATS_PER_ROAD]), st.sampled_from([1, 2, 5, 1000]))
def test_imports_do_not_depend_on_batches_or_interleaving(draws, cuts_d, cuts_r, cuts_m, seed,
                                                          model, rows):
    events = stream(draws)
    alerts, _ = outputs(model, events, import_derived=False)
    assert by_hand(model, events, cuts_d, cuts_r, cuts_m, seed, rows) == alerts


def test_a_result_after_its_transactions_were_routed_is_refused():
    """The deriver sends results before the progress that covers them; one
    arriving later would be lost, so the router says so."""
    plan = compile_model(MODEL)
    sched = SchedulerProcessor(plan)
    txns = sched.process([InputRecord("cars", 0, i, e) for i, e in enumerate(jam_scene())]
                         ).transactions + sched.flush().transactions
    out = DeriverProcessor(plan).process(txns)
    assert out.imports is not None
    router = RouterProcessor(plan)
    router.process([*txns, Progress(10**9, "deriver")])
    with pytest.raises(PlanError, match="came after the transactions up to"):
        router.process([Imports(out.imports)])


def test_a_timestamp_cut_between_batches_waits_for_all_its_results():
    """One timestamp's transactions in two batches (columnar.chunks cuts
    between partitions): the deriver's progress already names that ts after
    the first, yet the second's results for the matcher are still to come,
    so the router holds the timestamp until the deriver is past it."""
    events = sorted(({**e, "road": road} for e in jam_scene() for road in (0, 1)),
                    key=lambda e: e["ts"])
    plan = compile_model(PER_ROAD)
    sched = SchedulerProcessor(plan)
    released = sched.process([InputRecord("cars", 0, i, e) for i, e in enumerate(events)]
                             ).transactions + sched.flush().transactions
    deriver, router, matcher = DeriverProcessor(plan), RouterProcessor(plan), \
        MatcherProcessor(plan)
    routed: list = []
    for item in released:
        for piece in (chunks(item, 1) if isinstance(item, TxnBatch) else [item]):
            routed += router.process([piece]).routed  # the transactions come first
            out = deriver.process([piece])
            derived = [*out.changes, *([Imports(out.imports)] if out.imports else []),
                       *([out.progress] if out.progress else [])]
            routed += router.process(derived).routed
    alerts = sorted(a.identity() for a in matcher.process(routed).alerts)
    assert alerts == outputs(PER_ROAD, events, import_derived=False)[0]
    assert {a[1] for a in alerts} == {"Behind", "Again"}


def test_a_router_restored_mid_stream_routes_the_imports_it_held():
    """Imports that arrived before their timestamp could be routed are part
    of the router's state: a router restored from a snapshot taken then
    routes them as the one that kept running does."""
    events = stream([(1, 0, 0, 1, 0), (1, 0, 0, 2, 0), (1, 0, 0, 1, 0), (1, 0, 0, 2, 0),
                     (1, 0, 0, 3, 30), (1, 0, 0, 1, 30), (1, 0, 0, 3, 30)])
    plan = compile_model(MODEL)
    sched = SchedulerProcessor(plan)
    txns = sched.process([InputRecord("cars", 0, i, e) for i, e in enumerate(events)]
                         ).transactions + sched.flush().transactions
    out = DeriverProcessor(plan).process(txns)
    assert out.imports is not None and out.progress is not None
    derived = [*out.changes, Imports(out.imports)]
    kept, restored = RouterProcessor(plan), RouterProcessor(plan)
    first = kept.process([*txns, *derived]).routed  # no deriver progress yet: all held
    assert kept.imported
    restored.restore(kept.snapshot())
    found = []
    for router in (kept, restored):
        matcher = MatcherProcessor(plan)
        routed = first + router.process([out.progress]).routed
        found.append(sorted(a.identity() for a in matcher.process(routed).alerts))
    expected = outputs(MODEL, events, import_derived=False)[0]
    assert found == [expected, expected]
    assert "Behind" in {a[1] for a in expected}
