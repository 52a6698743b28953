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


class Oracle:
    """The model's rules written out as one state machine, applied per
    timestamp in the model's declaration order (the s-transaction's order)."""

    def __init__(self) -> None:
        self.status: dict[int, tuple[str, int]] = {}
        self.violations: dict[int, int] = {}
        self.last_leave: dict[int, int] = {}
        self.clean_since_leave: dict[int, bool] = {}
        self.out: list[tuple] = []

    def state(self, worker: int) -> str:
        return self.status.get(worker, ("",))[0]

    def run(self, events: Iterable[dict[str, Any]]) -> tuple[list[tuple], dict[str, list]]:
        for ts, group in groupby(sorted(events, key=lambda e: (e["ts"], e["worker"])),
                                 key=lambda e: e["ts"]):
            evs = list(group)
            of: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for e in evs:
                of[e["type"]].append(e)
            self.transaction(ts, of)
            self.pattern_state(ts, evs)
        tables = {"hygiene": [{"worker": w, "status": s, "since": t}
                              for w, (s, t) in sorted(self.status.items())],
                  "violations": [{"worker": w, "n": n}
                                 for w, n in sorted(self.violations.items())]}
        return self.out, tables

    def transaction(self, ts: int, of: dict[str, list[dict[str, Any]]]) -> None:
        for e in of["ShiftStart"]:  # start
            self.status[e["worker"]] = ("safe", ts)
        for e in of["ShiftStart"]:  # enrol
            self.violations.setdefault(e["worker"], 0)
        for e in of["EnterRoom"]:  # q1_warning
            w = e["worker"]
            if e["patient"] and w in self.last_leave and ts - self.last_leave[w] < WINDOW \
                    and not self.clean_since_leave[w] and self.state(w) == "safe":
                self.status[w] = ("warning", ts)
        self.switch(of["Sanitize"], "warning", "safe", ts)  # sanitized
        for e in of["Contact"]:  # violation
            w = e["worker"]
            if e["zone"] == "patient" and self.state(w) == "warning":
                self.status[w] = ("violation", ts)
                if w in self.violations:  # UPDATE of a missing row changes nothing
                    self.violations[w] += 1
                self.out.append(("HygieneAlert", ts, w, e["room"]))
        self.out.extend(("Reminder", ts, e["worker"], e["room"],
                         self.violations.get(e["worker"])) for e in of["EnterRoom"]
                        if self.state(e["worker"]) == "violation")
        self.switch(of["Sanitize"], "violation", "safe", ts)  # recovered
        self.out.extend(("WardStatus", ts, e["worker"],
                         sum(1 for s, _ in self.status.values() if s != "safe"))
                        for e in of["ShiftEnd"])

    def switch(self, events: list[dict[str, Any]], old: str, new: str, ts: int) -> None:
        for e in events:
            if self.state(e["worker"]) == old:
                self.status[e["worker"]] = (new, ts)

    def pattern_state(self, ts: int, evs: list[dict[str, Any]]) -> None:
        """What SEQ(LeaveRoom, NOT Sanitize, EnterRoom) remembers per worker."""
        for e in evs:
            if e["type"] == "LeaveRoom":
                self.last_leave[e["worker"]], self.clean_since_leave[e["worker"]] = ts, False
            elif e["type"] == "Sanitize":
                self.clean_since_leave[e["worker"]] = True


def shown(alert: caesar.Alert) -> tuple:
    f = alert.fields
    if alert.event_type == "HygieneAlert":
        return ("HygieneAlert", alert.end_ts, f["worker"], f["room"])
    if alert.event_type == "Reminder":
        return ("Reminder", alert.end_ts, f["worker"], f["room"], f["violations"])
    return ("WardStatus", alert.end_ts, f["worker"], f["not_safe"])


EVENTS = list(generate(HygieneConfig(workers=40, hours=8, seed=3, sanitize_before=0.6,
                                     sanitize_after=0.6)))
EXPECTED, TABLES = Oracle().run(EVENTS)


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


def test_caesar_run_with_a_scheduler_prints_alerts_and_tables(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from caesar.cli.main import _register_all, app

    data = tmp_path / "hh.jsonl"
    data.write_text("\n".join(json.dumps(e) for e in EVENTS[:3000]) + "\n")
    _register_all()
    outs = {}
    for scheduler in ("lwm", "sei"):
        result = CliRunner().invoke(app, ["run", str(MODEL), "--input", str(data), "--json",
                                          "--scheduler", scheduler, "--tables"])
        assert result.exit_code == 0, result.output
        outs[scheduler] = sorted(line for line in result.stdout.splitlines()
                                 if line.startswith("{"))
        assert "hygiene (" in result.stdout and "violations (" in result.stdout
    assert outs["lwm"] == outs["sei"] and any("HygieneAlert" in o for o in outs["lwm"])
    memory = CliRunner().invoke(app, ["run", str(MODEL), "--input", str(data), "--bus",
                                      "memory"])
    assert memory.exit_code != 0 and "direct embedded pipeline" in str(memory.exception or "") \
        + memory.output
