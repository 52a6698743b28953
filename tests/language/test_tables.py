"""ACEP language: TABLE and RULE declarations and table reads parse, print
back to the same AST, compile to table plans, and every schema- or
key-breaking declaration or action is reported with its line and column."""

from __future__ import annotations

import pytest

from caesar.errors import ModelError
from caesar.language import compile_phases, errors, parse
from caesar.language.formatter import format_model
from caesar.plans.expr import Attr
from caesar.plans.pattern import PatternPlan

HEAD = """MODEL m
EVENT Enter(w INT, room STRING, ts INT) TIMESTAMP ts
EVENT Exit(w INT, room STRING, ts INT) TIMESTAMP ts
TABLE status(w INT, st STRING, since INT, PRIMARY KEY (w))
TABLE visits(w INT, room STRING, n INT, PRIMARY KEY (w, room))
"""
# HEAD has 5 lines: the body starts on line 6.

GOOD = HEAD + """
RULE hire ON Enter e WHERE NOT EXISTS (SELECT * FROM status WHERE w = e.w)
  DO INSERT INTO status (w, st, since) VALUES (e.w, "safe", e.ts);
RULE count ON Enter e DO BEGIN
  UPSERT INTO visits VALUES (e.w, e.room,
    (SELECT count(*) FROM visits v WHERE v.w = e.w AND v.room = e.room) + 1);
  UPDATE status SET since = e.ts WHERE w = e.w AND st != "violation";
  DERIVE Visited(e.w AS w, (SELECT sum(n) FROM visits WHERE w = e.w) AS total);
END;
RULE leave ON SEQ(Enter a, NOT Enter b, Exit x) WHERE a.w = x.w AND a.w = b.w WITHIN 60
  DO DELETE FROM visits WHERE w = x.w AND room = x.room;
DERIVE Alert(x.w AS w, (SELECT st FROM status WHERE w = x.w) AS st)
  PATTERN Exit x WHERE (SELECT st FROM status s WHERE s.w = x.w) != "safe";
"""


def test_round_trip() -> None:
    model = parse(GOOD)
    assert len(model.tables) == 2 and len(model.rules) == 3
    printed = format_model(model)
    assert parse(printed) == model
    assert format_model(parse(printed)) == printed


def test_compiles_to_table_plans() -> None:
    c = compile_phases(GOOD)
    acep = c.acep
    assert acep is not None and c.execution.acep == acep
    assert [t.name for t in acep.tables] == ["status", "visits"]
    assert [(a.name, a.kind, a.rank) for a in acep.actors] == [
        ("hire", "rule", 0), ("count", "rule", 1), ("leave", "rule", 2), ("Alert", "query", 3)]
    hire, count, leave, alert = acep.actors
    assert hire.reads[0].kind == "exists" and hire.write_tables == {"status"}
    assert [a.kind for a in count.actions] == ["UPSERT", "UPDATE", "DERIVE"]
    assert count.actions[1].key == (Attr("$event", "e__w"),)  # WHERE fixes the key
    assert count.actions[2].reads[0].kind == "sum"
    assert leave.actions[0].key is not None and leave.write_tables == {"visits"}
    assert alert.reads[0].kind == "lookup" and not alert.write_tables
    # The pattern parts run in the matcher as internal derived events.
    outputs = {s.plan.output.event_type for s in c.execution.matcher_stages
               if isinstance(s.plan, PatternPlan) and s.plan.output is not None}
    assert {"_acep_hire", "_acep_count", "_acep_leave", "_acep_Alert"} <= outputs


CASES = [
    ("dup-table", "TABLE status(w INT, PRIMARY KEY (w))", errors.DuplicateNameError, 6, 7,
     ["table status is declared twice"]),
    ("key-not-column", "TABLE t(a INT, PRIMARY KEY (b))", errors.UnknownNameError, 6, 16,
     ["primary key column b is not a column of t"]),
    ("dup-column", "TABLE t(a INT, a STRING, PRIMARY KEY (a))", errors.DuplicateNameError, 6,
     16, ["column a is declared twice"]),
    ("unknown-table", "RULE r ON Enter e DO DELETE FROM nowhere", errors.UnknownNameError, 6,
     34, ["unknown table nowhere", "expected status, visits"]),
    ("set-key", 'RULE r ON Enter e DO UPDATE status SET w = 3', errors.TableError, 6, 40,
     ["UPDATE cannot change primary key column w"]),
    ("insert-no-key", 'RULE r ON Enter e DO INSERT INTO status (st) VALUES ("x")',
     errors.TableError, 6, 22, ["must give the primary key", "no value for w"]),
    ("insert-arity", "RULE r ON Enter e DO INSERT INTO status VALUES (e.w)", errors.TableError,
     6, 22, ["gives 1 values for 3 columns"]),
    ("insert-type", "RULE r ON Enter e DO INSERT INTO status VALUES (e.w, e.ts, e.ts)",
     errors.TableError, 6, 54, ["column st of table status is STRING", "type int"]),
    ("update-type", "RULE r ON Enter e DO UPDATE status SET since = e.room WHERE w = e.w",
     errors.TableError, 6, 48, ["column since of table status is INT"]),
    ("unknown-column", "RULE r ON Enter e DO UPDATE status SET color = 1",
     errors.UnknownNameError, 6, 40, ["table status has no column color"]),
    ("read-not-key", 'DERIVE A(x.w) PATTERN Exit x WHERE (SELECT st FROM status WHERE '
     'st = "safe") = "safe"', errors.TableError, 6, 36,
     ["must name its row by the whole primary key", "w = <value>"]),
    ("read-partial-key", "DERIVE A(x.w, (SELECT n FROM visits WHERE w = x.w) AS n) "
     "PATTERN Exit x", errors.TableError, 6, 15, ["whole primary key", "room = <value>"]),
    ("read-column", "DERIVE A(x.w) PATTERN Exit x WHERE EXISTS (SELECT * FROM status WHERE "
     "colour = 1)", errors.UnknownNameError, 6, 71, ["table status has no column colour"]),
    ("read-nested", "DERIVE A(x.w) PATTERN Exit x WHERE EXISTS (SELECT * FROM status WHERE "
     "w = (SELECT count(*) FROM visits))", errors.TableError, 6, 75, ["cannot be nested"]),
    ("read-in-context-query", "DEFAULT CONTEXT c {\n  INITIATE CONTEXT d PATTERN Exit x "
     "WHERE EXISTS (SELECT * FROM status WHERE w = x.w)\n}\nCONTEXT d {}",
     errors.TableError, 7, 43, ["not supported in a context deriving query"]),
    ("unknown-event-attr", "RULE r ON Enter e DO DELETE FROM status WHERE w = e.badge",
     errors.UnknownNameError, 6, 51, ["Enter has no attribute badge"]),
    ("dup-rule", "RULE r ON Enter e DO DELETE FROM status\nRULE r ON Exit e DO DELETE FROM "
     "status", errors.DuplicateNameError, 7, 6, ["rule r is declared twice"]),
    ("set-needs-equals", "RULE r ON Enter e DO UPDATE status SET st > 1",
     errors.ModelSyntaxError, 6, 43, ["SET assigns with '='"]),
    ("select-star-value", "DERIVE A(x.w) PATTERN Exit x WHERE (SELECT * FROM status) = 1",
     errors.ModelSyntaxError, 6, 36, ["SELECT * reads no single value"]),
]


@pytest.mark.parametrize(("body", "cls", "line", "column", "words"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_errors_name_line_and_column(body: str, cls: type[ModelError], line: int, column: int,
                                     words: list[str]) -> None:
    with pytest.raises(cls) as info:
        compile_phases(HEAD + body)
    err = info.value
    assert err.position is not None
    assert (err.position.line, err.position.column) == (line, column), str(err)
    for w in words:
        assert w in str(err), str(err)


def test_the_docs_and_the_example_compile_and_round_trip() -> None:
    import re
    from pathlib import Path

    import caesar

    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs" / "language.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```caesar\n(.*?)```", doc, flags=re.S) if "RULE" in b]
    example = Path(caesar.__file__).parent / "examples" / "hospital_hygiene" / "hyreminder.caesar"
    assert blocks
    for text in [*blocks, example.read_text(encoding="utf-8")]:
        assert compile_phases(text).acep is not None
        assert parse(format_model(parse(text))) == parse(text)


def test_initial_rows_from_a_file(tmp_path: object) -> None:
    from pathlib import Path

    import caesar

    assert isinstance(tmp_path, Path)
    (tmp_path / "staff.csv").write_text("w,st,since\n1,safe,0\n2,warning,5\n")
    model = tmp_path / "m.caesar"
    model.write_text("EVENT Exit(w INT, ts INT)\n"
                     'TABLE status(w INT, st STRING, since INT, PRIMARY KEY (w)) '
                     'FROM FILE "staff.csv"\n'
                     "DERIVE Q(x.w AS w, (SELECT st FROM status WHERE w = x.w) AS st) "
                     "PATTERN Exit x\n")
    compiled = caesar.compile(model)
    with compiled.session() as s:
        out = s.push([{"type": "Exit", "ts": 1, "w": 2}, {"type": "Exit", "ts": 2, "w": 3}])
        alerts = out.alerts + s.finish().alerts
        assert [a.fields for a in alerts] == [{"w": 2, "st": "warning"}, {"w": 3, "st": None}]
        assert s.tables()["status"] == [{"w": 1, "st": "safe", "since": 0},
                                        {"w": 2, "st": "warning", "since": 5}]
    for rows, words in (("w,st,since\n1,a,0\n1,b,1\n", "key (1,) is given twice"),
                        ("w,st,since\nx,a,0\n", "invalid literal"),
                        (None, "cannot read the rows of table status")):
        (tmp_path / "staff.csv").unlink(missing_ok=True)
        if rows is not None:
            (tmp_path / "staff.csv").write_text(rows)
        with pytest.raises(errors.TableError) as info:
            caesar.compile(model)
        assert words in str(info.value) and info.value.position.line == 2, str(info.value)


def test_explain_shows_the_steps() -> None:
    from caesar.language.explain import explain_text

    text = explain_text(compile_phases(GOOD))
    assert "== stream transactions (shared tables and rules) ==" in text
    assert "step 0: rule hire on _acep_hire reads [status] writes [status]" in text
    assert "read $0: exists status[$event.e__w] where ($row.w = $event.e__w)" in text
    assert "step 3: query Alert on _acep_Alert reads [status] writes []" in text
