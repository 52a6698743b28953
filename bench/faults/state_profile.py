"""Where a service's state goes: the embedded pipeline (the processors the
services run) on the soak's input, the deriver's and matcher's snapshots
(what their checkpoints hold) measured per query every `--every` simulated
seconds, compressed as the state store writes them.

    .venv/bin/python -m bench.faults.state_profile [--minutes 30] [--segments 86:87]

Prints one line per step: each processor's total, its largest queries and
the ones named by `--show` (default TollCharge).
"""

from __future__ import annotations

import argparse
import zlib
from itertools import groupby
from typing import Any

from bench.faults.soak import PLATEAU_S
from caesar.examples import model_path
from caesar.examples.linear_road.generator import GeneratorConfig, generate
from caesar.examples.linear_road.partitioning import wire_records
from caesar.examples.linear_road.records import position_reports
from caesar.language import compile_model
from caesar.services.common.messages import InputRecord
from caesar.services.embedded.pipeline import EmbeddedPipeline
from caesar.services.store.state_format import pack


def size(value: Any) -> int:
    """Bytes as the state store writes them (msgpack, zlib level 1)."""
    return len(zlib.compress(pack(value), 1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30.0, help="simulated minutes")
    ap.add_argument("--segments", default="86:87")
    ap.add_argument("--start", type=int, default=PLATEAU_S)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--every", type=int, default=120, help="simulated seconds between lines")
    ap.add_argument("--top", type=int, default=4, help="queries shown per processor")
    ap.add_argument("--show", default="TollCharge",
                    help="comma-separated queries shown whatever their size")
    args = ap.parse_args(argv)
    lo, hi = (int(v) for v in args.segments.split(":"))
    duration = int(args.minutes * 60)
    config = GeneratorConfig(xways=1, duration_s=args.start + duration, seed=args.seed,
                             segments=(lo, hi))
    reports = (r for r in position_reports(generate(config)) if r.time >= args.start)
    pipe = EmbeddedPipeline(compile_model(model_path("linear_road")))
    offset = 0
    for t, group in groupby(wire_records(reports, fanout=True), key=lambda p: p[1]["time"]):
        batch = []
        for _, rec in group:
            batch.append(InputRecord("input", 0, offset, {"type": "PositionReport", **rec}))
            offset += 1
        pipe.feed(batch)
        if (t - args.start + 1) % args.every:
            continue
        line = [f"{t - args.start + 1:5d} s"]
        for name, proc in (("deriver", pipe.deriver), ("matcher", pipe.matcher)):
            snap = proc.snapshot()
            queries = snap["graph"]["queries"]
            ranked = sorted(((size(q["state"]), ident) for ident, q in queries.items()),
                            reverse=True)
            shown = set(args.show.split(","))
            top = ranked[:args.top] + [r for r in ranked[args.top:]
                                       if r[1].rsplit("-", 1)[0] in shown]
            line.append(f"{name} {size(snap) / 1024:,.0f} KiB (" +
                        ", ".join(f"{ident.rsplit('-', 1)[0]} {n / 1024:,.0f}" for n, ident in top)
                        + ")")
        print("  ".join(line), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
