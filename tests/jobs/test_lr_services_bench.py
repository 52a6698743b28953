"""bench/linear_road/services.py without a broker: its result files (CSV, hop
table, plot) and --append keeping the levels of an earlier run. The replay
itself needs Kafka + Ray and is the benchmark, not part of the suite."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2]))  # bench/ is not an installed package

from bench.linear_road.services import _earlier, write_results  # noqa: E402


def row(xways: int, worst: float) -> dict:
    return {"xways": xways, "pace": 1.0, "duration_s": 300, "outputs": 10, "expected": 10,
            "differences": 0, "dead_letters": 0, "topic_p50_s": 0.3, "topic_p99_s": 0.5,
            "topic_max_s": worst, "hops_ms": {"router": {"mean": 1.0, "p50": 1.0, "p99": 2.0,
                                                          "max": 3.0}}}


def test_results_round_trip_and_append(tmp_path: Path) -> None:
    write_results([row(1, 0.8), row(2, 1.4)], tmp_path, "")
    assert (tmp_path / "services_l_rating.png").stat().st_size > 0
    earlier = _earlier(tmp_path, "", levels=[2, 4])  # level 2 is measured again
    assert [r["xways"] for r in earlier] == [1]
    assert earlier[0]["topic_max_s"] == 0.8 and earlier[0]["hops_ms"]["router"]["max"] == 3.0
