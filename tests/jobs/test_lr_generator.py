"""The Linear Road generator: deterministic, follows the benchmark's rules, and a
short run yields congestion (positive tolls) and accidents per SPEC.md."""

from __future__ import annotations

import io
from collections import defaultdict
from pathlib import Path

import pytest

from caesar.examples.linear_road.generator import GeneratorConfig, generate
from caesar.examples.linear_road.oracle import INF, expected_outputs, stopped_intervals
from caesar.examples.linear_road.records import (
    LinearRoadFormatError,
    PositionReport,
    parse_lr_line,
    read_lr,
)

SAMPLE = Path(__file__).resolve().parents[2] / "src/caesar/examples/linear_road/data/sample-L1-480s-seed1.lr"
SHORT = GeneratorConfig(duration_s=600, cars_per_direction=300, seed=3)


@pytest.fixture(scope="module")
def short_run() -> list[PositionReport]:
    return list(generate(SHORT))


def test_same_seed_same_reports_other_seed_differs(short_run):
    assert list(generate(SHORT)) == short_run
    assert list(generate(SHORT.model_copy(update={"seed": 4}))) != short_run


def test_reports_follow_the_benchmark_rules(short_run):
    assert [r.time for r in short_run] == sorted(r.time for r in short_run)
    by_car: dict[int, list[PositionReport]] = defaultdict(list)
    for r in short_run:
        assert 0 <= r.time < SHORT.duration_s
        assert 0 <= r.spd <= 100 and 0 <= r.lane <= 4 and r.dir in (0, 1)
        assert r.xway == 0 and r.seg == r.pos // 5280 and 0 <= r.seg < 100
        by_car[r.vid].append(r)
    for reports in by_car.values():
        assert reports[0].lane == 0  # enters on the entrance lane
        assert all(b.time - a.time == 30 for a, b in zip(reports, reports[1:], strict=False))
        assert all(r.lane != 4 for r in reports[:-1])  # the exit lane is the last report
        assert len({(r.xway, r.dir) for r in reports}) == 1
        step = 1 if reports[0].dir == 0 else -1
        assert all((b.pos - a.pos) * step >= 0 for a, b in zip(reports, reports[1:], strict=False))


def test_short_run_has_congestion_and_accidents(short_run):
    expected = expected_outputs(short_run)
    assert expected.congested_minutes > 0
    assert any(t.toll > 0 for t in expected.tolls)
    assert len(expected.accidents) >= 1
    assert any(a.cleared != INF for a in expected.accidents)  # an accident that clears
    assert expected.alerts
    # Traffic builds: more reports in the last third than in the first.
    third = SHORT.duration_s // 3
    assert sum(r.time >= 2 * third for r in short_run) > 2 * sum(r.time < third for r in short_run)


def test_accidents_are_two_cars_stopped_at_one_spot(short_run):
    expected = expected_outputs(short_run)
    for acc in expected.accidents:
        stopped_here = [(t4, tm) for position, t4, tm in stopped_intervals(short_run)
                        if position == (acc.xway, acc.dir, acc.lane, acc.pos)]
        assert len(stopped_here) >= 2
        assert acc.detected == sorted(t4 for t4, _ in stopped_here)[1]


def test_more_expressways_scale_the_stream():
    one = list(generate(GeneratorConfig(xways=1, duration_s=120, cars_per_direction=50)))
    three = list(generate(GeneratorConfig(xways=3, duration_s=120, cars_per_direction=50)))
    assert {r.xway for r in three} == {0, 1, 2}
    assert len(three) > 2 * len(one)
    assert len({r.vid for r in three}) == sum(r.lane == 0 for r in three)  # one vid per trip


def test_lr_file_round_trip_and_sample_is_current(tmp_path):
    reports = list(generate(GeneratorConfig(duration_s=480, cars_per_direction=300, seed=1)))
    assert list(read_lr(SAMPLE)) == reports
    text = "\n".join(r.to_lr_line() for r in reports[:20]) + "\n2,5,1,0,0,0,0,0,0,7,-1,-1,-1,-1,-1\n"
    assert list(read_lr(io.StringIO(text))) == reports[:20]  # type 2 (a query) is skipped


@pytest.mark.parametrize("line, message", [
    ("0,1,2,3", "15 comma-separated"),
    ("0,1,2,x,0,0,0,0,0,-1,-1,-1,-1,-1,-1", "integers"),
    ("0,1,2,30,0,0,0,3,100,-1,-1,-1,-1,-1,-1", "Seg 3 != Pos // 5280 = 0"),
    ("0,1,2,130,0,7,0,0,100,-1,-1,-1,-1,-1,-1", "Spd 130"),
])
def test_bad_lr_lines_name_the_problem(line, message):
    with pytest.raises(LinearRoadFormatError, match=message) as info:
        parse_lr_line(line, "data.lr:7")
    assert "data.lr:7" in str(info.value)


def test_segment_fanout_reaches_the_partitions_that_need_the_report():
    from caesar.examples.linear_road.partitioning import fanout_segments, wire_records

    assert fanout_segments(50, 0) == [50, 49, 48, 47, 46, 45]  # partitions upstream of 50
    assert fanout_segments(50, 1) == [50, 51, 52, 53, 54, 55]
    assert fanout_segments(2, 0) == [2, 1, 0] and fanout_segments(98, 1) == [98, 99]
    report = PositionReport(time=61, vid=7, spd=30, xway=2, lane=1, dir=1, seg=10, pos=53000)
    assert wire_records(report, fanout=False) == [("2:1", {**report._asdict(), "pseg": -1})]
    fanned = wire_records(report, fanout=True)
    assert [key for key, _ in fanned] == [f"2:1:{p}" for p in range(10, 16)]
    assert all(rec["pseg"] == int(key.rsplit(":", 1)[1]) for key, rec in fanned)
    # Partition p sees an accident at segment p+4 downstream (dir 1: p-4) and one more.
    for p in range(10, 16):
        assert 0 <= p - report.seg <= 5


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
