"""A deterministic Linear Road traffic generator.

Per expressway and direction, car trips converge on a bottleneck segment: cars
enter on lane 0 a few segments upstream of it, travel on lanes 1-3, and leave on
lane 4 a few segments past it. The entry rate grows linearly over the run, and a
car's speed falls with the number of cars in its segment (more steeply at the
bottleneck), so traffic builds into congestion (> 50 cars, average < 40 mph).
Accidents are scheduled: a travelling car stops dead, the next car that would
drive through its position stops at the same spot, both stay for a few minutes
(more than the 4 reports that make a car "stopped"), then drive on.

Every car reports every 30 s while on the road. Same config and seed, same
reports: one `random.Random(seed)` drives everything and cars are visited in a
fixed order.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from caesar.examples.linear_road.records import (
    ENTRANCE_LANE,
    EXIT_LANE,
    ROAD_FEET,
    SEGMENT_FEET,
    PositionReport,
)

REPORT_INTERVAL = 30
FEET_PER_MPH_PER_INTERVAL = 5280 / 3600 * REPORT_INTERVAL  # 44 ft per mph per 30 s


class GeneratorConfig(BaseModel):
    xways: int = Field(1, ge=1, le=250)
    duration_s: int = Field(900, ge=60, description="simulated seconds; reports at 0..duration-1")
    cars_per_direction: int = Field(500, ge=1, description="car trips per expressway and direction")
    seed: int = 0
    accidents_per_direction: int = Field(1, ge=0)
    accident_stop_s: tuple[int, int] = (150, 300)
    jam_cars: int = Field(90, ge=10, description="cars in a segment at which speed hits the floor")
    bottleneck_jam_cars: int = Field(45, ge=10)
    entry_spread_segments: int = Field(6, ge=1)
    exit_spread_segments: int = Field(4, ge=1)


@dataclass
class _Car:
    vid: int
    xway: int
    dir: int
    pos: int
    free_speed: int
    lane: int
    exit_seg: int
    first: bool = True
    stopped_until: int = -1  # > -1: stopped (crashed) until this time
    crash_at: int | None = None  # next report is a stop at this position (second car)
    crash_lane: int = 0
    counted_seg: int | None = None  # segment of the last report, where occupancy counts it

    @property
    def seg(self) -> int:
        return self.pos // SEGMENT_FEET


@dataclass
class _Accident:
    xway: int
    dir: int
    at: int  # time from which the first car may stop
    pos: int | None = None
    lane: int = 0
    first_car: _Car | None = None
    second_vid: int = -1
    release: int = -1
    stop_s: int = 200
    done: bool = False


@dataclass
class _Road:
    """One expressway direction."""

    xway: int
    dir: int
    bottleneck: int
    occupancy: dict[int, int] = field(default_factory=lambda: defaultdict(int))


def _downstream(direction: int) -> int:
    return 1 if direction == 0 else -1


def generate(config: GeneratorConfig) -> Iterator[PositionReport]:
    """Position reports in time order (ties by vid order of entry)."""
    rnd = random.Random(config.seed)
    duration = config.duration_s
    roads = [_Road(x, d, rnd.randint(20, 79)) for x in range(config.xways) for d in (0, 1)]

    # Trips: entry times with a density growing linearly (t = T_entry * sqrt(u)).
    last_entry = max(1, int(duration * 0.85))
    starts: dict[int, list[tuple[_Road, int]]] = defaultdict(list)
    trips = [(int(last_entry * math.sqrt(rnd.random())), road)
             for road in roads for _ in range(config.cars_per_direction)]
    trips.sort(key=lambda trip: (trip[0], trip[1].xway, trip[1].dir))
    for t, road in trips:
        starts[t].append((road, rnd.getrandbits(32)))

    accidents = [_Accident(road.xway, road.dir,
                           at=rnd.randint(int(duration * 0.25), int(duration * 0.5)),
                           stop_s=rnd.randint(*config.accident_stop_s))
                 for road in roads for _ in range(config.accidents_per_direction)]
    accidents.sort(key=lambda a: (a.at, a.xway, a.dir))

    due: dict[int, list[_Car]] = defaultdict(list)
    next_vid = 0
    for t in range(duration):
        for road, salt in starts.pop(t, ()):
            car_rnd = random.Random(salt)
            step = _downstream(road.dir)
            entry_seg = road.bottleneck - step * car_rnd.randint(1, config.entry_spread_segments)
            exit_seg = road.bottleneck + step * car_rnd.randint(1, config.exit_spread_segments)
            pos = entry_seg * SEGMENT_FEET + car_rnd.randint(0, SEGMENT_FEET - 1)
            due[t].append(_Car(next_vid, road.xway, road.dir, pos,
                               free_speed=car_rnd.randint(55, 90), lane=car_rnd.randint(1, 3),
                               exit_seg=exit_seg))
            next_vid += 1
        cars = due.pop(t, ())
        for car in cars:
            road = roads[car.xway * 2 + car.dir]
            report, keep = _report(car, t, road, accidents, config, rnd)
            yield report
            if keep:
                due[t + REPORT_INTERVAL].append(car)


def _report(car: _Car, t: int, road: _Road, accidents: list[_Accident],
            config: GeneratorConfig, rnd: random.Random) -> tuple[PositionReport, bool]:
    step = _downstream(car.dir)
    old_seg = car.counted_seg

    if car.crash_at is not None:  # second car of an accident: stopped at the first car's spot
        car.pos, car.lane, car.crash_at = car.crash_at, car.crash_lane, None
    if car.stopped_until >= 0:
        if t < car.stopped_until:
            return _emit(car, t, 0, car.lane, road, old_seg), True
        car.stopped_until = -1

    if car.first:
        lane = ENTRANCE_LANE
        car.first = False
    elif (car.seg - car.exit_seg) * step >= 0:
        lane = EXIT_LANE
    else:
        lane = car.lane
    speed = _speed(car, road, config)

    if lane not in (ENTRANCE_LANE, EXIT_LANE) and _maybe_crash(car, t, speed, road, accidents):
        return _emit(car, t, 0, car.lane, road, old_seg), True

    report = _emit(car, t, speed, lane, road, old_seg)
    if lane == EXIT_LANE:
        road.occupancy[car.seg] -= 1
        return report, False
    car.pos += step * int(speed * FEET_PER_MPH_PER_INTERVAL)
    if not 0 <= car.pos < ROAD_FEET:
        road.occupancy[report.seg] -= 1
        return report, False
    return report, True


def _emit(car: _Car, t: int, speed: int, lane: int, road: _Road, old_seg: int | None
          ) -> PositionReport:
    if old_seg != car.seg:
        if old_seg is not None:
            road.occupancy[old_seg] -= 1
        road.occupancy[car.seg] += 1
        car.counted_seg = car.seg
    return PositionReport(t, car.vid, speed, car.xway, lane, car.dir, car.seg, car.pos)


def _speed(car: _Car, road: _Road, config: GeneratorConfig) -> int:
    jam = config.bottleneck_jam_cars if car.seg == road.bottleneck else config.jam_cars
    factor = max(0.08, 1.0 - road.occupancy[car.seg] / jam)
    return max(3, min(100, round(car.free_speed * factor)))


def _maybe_crash(car: _Car, t: int, speed: int, road: _Road,
                 accidents: list[_Accident]) -> bool:
    """Start or join an accident on this car's road; True if the car stops now."""
    step = _downstream(car.dir)
    for acc in accidents:
        if acc.done or acc.xway != car.xway or acc.dir != car.dir:
            continue
        if acc.pos is None:
            if t >= acc.at and acc.at >= 0:
                # First car: stops dead where it is.
                acc.pos, acc.lane, acc.first_car = car.pos, car.lane, car
                acc.release = t + 600  # give up if no second car comes by then
                car.stopped_until = acc.release
                return True
            continue
        if acc.second_vid < 0:
            if t >= acc.release:  # nobody came: the first car drives on, no accident
                acc.done = True
                continue
            reach = car.pos + step * int(speed * FEET_PER_MPH_PER_INTERVAL)
            ahead = (acc.pos - car.pos) * step
            if car is not acc.first_car and 0 < ahead <= (reach - car.pos) * step:
                # Second car: would drive through the stopped car; it stops there.
                acc.second_vid = car.vid
                car.crash_at, car.crash_lane = acc.pos, acc.lane
                # 1 report to get there, 4 to count as stopped, then the accident lasts.
                acc.release = t + REPORT_INTERVAL * 5 + acc.stop_s
                car.stopped_until = acc.release
                assert acc.first_car is not None  # set with acc.pos
                acc.first_car.stopped_until = acc.release
                acc.done = True  # one accident per schedule entry
                return False
    return False


def main(argv: list[str] | None = None) -> None:
    """Write generated reports as a standard LR data file."""
    import argparse

    from caesar.examples.linear_road.records import write_lr

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--xways", type=int, default=1)
    parser.add_argument("--duration", type=int, default=900, help="simulated seconds")
    parser.add_argument("--cars", type=int, default=500, help="car trips per xway and direction")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    config = GeneratorConfig(xways=args.xways, duration_s=args.duration,
                             cars_per_direction=args.cars, seed=args.seed)
    print(f"{write_lr(generate(config), args.out)} reports written to {args.out}")


if __name__ == "__main__":
    main()
