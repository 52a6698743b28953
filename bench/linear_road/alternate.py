"""A B A B runs of one benchmark's policies, each run in a fresh process
(`python -m <module> --one <policy>` prints its row as JSON): the driver
collector_cost.py and sweep_slices.py share."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def parser(doc: str, policies: Sequence[str], window: Sequence[int],
           out: Path) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--data", help="LR data file (default: $CAESAR_LR_DATA)")
    ap.add_argument("--window", type=int, nargs=2, default=list(window), metavar=("START", "END"))
    ap.add_argument("--history", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--label", default="")
    ap.add_argument("--out", type=Path, default=out)
    ap.add_argument("--one", choices=policies, help=argparse.SUPPRESS)  # a child run
    return ap


def run(module: str, args: argparse.Namespace, policies: Sequence[str],
        csv: Path) -> list[dict[str, Any]]:
    """args.rounds rounds of every policy in turn; each row printed and
    appended to `csv` as it comes."""
    from bench.linear_road.throughput import append_row, commit

    start, end = args.window
    rows: list[dict[str, Any]] = []
    for r in range(args.rounds):
        for policy in policies:
            cmd = [sys.executable, "-m", module, "--one", policy,
                   "--window", str(start), str(end), "--history", str(args.history)]
            if args.data:
                cmd += ["--data", args.data]
            done = subprocess.run(cmd, capture_output=True, text=True, check=False,
                                  cwd=Path(__file__).parents[2])
            if done.returncode:
                sys.exit(f"{policy} run failed:\n{done.stderr[-3000:]}")
            row = {"label": args.label, "commit": commit(),
                   "when": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
                   "window": f"{start}-{end}", "history_s": args.history, "round": r + 1,
                   **json.loads(done.stdout.strip().splitlines()[-1])}
            print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
            csv.parent.mkdir(parents=True, exist_ok=True)
            append_row(csv, row)
            rows.append(row)
    return rows
