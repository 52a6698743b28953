"""CLI conventions: --version, validated choices, exit codes (2 usage, 3 model,
1 runtime), logging through one configuration point, no print in services."""

from __future__ import annotations

import ast
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from caesar import __version__
from caesar.logs import configure

SRC = Path(__file__).resolve().parents[2] / "src" / "caesar"
MODEL = "EVENT R(ts INT, v INT)\nDERIVE A(r.v) PATTERN R r\n"


def caesar(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "caesar.cli.main", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_version_flag() -> None:
    out = caesar("--version")
    assert out.returncode == 0 and out.stdout.strip() == __version__


def test_a_bad_choice_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "m.caesar").write_text(MODEL)
    (tmp_path / "e.jsonl").write_text('{"type": "R", "ts": 1, "v": 2}\n')
    out = caesar("run", "m.caesar", "--input", "e.jsonl", "--engine", "fast", cwd=tmp_path)
    assert out.returncode == 2
    assert "fast" in out.stderr and "cython" in out.stderr and "reference" in out.stderr


def test_model_and_runtime_errors_have_their_own_codes(tmp_path: Path) -> None:
    (tmp_path / "bad.caesar").write_text("DERIVE A(r.v) PATTERN R r\n")
    model_error = caesar("explain", "bad.caesar", cwd=tmp_path)
    assert model_error.returncode == 3 and "bad.caesar:1:" in model_error.stderr
    (tmp_path / "m.caesar").write_text(MODEL)
    missing_input = caesar("run", "m.caesar", "--input", "nope.jsonl", cwd=tmp_path)
    assert missing_input.returncode == 1 and "does not exist" in missing_input.stderr
    assert "Traceback" not in model_error.stderr + missing_input.stderr


def test_deploy_takes_the_same_config_flag_as_the_runtime_commands() -> None:
    for command in ("deploy", "up", "status", "topics"):
        assert "--config" in caesar(command, "--help").stdout, command


def test_json_logs_are_one_object_per_line(capsys: pytest.CaptureFixture[str]) -> None:
    configure("DEBUG", "json")
    try:
        logging.getLogger("caesar.test").info("hello %s", "there", extra={"partition": 7})
        line = capsys.readouterr().err.strip().splitlines()[-1]
        record = json.loads(line)
        assert record["message"] == "hello there" and record["partition"] == 7
        assert record["level"] == "INFO" and record["logger"] == "caesar.test"
    finally:
        configure("INFO", "text")


def test_a_bad_log_level_is_a_usage_error() -> None:
    assert caesar("--log-level", "LOUD", "version").returncode == 2


def test_services_log_instead_of_printing() -> None:
    printing = []
    for path in (SRC / "services").rglob("*.py"):
        printing.extend(f"{path.relative_to(SRC)}:{node.lineno}"
                        for node in ast.walk(ast.parse(path.read_text()))
                        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print")
    assert printing == []
