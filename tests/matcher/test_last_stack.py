"""The last positive component's row lives only while the matches it ends
are made, so skip-till-any-match plans keep one Stack for it per plan, shared
by every Part (engine._mark_fast_paths): it must be empty between calls and
never used where the row has to stay. That the matches stay the same is the
reference property tests' job (test_equivalence, test_prefix_sharing)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from caesar.services.matcher.engine import CythonEngine

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.matcher.workload import batches, seq_query  # noqa: E402


def _parts(engine: CythonEngine, plan_id: str):
    for p, keyed in engine._keyed_parts(0).get(plan_id, []):
        yield from ((p, part) for part in keyed.values())


def test_one_last_stack_per_plan_empty_between_calls():
    plans = [seq_query("any", [1, 2, 3], within=2_000),
             seq_query("neg", [1, 4, 2], within=2_000, negated=(1,))]
    engine = CythonEngine(plans)
    matches = 0
    for batch in batches(20_000, domains=(50, 10, 10, 10, 10), batch_size=2_000, seed=5):
        matches += len(engine.process(batch))
        for pid in ("any", "neg"):
            parts = list(_parts(engine, pid))
            assert parts
            for p, part in parts:
                assert part.stacks[-1] is p.last_stack  # both end with a positive one
                assert len(p.last_stack) == 0
    assert matches > 0


def test_no_shared_last_stack_where_the_row_stays():
    base = seq_query("any", [1, 2, 3], within=2_000)
    plans = [dataclasses.replace(base, plan_id="next", strategy="skip_till_next_match"),
             seq_query("end", [5, 6, 7], within=1_000, negated=(2,))]
    engine = CythonEngine(plans)
    for batch in batches(5_000, domains=(50, 10, 10, 10, 10), batch_size=1_000, seed=5):
        engine.process(batch)
    for pid in ("next", "end"):
        for p, _part in _parts(engine, pid):
            assert p.last_stack is None
