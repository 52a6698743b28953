"""bench/acep keeps working: its query-rule pool compiles, and a tiny run of
each scheduler at both lock granularities matches the serial reference
(one_run checks that itself)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2]))  # bench/ is not an installed package

from bench.acep.run import one_run  # noqa: E402
from bench.acep.workload import Pool  # noqa: E402


def test_the_pool_has_the_asked_reads_and_writes() -> None:
    plan = Pool(read_n=3, write_n=0.5).plan()
    assert len(plan.actors) == 8 and len(plan.tables) == 8
    assert all(len(a.reads) == 0 and len(a.actions[0].reads) == 3 for a in plan.actors)
    assert sum(bool(a.write_tables) for a in plan.actors) == 4


@pytest.mark.parametrize("granularity", ["table", "tuple"])
@pytest.mark.parametrize("scheduler", ["sei", "s2pl", "lwm"])
def test_a_tiny_run(scheduler: str, granularity: str) -> None:
    row = one_run(Pool(read_n=2), 60, scheduler, 0.0,
                  granularity="tuple" if granularity == "tuple" else "table")
    assert row["events_per_s"] > 0 and row["latency_ms"] >= 0
