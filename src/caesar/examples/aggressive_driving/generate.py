"""Rewrite the example's data file, `data/car_sensors.jsonl` (README.md): 24
cars, one episode each (cars 1-16 match Listing 1 through one pair of
alternatives each, 17-24 are near misses). The episodes and traces are
generator.py's, which also makes data sets of any size.

    python -m caesar.examples.aggressive_driving.generate [--out FILE] [--seed N]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from caesar.examples.aggressive_driving.generator import DATA, fixed_set

__all__ = ["DATA", "main"]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DATA)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    eps, rows = fixed_set(args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    print(f"wrote {len(rows)} readings of {len(eps)} cars to {args.out}")
    for ep in eps:
        print(f"  car {ep.car:2d}: {ep.what}")


if __name__ == "__main__":
    main()
