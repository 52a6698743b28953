"""Synthetic car telemetry for the aggressive driving model (model.caesar
here): every car reports speed (m/s), acceleration (m/s²) and lane twice a
second; now and then a driver accelerates hard several times in a row, weaves
between lanes and speeds, then calms down for a while. Time is in
milliseconds.

    python -m caesar.examples.aggressive_driving.generator --cars 10 --minutes 10 --out ad.parquet
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DrivingConfig:
    cars: int = 10
    minutes: float = 10.0
    period_ms: int = 500
    lanes: int = 4
    seed: int = 1
    burst_chance: float = 0.01  # per reading while calm: start a hard-acceleration burst


def _car(car: int, cfg: DrivingConfig, rnd: random.Random) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    t = rnd.randrange(cfg.period_ms)  # cars do not report in lockstep
    end = int(cfg.minutes * 60_000)
    speed, lane = rnd.uniform(22.0, 30.0), rnd.randrange(cfg.lanes)
    burst = weave = 0
    while t < end:
        if burst == 0 and weave == 0 and rnd.random() < cfg.burst_chance:
            burst, weave = rnd.randint(3, 6), rnd.randint(10, 40)
        if burst > 0:
            accel = rnd.uniform(3.2, 5.0)
            burst -= 1
        elif weave > 0:
            accel = rnd.uniform(-2.5, 2.5)
            if rnd.random() < 0.35:
                lane = max(0, min(cfg.lanes - 1, lane + rnd.choice((-1, 1))))
            weave -= 1
        else:
            accel = rnd.uniform(-0.9, 0.9)
        speed = max(5.0, min(45.0, speed + accel * cfg.period_ms / 1000))
        if burst == 0 and weave == 0 and speed > 31.0:
            speed -= 0.8  # back to the limit when calm
        out.append({"type": "Telemetry", "ts": t, "car": car, "speed": round(speed, 2),
                    "accel": round(accel, 2), "lane": lane})
        t += cfg.period_ms
    return out


def generate(cfg: DrivingConfig = DrivingConfig()) -> Iterator[dict[str, Any]]:
    """Every car's readings, merged in time order (ties: by car)."""
    rnd = random.Random(cfg.seed)
    events = [e for c in range(cfg.cars) for e in _car(c, cfg, rnd)]
    events.sort(key=lambda e: (e["ts"], e["car"]))
    yield from events


def main(argv: list[str] | None = None) -> None:
    from caesar.examples.event_files import write_events

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cars", type=int, default=DrivingConfig.cars)
    ap.add_argument("--minutes", type=float, default=DrivingConfig.minutes)
    ap.add_argument("--seed", type=int, default=DrivingConfig.seed)
    ap.add_argument("--out", required=True, help=".jsonl, .csv or .parquet")
    args = ap.parse_args(argv)
    n = write_events(generate(DrivingConfig(cars=args.cars, minutes=args.minutes,
                                            seed=args.seed)), args.out)
    print(f"{n} events -> {args.out}")


if __name__ == "__main__":
    main()
