"""The generator's load against the standard Linear Road load (issue 13).

    python -m bench.linear_road.load_curve [--standard L1.dat] [--seed 1]

Counts, per simulated minute of a 3-hour run of one expressway, the position
reports, Type 2 and Type 3 queries, re-entrant trips and accidents of
`src/caesar/examples/linear_road/generator.py` (scale 1) and of a data file of
the public generator (walmartlabs/LinearGenerator, the one the public LR
validator is paired with), with one counting code for both. Without
`--standard` the public file's counts are read from
`results/standard_load.csv` (written by an earlier run with `--standard`:
the public data is not in this repository; a user makes it with that
generator). Writes `results/load_curve.csv` (per minute), `results/load_summary.csv`
(totals) and `results/load_curve.png`.

Accidents are counted with SPEC.md section 4 (two cars stopped at one
position, the first accident of its segment); re-entrant trips with section 2
(a lane-0 report more than 60 s after the car's previous one).
"""

from __future__ import annotations

import argparse
import csv
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from caesar.examples.linear_road.generator import STANDARD_DURATION_S, GeneratorConfig, generate
from caesar.examples.linear_road.records import (
    ENTRANCE_LANE,
    SEGMENT_FEET,
    BalanceQuery,
    LrRecord,
    PositionReport,
    read_lr,
)

RESULTS = Path(__file__).parent / "results"
MINUTES = STANDARD_DURATION_S // 60
STOPPED_REPORTS = 4
NEW_TRIP_GAP_S = 60
KINDS = ("reports", "type2", "type3", "reentries", "accidents")


@dataclass
class LoadStats:
    """Per-minute counts of one LR run (minute = time // 60, 0-based)."""

    per_minute: dict[str, Counter[int]] = field(
        default_factory=lambda: {k: Counter() for k in KINDS})
    _last: dict[int, tuple[int, int, int, int, int, int]] = field(default_factory=dict)
    _stopped: dict[tuple[int, int, int, int], set[int]] = field(default_factory=dict)
    _accident_segs: set[tuple[int, int, int]] = field(default_factory=set)

    def add(self, records: Iterable[LrRecord]) -> LoadStats:
        for r in records:
            minute = r.time // 60
            if isinstance(r, PositionReport):
                self.per_minute["reports"][minute] += 1
                self._report(r, minute)
            elif isinstance(r, BalanceQuery):
                self.per_minute["type2"][minute] += 1
            else:
                self.per_minute["type3"][minute] += 1
        return self

    def _report(self, r: PositionReport, minute: int) -> None:
        """Trips and stopped cars per car (one road per car at a time, as in
        both generators)."""
        prev = self._last.get(r.vid)
        here = (r.xway, r.dir, r.lane, r.pos)
        count = 1
        if prev is not None:
            t, xway, direction, lane, pos, n = prev
            if r.lane == ENTRANCE_LANE and r.time - t > NEW_TRIP_GAP_S:
                self.per_minute["reentries"][minute] += 1
            elif (xway, direction, lane, pos) == here:
                count = n + 1
            if (xway, direction, lane, pos) != here or count == 1:
                self._stopped.get((xway, direction, lane, pos), set()).discard(r.vid)
        self._last[r.vid] = (r.time, r.xway, r.dir, r.lane, r.pos, count)
        if count == STOPPED_REPORTS:
            cars = self._stopped.setdefault(here, set())
            cars.add(r.vid)
            seg = (r.xway, r.dir, r.pos // SEGMENT_FEET)
            if len(cars) == 2 and seg not in self._accident_segs:
                self._accident_segs.add(seg)
                self.per_minute["accidents"][minute] += 1

    def totals(self) -> dict[str, int]:
        return {k: sum(c.values()) for k, c in self.per_minute.items()}


def read_standard_csv(path: Path) -> LoadStats:
    stats = LoadStats()
    with path.open() as f:
        for row in csv.DictReader(f):
            for k in KINDS:
                stats.per_minute[k][int(row["minute"])] = int(row[k])
    return stats


def write_standard_csv(stats: LoadStats, path: Path) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["minute", *KINDS])
        for m in range(MINUTES):
            w.writerow([m, *(stats.per_minute[k][m] for k in KINDS)])


def compare(standard: LoadStats, ours: LoadStats, out: Path, label: str) -> float:
    """Write the per-minute table, totals and figure; the largest relative
    difference of reports per minute (over minutes with standard reports)."""
    std, gen = standard.per_minute["reports"], ours.per_minute["reports"]
    worst = 0.0
    with (out / "load_curve.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["minute", "standard_reports_per_s", "generated_reports_per_s", "ratio"])
        for m in range(MINUTES):
            ratio = gen[m] / std[m] if std[m] else float("nan")
            if std[m]:
                worst = max(worst, abs(ratio - 1))
            w.writerow([m, round(std[m] / 60, 1), round(gen[m] / 60, 1), round(ratio, 4)])
    st, ot = standard.totals(), ours.totals()
    with (out / "load_summary.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["count", "standard", "generated", "ratio"])
        for k in KINDS:
            w.writerow([k, st[k], ot[k], round(ot[k] / st[k], 4) if st[k] else ""])
        w.writerow(["max |ratio - 1| of reports per minute", "", "", round(worst, 4)])
    _plot(std, gen, out / "load_curve.png", label, worst)
    return worst


def _plot(std: Counter[int], gen: Counter[int], path: Path, label: str, worst: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = list(range(MINUTES))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 1]})
    top.plot(minutes, [std[m] / 60 for m in minutes], label="public generator (standard)")
    top.plot(minutes, [gen[m] / 60 for m in minutes], label=label, linestyle="--")
    top.set_ylabel("position reports / s (1 expressway)")
    top.set_title("Linear Road load over 3 hours")
    top.legend()
    bottom.plot(minutes, [gen[m] / std[m] if std[m] else float("nan") for m in minutes])
    bottom.axhspan(0.9, 1.1, alpha=0.15, color="green", label="+-10 %")
    bottom.set_ylim(0.8, 1.2)
    bottom.set_ylabel("ratio")
    bottom.set_xlabel(f"minute (max |ratio - 1| = {worst:.3f})")
    bottom.legend(loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--standard", type=Path, help="a 1-expressway 3-hour file of the public "
                    "generator (default: its counts in results/standard_load.csv)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    reference = args.out / "standard_load.csv"
    if args.standard:
        print(f"counting {args.standard} ...", flush=True)
        bad: list = []
        standard = LoadStats().add(read_lr(args.standard, bad))
        write_standard_csv(standard, reference)
        print(f"  {len(bad)} unusable lines; counts written to {reference}")
    else:
        standard = read_standard_csv(reference)
    print(f"generating 3 h of 1 expressway, seed {args.seed} ...", flush=True)
    ours = LoadStats().add(generate(GeneratorConfig(seed=args.seed)))
    worst = compare(standard, ours, args.out, f"CAESAR generator (seed {args.seed})")
    st, ot = standard.totals(), ours.totals()
    for k in KINDS:
        print(f"{k:>10}: standard {st[k]:>11,}  generated {ot[k]:>11,}  "
              f"ratio {ot[k] / st[k] if st[k] else float('nan'):.3f}")
    print(f"reports per minute: max |generated / standard - 1| = {worst:.3f}")


if __name__ == "__main__":
    main()
