"""A deterministic Linear Road traffic generator with the standard load profile.

It reproduces what the public generator (walmartlabs/LinearGenerator, the one
the public LR validator is paired with) makes for one expressway over 3 hours:
the same curve of position reports per second (from about 220/s in the first
minutes to about 2,870/s in minutes 100-130, 2,140/s on average), one accident
at a time per expressway (about every 20 minutes), re-entrant cars, and Type 2
and Type 3 queries, plus the historical-tolls file for Type 3. The traffic
model is a description of that generator's, written anew (its code is not
part of this project) and stepped per report instead of per second:

- Cars enter each second at a rate that follows half a sine over the 3 hours:
  `20 * L * (sin(pi * t / 10800) + 0.8 + u)` with u uniform in [0, 1). Each
  picks an expressway, a direction, an entrance segment and an exit segment
  (at least 2 segments on; 80 % of the cars entering before downtown, segments
  33-65, leave there).
- A car enters in lane 0 at the start of its entrance segment at 10 mph, speeds
  up to about 40 mph, takes a travel lane (1-3) in the next segment and drives
  at about 70 mph (60 or 50 when more than 72 or 87 cars are in its segment),
  -10..+7 mph; in its exit segment it reports once in lane 4 at 10 mph and leaves.
  10 % of the cars that leave come back 1,000-2,000 s later on a new route.
- Every car reports every 30 s from its entry second. With each report, with
  probability 1 %, it asks a query: half of them Type 2, a tenth Type 3 (for a
  day in 1..68 of its expressway).
- Per expressway, 5-15 minutes into the run and 5-15 minutes after each
  accident clears, a car in a travel lane and a second one within 1,000 feet
  of it in the same segment stop at the first car's position; they stay
  5-15 minutes, then drive on.

Same config and seed, same records: every random draw comes from one
`random.Random(seed)` (the history of a car from its own), cars are visited in
a fixed order. `segments` keeps the reports of a stretch of road only (a small
slice with the full density for tests and the demo).
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field, model_validator

from caesar.examples.linear_road.records import (
    ENTRANCE_LANE,
    EXIT_LANE,
    SEGMENT_FEET,
    SEGMENTS,
    BalanceQuery,
    ExpenditureQuery,
    HistoricalToll,
    LrRecord,
    PositionReport,
)

REPORT_INTERVAL = 30
STANDARD_DURATION_S = 10800
FEET_PER_MPH_PER_INTERVAL = 5280 / 3600 * REPORT_INTERVAL  # 44 ft per mph per 30 s
LAST_POSITION = SEGMENT_FEET * (SEGMENTS - 1)  # eastbound cars are held at the start of segment 99
DOWNTOWN = (33, 66)  # first segment of downtown, first one after it
HISTORICAL_DAYS = 69
QUERY_DAYS = 68  # Type 3 queries ask for days 1..68


class GeneratorConfig(BaseModel):
    xways: int = Field(1, ge=1, le=250)
    duration_s: int = Field(STANDARD_DURATION_S, ge=1,
                            description="simulated seconds: reports at 0..duration-1")
    seed: int = 0
    scale: float = Field(1.0, gt=0, description="entry rate relative to the standard load")
    segments: tuple[int, int] | None = Field(
        None, description="keep only the reports (and queries) of segments lo..hi")
    profile_s: int = Field(STANDARD_DURATION_S, ge=60,
                           description="length of the load curve (half a sine)")
    base_entries_per_s: float = Field(20.0, gt=0, description="per expressway, scale 1")
    accidents: bool = True
    first_accident_s: tuple[int, int] = (300, 900)
    accident_gap_s: tuple[int, int] = (300, 900)
    accident_length_s: tuple[int, int] = (300, 900)
    reentry_share: float = Field(0.10, ge=0, le=1)
    reentry_delay_s: tuple[int, int] = (1000, 2000)
    query_share: float = Field(0.01, ge=0, le=1)

    @model_validator(mode="after")
    def _check(self) -> GeneratorConfig:
        if self.segments is not None:
            lo, hi = self.segments
            if not 0 <= lo <= hi < SEGMENTS:
                raise ValueError(f"segments must be lo..hi within 0..{SEGMENTS - 1}")
        return self


@dataclass
class _Car:
    vid: int
    xway: int
    dir: int
    entrance: int
    exit: int
    pos: float
    speed: int = 10
    lane: int = ENTRANCE_LANE
    seg: int = -1  # segment where the occupancy counts it
    stopped_until: int = -1  # in an accident until this time
    stop_at: tuple[int, int] | None = None  # (pos, lane) of its accident
    crashed: bool = False


@dataclass
class _Xway:
    next_accident: int
    cars: dict[int, _Car] = field(default_factory=dict)  # on the road by vid, in entry order
    accident_until: int = -1  # an accident holds until this time


class _Generator:
    def __init__(self, config: GeneratorConfig) -> None:
        self.c = config
        self.rnd = random.Random(config.seed)
        self.occupancy: dict[tuple[int, int, int], int] = defaultdict(int)
        self.due: dict[int, list[_Car]] = defaultdict(list)
        self.reentries: dict[int, list[_Car]] = defaultdict(list)
        self.xways = [_Xway(self.rnd.randint(*config.first_accident_s))
                      for _ in range(config.xways)]
        self.next_vid = 0
        self.next_qid = 0
        self.type3: dict[tuple[int, int], int] = {}  # (vid, day) -> xway asked

    # -- cars --------------------------------------------------------------------------

    def _route(self, car: _Car | None, vid: int) -> _Car:
        rnd, c = self.rnd, self.c
        xway = rnd.randrange(c.xways)
        direction = rnd.randrange(2)
        if direction == 0:
            entrance = rnd.randrange(SEGMENTS - 2)
            exit_ = min(SEGMENTS - 1, entrance + 2 + rnd.randrange(SEGMENTS - entrance))
            before_downtown = entrance < DOWNTOWN[0]
        else:
            entrance = rnd.randrange(SEGMENTS - 2) + 2
            exit_ = max(0, rnd.randrange(entrance + 1) - 2)
            before_downtown = entrance >= DOWNTOWN[1]
        if before_downtown and rnd.random() < 0.8:
            exit_ = rnd.randrange(DOWNTOWN[0], DOWNTOWN[1])
        pos = entrance * SEGMENT_FEET + (0 if direction == 0 else SEGMENT_FEET - 1)
        return _Car(vid, xway, direction, entrance, exit_, float(pos))

    def _enter(self, t: int, car: _Car) -> None:
        self.xways[car.xway].cars[car.vid] = car
        self.due[t].append(car)

    def _occupy(self, car: _Car, seg: int) -> None:
        if car.seg == seg:
            return
        if car.seg >= 0:
            self.occupancy[(car.xway, car.dir, car.seg)] -= 1
        if seg >= 0:
            self.occupancy[(car.xway, car.dir, seg)] += 1
        car.seg = seg

    def _slowdown(self, car: _Car, seg: int) -> int:
        cars = self.occupancy[(car.xway, car.dir, seg)]
        return 0 if cars <= 72 else 10 if cars <= 87 else 20

    def _step(self, t: int, car: _Car) -> tuple[PositionReport, bool]:
        """The car's report at t (its state moved on by 30 s) and whether it stays."""
        rnd = self.rnd
        if car.stop_at is not None:
            if t <= car.stopped_until:
                pos, lane = car.stop_at
                car.pos, car.lane, car.speed = float(pos), lane, 0
                return self._emit(t, car), True
            car.stop_at = None  # cleared: drives on from a standstill
        seg = int(car.pos) // SEGMENT_FEET
        step = 1 if car.dir == 0 else -1
        first = car.seg < 0
        if first:
            speed = 10
        elif (seg - car.entrance) * step <= 0:  # still in the entrance segment
            speed = max(0, 40 - self._slowdown(car, seg) + rnd.randint(-5, 3))
        else:
            speed = max(1, 70 - self._slowdown(car, seg) + rnd.randint(-10, 7))
        if not first:
            car.pos += step * _distance(car.speed, speed)
            # Held at the end of the road (the start of segment 99, or 0).
            car.pos = min(float(LAST_POSITION), car.pos) if car.dir == 0 else max(0.0, car.pos)
        car.speed = speed
        self._change_lane(car, first, step)
        report = self._emit(t, car)
        if car.lane == EXIT_LANE:
            self._leave(t, car)
            return report, False
        return report, True

    def _change_lane(self, car: _Car, first: bool, step: int) -> None:
        """Lane 0 on entry, lane 4 in the exit segment, a travel lane (1-3)
        after the entrance segment, changed with probability 0.4 per report."""
        seg = int(car.pos) // SEGMENT_FEET
        if first:
            car.lane = ENTRANCE_LANE
        elif (seg - car.exit) * step >= 0:
            car.lane, car.speed = EXIT_LANE, 10
        elif car.lane == ENTRANCE_LANE:
            if (seg - car.entrance) * step > 0:
                car.lane = self.rnd.randint(1, 3)
        elif self.rnd.random() < 0.4:
            car.lane = self.rnd.randint(1, 3)

    def _emit(self, t: int, car: _Car) -> PositionReport:
        pos = int(car.pos)
        self._occupy(car, pos // SEGMENT_FEET)
        return PositionReport(t, car.vid, car.speed, car.xway, car.lane, car.dir,
                              pos // SEGMENT_FEET, pos)

    def _leave(self, t: int, car: _Car) -> None:
        self._occupy(car, -1)
        del self.xways[car.xway].cars[car.vid]
        if self.rnd.random() < self.c.reentry_share:
            self.reentries[t + self.rnd.randint(*self.c.reentry_delay_s)].append(car)

    # -- accidents ---------------------------------------------------------------------

    def _accidents(self, t: int) -> None:
        for xw in self.xways:
            if xw.accident_until >= 0:
                if t > xw.accident_until:
                    xw.accident_until = -1
                    xw.next_accident = t + self.rnd.randint(*self.c.accident_gap_s)
                continue
            if t > xw.next_accident:
                self._crash(t, xw)

    def _crash(self, t: int, xw: _Xway) -> None:
        """Stop the first car (in entry order) in a travel lane that has a second
        one within 1,000 feet behind it (or ahead) in its segment."""
        def travelling(car: _Car) -> bool:
            return car.stop_at is None and car.lane not in (ENTRANCE_LANE, EXIT_LANE)

        by_segment: dict[tuple[int, int], list[_Car]] = defaultdict(list)
        for car in xw.cars.values():
            if travelling(car):
                by_segment[(car.dir, car.seg)].append(car)
        for first in xw.cars.values():
            if first.crashed or not travelling(first):
                continue
            for second in by_segment[(first.dir, first.seg)]:
                behind = (first.pos - second.pos) * (1 if first.dir == 0 else -1)
                if second is not first and behind < 1000:
                    until = t + self.rnd.randint(*self.c.accident_length_s)
                    spot = (int(first.pos), first.lane)
                    for car in (first, second):
                        car.stop_at, car.stopped_until, car.crashed = spot, until, True
                    xw.accident_until = until
                    return

    # -- queries -----------------------------------------------------------------------

    def _query(self, report: PositionReport) -> BalanceQuery | ExpenditureQuery | None:
        rnd = self.rnd
        if rnd.random() >= self.c.query_share:
            return None
        kind = rnd.random()
        if kind < 0.5:
            self.next_qid += 1
            return BalanceQuery(report.time, report.vid, self.next_qid - 1, report.xway)
        if kind <= 0.6:
            day = rnd.randint(1, QUERY_DAYS)
            self.next_qid += 1
            self.type3[(report.vid, day)] = report.xway
            return ExpenditureQuery(report.time, report.vid, self.next_qid - 1, report.xway, day)
        return None  # Type 4: not generated (as in the public generator)

    # -- the run -----------------------------------------------------------------------

    def run(self) -> Iterator[LrRecord]:
        c = self.c
        lo, hi = c.segments if c.segments is not None else (0, SEGMENTS - 1)
        for t in range(c.duration_s):
            # Cars keep entering while their count is below the curve, drawn anew for
            # each car: 20 L (sin(pi t / T) + 0.8 + u) (the public generator's rule).
            level = math.sin(math.pi * t / c.profile_s) + 0.8
            entries = 0
            while entries < c.scale * c.base_entries_per_s * c.xways * (level + self.rnd.random()):
                entries += 1
            for _ in range(entries):
                self._enter(t, self._route(None, self.next_vid))
                self.next_vid += 1
            for car in self.reentries.pop(t, ()):
                new = self._route(car, car.vid)
                self._enter(t, new)
            for car in self.due.pop(t, ()):
                report, stays = self._step(t, car)
                query = self._query(report)
                if stays:
                    self.due[t + REPORT_INTERVAL].append(car)
                if lo <= report.seg <= hi:
                    yield report
                    if query is not None:
                        yield query
            if c.accidents:
                self._accidents(t)

    def history(self, vid: int) -> Iterator[HistoricalToll]:
        """The car's historical tolls: days 1..69, the expressway its Type 3 query
        for that day names (so that it has an answer), else a random one."""
        rnd = random.Random(self.c.seed * 1_000_003 + vid)
        for day in range(1, HISTORICAL_DAYS + 1):
            toll = rnd.randint(10, 99)
            xway = self.type3.get((vid, day), rnd.randrange(self.c.xways))
            yield HistoricalToll(vid, day, xway, toll)


def _distance(before: int, after: int) -> float:
    """Feet driven in 30 s from `before` to `after` mph, speeding up at 4.5 mph/s
    (the mean of 0-9 mph per second) or slowing down at once."""
    if after <= before:
        return (before + after) / 2 * FEET_PER_MPH_PER_INTERVAL
    ramp = min(REPORT_INTERVAL, (after - before) / 4.5)
    mean = (after * REPORT_INTERVAL - (after - before) * ramp / 2) / REPORT_INTERVAL
    return mean * FEET_PER_MPH_PER_INTERVAL


def generate(config: GeneratorConfig) -> Iterator[LrRecord]:
    """Reports and queries in time order (within a second, cars in entry order)."""
    return _Generator(config).run()


def generate_with_history(config: GeneratorConfig
                          ) -> tuple[list[LrRecord], dict[tuple[int, int, int], int]]:
    """The records and the historical tolls of the cars that ask Type 3 queries."""
    gen = _Generator(config)
    records = list(gen.run())
    askers = {r.vid for r in records if isinstance(r, ExpenditureQuery)}
    history = {(h.vid, h.day, h.xway): h.toll for vid in sorted(askers) for h in gen.history(vid)}
    return records, history


def write_files(config: GeneratorConfig, out: str) -> tuple[int, int]:
    """`out` (LR data) and `out.tolls.dat` (historical tolls of every car), like
    the public generator's files."""
    from caesar.examples.linear_road.records import write_historical, write_lr

    gen = _Generator(config)
    n = write_lr(gen.run(), out)
    m = write_historical((h for vid in range(gen.next_vid) for h in gen.history(vid)),
                         f"{out}.tolls.dat")
    return n, m


def write_sample(config: GeneratorConfig, out: str) -> tuple[int, int]:
    """`out` (LR data) and `out.tolls.dat` with the historical tolls of the cars
    that ask Type 3 queries only (a small committed slice)."""
    from caesar.examples.linear_road.records import write_historical, write_lr

    records, history = generate_with_history(config)
    n = write_lr(records, out)
    m = write_historical((HistoricalToll(v, d, x, t) for (v, d, x), t in sorted(history.items())),
                         f"{out}.tolls.dat")
    return n, m


def parse_spec(text: str) -> GeneratorConfig:
    """'xways=1,duration_s=600,seed=3,segments=40:59' -> GeneratorConfig."""
    values: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, _, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if ":" in value:
            values[key] = tuple(int(v) for v in value.split(":"))
        elif key in ("scale", "base_entries_per_s", "reentry_share", "query_share"):
            values[key] = float(value)
        elif key == "accidents":
            values[key] = value.lower() in ("1", "true", "yes")
        else:
            values[key] = int(value)
    return GeneratorConfig(**values)


def main(argv: list[str] | None = None) -> None:
    """Write a standard LR data file and its historical-tolls file."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--spec", default="", help="generator settings, e.g. "
                        "xways=1,duration_s=10800,seed=1 (GeneratorConfig fields)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    n, m = write_files(parse_spec(args.spec), args.out)
    print(f"{n:,} records written to {args.out}, {m:,} historical tolls to {args.out}.tolls.dat")


if __name__ == "__main__":
    main()
