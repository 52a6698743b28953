"""An engine restored from a snapshot and advanced before its next batch:
string values and constants are codes of the batches' StringPool, so
`restore(..., strings)` hands it over. Without it a restored engine compared
its string constants uninterned (a timed-out run taken for a complete match:
no timeout) until a batch brought the pool. Found by
test_features.test_cython_equals_reference_with_features[partition_contiguity]."""

from __future__ import annotations

import dataclasses

import pytest

from caesar.events.batch import StringPool
from caesar.plans.expr import Attr
from caesar.plans.pattern import Output, OutputField
from caesar.services.matcher.engine import CythonEngine
from caesar.services.matcher.reference import ReferenceEngine

from .tapes import cmp, comp, multiset, plan, tape


def _plan(strategy: str):
    # a run of A+ whose last event must have s = 'q' completes; one that
    # never does times out when the window passes
    p = plan("q", [comp("n", "A", neg=True), comp("b", "A", kleene=True)],
             where=[cmp("=", Attr("b", "s"), "q")], within=2, strategy=strategy,
             fields={"first": Attr("b", "x")})
    return dataclasses.replace(p, timeout=Output("q_to", (OutputField("x", Attr("b", "x")),
                                                          OutputField("s", Attr("b", "s")))))


ROWS = [("A", 0, {"x": i, "y": 0, "s": "p", "f": 0.5}) for i in range(3)]


@pytest.mark.parametrize("strategy", ["partition_contiguity", "skip_till_next_match"])
def test_a_restored_engine_times_out_before_its_next_batch(strategy):
    p = _plan(strategy)
    pool = StringPool()
    whole = CythonEngine([p])
    whole.process(tape(ROWS, pool), None)
    expected = whole.advance(10**9)
    assert expected and {d.fields["s"] for d in expected} == {"p"}  # the case at stake
    ref_pool = StringPool()
    ref = ReferenceEngine([p])
    ref.process(tape(ROWS, ref_pool), None)
    assert multiset(ref.advance(10**9)) == multiset(expected)

    pool = StringPool()
    first = CythonEngine([p])
    first.process(tape(ROWS, pool), None)
    moved = CythonEngine([p])
    moved.restore(0, first.snapshot(0), pool)
    assert multiset(moved.advance(10**9)) == multiset(expected)


def test_a_restored_engine_refuses_another_pool_while_holding_state():
    p = _plan("partition_contiguity")
    pool = StringPool()
    first = CythonEngine([p])
    first.process(tape(ROWS, pool), None)
    moved = CythonEngine([p])
    moved.restore(0, first.snapshot(0), pool)
    with pytest.raises(Exception, match="different StringPool"):
        moved.process(tape(ROWS, StringPool()), None)
