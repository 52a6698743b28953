"""`caesar tables MODEL`: what it says when it cannot show a table. The
command against a running deployment (Kafka + Ray) is tested in
tests/services/test_acep_ray_kafka.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import caesar
from caesar.errors import ConfigError, RuntimeEnvironmentError

EXAMPLES = Path(caesar.__file__).parent / "examples" / "hospital_hygiene"
WITH_TABLES = EXAMPLES / "hyreminder.caesar"
WITHOUT_TABLES = EXAMPLES / "model.caesar"


def caesar_cli(*args: str, env: dict[str, str] | None = None
               ) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([sys.executable, "-m", "caesar.cli.main", *args],
                         capture_output=True, text=True, timeout=120, env=env)
    out.stderr = " ".join(out.stderr.split())  # rich wraps lines at the terminal width
    return out


def test_a_model_without_tables_is_an_error() -> None:
    out = caesar_cli("tables", str(WITHOUT_TABLES))
    assert out.returncode == 1
    assert "declares no TABLE" in out.stderr and "Traceback" not in out.stderr


def test_an_unknown_table_names_the_known_ones() -> None:
    out = caesar_cli("tables", str(WITH_TABLES), "--table", "hygiene", "--table", "nope")
    assert out.returncode == 1
    assert "no table 'nope'" in out.stderr and "its tables: hygiene, violations" in out.stderr


def test_without_a_ray_cluster_it_says_how_to_start_one(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if k != "RAY_ADDRESS" and not k.startswith("CAESAR_")}
    out = caesar_cli("tables", str(WITH_TABLES), "--runtime-dir", str(tmp_path), env=env)
    assert out.returncode == 1
    assert "no Ray cluster" in out.stderr and "caesar deploy MODEL" in out.stderr


def test_a_deployment_without_tables_has_none_to_show() -> None:
    from caesar.language import compile_model
    from caesar.services.ray_runtime.deployment import Deployment
    from caesar.settings import Settings

    dep = Deployment(compile_model(WITHOUT_TABLES), Settings(),
                     options={"group_prefix": "plain"})
    with pytest.raises(ConfigError, match="'plain' runs model .* declares no TABLE"):
        dep.tables()


@pytest.mark.integration
def test_no_deployment_names_the_namespace(ray_session: None) -> None:
    """A Ray cluster without the deployment: the namespace and prefix asked
    for, and `caesar deploy MODEL` (in this process: the session's Ray)."""
    import ray
    from typer.testing import CliRunner

    from caesar.cli.main import _register_all, app

    _register_all()
    namespace = "elsewhere"
    assert ray.get_runtime_context().namespace != namespace
    result = CliRunner().invoke(app, ["tables", str(WITH_TABLES), "--prefix", "nobody",
                                      "--ray-address", "unused"],
                                env={"CAESAR_RAY__NAMESPACE": namespace})
    assert isinstance(result.exception, RuntimeEnvironmentError)
    message = str(result.exception)
    assert f"no running deployment 'nobody' in Ray namespace {namespace!r}" in message
    assert "caesar deploy MODEL" in message
