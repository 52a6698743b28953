"""Each of Allen's 13 relations is detected at the point of the paper's
Table 2 (written out here, not computed), and a constraint holding a whole
prefix group at the group's point; the Cython engine and the reference agree."""

from __future__ import annotations

import pytest

from caesar.events.batch import EventBatch, StringPool
from caesar.plans.expr import Attr, Binary, Const
from caesar.plans.temporal import PREFIX_GROUPS, SituationSpec, TemporalConstraint, TemporalPlan
from caesar.services.matcher.tpstream.engine import TemporalEngine
from caesar.services.matcher.tpstream.reference import TwoPhaseReference

# relation: (A interval, B interval, detection point per Table 2)
CASES = {
    "before": ((2, 5), (8, 12), "B.ts"),
    "meets": ((2, 5), (5, 12), "B.ts"),
    "overlaps": ((2, 8), (5, 12), "A.te"),
    "starts": ((2, 8), (2, 12), "A.te"),
    "during": ((4, 8), (2, 12), "A.te"),
    "finishes": ((4, 12), (2, 12), "A.te"),
    "equals": ((2, 12), (2, 12), "A.te"),
    "after": ((8, 12), (2, 5), "A.ts"),
    "met_by": ((5, 12), (2, 5), "A.ts"),
    "overlapped_by": ((5, 12), (2, 8), "B.te"),
    "started_by": ((2, 12), (2, 8), "B.te"),
    "contains": ((2, 12), (4, 8), "B.te"),
    "finished_by": ((2, 12), (4, 12), "A.te"),
}


def plan(relations: tuple[str, ...]) -> TemporalPlan:
    a = SituationSpec("A", "E", Binary("=", Attr("A", "a"), Const(1)))
    b = SituationSpec("B", "E", Binary("=", Attr("B", "b"), Const(1)))
    return TemporalPlan("p", (a, b), (TemporalConstraint("A", "B", relations),), within=100)


def stream(a: tuple[int, int], b: tuple[int, int]) -> EventBatch:
    recs = [{"type": "E", "ts": t, "a": int(a[0] <= t < a[1]), "b": int(b[0] <= t < b[1])}
            for t in range(20)]
    return EventBatch.from_records(recs, {"E": {"a": "int", "b": "int"}}, StringPool())


def detect(p: TemporalPlan, batch: EventBatch) -> list[tuple]:
    got = [(d.end_ts, d.fields["A_te"], d.fields["B_te"]) for d in TemporalEngine([p]).process(batch)]
    ref = TwoPhaseReference(p)
    ref.process(batch)
    assert got == [(d.end_ts, d.fields["A_te"], d.fields["B_te"]) for d in ref.matches()]
    return got


@pytest.mark.parametrize("relation", list(CASES))
def test_relation_detected_at_its_table_2_point(relation: str) -> None:
    (a, b, point) = CASES[relation]
    td = {"A.ts": a[0], "A.te": a[1], "B.ts": b[0], "B.te": b[1]}[point]
    got = detect(plan((relation,)), stream(a, b))
    assert [g[0] for g in got] == [td]
    # ends after the detection point are reported open
    assert got[0][1:] == (a[1] if a[1] <= td else None, b[1] if b[1] <= td else None)


@pytest.mark.parametrize("group", [sorted(g) for g in PREFIX_GROUPS], ids=lambda g: "+".join(g))
def test_a_whole_prefix_group_is_detected_at_the_second_endpoint(group: list[str]) -> None:
    for relation in group:
        a, b, _ = CASES[relation]
        got = detect(plan(tuple(group)), stream(a, b))
        assert [g[0] for g in got] == [max(a[0], b[0])], relation


def test_a_relation_that_does_not_hold_is_not_reported() -> None:
    for relation, (a, b, _) in CASES.items():
        for other in CASES:
            if other != relation:
                assert detect(plan((other,)), stream(a, b)) == [], (relation, other)
