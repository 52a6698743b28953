"""Fuzzing: generated and mutated model texts. Whatever the text, compiling it
either succeeds or raises a ModelError (the project's own error type); no
other exception escapes."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caesar.errors import ModelError
from caesar.examples import model_path
from caesar.language import compile_phases
from caesar.language.explain import explain_dot, explain_text

ROOT = Path(__file__).resolve().parents[2]
SEEDS = [
    (model_path("linear_road")).read_text(encoding="utf-8"),
    (Path(__file__).parent / "data" / "figure3.caesar").read_text(encoding="utf-8"),
]
TOKENS = ["SEQ(", "NOT", "ANY(", ")", "(", ",", "+", "-", "*", "/", "%", "=", "!=", "<", ">=",
          "AND", "OR", "WHERE", "WITHIN", "0", "1", "30 SECONDS", "-5", "1.5", '"x"', "[vid]",
          "PATTERN", "DERIVE", "CONTEXT", "SWITCH", "INITIATE", "TERMINATE", "DEFAULT", "{", "}",
          "FILTER(", "count(", "avg(", "DISTINCT", "WINDOW", "TUMBLING", "SLIDING", "EVERY",
          "GROUP BY", "HAVING", "FROM", "EVENT", "INT", "STRING", ";", ".", "p", "q", "x.y",
          "PositionReport", "clear", "congestion", "accident", "STRATEGY", "strict_contiguity",
          "TIME UNIT", "MILLISECONDS", "SITUATION", "KEYED", "KEYED BY", "\n", " ", "“", "≠"]


def _compile(text: str) -> None:
    try:
        compiled = compile_phases(text, "fuzz.caesar")
    except ModelError as err:
        assert err.position is None or err.position.line >= 1
        str(err)  # rendering must not fail either
        return
    explain_text(compiled)
    explain_dot(compiled)


@st.composite
def mutated(draw) -> str:
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["delete", "insert", "replace", "swap"]))
        i = draw(st.integers(0, len(text)))
        j = min(len(text), i + draw(st.integers(0, 40)))
        if kind == "delete":
            text = text[:i] + text[j:]
        elif kind == "insert":
            text = text[:i] + " " + draw(st.sampled_from(TOKENS)) + " " + text[i:]
        elif kind == "replace":
            text = text[:i] + draw(st.sampled_from(TOKENS)) + text[j:]
        else:
            k = draw(st.integers(0, len(text)))
            a, b = sorted((i, k))
            text = text[:a] + text[b:] + text[a:b]
    return text


attrs = st.sampled_from(["vid", "seg", "ts", "vid", "seg", "x", "y"])
variables = st.sampled_from(["p", "p", "q", "r"])
atoms = st.one_of(st.tuples(variables, attrs).map(".".join), attrs,
                  st.integers(-100, 100).map(str), st.sampled_from(['"s"', "TRUE", "1.5"]))


@st.composite
def expressions(draw, depth: int = 0) -> str:
    if depth > 2 or draw(st.booleans()):
        return draw(atoms)
    op = draw(st.sampled_from(["+", "-", "*", "/", "%", "=", "!=", "<", ">=", "AND", "OR"]))
    return f"({draw(expressions(depth + 1))} {op} {draw(expressions(depth + 1))})"


@st.composite
def conditions(draw) -> str:
    left, right = draw(expressions(1)), draw(expressions(1))
    cond = f"{left} {draw(st.sampled_from(['=', '!=', '<', '>=']))} {right}"
    if draw(st.booleans()):
        cond += " AND [vid]"
    return cond


@st.composite
def generated(draw) -> str:
    """Models built from the grammar's pieces: mostly well-formed, often wrong
    in their names, types and windows."""
    lines = ["MODEL g", "TIME UNIT " + draw(st.sampled_from(["SECONDS", "MINUTES",
                                                             "MILLISECONDS"]))]
    lines.append('EVENT A(ts INT, vid INT, seg INT, x FLOAT, s STRING) FROM TOPIC "a"')
    lines.append('EVENT B(ts INT, vid INT, seg INT) FROM TOPIC "b"')
    comp = st.tuples(st.sampled_from(["A", "B", "A", "C", "ANY(A, B)"]),
                     st.sampled_from([False, False, True]), st.sampled_from([False, False, True]),
                     st.sampled_from(["p", "q", "r"]))
    queries = []
    for _ in range(draw(st.integers(1, 4))):
        comps = draw(st.lists(comp, min_size=1, max_size=3))
        parts = [("NOT " if neg else "") + t + ("+" if kleene else "") + f" {var}"
                 for t, neg, kleene, var in comps]
        pattern = parts[0] if len(parts) == 1 else f"SEQ({', '.join(parts)})"
        head = draw(st.sampled_from(["DERIVE C(p.vid)", "DERIVE D(p.vid AS v, count(q) AS n)",
                                     "SWITCH CONTEXT jam", "INITIATE CONTEXT acc",
                                     "TERMINATE CONTEXT acc", "SWITCH CONTEXT clear"]))
        if head.startswith(("SWITCH", "INITIATE", "TERMINATE")) and draw(st.booleans()):
            head += " KEYED BY " + ", ".join(draw(st.lists(
                st.sampled_from(["p.seg", "q.vid", "r.x + 1", "p.nope", "z.vid"]),
                min_size=1, max_size=2)))
        q = f"{head} PATTERN {pattern} WHERE {draw(conditions())}"
        if draw(st.booleans()):
            q += f" WITHIN {draw(st.integers(-1, 90))} SECONDS"
        queries.append(q)
    if draw(st.booleans()):
        queries.append("DERIVE E(seg, count(DISTINCT vid) AS n, avg(x) AS m) FROM A GROUP BY seg "
                       f"WINDOW SLIDING {draw(st.integers(0, 3))} MINUTES EVERY "
                       f"{draw(st.integers(0, 3))} MINUTES")
    blocks = draw(st.sampled_from(["none", "contexts", "contexts"]))
    if blocks == "none":
        lines.extend(queries)
    else:
        lines.append("DEFAULT CONTEXT clear {")
        lines.extend(queries[: len(queries) // 2])
        lines.append("}")
        lines.append("CONTEXT jam {")
        lines.extend(queries[len(queries) // 2:])
        lines.append("}")
        lines.append("CONTEXT acc " + draw(st.sampled_from(["{ }", "KEYED { }"])))
    return "\n".join(lines) + "\n"


FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(mutated())
def test_mutated_models_fail_only_with_model_errors(text: str) -> None:
    _compile(text)


@FUZZ
@given(generated())
def test_generated_models_fail_only_with_model_errors(text: str) -> None:
    _compile(text)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.text(max_size=200))
def test_arbitrary_text_fails_only_with_model_errors(text: str) -> None:
    _compile(text)


def test_deep_nesting_is_a_model_error() -> None:
    head = 'EVENT R(ts INT, x INT) FROM TOPIC "r"\n'
    for body in ["DERIVE A(r.x) PATTERN " + "SEQ(" * 500 + "R r" + ")" * 500,
                 "DERIVE A(r.x) PATTERN R r WHERE " + "NOT " * 3000 + "TRUE",
                 "DERIVE A(r.x) PATTERN R r WHERE " + " + ".join(["1"] * 5000) + " = r.x"]:
        _compile(head + body)
