"""Car sensor data for the aggressive-drivers example (model.caesar here:
Listing 1 of the TPStream paper): `CarSensor(ts, car_id, speed, accel)`, one
reading per car per second, time in seconds.

A car drives calmly (40-65 mph, |accel| <= 3 m/s², no situation of the model
holds) except for 60-second *episodes*. A matching episode drives one pair of
Listing 1's alternatives: A (acceleration > 8 m/s², at least 5 s) MEETS /
OVERLAPS / STARTS / DURING B (speed > 70 mph, 4-30 s), and C (deceleration
< -9 m/s², at least 3 s) DURING B, or B FINISHED BY / OVERLAPS / MEETS C, with
A BEFORE C. A near miss must not match (each says why: A too short, B too long,
C before A, ...). Episodes are at least 15 s of calm apart, so no match spans
two of them: every matching episode gives exactly one alert, near misses none.

Two data sets come from the same episodes and traces:

- `fixed_set()`: the 24 cars of `data/car_sensors.jsonl` (README.md), each
  driving one episode: cars 1-16 one per pair of alternatives, 17-24 the near
  misses (`python -m caesar.examples.aggressive_driving.generate` rewrites it);
- `drive(DrivingConfig)`: any number of cars over any number of minutes,
  seeded; a share of the cars (`aggressive`) drive matching episodes, the
  others near misses, with random calm stretches in between:

    python -m caesar.examples.aggressive_driving.generator --cars 10 --minutes 10 --out ad.parquet
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data" / "car_sensors.jsonl"
EVENT_TYPE = "CarSensor"
AB = ("meets", "overlaps", "starts", "during")
CB = ("during", "finished_by", "overlaps", "meets")  # C during B, B finished-by C, ...
B_LEN = 20  # seconds of speeding (inside 4-30)
EPISODE_S = 60  # an episode's trace; every interval of an episode ends by its second 45


@dataclass(frozen=True)
class Episode:
    car: int
    what: str  # "A meets B, C during B" or a near miss
    start: int  # first second of the episode's trace
    a: tuple[int, int] | None  # [from, to) seconds relative to `start`
    b: tuple[int, int] | None
    c: tuple[int, int] | None
    matches: bool


def a_window(rel: str) -> tuple[int, int]:
    """A's interval relative to B = [10, 30)."""
    return {"meets": (4, 10), "overlaps": (7, 13), "starts": (10, 16),
            "during": (12, 18)}[rel]


def c_window(rel: str) -> tuple[int, int]:
    return {"during": (21, 25), "finished_by": (24, 30), "overlaps": (26, 34),
            "meets": (30, 35)}[rel]


def episodes() -> list[Episode]:
    """The 16 matching episodes (one per pair of alternatives), then the 8 near
    misses, as cars 1-24 starting at second 0."""
    out = []
    car = 1
    for ab in AB:
        for cb in CB:
            out.append(Episode(car, f"A {ab} B, " + (f"C {cb} B" if cb == "during" else
                                                      f"B {cb.replace('_', ' ')} C"),
                               0, a_window(ab), (10, 10 + B_LEN), c_window(cb), True))
            car += 1
    misses = [
        ("A lasts 4 s (< AT LEAST 5)", (6, 10), (10, 30), (21, 25)),
        ("B lasts 35 s (> 30)", (4, 10), (10, 45), (21, 25)),
        ("B lasts 3 s (< 4)", (4, 10), (10, 13), (13, 18)),
        ("C lasts 2 s (< AT LEAST 3)", (4, 10), (10, 30), (21, 23)),
        ("C before A (not A BEFORE C)", (12, 18), (10, 30), (2, 6)),
        ("A after B (no A-B alternative)", (31, 37), (10, 30), (40, 44)),
        ("C after B with a gap (no C-B alternative)", (4, 10), (10, 30), (32, 36)),
        ("A overlaps C: A does not end before C starts", (12, 22), (10, 30), (22, 26)),
    ]
    for what, a, b, c in misses:
        out.append(Episode(car, "near miss: " + what, 0, a, b, c, False))
        car += 1
    return out


def trace(ep: Episode, rnd: random.Random, length: int = EPISODE_S) -> list[dict[str, Any]]:
    """`length` seconds of readings from `ep.start`: inside A, B, C as they
    demand, calm elsewhere."""
    rows = []
    for s in range(length):
        speed = rnd.uniform(78.0, 92.0) if _inside(ep.b, s) else rnd.uniform(40.0, 65.0)
        if _inside(ep.a, s):
            accel = rnd.uniform(8.5, 10.0)
        elif _inside(ep.c, s):
            accel = rnd.uniform(-11.0, -9.5)
        else:
            accel = rnd.uniform(-3.0, 3.0)
        rows.append({"ts": ep.start + s, "car_id": ep.car, "speed": round(speed, 2),
                     "accel": round(accel, 2)})
    return rows


def _inside(w: tuple[int, int] | None, s: int) -> bool:
    return w is not None and w[0] <= s < w[1]


def fixed_set(seed: int = 7) -> tuple[list[Episode], list[dict[str, Any]]]:
    """`data/car_sensors.jsonl`: car i drives episode i from second 100 + 5 (i - 1);
    rows without a `type` (the model has one input type)."""
    rnd = random.Random(seed)
    eps = [replace(ep, start=100 + 5 * i) for i, ep in enumerate(episodes())]
    rows = [r for ep in eps for r in trace(ep, rnd)]
    rows.sort(key=lambda r: (r["ts"], r["car_id"]))
    return eps, rows


@dataclass(frozen=True)
class DrivingConfig:
    cars: int = 10
    minutes: float = 10.0
    seed: int = 1
    aggressive: float = 2 / 3  # share of cars driving matching episodes (the fixed set's 16/24)
    calm_s: tuple[int, int] = (0, 60)  # calm driving before each episode, seconds


def drive(cfg: DrivingConfig = DrivingConfig()) -> tuple[list[Episode], list[dict[str, Any]]]:
    """The episodes driven and every reading (`type` CarSensor), in time order
    (ties: by car). Cars are numbered 1..cars; time starts at 0."""
    rnd = random.Random(cfg.seed)
    end = int(cfg.minutes * 60)
    matching = [e for e in episodes() if e.matches]
    misses = [e for e in episodes() if not e.matches]
    eps: list[Episode] = []
    rows: list[dict[str, Any]] = []
    for car in range(1, cfg.cars + 1):
        pool = matching if rnd.random() < cfg.aggressive else misses
        t = 0
        while t < end:
            calm = min(rnd.randint(*cfg.calm_s), end - t)
            if t + calm + EPISODE_S > end:
                calm = end - t  # no room for another episode: calm to the end
            rows += trace(Episode(car, "calm", t, None, None, None, False), rnd, calm)
            t += calm
            if t < end:
                ep = replace(rnd.choice(pool), car=car, start=t)
                eps.append(ep)
                rows += trace(ep, rnd)
                t += EPISODE_S
    rows.sort(key=lambda r: (r["ts"], r["car_id"]))
    return eps, [{"type": EVENT_TYPE, **r} for r in rows]


def generate(cfg: DrivingConfig = DrivingConfig()) -> Iterator[dict[str, Any]]:
    """`drive(cfg)`'s readings."""
    yield from drive(cfg)[1]


def main(argv: list[str] | None = None) -> None:
    from caesar.examples.event_files import write_events

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cars", type=int, default=DrivingConfig.cars)
    ap.add_argument("--minutes", type=float, default=DrivingConfig.minutes)
    ap.add_argument("--seed", type=int, default=DrivingConfig.seed)
    ap.add_argument("--aggressive", type=float, default=DrivingConfig.aggressive,
                    help="share of cars whose episodes match (the others: near misses)")
    ap.add_argument("--out", required=True, help=".jsonl, .csv or .parquet")
    args = ap.parse_args(argv)
    eps, rows = drive(DrivingConfig(cars=args.cars, minutes=args.minutes, seed=args.seed,
                                    aggressive=args.aggressive))
    n = write_events(rows, args.out)
    hits = sum(e.matches for e in eps)
    print(f"{n} readings of {args.cars} cars -> {args.out}; {len(eps)} episodes: "
          f"{hits} matching Listing 1 (one alert each), {len(eps) - hits} near misses")


if __name__ == "__main__":
    main()
