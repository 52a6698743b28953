"""A plain-Python reference of src/caesar/examples/linear_road/SPEC.md, written for clarity.

It is the cross-check for the Spark SQL validator (they must agree exactly on
generated data) and the quick way to see what a run of the generator contains.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from caesar.examples.linear_road.records import EXIT_LANE, SEGMENT_FEET, PositionReport, minute

INF = float("inf")
TOLL_FIELDS = ("vid", "time", "xway", "dir", "seg", "lav", "toll")
ALERT_FIELDS = ("vid", "time", "xway", "dir", "seg", "acc_seg")


class TollRow(NamedTuple):
    vid: int
    time: int
    xway: int
    dir: int
    seg: int
    lav: int
    toll: int


class AlertRow(NamedTuple):
    vid: int
    time: int
    xway: int
    dir: int
    seg: int
    acc_seg: int


@dataclass(frozen=True)
class Accident:
    xway: int
    dir: int
    lane: int
    pos: int
    detected: int
    cleared: float  # INF when never cleared in the input

    @property
    def seg(self) -> int:
        return self.pos // SEGMENT_FEET


@dataclass
class Expected:
    tolls: list[TollRow]
    alerts: list[AlertRow]
    accidents: list[Accident]
    congested_minutes: int  # (segment, minute) pairs with cars > 50 and lav < 40


def stopped_intervals(reports: Iterable[PositionReport]
                      ) -> list[tuple[tuple[int, int, int, int], int, float]]:
    """(position, t4, tm): the car is stopped at position during [t4, tm)."""
    by_car: dict[int, list[PositionReport]] = defaultdict(list)
    for r in sorted(reports, key=lambda r: (r.vid, r.time)):
        by_car[r.vid].append(r)
    out: list[tuple[tuple[int, int, int, int], int, float]] = []
    for car_reports in by_car.values():
        run_pos: tuple[int, int, int, int] | None = None
        run_len, start = 0, None
        for r in car_reports:
            here = (r.xway, r.dir, r.lane, r.pos)
            if r.spd == 0 and here == run_pos:
                run_len += 1
            elif r.spd == 0:
                if start is not None and run_pos is not None:
                    out.append((run_pos, start, r.time))
                run_pos, run_len, start = here, 1, None
                continue
            else:
                if start is not None and run_pos is not None:
                    out.append((run_pos, start, r.time))
                run_pos, run_len, start = None, 0, None
                continue
            if run_len == 4:
                start = r.time
        if start is not None and run_pos is not None:
            out.append((run_pos, start, INF))
    return out


def accidents(reports: Iterable[PositionReport]) -> list[Accident]:
    changes: dict[tuple[int, int, int, int], dict[float, int]] = defaultdict(
        lambda: defaultdict(int))
    for position, t4, tm in stopped_intervals(reports):
        changes[position][t4] += 1
        if tm != INF:
            changes[position][tm] -= 1
    found = []
    for position, deltas in changes.items():
        count, detected = 0, None
        for t in sorted(deltas):
            count += deltas[t]  # evaluated after all reports at t
            if count >= 2 and detected is None:
                detected = t
            elif count < 2 and detected is not None:
                found.append(Accident(*position, detected=int(detected), cleared=t))
                detected = None
        if detected is not None:
            found.append(Accident(*position, detected=int(detected), cleared=INF))
    return sorted(found, key=lambda a: (a.detected, a.xway, a.dir, a.pos))


@dataclass
class _SegmentMinutes:
    """Per (xway, dir, seg, minute): the cars reporting there and their speeds."""

    cars: dict[tuple[int, int, int, int], set[int]] = field(
        default_factory=lambda: defaultdict(set))
    speed: dict[tuple[int, int, int, int], list[int]] = field(
        default_factory=lambda: defaultdict(lambda: [0, 0]))  # sum, count

    def add(self, r: PositionReport) -> None:
        key = (r.xway, r.dir, r.seg, minute(r.time))
        self.cars[key].add(r.vid)
        self.speed[key][0] += r.spd
        self.speed[key][1] += 1

    def lav(self, x: int, d: int, s: int, m: int) -> int:
        """Latest average velocity: the mean speed over minutes m-5 .. m-1."""
        total = n = 0
        for k in range(m - 5, m):
            got = self.speed.get((x, d, s, k))
            if got:
                total += got[0]
                n += got[1]
        return total // n if n else 0


def expected_outputs(reports: Iterable[PositionReport]) -> Expected:
    reports = sorted(reports, key=lambda r: (r.time, r.vid))
    stats = _SegmentMinutes()
    for r in reports:
        stats.add(r)
    found = accidents(reports)
    by_road: dict[tuple[int, int], list[Accident]] = defaultdict(list)
    for acc in found:
        by_road[(acc.xway, acc.dir)].append(acc)
    congested = sum(1 for (x, d, s, m), vids in stats.cars.items()
                    if len(vids) > 50 and stats.lav(x, d, s, m + 1) < 40)
    tolls: list[TollRow] = []
    alerts: list[AlertRow] = []
    previous: dict[int, PositionReport] = {}
    for r in reports:
        prev = previous.get(r.vid)
        previous[r.vid] = r
        entering = r.lane != EXIT_LANE and (
            prev is None or (prev.xway, prev.dir, prev.seg) != (r.xway, r.dir, r.seg))
        if not entering:
            continue
        alert, toll = _on_entry(r, stats, by_road[(r.xway, r.dir)])
        if alert is not None:
            alerts.append(alert)
        tolls.append(toll)
    return Expected(tolls, alerts, found, congested)


def _on_entry(r: PositionReport, stats: _SegmentMinutes, road_accidents: list[Accident]
              ) -> tuple[AlertRow | None, TollRow]:
    """A car entering a segment: the accident alert it gets, if any, and its toll."""
    m = minute(r.time)
    near = [acc for acc in road_accidents
            if 0 <= (acc.seg - r.seg) * (1 if r.dir == 0 else -1) <= 4
            and r.time <= acc.cleared]
    zeroing = [acc for acc in near if acc.detected < r.time]
    alerting = [acc for acc in near if m > minute(acc.detected)]
    alert = None
    if alerting:
        nearest = min(alerting, key=lambda a: abs(a.seg - r.seg))
        alert = AlertRow(r.vid, r.time, r.xway, r.dir, r.seg, nearest.seg)
    n_cars = len(stats.cars.get((r.xway, r.dir, r.seg, m - 1), ()))
    average = stats.lav(r.xway, r.dir, r.seg, m)
    toll = 0
    if not zeroing and n_cars > 50 and average < 40:
        toll = 2 * (n_cars - 50) ** 2
    return alert, TollRow(r.vid, r.time, r.xway, r.dir, r.seg, average, toll)
