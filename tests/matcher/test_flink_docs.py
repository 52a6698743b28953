"""Flink CEP's documented examples (docs/content/docs/libs/cep.md: the
"After Match Skip Strategy" tables, "Combining Patterns", "Contiguity within
looping patterns", `allowCombinations()`), reproduced with the same expected
matches on both engines, where our language expresses the same pattern.

Flink sets contiguity per edge and per loop; CAESAR has one strategy per
query: strict_contiguity is `next()` + `consecutive()` everywhere,
skip_till_any_match `followedByAny()` + `allowCombinations()` everywhere,
skip_till_next_match is SASE's deterministic run (see docs/language.md,
"Compared with Esper and Flink CEP", for the cases that differ). Flink's
regex-style `b+ c` tables are the SQL MATCH_RECOGNIZE reading, contiguous rows:
strict_contiguity here."""

from __future__ import annotations

import dataclasses

import pytest

from caesar.services.matcher.engine import CythonEngine
from caesar.services.matcher.reference import ReferenceEngine

from .tapes import comp, plan, run, tape

ENGINES = [ReferenceEngine, CythonEngine]
END = 10**9


@pytest.fixture(params=ENGINES, ids=["reference", "cython"])
def engine(request):
    return request.param


def names(engine_cls, p, rows) -> list[str]:
    """Matches as Flink's tables write them ("b1 b2 b3 c"), in output order."""
    labels = [r[2]["label"] for r in rows]
    out = run(engine_cls([p]), [tape([(t, ts, {"x": i}) for i, (t, ts, _) in enumerate(rows)])],
              END)
    return [" ".join(labels[s] for s in d.event_seqs) for d in out]


# "b+ c" over b1 b2 b3 c
B3C = [("B", 1, {"label": "b1"}), ("B", 2, {"label": "b2"}), ("B", 3, {"label": "b3"}),
       ("C", 4, {"label": "c"})]


def b_plus_c(skip: str, var: str | None = None):
    p = plan("bc", [comp("b", "B", kleene=True), comp("c", "C")], strategy="strict_contiguity")
    return dataclasses.replace(p, skip=skip, skip_var=var)


@pytest.mark.parametrize(("skip", "var", "expected"), [
    ("no_skip", None, ["b1 b2 b3 c", "b2 b3 c", "b3 c"]),
    ("to_next", None, ["b1 b2 b3 c", "b2 b3 c", "b3 c"]),
    ("past_last", None, ["b1 b2 b3 c"]),
    ("to_first", "b", ["b1 b2 b3 c", "b2 b3 c", "b3 c"]),
    ("to_last", "b", ["b1 b2 b3 c", "b3 c"]),
])
def test_skip_strategies_table(engine, skip, var, expected):
    assert sorted(names(engine, b_plus_c(skip, var), B3C)) == sorted(expected)


# "(a | b | c) (b | c) c+.greedy d" over a b c1 c2 c3 d
ABCD = [("A", 1, {"label": "a"}), ("B", 2, {"label": "b"}), ("C", 3, {"label": "c1"}),
        ("C", 4, {"label": "c2"}), ("C", 5, {"label": "c3"}), ("D", 6, {"label": "d"})]


@pytest.mark.parametrize(("skip", "expected"), [
    ("no_skip", ["a b c1 c2 c3 d", "b c1 c2 c3 d", "c1 c2 c3 d"]),
    ("to_first", ["a b c1 c2 c3 d", "c1 c2 c3 d"]),
])
def test_skip_to_first_vs_no_skip(engine, skip, expected):
    p = plan("abcd", [comp("x", "A", "B", "C"), comp("y", "B", "C"),
                      dataclasses.replace(comp("z", "C", kleene=True), greedy=True),
                      comp("d", "D")], strategy="strict_contiguity")
    p = dataclasses.replace(p, skip=skip, skip_var="z" if skip == "to_first" else None)
    assert sorted(names(engine, p, ABCD)) == sorted(expected)


# "a b+" over a b1 b2 b3 (Flink's default relaxed contiguity)
AB3 = [("A", 1, {"label": "a"}), ("B", 2, {"label": "b1"}), ("B", 3, {"label": "b2"}),
       ("B", 4, {"label": "b3"})]


@pytest.mark.parametrize(("skip", "expected"), [
    ("no_skip", ["a b1", "a b1 b2", "a b1 b2 b3"]),
    ("to_next", ["a b1"]),
])
def test_no_skip_vs_skip_to_next(engine, skip, expected):
    p = plan("ab", [comp("a", "A"), comp("b", "B", kleene=True)],
             strategy="skip_till_next_match")
    assert names(engine, dataclasses.replace(p, skip=skip), AB3) == expected


# allowCombinations(): "c a+ b" over C D A1 A2 A3 D A4 B, every combination
CDAB = [("C", 1, {"label": "C"}), ("D", 2, {"label": "D"}), ("A", 3, {"label": "A1"}),
        ("A", 4, {"label": "A2"}), ("A", 5, {"label": "A3"}), ("D", 6, {"label": "D"}),
        ("A", 7, {"label": "A4"}), ("B", 8, {"label": "B"})]


def test_allow_combinations(engine):
    p = plan("cab", [comp("c", "C"), comp("a", "A", kleene=True), comp("b", "B")])
    expected = ["C A1 B", "C A1 A2 B", "C A1 A3 B", "C A1 A4 B", "C A1 A2 A3 B", "C A1 A2 A4 B",
                "C A1 A3 A4 B", "C A1 A2 A3 A4 B", "C A2 B", "C A2 A3 B", "C A2 A4 B",
                "C A2 A3 A4 B", "C A3 B", "C A3 A4 B", "C A4 B"]
    assert sorted(names(engine, p, CDAB)) == sorted(expected)


def test_relaxed_loop_is_one_run(engine):
    # Flink without allowCombinations() also closes the loop after each A
    # ({C A1 B}, {C A1 A2 B}, {C A1 A2 A3 B}, {C A1 A2 A3 A4 B}); a SASE run
    # under skip_till_next_match takes every relevant event: one match
    # (docs/language.md, "Compared with Esper and Flink CEP").
    p = plan("cab", [comp("c", "C"), comp("a", "A", kleene=True), comp("b", "B")],
             strategy="skip_till_next_match")
    assert names(engine, p, CDAB) == ["C A1 A2 A3 A4 B"]


# greedy vs reluctant: "a b+ c" where c events are b events too
ABBB = [("A", 1, {"label": "a"}), ("B", 2, {"label": "b1"}), ("B", 3, {"label": "b2"}),
        ("B", 4, {"label": "b3"})]


@pytest.mark.parametrize(("greedy", "bounds", "expected"), [
    (False, (1, None), ["a b1 b2"]),           # reluctant: b2 closes the loop as c
    (True, (1, None), []),                     # greedy: the loop takes every B
    (True, (1, 2), ["a b1 b2 b3"]),            # greedy up to 2, then b3 is c
])
def test_greedy_vs_reluctant(engine, greedy, bounds, expected):
    b = dataclasses.replace(comp("b", "B", kleene=True), greedy=greedy, min_count=bounds[0],
                            max_count=bounds[1])
    p = plan("g", [comp("a", "A"), b, comp("c", "B")], strategy="skip_till_next_match")
    assert names(engine, p, ABBB) == expected
