"""State stays bounded on a long stream with a finite window: stacks, runs
and pending end-negation results are pruned by the window (and emptied
partitions dropped), so stored rows do not grow with the stream length."""

from __future__ import annotations

import sys
from pathlib import Path

from caesar.services.matcher.engine import CythonEngine

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.matcher.workload import batches, seq_query  # noqa: E402


def _sizes(n_events: int, plans) -> list[int]:
    engine = CythonEngine(plans)
    sizes = []
    for batch in batches(n_events, domains=(50, 10, 10, 10, 10), batch_size=5_000, seed=3):
        engine.process(batch)
        engine.advance(int(max(c.ts.max() for c in batch.by_type.values())))
        sizes.append(engine.state_size())
    return sizes


def test_state_is_flat_on_a_long_stream():
    plans = [
        seq_query("any", [1, 2, 3], within=2_000),
        seq_query("neg", [1, 4, 2], within=2_000, negated=(1,)),
        seq_query("end", [5, 6, 7], within=1_000, negated=(2,)),
        seq_query("start", [8, 9, 10], within=1_000, negated=(0,)),
        seq_query("nonkey", [11, 12], within=500, equivalence=()),
    ]
    plans.append(plans[0].__class__(**{**plans[0].__dict__, "plan_id": "next",
                                       "strategy": "skip_till_next_match"}))
    plans.append(plans[0].__class__(**{**plans[0].__dict__, "plan_id": "strict",
                                       "strategy": "strict_contiguity"}))
    sizes = _sizes(150_000, plans)
    warm = max(sizes[3:12])
    late = max(sizes[-10:])
    assert warm > 0
    assert late <= warm * 1.3, (warm, late)
