"""The Linear Road generator (deterministic, the benchmark's rules, the standard
load profile's shape), the LR file formats (bad lines become dead letters,
queries and historical tolls are read), and the wire records (segment fan-out,
millisecond event time in input order)."""

from __future__ import annotations

import io
from collections import defaultdict

import pytest

from caesar.examples.linear_road.generator import (
    GeneratorConfig,
    generate,
    generate_with_history,
    parse_spec,
)
from caesar.examples.linear_road.oracle import expected_outputs
from caesar.examples.linear_road.partitioning import (
    PartitionOverflow,
    fanout_segments,
    second,
    wire_records,
)
from caesar.examples.linear_road.records import (
    SAMPLE,
    BadLine,
    BalanceQuery,
    ExpenditureQuery,
    PositionReport,
    read_historical,
    read_lr,
)

SAMPLE_CONFIG = GeneratorConfig(duration_s=1200, seed=14, segments=(78, 82))
# The first 8 minutes of a standard run, whole road.
START = GeneratorConfig(duration_s=480, seed=2)


@pytest.fixture(scope="module")
def start_run() -> list:
    return list(generate(START))


def test_same_seed_same_records_other_seed_differs(start_run):
    assert list(generate(START)) == start_run
    assert list(generate(START.model_copy(update={"seed": 3}))) != start_run


def test_reports_follow_the_benchmark_rules(start_run):
    reports = [r for r in start_run if isinstance(r, PositionReport)]
    assert [r.time for r in start_run] == sorted(r.time for r in start_run)
    trips: dict[int, list[PositionReport]] = defaultdict(list)
    for r in reports:
        assert 0 <= r.time < START.duration_s and 0 <= r.spd <= 100
        assert 0 <= r.lane <= 4 and r.dir in (0, 1) and r.xway == 0
        assert r.seg == r.pos // 5280 and 0 <= r.seg < 100
        trips[r.vid].append(r)
    for trip in trips.values():  # no re-entries before 1,000 s
        assert trip[0].lane == 0 and trip[0].spd == 10  # enters on the entrance lane
        assert all(b.time - a.time == 30 for a, b in zip(trip, trip[1:], strict=False))
        assert all(r.lane != 4 for r in trip[:-1])  # the exit lane is the last report
        step = 1 if trip[0].dir == 0 else -1
        # Forward at most 4,400 ft (100 mph); the second car of an accident may
        # be put back to the first one's spot in its segment.
        assert all(0 <= (b.pos - a.pos) * step <= 4400 or (b.spd == 0 and b.seg == a.seg)
                   for a, b in zip(trip, trip[1:], strict=False))


def test_load_ramps_up_like_the_standard_profile(start_run):
    # The public generator's 3-hour file: 224 reports/s in minutes 0-9 (and
    # 2,140/s on average; bench/linear_road/README.md compares the whole curve).
    per_s = sum(isinstance(r, PositionReport) and r.time < 480 for r in start_run) / 480
    first = sum(isinstance(r, PositionReport) and r.time < 120 for r in start_run) / 120
    last = sum(isinstance(r, PositionReport) and r.time >= 360 for r in start_run) / 120
    assert 150 < per_s < 300 and last > 2 * first


def test_queries_are_about_one_percent_of_the_reports(start_run):
    reports = sum(isinstance(r, PositionReport) for r in start_run)
    balance = [r for r in start_run if isinstance(r, BalanceQuery)]
    spend = [r for r in start_run if isinstance(r, ExpenditureQuery)]
    assert 0.003 < len(balance) / reports < 0.007 and 0.0005 < len(spend) / reports < 0.0015
    assert len({q.qid for q in balance + spend}) == len(balance) + len(spend)
    assert all(1 <= q.day <= 68 for q in spend)


def test_historical_tolls_answer_every_type_3_query():
    records, history = generate_with_history(GeneratorConfig(duration_s=300, seed=4))
    spend = [r for r in records if isinstance(r, ExpenditureQuery)]
    assert spend and all((q.vid, q.day, q.xway) in history for q in spend)
    assert len(history) == 69 * len({q.vid for q in spend})
    assert all(10 <= toll <= 99 for toll in history.values())


def test_accidents_re_entries_and_expressways():
    records, _ = generate_with_history(GeneratorConfig(duration_s=1500, seed=5, xways=2,
                                                       scale=0.3))
    reports = [r for r in records if isinstance(r, PositionReport)]
    assert {r.xway for r in reports} == {0, 1}
    last: dict[int, PositionReport] = {}
    reentries = 0
    for r in reports:
        if r.vid in last and r.time - last[r.vid].time > 60:
            reentries += 1
            assert r.lane == 0 and last[r.vid].lane == 4
        last[r.vid] = r
    assert reentries > 0
    expected = expected_outputs(records)
    assert {a.xway for a in expected.accidents} == {0, 1}
    assert all(a.cleared is None or 300 <= a.cleared - a.detected <= 1000
               for a in expected.accidents)


def test_sample_files_are_current():
    records, history = generate_with_history(SAMPLE_CONFIG)
    assert list(read_lr(SAMPLE)) == records
    assert read_historical(f"{SAMPLE}.tolls.dat") == history
    assert {r.seg for r in records if isinstance(r, PositionReport)} == set(range(78, 83))


def test_parse_spec():
    assert parse_spec("duration_s=600,segments=40:59,scale=0.5,accidents=no") == \
        GeneratorConfig(duration_s=600, segments=(40, 59), scale=0.5, accidents=False)
    with pytest.raises(ValueError, match="segments"):
        parse_spec("segments=50:40")


def test_lr_file_round_trip_with_queries_and_bad_lines(start_run):
    text = "".join(r.to_lr_line() + "\n" for r in start_run[:50])
    bad_lines = ["0,1,2,3",  # too few fields
                 "0,1,2,x,0,0,0,0,0,-1,-1,-1,-1,-1,-1",
                 "0,1,2,30,0,0,0,3,100,-1,-1,-1,-1,-1,-1",  # Seg != Pos // 5280
                 "0,1,2,30,0,7,0,0,100,-1,-1,-1,-1,-1,-1",  # lane 7
                 "4,5,1,0,0,0,0,0,0,7,-1,-1,-1,-1,-1",  # travel time: not supported
                 "0,5,3,-2,0,1,0,0,100,-1,-1,-1,-1,-1,-1"]  # a negative speed is kept
    bad: list[BadLine] = []
    got = list(read_lr(io.StringIO(text + "\n".join(bad_lines) + "\n"), bad))
    assert got[:50] == start_run[:50]
    assert got[50:] == [PositionReport(5, 3, -2, 0, 1, 0, 0, 100)]
    assert [b.where.rsplit(":", 1)[1] for b in bad] == ["51", "52", "53", "54", "55"]
    assert ["15 comma-separated" in bad[0].reason, "integers" in bad[1].reason,
            "Seg 3 != Pos // 5280 = 0" in bad[2].reason, "Lane 7" in bad[3].reason,
            "Type 4" in bad[4].reason] == [True] * 5
    with pytest.warns(UserWarning, match="5 unusable"):
        list(read_lr(io.StringIO("\n".join(bad_lines))))


def test_segment_fanout_reaches_the_partitions_that_need_the_report():
    assert fanout_segments(50, 0) == [50, 49, 48, 47, 46, 45]  # partitions upstream of 50
    assert fanout_segments(50, 1) == [50, 51, 52, 53, 54, 55]
    assert fanout_segments(2, 0) == [2, 1, 0] and fanout_segments(98, 1) == [98, 99]
    report = PositionReport(time=61, vid=7, spd=30, xway=2, lane=1, dir=1, seg=10, pos=53000)
    assert second([report], fanout=False) == [
        ("2:1", {**report._asdict(), "pseg": -1, "ts": 61000})]
    fanned = second([report], fanout=True)
    assert [key for key, _ in fanned] == [f"2:1:{p}" for p in range(10, 16)]
    assert all(rec["pseg"] == int(key.rsplit(":", 1)[1]) for key, rec in fanned)


def test_reports_of_one_second_at_one_place_keep_their_input_order():
    at = [PositionReport(7, vid, 0, 0, 1, 0, 3, 16000) for vid in (5, 2, 9)]
    elsewhere = PositionReport(7, 4, 50, 0, 1, 0, 3, 17000)
    wire = second([at[0], elsewhere, at[1], at[2]], fanout=True)
    own = [(rec["vid"], rec["ts"]) for key, rec in wire if key == "0:0:3"]
    assert own == [(5, 7000), (4, 7000), (2, 7001), (9, 7002)]
    # Timestamps never decrease in send order (one Kafka partition may hold them all).
    assert [rec["ts"] for _, rec in wire] == sorted(rec["ts"] for _, rec in wire)
    stream = list(wire_records(at + [at[0]._replace(time=8)], fanout=False))
    assert [rec["ts"] for _, rec in stream] == [7000, 7001, 7002, 8000]
    crowd = [PositionReport(7, vid, 0, 0, 1, 0, 3, 16000) for vid in range(1000)]
    with pytest.raises(PartitionOverflow, match="more than 999 reports in second 7"):
        second(crowd, fanout=False)


def test_replay_pacing_follows_simulated_time():
    from caesar.examples.linear_road.produce import paced_slices, slice_seconds

    reports = [PositionReport(t, t, 50, 0, 1, 0, 0, 0) for t in range(0, 600, 7)]
    now = [100.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    slices = list(paced_slices(reports, speed=60.0, clock=lambda: now[0], sleep=sleep))
    assert [r for batch in slices for r in batch] == reports
    assert slice_seconds(60.0) == 30 and all(
        len({r.time // 30 for r in batch}) == 1 for batch in slices)
    # 60x: the slice starting at simulated second s is released s/60 wall seconds in.
    assert now[0] - 100.0 == pytest.approx((slices[-1][0].time - 0) / 60.0)
    assert list(paced_slices(reports, speed=0, clock=lambda: now[0], sleep=sleep))
    assert len(slept) == len(slices) - 1  # as fast as possible: no more waiting
