"""The Linear Road model (src/caesar/examples/linear_road/model.caesar) run by the CAESAR
services in embedded mode derives exactly the outputs of the SPEC.md oracle, on
the sample data with per-segment fan-out (src/caesar/examples/linear_road/check_model.py)."""

from __future__ import annotations

from pathlib import Path

from caesar.examples.linear_road import oracle
from caesar.examples.linear_road.check_model import OUTPUTS, diff, run_model
from caesar.examples.linear_road.records import read_lr

SAMPLE = Path(__file__).resolve().parents[2] / "src/caesar/examples/linear_road/data/sample-L1-480s-seed1.lr"


def test_model_in_embedded_mode_equals_the_oracle():
    reports = list(read_lr(SAMPLE))
    expected = oracle.expected_outputs(reports)
    actual = run_model(reports, fanout=True)
    for name, rows in (("TollNotification", expected.tolls), ("AccidentAlert", expected.alerts)):
        result = diff(rows, actual[name], OUTPUTS[name])
        counts = {k: result[k] for k in ("missing", "extra", "duplicates", "different")}
        assert counts == dict.fromkeys(counts, 0), (name, result)
        assert result["actual"] == len(rows) > 0
    assert any(t.toll > 0 for t in expected.tolls) and expected.accidents


def test_diff_reports_each_kind():
    want = [oracle.AlertRow(1, 10, 0, 0, 5, 6), oracle.AlertRow(2, 10, 0, 0, 5, 6),
            oracle.AlertRow(3, 10, 0, 0, 5, 6)]
    got = [dict(w._asdict()) for w in want[1:]] + [
        {"vid": 9, "time": 1, "xway": 0, "dir": 0, "seg": 1, "acc_seg": 1}]
    got[0]["acc_seg"] = 7
    got.append(dict(got[1]))
    result = diff(want, got, oracle.ALERT_FIELDS)
    assert {k: result[k] for k in ("missing", "extra", "duplicates", "different")} == {
        "missing": 1, "extra": 1, "duplicates": 1, "different": 1}
    assert result["examples"]["different (expected, actual)"][0]["acc_seg"] == (6, 7)
