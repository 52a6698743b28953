"""Each error class: message, found/expected and position (line, column)."""

from __future__ import annotations

import pytest

from caesar.errors import ModelError
from caesar.language import compile_model, errors

HEAD = """MODEL m
TIME UNIT SECONDS
PARTITION BY seg
EVENT R(ts INT, vid INT, seg INT, spd INT, lane STRING) FROM TOPIC "r"
EVENT S(ts INT, vid INT, seg INT) FROM TOPIC "s"
"""
# HEAD has 5 lines: the model body starts on line 6.

CASES = [
    # (id, body, error class, line, column, words in the message)
    ("syntax", "DERIVE A(r.vid) PATTERN R r WHERE r.vid >", errors.ModelSyntaxError, 6, 42,
     ["found end of model", "expected"]),
    ("syntax-token", "DERIVE A(r.vid) PATTERN R r WHERE )", errors.ModelSyntaxError, 6, 35,
     ["found ')'", "expected"]),
    ("syntax-char", "DERIVE A(r.vid) PATTERN R r WHERE r.vid $ 1", errors.ModelSyntaxError, 6, 41,
     ["unexpected character", "'$'"]),
    ("unknown-type", "DERIVE A(r.vid) PATTERN Rx r", errors.UnknownNameError, 6, 25,
     ["unknown event type Rx", "expected A, R, S"]),
    ("unknown-attr", "DERIVE A(r.vid) PATTERN R r WHERE r.speed > 3", errors.UnknownNameError,
     6, 35, ["R has no attribute speed", "found r.speed"]),
    ("unknown-var", "DERIVE A(q.vid) PATTERN R r", errors.UnknownNameError, 6, 10,
     ["unknown pattern variable q"]),
    ("unknown-context", "DEFAULT CONTEXT c {}\nDERIVE A(r.vid) PATTERN R r CONTEXT nowhere",
     errors.UnknownNameError, 7, 29, ["unknown context nowhere", "expected c"]),
    ("switch-undefined", "DEFAULT CONTEXT c {\n  SWITCH CONTEXT jam PATTERN R r\n}",
     errors.UnknownNameError, 7, 18, ["SWITCH to undefined context jam", "expected c"]),
    ("type-mismatch", "DERIVE A(r.vid) PATTERN R r WHERE r.lane > 3", errors.ModelTypeError,
     6, 42, ["cannot compare string with int"]),
    ("type-arith", "DERIVE A(r.vid) PATTERN R r WHERE r.lane + 1 = 2", errors.ModelTypeError,
     6, 35, ["'+' needs numbers", "found a value of type string"]),
    ("type-condition", "DERIVE A(r.vid) PATTERN R r WHERE r.vid + 1", errors.ModelTypeError,
     6, 41, ["a condition must be true or false"]),
    ("negation-inseparable",
     "DERIVE A(r.vid) PATTERN SEQ(R r, NOT S a, NOT S b, R q) WHERE a.vid = b.vid",
     errors.PatternError, 6, 69, ["more than one negated variable", "found a, b"]),
    ("negation-end-needs-within", "DERIVE A(r.vid) PATTERN SEQ(R r, NOT S s)",
     errors.PatternError, 6, 34, ["needs WITHIN"]),
    ("negated-output", "DERIVE A(s.vid) PATTERN SEQ(R r, NOT S s, R q)", errors.PatternError,
     6, 10, ["s is negated"]),
    ("kleene-bare", "DERIVE A(r.vid) PATTERN SEQ(R r, S+ k) WHERE k.vid > 1",
     errors.PatternError, 6, 46, ["Kleene variable", "through an aggregate"]),
    ("strategy", "DERIVE A(r.vid) PATTERN R r STRATEGY greedy", errors.PatternError, 6, 38,
     ["unknown event selection strategy greedy", "skip_till_next_match"]),
    ("window-within-zero", "DERIVE A(r.vid) PATTERN SEQ(R r, S s) WITHIN 0 SECONDS",
     errors.WindowError, 6, 46, ["WITHIN must be positive"]),
    ("window-aggregate-zero", "DERIVE C(count(*) AS n) FROM R WINDOW TUMBLING 0 MINUTES",
     errors.WindowError, 6, 48, ["WINDOW size must be positive"]),
    ("window-fraction", "DERIVE A(r.vid) PATTERN SEQ(R r, S s) WITHIN 500 MILLISECONDS",
     errors.WindowError, 6, 46, ["not a whole number of SECONDS"]),
    ("window-slide", "DERIVE C(count(*) AS n) FROM R WINDOW SLIDING 1 MINUTE EVERY 2 MINUTES",
     errors.WindowError, 6, 62, ["cannot slide by more than its size"]),
    ("duplicate-var", "DERIVE A(r.vid) PATTERN SEQ(R r, R r)", errors.DuplicateNameError, 6, 34,
     ["pattern variable r is bound twice"]),
    ("duplicate-field", "DERIVE A(r.vid, r.vid) PATTERN R r", errors.DuplicateNameError, 6, 17,
     ["DERIVE field vid is given twice"]),
    ("no-default", "CONTEXT a {}", errors.ModelStructureError, 6, 9,
     ["no DEFAULT CONTEXT"]),
    ("cycle", "DERIVE A(b.vid) PATTERN B b\nDERIVE B(a.vid) PATTERN A a",
     errors.ModelStructureError, 6, 1, ["cycle"]),
    ("derived-mismatch", "DERIVE A(r.vid) PATTERN R r\nDERIVE A(s.seg) PATTERN S s",
     errors.SchemaMismatchError, 7, 1, ["DERIVE A produces fields (seg int)"]),
    ("equivalence-missing", "DERIVE A(r.vid) PATTERN SEQ(R r, S s) WHERE [spd]",
     errors.UnknownNameError, 6, 45, ["S has no attribute spd"]),
    ("input-to-topic", "EVENT T(ts INT, seg INT) FROM TOPIC \"t\" TO TOPIC \"u\"",
     errors.ModelStructureError, 6, 7, ["cannot go TO TOPIC"]),
    ("keyed-default", "DEFAULT CONTEXT c KEYED {}", errors.ModelStructureError, 6, 17,
     ["default context cannot be keyed"]),
    ("keyed-missing", "DEFAULT CONTEXT c {\n  SWITCH CONTEXT acc PATTERN S s\n}\n"
     "CONTEXT acc KEYED {}", errors.ModelStructureError, 7, 3,
     ["context acc is KEYED", "must name the instance"]),
    ("keyed-close-missing", "DEFAULT CONTEXT c {\n  SWITCH CONTEXT acc KEYED BY s.seg PATTERN S s"
     "\n}\nCONTEXT acc KEYED {\n  SWITCH CONTEXT c PATTERN R r\n}",
     errors.ModelStructureError, 10, 3, ["a query that closes it must name the instance"]),
    ("keyed-arity", "DEFAULT CONTEXT c {\n  SWITCH CONTEXT acc KEYED BY s.seg PATTERN S s\n}\n"
     "CONTEXT acc KEYED {\n  SWITCH CONTEXT c KEYED BY r.seg, r.vid PATTERN R r\n}",
     errors.ModelStructureError, 10, 20, ["keyed by 1 value(s) at line 7",
                                         "found KEYED BY with 2 value(s)"]),
    ("keyed-unkeyed", "DEFAULT CONTEXT c {\n  SWITCH CONTEXT acc KEYED BY s.seg PATTERN S s\n}\n"
     "CONTEXT acc {}", errors.ModelStructureError, 7, 22,
     ["neither opens nor closes a keyed context", "CONTEXT acc KEYED"]),
    ("keyed-unknown-var", "DEFAULT CONTEXT c {\n  SWITCH CONTEXT acc KEYED BY z.seg PATTERN S s"
     "\n}\nCONTEXT acc KEYED {}", errors.UnknownNameError, 7, 31,
     ["unknown pattern variable z"]),
    ("keyed-syntax", "DEFAULT CONTEXT c {\n  SWITCH CONTEXT acc KEYED s.seg PATTERN S s\n}",
     errors.ModelSyntaxError, 7, 28, ["found", "expected"]),
    ("consumed-outside-its-contexts", "DEFAULT CONTEXT c {\n  SWITCH CONTEXT d PATTERN S s\n"
     "  DERIVE A(r.vid) PATTERN R r\n}\nCONTEXT d {\n  DERIVE B(a.vid) PATTERN A a\n}",
     errors.ModelStructureError, 11, 27, ["A is never derived in context d", "found CONTEXT d",
                                         "expected contexts where A is derived: c"]),
    # issue 11: numbers beyond 64 bits were an OverflowError traceback in `caesar run`
    ("number-2^63", "DERIVE A(r.vid) PATTERN SEQ(R r, S s) WITHIN 9223372036854775808 SECONDS",
     errors.NumberRangeError, 6, 46, ["integer 9223372036854775808 does not fit in 64 bits"]),
    ("number-4000-digits", "DERIVE A(r.vid) PATTERN R r WHERE r.vid > " + "9" * 4000,
     errors.NumberRangeError, 6, 43, ["(4000 digits) does not fit in 64 bits"]),
    ("number-ticks", "DERIVE A(r.vid) PATTERN SEQ(R r, S s) WITHIN 9223372036854775807 HOURS",
     errors.NumberRangeError, 6, 46, ["WITHIN of 9223372036854775807 HOURS is too long"]),
    ("partition", "EVENT T(ts INT, x INT) FROM TOPIC \"t\"", errors.UnknownNameError, 3, 1,
     ["PARTITION BY attribute seg is missing from input event type T"]),
    # A keyword glued to a name: lark's contextual lexer would take "EVENTX"
    # as EVENT X and "WITHIN5" as WITHIN 5 without a word boundary check.
    ("keyword-glued", "EVENTX(ts INT, seg INT) FROM TOPIC \"x\"", errors.ModelSyntaxError, 6, 1,
     ["found 'EVENTX'", "EVENT followed by a space"]),
    ("keyword-glued-clause", "DERIVE A(r.vid) PATTERN SEQ(R r, S s) WITHINs 5 SECONDS",
     errors.ModelSyntaxError, 6, 39, ["found 'WITHINs'"]),
]


def test_a_word_that_starts_with_a_keyword_is_not_a_model() -> None:
    # "model_per_segment" parsed as MODEL _per_segment: an empty model, no error
    assert_model_error("model_per_segment", errors.ModelSyntaxError, 1, 1,
                       ["found 'model_per_segment'", "MODEL followed by a space"])


@pytest.mark.parametrize(("body", "cls", "line", "column", "words"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_error(body: str, cls: type, line: int, column: int, words: list[str]) -> None:
    assert_model_error(HEAD + body, cls, line, column, words)


def assert_model_error(text: str, cls: type, line: int, column: int, words: list[str]) -> None:
    """Compiling `text` fails with `cls` at line:column, the message holds
    `words`, and the rendering shows the place and a caret under it."""
    with pytest.raises(cls) as info:
        compile_model(text, "model.caesar")
    err = info.value
    assert isinstance(err, ModelError)
    assert err.position is not None
    assert (err.position.file, err.position.line, err.position.column) == \
        ("model.caesar", line, column), str(err)
    for word in words:
        assert word in err.message, err.message
    rendered = str(err)
    assert rendered.startswith(f"model.caesar:{line}:{column}: ")
    # The source line and a caret under the column.
    lines = rendered.splitlines()
    assert lines[-1].index("^") - 2 == column - 1


def test_schema_mismatch(tmp_path) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "r.avsc").write_text(
        '{"type": "record", "name": "R", "fields": [{"name": "ts", "type": "long"},'
        ' {"name": "vid", "type": "string"}]}')
    model = tmp_path / "m.caesar"
    model.write_text('EVENT R(ts INT, vid INT) FROM TOPIC "r" SCHEMA "schemas/r.avsc"\n'
                     "DERIVE A(r.vid) PATTERN R r\n")
    with pytest.raises(errors.SchemaMismatchError) as info:
        compile_model(model)
    assert "vid of R is int but schemas/r.avsc says string" in info.value.message
    assert (info.value.position.line, info.value.position.column) == (1, 7)


def test_schema_agreement_passes(tmp_path) -> None:
    (tmp_path / "r.avsc").write_text(
        '{"type": "record", "name": "R", "fields": [{"name": "ts", "type": "long"},'
        ' {"name": "vid", "type": ["null", "int"]}]}')
    model = tmp_path / "m.caesar"
    model.write_text('EVENT R(ts INT, vid INT) FROM TOPIC "r" SCHEMA "r.avsc"\n'
                     "DERIVE A(r.vid) PATTERN R r\n")
    assert compile_model(model).matcher_stages[0].plan.plan_id == "q1"


def _caesar(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """Run the `caesar` entry point in-process (as the console script does)."""
    import sys

    from caesar.cli import main as cli

    monkeypatch.setattr(sys, "argv", ["caesar", *args])
    with pytest.raises(SystemExit) as info:
        cli.main()
        raise SystemExit(0)
    out = capsys.readouterr()
    return int(info.value.code or 0), out.out, out.err


def test_cli_prints_error_without_traceback(tmp_path, monkeypatch, capsys) -> None:
    model = tmp_path / "bad.caesar"
    model.write_text("DERIVE A(r.vid) PATTERN R r\n")
    code, _, err = _caesar(monkeypatch, capsys, "explain", str(model))
    assert code == 3  # a model error (2 is for usage errors, 1 for runtime failures)
    # the location whole on one line, however long the path (pytest-xdist's are long)
    assert f"{model}:1:25: unknown event type R" in err.splitlines()[0]
    assert "Traceback" not in err


def test_cli_explain_text_and_dot(tmp_path, monkeypatch, capsys) -> None:
    from pathlib import Path

    model = Path(__file__).parent / "data" / "figure3.caesar"
    code, out, err = _caesar(monkeypatch, capsys, "explain", str(model))
    assert code == 0, err
    assert out.index("== phase 2: plan before optimization ==") < \
        out.index("== plan after optimization ==")
    assert "CW[congestion]" in out and "INITIATE accident" in out
    dot = tmp_path / "plan.dot"
    code, out, err = _caesar(monkeypatch, capsys, "explain", str(model), "--format", "dot",
                             "--output", str(dot))
    assert code == 0, err
    text = dot.read_text()
    assert text.startswith("digraph caesar {") and text.rstrip().endswith("}")
    assert 'subgraph "cluster_before"' in text and 'subgraph "cluster_after"' in text
    assert text.count("{") == text.count("}")
