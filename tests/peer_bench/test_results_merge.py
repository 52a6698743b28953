"""`python -m bench.peers.run --merge`: a partial re-run replaces its own
workloads' rows of results/peers.csv and keeps every other row as it was."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.peers.run import FIELDS, load_rows, merge_rows  # noqa: E402


def _row(workload: str, engine: str, eps: float) -> dict:
    return {"workload": workload, "group": "g", "engine": engine, "events": 100, "queries": 1,
            "reps": 3, "median_eps": eps, "matches": 7, "same_matches": True,
            "difference": "", "description": "d"}


def test_reads_back_what_it_wrote_and_replaces_only_rerun_rows(tmp_path: Path) -> None:
    old = [_row("a", "caesar", 1.0), _row("a", "esper", 2.0), _row("b", "caesar", 3.0),
           {"workload": "b", "group": "g", "engine": "flink", "events": 100, "queries": 1,
            "reps": 0, "difference": "no form", "description": "d"}]
    path = tmp_path / "peers.csv"
    with path.open("w", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=FIELDS)
        wr.writeheader()
        wr.writerows(old)
    loaded = load_rows(path)
    assert loaded[0]["median_eps"] == 1.0 and loaded[0]["reps"] == 3
    assert loaded[0]["same_matches"] is True and "best_eps" not in loaded[0]
    assert loaded[3]["reps"] == 0 and loaded[3]["difference"] == "no form"
    new = [_row("b", "caesar", 30.0), _row("c", "caesar", 40.0)]
    merged = merge_rows(loaded, new, ["b", "c"])
    assert [(r["workload"], r["engine"], r.get("median_eps")) for r in merged] == [
        ("a", "caesar", 1.0), ("a", "esper", 2.0), ("b", "caesar", 30.0), ("c", "caesar", 40.0)]
