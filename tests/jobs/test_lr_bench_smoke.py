"""Smoke test of the bench/linear_road code path at a tiny size (the
benchmark itself is not part of the suite): both modes agree, the virtual
clock queues batches, and the L-rating table is built."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2]))  # bench/ is not an installed package

from bench.linear_road.replay import make_workload  # noqa: E402
from bench.linear_road.run import l_ratings, run_pair  # noqa: E402
from caesar.examples.linear_road.generator import GeneratorConfig  # noqa: E402


def test_bench_code_path_on_a_tiny_run() -> None:
    wl = make_workload(GeneratorConfig(xways=1, duration_s=90, scale=0.006, seed=2))
    pair = run_pair(wl, 2, "filter")  # raises when the modes differ
    ca, ci = pair["CA"], pair["CI"]
    assert ca.events == ci.events == wl.events > 0
    assert ci.skipped_events == 0
    # Slower pace can only lower the queueing part of latency.
    assert ca.max_latency(100.0, "cpu") >= ca.max_latency(1.0, "cpu") - 1e-9 >= -1e-9
    assert len(ca.batch_ts) == len(wl.seconds) + 1
    rows = l_ratings({1: pair}, [1.0])
    assert {r["clock"] for r in rows} == {"cpu", "wall"}
