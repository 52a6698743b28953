"""Errors that name the problem for the pattern features of issue 16 (and
for the spellings users bring from other engines): message, position."""

from __future__ import annotations

import pytest

from caesar.language import errors

from .test_errors import assert_model_error

HEAD = """MODEL m
TIME UNIT SECONDS
PARTITION BY seg
EVENT R(ts INT, vid INT, seg INT, spd INT, lane STRING) FROM TOPIC "r"
EVENT S(ts INT, vid INT, seg INT) FROM TOPIC "s"
"""
X = 'EVENT X(ts INT, seg INT) FROM TOPIC "x"\n'

CASES = [
    ("strategy-hyphens", "DERIVE A(r.vid) PATTERN R r STRATEGY skip-till-any-match",
     errors.PatternError, 6, 38, ["written with underscores", "expected skip_till_any_match"]),
    ("model-strategy-hyphens", "STRATEGY skip-till-next-match\nDERIVE A(r.vid) PATTERN R r",
     errors.PatternError, 6, 10, ["expected skip_till_next_match"]),
    ("strategy-misspelt", "DERIVE A(r.vid) PATTERN R r STRATEGY skip_til_next_match",
     errors.PatternError, 6, 38, ["unknown event selection strategy", "expected skip_till_next_match"]),
    ("not-seq", "DERIVE A(r.vid) PATTERN SEQ(R r, NOT SEQ(S a, S b), R q) WITHIN 5",
     errors.PatternError, 6, 34, ["NOT applies to one event type, not to SEQ(...)",
                                  "negate the derived type"]),
    ("not-or", "DERIVE A(r.vid) PATTERN SEQ(R r, NOT OR(S a, R b), R q) WITHIN 5",
     errors.PatternError, 6, 34, ["not to OR(...)", "NOT ANY(T1, T2) v"]),
    ("optional-first", "DERIVE A(r.vid) PATTERN SEQ(R? r, S s)", errors.PatternError, 6, 29,
     ["optional component cannot start or end a pattern", "found R?"]),
    ("optional-last", "DERIVE A(s.vid) PATTERN SEQ(S s, R* r)", errors.PatternError, 6, 34,
     ["found R*"]),
    ("bounds", "DERIVE A(r.vid) PATTERN SEQ(R r, S{3,2} s, R q)", errors.PatternError, 6, 34,
     ["maximum is below its minimum", "found {3,2}"]),
    ("not-inside-or", "DERIVE A(r.vid) PATTERN SEQ(R r, OR(NOT S s, R x), R q) WITHIN 5",
     errors.PatternError, 6, 37, ["NOT inside AND(...) or OR(...)"]),
    ("and-too-many", "DERIVE A(r.vid) PATTERN SEQ(R r, AND(S a, S b, S c, S d, S e), R q)",
     errors.PatternError, 6, 34, ["more than 64 alternative orders"]),
    ("skip-any-match", "DERIVE A(r.vid) PATTERN SEQ(R r, S s) AFTER MATCH SKIP PAST LAST EVENT",
     errors.PatternError, 6, 39, ["needs a run-based strategy",
                                  "expected STRATEGY skip_till_next_match"]),
    ("skip-unknown-var", "DERIVE A(r.vid) PATTERN SEQ(R r, S s) STRATEGY skip_till_next_match "
     "AFTER MATCH SKIP TO LAST x", errors.UnknownNameError, 6, 69,
     ["not a positive pattern variable", "expected r, s"]),
    ("skip-with-or", "DERIVE A(r.vid) PATTERN SEQ(R r, OR(S s, R x)) "
     "STRATEGY skip_till_next_match AFTER MATCH SKIP PAST LAST EVENT", errors.PatternError,
     6, 78, ["cannot be combined with AND(...)/OR(...)"]),
    ("timeout-no-within", "DERIVE A(r.vid) PATTERN SEQ(R r, S s) STRATEGY skip_till_next_match "
     "ON TIMEOUT DERIVE T(r.vid)", errors.PatternError, 6, 69, ["ON TIMEOUT needs WITHIN"]),
    ("timeout-consumed", "DERIVE A(r.vid) PATTERN SEQ(R r, S s) WITHIN 5 "
     "STRATEGY skip_till_next_match ON TIMEOUT DERIVE T(r.vid)\nDERIVE B(t.vid) PATTERN T t",
     errors.ModelStructureError, 7, 25, ["ON TIMEOUT event of query q1", "feed no other query"]),
    ("equivalence-negated-lacks", X + "DERIVE A(r.vid) PATTERN SEQ(R r, NOT X x, R q) "
     "WHERE [vid] WITHIN 5", errors.UnknownNameError, 7, 54,
     ["the negated X has no attribute vid", "expected [vid] EXCEPT NOT"]),
    ("equivalence-mixed", X + "DERIVE A(r.vid) PATTERN SEQ(R r, NOT X x, R q) "
     "WHERE [seg] AND [vid] EXCEPT NOT WITHIN 5", errors.PatternError, 7, 64,
     ["either all compare the negated events or none does"]),
    ("skip-partition-contiguity", "DERIVE A(r.vid) PATTERN SEQ(R r, S s) WHERE [vid] "
     "STRATEGY partition_contiguity AFTER MATCH SKIP PAST LAST EVENT", errors.PatternError,
     6, 81, ["not supported with partition_contiguity", "expected STRATEGY skip_till_next_match"]),
    ("except-not-partition-contiguity", X + "DERIVE A(r.vid) PATTERN SEQ(R r, NOT X x, R q) "
     "WHERE [vid] EXCEPT NOT WITHIN 5 STRATEGY partition_contiguity", errors.PatternError,
     7, 54, ["[attr] EXCEPT NOT with a negation is not supported"]),
    ("count-zero", "DERIVE C(count(*) AS n) FROM R WINDOW COUNT 0", errors.WindowError, 6, 32,
     ["WINDOW COUNT must be at least 1 event"]),
    ("count-slide", "DERIVE C(count(*) AS n) FROM R WINDOW COUNT 2 EVERY 3",
     errors.WindowError, 6, 32, ["cannot slide by more than its size"]),
    ("session-zero", "DERIVE C(count(*) AS n) FROM R WINDOW SESSION GAP 0 SECONDS",
     errors.WindowError, 6, 51, ["WINDOW SESSION GAP must be positive"]),
    ("output-zero", "DERIVE A(r.vid) PATTERN R r OUTPUT LAST EVERY 0", errors.WindowError, 6, 47,
     ["OUTPUT EVERY must be positive"]),
]


@pytest.mark.parametrize(("body", "cls", "line", "column", "words"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_error(body: str, cls: type, line: int, column: int, words: list[str]) -> None:
    assert_model_error(HEAD + body, cls, line, column, words)
