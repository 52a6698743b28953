"""Hand-made Linear Road traffic for the tests: cars that report every 30 s along
a trip the test writes (drive, stand still at a spot, leave, come back), and a
hypothesis strategy that draws such scenarios at random (crowds for tolls,
accidents, reports that share a second, re-entrant cars, queries)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from caesar.examples.linear_road.records import (
    BalanceQuery,
    ExpenditureQuery,
    LrRecord,
    PositionReport,
)

SEG = 5280


@dataclass
class Car:
    """One car's trips on expressway 0: `reports` as (time, spd, lane, pos)."""

    vid: int
    dir: int
    reports: list[tuple[int, int, int, int]] = field(default_factory=list)

    def at(self, time: int, pos: int, lane: int = 1, spd: int = 60) -> Car:
        self.reports.append((time, spd, lane, pos))
        return self

    def drive(self, start: int, pos: int, steps: int, feet: int = 3000, lane: int = 1,
              spd: int = 60, enter: bool = True) -> Car:
        """Enter (lane 0) at `pos` at `start`, then `steps` reports `feet` apart."""
        t = start
        if enter:
            self.at(t, pos, 0, 10)
            t += 30
        for _ in range(steps):
            pos += feet if self.dir == 0 else -feet
            self.at(t, pos, lane, spd)
            t += 30
        return self

    def stand(self, pos: int, reports: int, lane: int = 1, spd: int = 0) -> Car:
        """`reports` more reports at `pos`, 30 s apart after the last one."""
        t = self.reports[-1][0] + 30
        for k in range(reports):
            self.at(t + 30 * k, pos, lane, spd)
        return self

    def leave(self, feet: int = 2000) -> Car:
        """One exit-lane report `feet` on."""
        t, _, _, pos = self.reports[-1]
        return self.at(t + 30, pos + (feet if self.dir == 0 else -feet), 4, 10)

    @property
    def last(self) -> tuple[int, int, int, int]:
        return self.reports[-1]

    def position_reports(self) -> list[PositionReport]:
        return [PositionReport(t, self.vid, spd, 0, lane, self.dir, pos // SEG, pos)
                for t, spd, lane, pos in self.reports]


def records(cars: list[Car], queries: list[BalanceQuery | ExpenditureQuery] = ()
            ) -> list[LrRecord]:
    """Every car's reports in time order (within a second: in `cars` order), each
    query after the reports of its second."""
    order = {c.vid: i for i, c in enumerate(cars)}
    reports = sorted((r for c in cars for r in c.position_reports()),
                     key=lambda r: (r.time, order[r.vid]))
    out: list[LrRecord] = []
    pending = sorted(queries, key=lambda q: q.time)
    for r in reports:
        while pending and pending[0].time < r.time:
            out.append(pending.pop(0))
        out.append(r)
    return out + pending


def crowd(first_vid: int, direction: int, seg: int, minute: int, cars: int, spd: int,
          other_spd: int | None = None) -> list[Car]:
    """`cars` cars that report twice in segment `seg` during `minute` (1-based),
    at speed `spd` (every second car at `other_spd`), then leave in it: more than
    50 of them make the next minute's toll."""
    out = []
    for k in range(cars):
        t = 60 * (minute - 1) + k % 30
        speed = spd if other_spd is None or k % 2 == 0 else other_spd
        base = seg * SEG + (100 + k if direction == 0 else SEG - 100 - k)
        car = Car(first_vid + k, direction).at(t, base, 0, speed)
        car.at(t + 30, base + (200 if direction == 0 else -200), 1, speed)
        out.append(car.leave(100))
    return out


def _move(draw: st.DrawFn, car: Car, direction: int, spots: list[tuple[int, int]]) -> None:
    """One more report 30 s on: drive, creep, stand, or stop at a shared spot ahead."""
    sign = 1 if direction == 0 else -1
    t, _, lane, pos = car.last
    action = draw(st.sampled_from(["drive", "drive", "creep", "spot", "stand"]))
    if action == "spot":
        spot_lane, spot = draw(st.sampled_from(spots))
        if direction == 1:
            spot = 27 * SEG - spot  # mirror into segments 12-15 of direction 1
        if 0 <= (spot - pos) * sign <= 4400:
            car.at(t + 30, spot, spot_lane, 0)
            return
        action = "drive"
    if action == "stand":
        car.at(t + 30, pos, lane, draw(st.sampled_from([0, 3])))
        return
    feet = draw(st.integers(0, 300)) if action == "creep" else draw(st.integers(1000, 4400))
    car.at(t + 30, pos + sign * feet, draw(st.integers(1, 3)), 45)


def _trip(draw: st.DrawFn, vid: int, direction: int, spots: list[tuple[int, int]]) -> Car:
    """A car entering in segment 10 (16 for direction 1), moving 2-14 times,
    maybe leaving and maybe coming back on a new trip."""
    sign = 1 if direction == 0 else -1
    car = Car(vid, direction)
    start = draw(st.sampled_from([0, 5, 29, 30, 59, 60, 90, 119, 150]))
    pos = draw(st.integers(10 * SEG, 11 * SEG)) if direction == 0 else \
        draw(st.integers(16 * SEG, 17 * SEG))
    car.at(start, pos, 0, 10)
    for _ in range(draw(st.integers(2, 14))):
        _move(draw, car, direction, spots)
    if draw(st.booleans()):
        car.leave(draw(st.integers(0, 3000)))
        if draw(st.booleans()):  # comes back: a new trip
            t, _, _, pos = car.last
            car.at(t + draw(st.integers(61, 200)), pos - sign * draw(st.integers(0, 6000)), 0, 10)
            car.at(car.last[0] + 30, car.last[3] + sign * 3000, 2, 50)
    return car


def _queries(draw: st.DrawFn, times: list[tuple[int, int]]
             ) -> tuple[list[BalanceQuery | ExpenditureQuery], dict[tuple[int, int, int], int]]:
    """Up to 6 queries at report times (Type 2 or 3), and historical tolls for some."""
    queries: list[BalanceQuery | ExpenditureQuery] = []
    historical: dict[tuple[int, int, int], int] = {}
    for qid, (t, vid) in enumerate(draw(st.lists(st.sampled_from(times), max_size=6))):
        if draw(st.booleans()):
            queries.append(BalanceQuery(t, vid, qid, 0))
            continue
        day = draw(st.integers(0, 3))
        queries.append(ExpenditureQuery(t, vid, qid, 0, day))
        if draw(st.booleans()):
            historical[(vid, day, draw(st.sampled_from([0, 0, 1])))] = draw(st.integers(10, 99))
    return queries, historical


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[LrRecord], dict[tuple[int, int, int], int]]:
    """A random little road: a crowd or not, cars driving through segments 10-16
    of one direction, some standing still at one or two shared spots (accidents,
    third cars, cars that leave in the second another stops), re-entrant cars,
    and queries."""
    direction = draw(st.integers(0, 1))
    cars: list[Car] = []
    if draw(st.booleans()):
        minute = draw(st.integers(1, 4))
        spd = draw(st.sampled_from([20, 39, 40, 60]))
        cars += crowd(1000, direction, draw(st.integers(11, 14)), minute,
                      draw(st.integers(49, 56)), spd, spd + draw(st.integers(0, 1)))
    spots = [(draw(st.integers(1, 3)), draw(st.integers(12 * SEG, 15 * SEG))) for _ in range(2)]
    cars += [_trip(draw, vid, direction, spots) for vid in range(draw(st.integers(2, 7)))]
    reports = {(r[0], c.vid): c for c in cars for r in c.reports}
    queries, historical = _queries(draw, sorted(reports))
    return records(cars, queries), historical
