"""TPStream errors: bad situations and patterns name line and column."""

from __future__ import annotations

import pytest

from caesar.errors import ModelError
from caesar.language import compile_model, errors

HEAD = """MODEL m
TIME UNIT SECONDS
PARTITION BY car
EVENT Car(ts INT, car INT, speed FLOAT, accel FLOAT, lane STRING) FROM TOPIC "c"
EVENT Light(ts INT, car INT, red BOOL) FROM TOPIC "l"
"""
# HEAD has 5 lines: the model body starts on line 6.

Q = "DERIVE X(count(A) AS n)\n  DEFINE A AS Car.speed > 70, B AS Car.accel > 3\n  PATTERN {}\n  WITHIN 1 MINUTE"

CASES = [
    # (id, body, error class, line, column, words in the message)
    ("unknown-situation", Q.format("A BEFORE C"), errors.UnknownNameError, 8, 20,
     ["unknown situation C", "expected A, B"]),
    ("unknown-left", Q.format("Z MEETS B"), errors.UnknownNameError, 8, 11,
     ["unknown situation Z"]),
    ("self-related", Q.format("A BEFORE A"), errors.PatternError, 8, 11,
     ["related to itself"]),
    ("contradictory", Q.format("A BEFORE B AND B BEFORE A"), errors.PatternError, 8, 26,
     ["contradictory relations", "A BEFORE B AND B BEFORE A"]),
    ("contradictory-chain",
     "DERIVE X(count(A) AS n) DEFINE A AS Car.speed > 1, B AS Car.speed > 2, "
     "C AS Car.speed > 3\n PATTERN A BEFORE B AND B BEFORE C AND C DURING A WITHIN 9",
     errors.PatternError, 7, 40, ["contradictory relations"]),
    ("never-related",
     "DERIVE X(count(A) AS n) DEFINE A AS Car.speed > 1, B AS Car.speed > 2,\n"
     "  C AS Car.accel < 0\n PATTERN A BEFORE B WITHIN 9", errors.PatternError, 7, 3,
     ["situation C is never related"]),
    ("unconnected",
     "DERIVE X(count(A) AS n) DEFINE A AS Car.speed > 1, B AS Car.speed > 2,\n"
     "  C AS Car.accel < 0, D AS Car.accel < 1\n PATTERN A BEFORE B AND C MEETS D WITHIN 9",
     errors.PatternError, 8, 2, ["A, B and C, D are not related"]),
    ("mixed-alternatives",
     "DERIVE X(count(A) AS n) DEFINE A AS Car.speed > 1, B AS Car.speed > 2,\n"
     "  C AS Car.accel < 0\n PATTERN A BEFORE B; B MEETS C WITHIN 9", errors.PatternError, 8, 22,
     ["must relate the same two situations"]),
    ("needs-within",
     "DERIVE X(count(A) AS n) DEFINE A AS Car.speed > 1, B AS Car.speed > 2 PATTERN A MEETS B",
     errors.PatternError, 6, 71, ["needs WITHIN"]),
    ("aggregate-in-condition",
     "DERIVE X(count(A) AS n) DEFINE A AS avg(Car.speed) > 1 PATTERN A",
     errors.PatternError, 6, 37, ["cannot read aggregates"]),
    ("two-types",
     "DERIVE X(count(A) AS n) DEFINE A AS Car.speed > 1 AND Light.red PATTERN A",
     errors.PatternError, 6, 55, ["reads two event types"]),
    ("unknown-alias",
     "DERIVE X(count(A) AS n) FROM Car c DEFINE A AS d.speed > 1 PATTERN A",
     errors.UnknownNameError, 6, 48, ["unknown event type or FROM alias d", "expected Car"]),
    ("bare-attr-two-sources",
     "DERIVE X(count(A) AS n) FROM Car c, Light l DEFINE A AS speed > 1 PATTERN A",
     errors.UnknownNameError, 6, 57, ["attribute speed of which event"]),
    ("empty-duration",
     "DERIVE X(count(A) AS n) DEFINE A AS Car.speed > 1 BETWEEN 9 SECONDS AND 3 SECONDS "
     "PATTERN A", errors.WindowError, 6, 59, ["can never last between 9 and 3"]),
    ("zero-duration",
     "DERIVE X(count(A) AS n) DEFINE A AS Car.speed > 1 AT LEAST 0 SECONDS PATTERN A",
     errors.WindowError, 6, 60, ["AT LEAST must be positive"]),
    ("bare-situation-output",
     "DERIVE X(A.speed) DEFINE A AS Car.speed > 1 PATTERN A", errors.PatternError, 6, 10,
     ["spans many events", "through an aggregate"]),
    ("agg-two-situations",
     "DERIVE X(max(A.speed + B.speed) AS m) DEFINE A AS Car.speed > 1, B AS Car.accel > 1 "
     "PATTERN A MEETS B WITHIN 9", errors.PatternError, 6, 10,
     ["must aggregate over one situation"]),
    ("interval-field-clash",
     "DERIVE X(count(A) AS A_ts) DEFINE A AS Car.speed > 1 PATTERN A", errors.DuplicateNameError,
     6, 1, ["interval of situation A"]),
    ("unknown-model-situation",
     "DEFAULT CONTEXT c {}\nCONTEXT d {}\nINITIATE CONTEXT d ON START OF Fast",
     errors.UnknownNameError, 8, 32, ["unknown situation Fast"]),
    ("define-unknown-model-situation",
     "DERIVE X(count(A) AS n) DEFINE Fast, A AS Car.speed > 1 PATTERN A MEETS Fast WITHIN 9",
     errors.UnknownNameError, 6, 32, ["unknown situation Fast", "a SITUATION declared"]),
    ("duplicate-situation",
     "SITUATION S AS Car.speed > 1\nSITUATION S AS Car.speed > 2", errors.DuplicateNameError,
     7, 11, ["situation S is declared twice"]),
    ("condition-not-bool",
     "DERIVE X(count(A) AS n) DEFINE A AS Car.speed + 1 PATTERN A", errors.ModelTypeError, 6, 47,
     ["a condition must be true or false"]),
    ("relation-syntax", Q.format("A NEAR B"), errors.ModelSyntaxError, 8, 13,
     ["found 'NEAR'", "BEFORE"]),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_error(case) -> None:
    _id, body, cls, line, column, words = case
    with pytest.raises(cls) as info:
        compile_model(HEAD + body, "model.caesar")
    err = info.value
    assert isinstance(err, ModelError)
    text = str(err)
    for w in words:
        assert w in text, f"{w!r} not in {text!r}"
    assert err.position is not None
    assert (err.position.line, err.position.column) == (line, column), text


def test_paper_finishes_is_written_finished_by() -> None:
    """The paper's `B finishes C` (A.ts < B.ts < A.te = B.te in its Table 1) is
    Allen's finished-by: CAESAR's B FINISHED BY C is C FINISHES B."""
    from caesar.plans.temporal import TemporalPlan

    def relations(pattern: str) -> set[tuple[str, str, str]]:
        plan = compile_model(HEAD + Q.format(pattern))
        tp = next(s.plan for s in plan.matcher_stages if isinstance(s.plan, TemporalPlan))
        return {(c.left, r, c.right) for c in tp.constraints for r in c.relations}

    assert relations("A FINISHED BY B") == {("A", "finished_by", "B")}
    assert relations("B FINISHES A") == {("B", "finishes", "A")}
    # the same constraint either way round: normalised to the first alternative's direction
    assert relations("A FINISHED BY B; B FINISHES A") == {("A", "finished_by", "B")}
