"""`caesar run` on a file, with the plan handed in directly (the compiler is
tested on its own; here the command, the file readers and the embedded
pipeline are under test)."""

import json

from service_plans import pos, two_context_plan
from typer.testing import CliRunner

import caesar.cli.run_cmd as run_cmd
from caesar.cli.main import _register_all, app


def test_run_prints_alerts_and_dead_letters(tmp_path, monkeypatch):
    monkeypatch.setattr(run_cmd, "load_plan", lambda model, *_: two_context_plan())
    events = [pos(1, 1, 7, 90.0), pos(2, 2, 7, 30.0), pos(3, 4, 7, 10.0), pos(4, 5, 7, 70.0)]
    lines = [json.dumps(e) for e in events]
    lines.insert(2, "{not json")
    lines.insert(3, json.dumps({"type": "Pos", "ts": 3, "vid": "x", "seg": 7, "spd": 1.0}))
    data = tmp_path / "events.jsonl"
    data.write_text("\n".join(lines) + "\n")
    model = tmp_path / "m.caesar"
    model.write_text("-- plan supplied by the test")
    _register_all()
    result = CliRunner().invoke(app, ["run", str(model), "--input", str(data), "--json",
                                      "--engine", "reference"])
    assert result.exit_code == 0, result.output
    alerts = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert sorted((a["type"], a["ts"]) for a in alerts) == [
        ("Fast", 1), ("SlowToll", 3), ("Toll", 3), ("Toll", 4)]
    assert "undecodable" in result.stderr and "schema" in result.stderr
    assert "2 dead letters" in result.stderr


def test_run_over_the_memory_bus_prints_the_same_alerts(tmp_path, monkeypatch):
    monkeypatch.setattr(run_cmd, "load_plan", lambda model, *_: two_context_plan())
    events = [pos(1, 1, 7, 90.0), pos(2, 2, 7, 30.0), pos(3, 4, 7, 10.0), pos(4, 5, 7, 70.0),
              pos(5, 6, 7, 95.0)]
    data = tmp_path / "events.jsonl"
    data.write_text("\n".join([json.dumps(e) for e in events] + ["{broken"]) + "\n")
    model = tmp_path / "m.caesar"
    model.write_text("-- plan supplied by the test")
    _register_all()
    outputs = []
    for bus in ("direct", "memory"):
        result = CliRunner().invoke(app, ["run", str(model), "--input", str(data), "--json",
                                          "--engine", "reference", "--bus", bus])
        assert result.exit_code == 0, result.output
        outputs.append(sorted(line for line in result.stdout.splitlines() if line.startswith("{")))
        assert "1 dead letter" in result.stderr
    assert outputs[0] == outputs[1] and len(outputs[0]) == 5


def test_run_reads_csv(tmp_path, monkeypatch):
    monkeypatch.setattr(run_cmd, "load_plan", lambda model, *_: two_context_plan())
    data = tmp_path / "events.csv"
    data.write_text("ts,vid,seg,spd\n1,1,7,90\n2,2,7,30\n3,4,7,10\n")
    model = tmp_path / "m.caesar"
    model.write_text("-- plan supplied by the test")
    _register_all()
    result = CliRunner().invoke(app, ["run", str(model), "--input", str(data), "--json",
                                      "--engine", "reference"])
    assert result.exit_code == 0, result.output
    alerts = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert sorted((a["type"], a["ts"], a["fields"]["vid"]) for a in alerts) == [
        ("Fast", 1, 1), ("SlowToll", 3, 4), ("Toll", 3, 4)]


def test_run_with_a_function_by_path(tmp_path):
    """`--function NAME=package.module:function`: the model calls it."""
    model = tmp_path / "geo.caesar"
    model.write_text('EVENT Pos(ts INT, car INT, lat DOUBLE, lon DOUBLE) FROM TOPIC "p"\n'
                     "DERIVE Far(p.car, km(p.lat, p.lon, 52.0, 13.0) AS d) PATTERN Pos p\n"
                     "  WHERE km(p.lat, p.lon, 52.0, 13.0) > 100\n")
    data = tmp_path / "events.jsonl"
    data.write_text("\n".join(json.dumps({"type": "Pos", "ts": t, "car": 1, "lat": lat,
                                          "lon": 13.0})
                              for t, lat in ((1, 52.5), (2, 54.0), (3, 91.0))) + "\n")
    _register_all()
    args = ["run", str(model), "--input", str(data), "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code != 0 and "unknown function km" in str(result.exception)
    result = CliRunner().invoke(app, args + ["--function", "km=caesar.examples.geo:haversine_km"])
    assert result.exit_code == 0, result.output
    alerts = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [(a["ts"], round(a["fields"]["d"])) for a in alerts] == [(2, 222)]
    assert "dead letter (function)" in result.stderr and "1 dead letters" in result.stderr


def test_bad_records_are_dead_lettered_alike_in_every_mode_and_batch_size(tmp_path, monkeypatch):
    """Issue 11: `--bus memory` crashed on a bad record, and `--batch-size 1`
    gave other alerts and dead letters than the default (lateness was decided
    per batch). Out-of-order input (within and beyond the allowance) and every
    kind of bad record: the same alerts and the same records dead-lettered,
    whatever the mode and the batch size. (Over the bus a record that breaks
    the schema cannot be encoded onto the input topic, so its reason there is
    UNDECODABLE; the direct mode names the field.)"""
    import re

    monkeypatch.setattr(run_cmd, "load_plan", lambda model, *_: two_context_plan())
    lines = [json.dumps(e) for e in [
        pos(5, 1, 7, 90.0), pos(3, 2, 7, 30.0), pos(1, 3, 7, 10.0), pos(8, 4, 7, 10.0),
        pos(6, 5, 7, 70.0), pos(2, 6, 7, 95.0), pos(9, 7, 7, 20.0), pos(10, 8, 7, 95.0)]]
    lines.insert(3, "{not json")
    lines.insert(5, json.dumps({"type": "Pos", "ts": 6, "vid": "x", "seg": 7, "spd": 1.0}))
    lines.insert(6, json.dumps({"type": "Nope", "ts": 6, "vid": 1, "seg": 7}))
    lines.insert(7, json.dumps({"type": "Pos", "ts": 6, "vid": 2**64, "seg": 7, "spd": 1.0}))
    data = tmp_path / "events.jsonl"
    data.write_text("\n".join(lines) + "\n")
    model = tmp_path / "m.caesar"
    model.write_text("-- plan supplied by the test")
    _register_all()
    runs = {}
    for bus in ("direct", "memory"):
        for batch in ("1", "3", "5000"):
            result = CliRunner().invoke(app, [
                "run", str(model), "--input", str(data), "--json", "--engine", "reference",
                "--allowance", "2", "--bus", bus, "--batch-size", batch])
            assert result.exit_code == 0, (bus, batch, result.output)
            alerts = sorted(line for line in result.stdout.splitlines() if line.startswith("{"))
            dead = re.findall(r"dead letter \((\w+)\) (?:record|offset) (\d+)", result.stderr)
            runs[bus, batch] = (alerts, [(r.lower(), int(o)) for r, o in dead])
    alerts, dead = runs["direct", "5000"]
    assert len(alerts) == 3
    assert dead == [("late", 2), ("undecodable", 3), ("schema", 5), ("unknown_type", 6),
                    ("schema", 7), ("late", 9)]
    for (bus, batch), (a, d) in runs.items():
        assert a == alerts, (bus, batch)
        if bus == "direct":
            assert d == dead, (bus, batch)
        else:
            assert [o for _, o in d] == [o for _, o in dead], (bus, batch)
            assert [r for r, _ in d] == ["late", "undecodable", "undecodable", "undecodable",
                                         "undecodable", "late"]


def test_run_counts_every_alert_it_printed_batch_by_batch(tmp_path, monkeypatch):
    """With batches of one event the alerts are printed, then dropped, per
    batch (a long file holds none of them); the summary still counts all."""
    monkeypatch.setattr(run_cmd, "load_plan", lambda model, *_: two_context_plan())
    events = [pos(1, 1, 7, 90.0), pos(2, 2, 7, 30.0), pos(3, 4, 7, 10.0), pos(4, 5, 7, 70.0)]
    data = tmp_path / "events.jsonl"
    data.write_text("\n".join(json.dumps(e) for e in events) + "\n")
    model = tmp_path / "m.caesar"
    model.write_text("-- plan supplied by the test")
    _register_all()
    result = CliRunner().invoke(app, ["run", str(model), "--input", str(data), "--json",
                                      "--engine", "reference", "--batch-size", "1"])
    assert result.exit_code == 0, result.output
    alerts = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert len(alerts) == 4
    assert "4 events, 4 alerts" in result.stderr
