"""ACEP in the embedded pipeline: the HyReminder example (the paper's hand
hygiene application) run through scheduler, matcher and the stream
transaction stage equals a direct per-worker state machine of its rules,
under each of SEI, S2PL and LWM; key-breaking actions are dead-lettered
with the reason while the pipeline goes on."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from itertools import groupby
from pathlib import Path
from typing import Any

import pytest

import caesar
from caesar.examples.hospital_hygiene.generator import HygieneConfig, generate

MODEL = Path(caesar.__file__).parent / "examples" / "hospital_hygiene" / "hyreminder.caesar"
WINDOW = 300  # WITHIN 5 MINUTES


def oracle(events: Iterable[dict[str, Any]]) -> tuple[list[tuple], dict[str, list[dict]]]:
    """The model's rules written out as one state machine, applied per
    timestamp in the model's declaration order (the s-transaction's order)."""
    status: dict[int, tuple[str, int]] = {}
    violations: dict[int, int] = {}
    last_leave: dict[int, int] = {}
    clean_since_leave: dict[int, bool] = {}
    out: list[tuple] = []
    for ts, group in groupby(sorted(events, key=lambda e: (e["ts"], e["worker"])),
                             key=lambda e: e["ts"]):
        evs = list(group)
        of = defaultdict(list)
        for e in evs:
            of[e["type"]].append(e)
        for e in of["ShiftStart"]:  # start
            status[e["worker"]] = ("safe", ts)
        for e in of["ShiftStart"]:  # enrol
            violations.setdefault(e["worker"], 0)
        for e in of["EnterRoom"]:  # q1_warning
            w = e["worker"]
            if e["patient"] and w in last_leave and ts - last_leave[w] < WINDOW \
                    and not clean_since_leave[w] and status.get(w, ("",))[0] == "safe":
                status[w] = ("warning", ts)
        for e in of["Sanitize"]:  # sanitized
            if status.get(e["worker"], ("",))[0] == "warning":
                status[e["worker"]] = ("safe", ts)
        for e in of["Contact"]:  # violation
            w = e["worker"]
            if e["zone"] == "patient" and status.get(w, ("",))[0] == "warning":
                status[w] = ("violation", ts)
                if w in violations:
                    violations[w] += 1
                out.append(("HygieneAlert", ts, w, e["room"]))
        for e in of["EnterRoom"]:  # Reminder
            w = e["worker"]
            if status.get(w, ("",))[0] == "violation":
                out.append(("Reminder", ts, w, e["room"], violations.get(w)))
        for e in of["Sanitize"]:  # recovered
            if status.get(e["worker"], ("",))[0] == "violation":
                status[e["worker"]] = ("safe", ts)
        for e in of["ShiftEnd"]:  # WardStatus
            out.append(("WardStatus", ts, e["worker"],
                        sum(1 for s, _ in status.values() if s != "safe")))
        for e in evs:  # the pattern's state after this timestamp
            if e["type"] == "LeaveRoom":
                last_leave[e["worker"]], clean_since_leave[e["worker"]] = ts, False
            elif e["type"] == "Sanitize":
                clean_since_leave[e["worker"]] = True
    tables = {"hygiene": [{"worker": w, "status": s, "since": t}
                          for w, (s, t) in sorted(status.items())],
              "violations": [{"worker": w, "n": n} for w, n in sorted(violations.items())]}
    return out, tables


def shown(alert: caesar.Alert) -> tuple:
    f = alert.fields
    if alert.event_type == "HygieneAlert":
        return ("HygieneAlert", alert.end_ts, f["worker"], f["room"])
    if alert.event_type == "Reminder":
        return ("Reminder", alert.end_ts, f["worker"], f["room"], f["violations"])
    return ("WardStatus", alert.end_ts, f["worker"], f["not_safe"])


EVENTS = list(generate(HygieneConfig(workers=40, hours=8, seed=3, sanitize_before=0.6,
                                     sanitize_after=0.6)))
EXPECTED, TABLES = oracle(EVENTS)


def test_the_workload_exercises_every_rule() -> None:
    kinds = {o[0] for o in EXPECTED}
    assert kinds == {"HygieneAlert", "Reminder", "WardStatus"}
    assert sum(o[0] == "HygieneAlert" for o in EXPECTED) >= 10
    assert any(o[3] > 0 for o in EXPECTED if o[0] == "WardStatus")


@pytest.mark.parametrize("scheduler", ["lwm", "s2pl", "sei"])
def test_hyreminder_equals_the_state_machine(scheduler: str) -> None:
    model = caesar.compile(MODEL)
    with model.session(scheduler=scheduler, batch_size=700) as session:
        alerts = [a for a in session.run(EVENTS)]
        tables = session.tables()
    assert sorted(shown(a) for a in alerts) == sorted(EXPECTED)
    assert tables == TABLES
    assert not any(a.event_type.startswith("_acep_") for a in alerts)


def test_a_key_breaking_action_is_dead_lettered_and_the_pipeline_goes_on() -> None:
    model = caesar.compile("""
MODEL m
EVENT Reg(ts INT, id INT, name STRING)
TABLE people(id INT, name STRING, PRIMARY KEY (id))
RULE reg ON Reg r DO BEGIN
  INSERT INTO people VALUES (r.id, r.name);
  DERIVE Registered(r.id AS id, (SELECT count(*) FROM people) AS total);
END
""")
    with model.session() as s:
        out = s.push([{"type": "Reg", "ts": 1, "id": 1, "name": "a"},
                      {"type": "Reg", "ts": 2, "id": 1, "name": "b"},
                      {"type": "Reg", "ts": 3, "id": 2, "name": "c"}])
        rest = s.finish()
        alerts = out.alerts + rest.alerts
        dead = out.dead_letters + rest.dead_letters
        assert [(a.end_ts, a.fields["total"]) for a in alerts] == [(1, 1), (2, 1), (3, 2)]
        assert len(dead) == 1 and dead[0].reason == "table_action"
        assert "<model>:6:3" in dead[0].detail and "key 1 exists already" in dead[0].detail
        assert s.tables() == {"people": [{"id": 1, "name": "a"}, {"id": 2, "name": "c"}]}
