"""Models and workloads shared by the ACEP scheduler tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from caesar.language import compile_phases
from caesar.plans.tables import AcepPlan

# A bank-like model whose rules read and write the same tables from several
# actors: read-modify-write counters, conditions on another table, inserts
# that may break the key (errors), deletes, aggregates in outputs.
BANK = """
MODEL bank;
EVENT Dep(id INT, amt INT, ts INT) TIMESTAMP ts;
EVENT Chk(id INT, ts INT) TIMESTAMP ts;
EVENT Mark(id INT, st STRING, ts INT) TIMESTAMP ts;
EVENT Del(id INT, ts INT) TIMESTAMP ts;
TABLE acct(id INT, bal INT, PRIMARY KEY (id));
TABLE flag(id INT, state STRING, PRIMARY KEY (id));
RULE open ON Dep d WHERE NOT EXISTS (SELECT * FROM acct WHERE id = d.id)
  DO INSERT INTO acct VALUES (d.id, 0);
RULE dep ON Dep d
  WHERE NOT EXISTS (SELECT * FROM flag WHERE id = d.id AND state = "frozen")
  DO UPDATE acct SET bal = bal + d.amt WHERE id = d.id;
RULE mark ON Mark m DO UPSERT INTO flag (id, state) VALUES (m.id, m.st);
RULE dup ON Mark m WHERE m.st = "dup" DO INSERT INTO acct VALUES (m.id, 1);
RULE close ON Del x DO BEGIN
  DELETE FROM acct WHERE id = x.id AND bal < 5;
  DERIVE Closed(x.id AS id, (SELECT count(*) FROM acct) AS left);
END;
DERIVE Balance(c.id AS id, (SELECT bal FROM acct WHERE id = c.id) AS bal,
               (SELECT sum(bal) FROM acct) AS total)
  PATTERN Chk c WHERE EXISTS (SELECT * FROM flag WHERE id = c.id AND state != "frozen");
"""

# Which actors each event type triggers (their patterns are single events).
BANK_TRIGGERS = {"Dep": ("open", "dep"), "Mark": ("mark", "dup"), "Del": ("close",),
                 "Chk": ("Balance",)}
VARS = ("d", "m", "x", "c")


def bank_plan() -> AcepPlan:
    acep = compile_phases(BANK).acep
    assert acep is not None
    return acep


def transactions(stream: Sequence[tuple[int, Sequence[tuple[str, Mapping[str, Any]]]]],
                 triggers: Mapping[str, Sequence[str]] = BANK_TRIGGERS,
                 variables: Sequence[str] = VARS) \
        -> list[tuple[int, dict[str, list[dict[str, Any]]]]]:
    """(ts, [(event type, fields)]) -> s-transactions: per actor, the matches
    (the fields under every variable name the rules use, as the matcher's
    `_acep_*` events carry them)."""
    out = []
    for ts, events in stream:
        per: dict[str, list[dict[str, Any]]] = {}
        for etype, fields in events:
            match = {f"{v}__{k}": val for v in variables for k, val in {**fields, "ts": ts}.items()}
            for actor in triggers[etype]:
                per.setdefault(actor, []).append(match)
        out.append((ts, per))
    return out


# The paper's section 2 (Examples 1-3): Q1 + R1 set a worker to "warning" on
# enter^10; Q2 reads the worker's status on exit^2 and exit^15.
FIGURE3 = """
MODEL figure3;
EVENT Hire(w INT, ts INT) TIMESTAMP ts;
EVENT Enter(w INT, ts INT) TIMESTAMP ts;
EVENT Exit(w INT, ts INT) TIMESTAMP ts;
TABLE status(w INT, st STRING, PRIMARY KEY (w));
RULE hire ON Hire h DO INSERT INTO status VALUES (h.w, "safe");
RULE r1 ON Enter e WHERE (SELECT st FROM status WHERE w = e.w) = "safe"
  DO UPDATE status SET st = "warning" WHERE w = e.w;
DERIVE Q2(x.w AS w, (SELECT st FROM status WHERE w = x.w) AS st) PATTERN Exit x;
"""
FIGURE3_TRIGGERS = {"Hire": ("hire",), "Enter": ("r1",), "Exit": ("Q2",)}
FIGURE3_STREAM = [(1, [("Hire", {"w": 7})]), (2, [("Exit", {"w": 7})]),
                  (10, [("Enter", {"w": 7})]), (15, [("Exit", {"w": 7})])]


# Every event moves the shared table and every output reads all of it: an
# input applied twice (or lost) shows in the tables and the outputs.
COUNTER = """
MODEL counter
PARTITION BY unit
EVENT Ping(ts INT, unit INT, v INT) FROM TOPIC "ping"
TABLE acct(unit INT, n INT, s INT, PRIMARY KEY (unit))
RULE open ON Ping p WHERE NOT EXISTS (SELECT * FROM acct WHERE unit = p.unit)
  DO INSERT INTO acct VALUES (p.unit, 0, 0)
RULE add ON Ping p DO UPDATE acct SET n = n + 1, s = s + p.v WHERE unit = p.unit
DERIVE Total(p.unit AS unit, (SELECT sum(n) FROM acct) AS n) PATTERN Ping p
"""
