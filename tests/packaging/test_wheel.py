"""The wheel as a user gets it: built from the checkout, installed into a clean
venv outside it, used from a directory that is not the checkout.

The core (language, Cython engine, embedded mode, Avro, Kafka client) installs
without Spark, Ray or matplotlib; `[ray]` adds what `caesar up` needs, and the
broker's jars and the schemas are found from the installed package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from caesar.runtime.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements" / "lock.txt"
pytestmark = pytest.mark.integration

MODEL = """MODEL packaged
TIME UNIT SECONDS
PARTITION BY car
EVENT Report(ts INT, car INT, speed INT) FROM TOPIC "reports"

DEFAULT CONTEXT calm {
  SWITCH CONTEXT fast PATTERN Report r WHERE r.speed > 100
}
CONTEXT fast {
  SWITCH CONTEXT calm PATTERN Report r WHERE r.speed <= 100
  DERIVE Speeding(r.car, r.speed) PATTERN Report r
}
"""


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None,
         timeout: float = 600) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # The build needs Cython and numpy: this venv has the locked ones.
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
          "--disable-pip-version-check", "-q", "-w", str(out), str(ROOT)], cwd=out)
    wheels = list(out.glob("caesar_cep-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def user(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Iterator[dict[str, Path]]:
    """A clean venv with the core wheel, and a working directory outside the checkout."""
    home = tmp_path_factory.mktemp("user")
    env_dir = home / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q",
          "-c", str(LOCK), str(wheel)], cwd=home)
    work = home / "work"
    work.mkdir()
    yield {"python": python, "bin": env_dir / "bin", "work": work, "wheel": wheel}


def _env(user: dict[str, Path]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "VIRTUAL_ENV", "CAESAR_SCHEMAS"))}
    env["PATH"] = f"{user['bin']}:{env.get('PATH', '')}"
    return env


def test_core_install_leaves_out_spark_ray_and_plotting(user: dict[str, Path]) -> None:
    probe = ("import importlib.util, json, caesar;"
             "print(json.dumps({'caesar': caesar.__file__, 'missing': [m for m in "
             "('ray', 'pyspark', 'matplotlib', 'pyarrow') if importlib.util.find_spec(m) is None]}))")
    out = json.loads(_run([str(user["python"]), "-c", probe], cwd=user["work"],
                          env=_env(user)).stdout)
    assert out["missing"] == ["ray", "pyspark", "matplotlib", "pyarrow"]
    assert Path(out["caesar"]).is_relative_to(user["python"].parents[1])  # not the checkout


def test_explain_and_run_a_model_outside_the_checkout(user: dict[str, Path]) -> None:
    work, env = user["work"], _env(user)
    model = work / "packaged.caesar"
    model.write_text(MODEL)
    events = work / "events.jsonl"
    rows = [{"type": "Report", "ts": t, "car": 1, "speed": s}
            for t, s in enumerate([90, 120, 130, 80, 110])]
    events.write_text("".join(json.dumps(r) + "\n" for r in rows))
    explained = _run([str(user["bin"] / "caesar"), "explain", str(model)], cwd=work, env=env)
    assert "Speeding" in explained.stdout
    ran = _run([str(user["bin"] / "caesar"), "run", str(model), "--input", str(events),
                "--json"], cwd=work, env=env)
    alerts = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    # Context windows are half-open (ti, tt]: fast holds for ts 2 and 3 (the
    # switch back at 3 included), and from after ts 4, when no report follows.
    assert sorted(a["fields"]["speed"] for a in alerts if a["type"] == "Speeding") == [80, 130]


def test_packaged_example_and_schemas_are_package_data(user: dict[str, Path]) -> None:
    probe = ("import json; from caesar.examples import model_path;"
             "from caesar.codecs.schemas import default_schema_dir;"
             "from caesar.runtime.kafka_jars import FETCH_SCRIPT;"
             "from caesar.language import compile_model;"
             "plan = compile_model(model_path('linear_road'));"
             "print(json.dumps({'model': str(model_path('linear_road')),"
             "'schemas': str(default_schema_dir()), 'fetch': str(FETCH_SCRIPT),"
             "'with_schema': sorted(t.name for t in plan.event_types if t.schema_json)}))")
    out = json.loads(_run([str(user["python"]), "-c", probe], cwd=user["work"],
                          env=_env(user)).stdout)
    site = user["python"].parents[1]
    for key in ("model", "schemas", "fetch"):
        assert Path(out[key]).is_relative_to(site) and Path(out[key]).exists(), out[key]
    assert out["with_schema"] == ["AccidentAlert", "PositionReport", "TollCharge",
                                  "TollNotification"]


def test_caesar_up_runs_from_the_installed_package(user: dict[str, Path],
                                                   tmp_path: Path) -> None:
    env, work = _env(user), user["work"]
    _run([str(user["python"]), "-m", "pip", "install", "--disable-pip-version-check", "-q",
          "-c", str(LOCK), f"caesar-cep[ray] @ {user['wheel'].as_uri()}"], cwd=work)
    caesar = str(user["bin"] / "caesar")
    runtime = ["--runtime-dir", str(tmp_path / "run")]
    env["RAY_AUTH_MODE"] = "disabled"  # a head of its own, not the test session's Ray
    try:
        _run([caesar, "up", *runtime, "--port", str(free_port()), "--controller-port",
              str(free_port()), "--ray-port", str(free_port())], cwd=work, env=env)
        status = _run([caesar, "status", *runtime], cwd=work, env=env).stdout
        assert status.count("running") >= 2, status
    finally:
        subprocess.run([caesar, "down", *runtime], cwd=work, env=env, capture_output=True,
                       timeout=120)
