"""The columnar `ts` (partitioning.ms_timestamps, used by benches that build
input columns with numpy) equals the one `wire_records` gives each copy."""

from __future__ import annotations

import numpy as np
import pytest

from caesar.examples.linear_road.generator import GeneratorConfig, generate
from caesar.examples.linear_road.partitioning import copies, ms_timestamps, wire_records
from caesar.examples.linear_road.records import PositionReport


@pytest.mark.parametrize("fanout", [False, True])
def test_ms_timestamps_equal_the_wire_records(fanout: bool) -> None:
    reports = [r for r in generate(GeneratorConfig(duration_s=300, seed=3, scale=0.3))
               if isinstance(r, PositionReport)]
    in_order = [rec for r in reports for _, rec in copies(r, fanout)]

    def col(name: str) -> np.ndarray:
        return np.array([c[name] for c in in_order])

    ts = ms_timestamps(col("time"), [col("xway"), col("dir"), col("pseg")], col("pos"))
    want = sorted((c["vid"], c["pseg"], t) for c, t in zip(in_order, ts.tolist(), strict=True))
    got = sorted((c["vid"], c["pseg"], c["ts"]) for _, c in wire_records(reports, fanout))
    assert want == got
    assert len(set(ts.tolist())) < len(ts)  # reports at different positions share one
