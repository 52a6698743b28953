"""Car sensor data for the aggressive-drivers example (Listing 1).

One reading per car per second. Each of the first 16 cars drives one episode
that matches Listing 1 through one pair of alternatives: A (acceleration >
8 m/s², at least 5 s) MEETS / OVERLAPS / STARTS / DURING B (speed > 70 mph,
4-30 s), and C (deceleration < -9 m/s², at least 3 s) DURING B, or B FINISHED
BY / OVERLAPS / MEETS C, with A BEFORE C. The other cars are near misses that
must not match (each says why). Cars drive at the same time, interleaved, so
the stream looks like one sensor feed.

    python -m caesar.examples.aggressive_driving.generate [--out FILE] [--seed N]
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).parent / "data" / "car_sensors.jsonl"
AB = ("meets", "overlaps", "starts", "during")
CB = ("during", "finished_by", "overlaps", "meets")  # C during B, B finished-by C, ...
B_LEN = 20  # seconds of speeding (inside 4-30)


@dataclass(frozen=True)
class Episode:
    car: int
    what: str  # "A meets B, C during B" or a near miss
    start: int  # first second of the car's trace
    a: tuple[int, int] | None  # [from, to) relative seconds
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


def trace(ep: Episode, rnd: random.Random, length: int = 60) -> list[dict]:
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


def generate(seed: int = 7) -> tuple[list[Episode], list[dict]]:
    rnd = random.Random(seed)
    eps = []
    for i, ep in enumerate(episodes()):
        eps.append(Episode(ep.car, ep.what, 100 + 5 * i, ep.a, ep.b, ep.c, ep.matches))
    rows = [r for ep in eps for r in trace(ep, rnd)]
    rows.sort(key=lambda r: (r["ts"], r["car_id"]))
    return eps, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DATA)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    eps, rows = generate(args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    print(f"wrote {len(rows)} readings of {len(eps)} cars to {args.out}")
    for ep in eps:
        print(f"  car {ep.car:2d}: {ep.what}")


if __name__ == "__main__":
    main()
