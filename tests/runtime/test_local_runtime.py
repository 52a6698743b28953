"""`caesar up / status / down` for real (broker from the cached jars, Ray head),
on free ports in a temp dir."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from caesar.runtime.processes import free_port, pid_alive, port_open

pytestmark = pytest.mark.integration

CAESAR = [sys.executable, "-m", "caesar.cli.main"]


def caesar(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([*CAESAR, *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_up_status_topics_down_on_custom_ports(tmp_path: Path):
    run = tmp_path / "run"
    port, cport, rport = free_port(), free_port(), free_port()
    ports = ["--port", str(port), "--controller-port", str(cport), "--ray-port", str(rport)]
    up = caesar("up", "--runtime-dir", str(run), *ports)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert f"127.0.0.1:{port}" in up.stdout
        state = json.loads((run / "state.json").read_text())
        kafka_pid, ray_pid = state["broker"]["pid"], state["ray"]["pid"]
        assert pid_alive(kafka_pid) and pid_alive(ray_pid)
        assert port_open(port) and port_open(rport)

        status = caesar("status", "--runtime-dir", str(run))
        assert status.returncode == 0
        assert status.stdout.count("running") == 2
        assert str(kafka_pid) in status.stdout and str(ray_pid) in status.stdout

        # a second `up` sees both running and starts nothing
        again = caesar("up", "--runtime-dir", str(run), *ports)
        assert again.returncode == 0 and "already running" in again.stdout

        topics = caesar("topics", "--runtime-dir", str(run), "--create", "-e", "Pos",
                        "--store", "ctx")
        assert topics.returncode == 0, topics.stderr
        assert "caesar.input.Pos" in topics.stdout and "compact" in topics.stdout

        # Ray is usable at the address status printed, and its workers (the
        # services' actors) run at this process's priority, not Ray's nice 15
        probe = subprocess.run(
            [sys.executable, "-c",
             f"import os, ray; ray.init(address='127.0.0.1:{rport}', log_to_driver=False);"
             "nice = ray.get(ray.remote(lambda: os.nice(0)).remote());"
             "print(int(ray.cluster_resources()['CPU']), nice)"],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "RAY_AUTH_MODE": "token"})  # as `up` tells clients
        lines = probe.stdout.strip().splitlines()
        assert lines and lines[-1] == f"2 {os.nice(0)}", probe.stderr[-2000:]
    finally:
        down = caesar("down", "--runtime-dir", str(run))
    assert down.returncode == 0, down.stderr
    assert "Ray (pid" in down.stdout and "Kafka broker (pid" in down.stdout
    assert not pid_alive(kafka_pid) and not pid_alive(ray_pid)
    assert not port_open(port) and not port_open(rport)
    status = caesar("status", "--runtime-dir", str(run))
    assert status.returncode == 1 and status.stdout.count("stopped") == 2


def test_up_fails_clearly_when_the_port_is_taken(tmp_path: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = caesar("up", "--runtime-dir", str(tmp_path / "run"), "--no-ray", "--no-topics",
                        "--port", str(port), "--controller-port", str(free_port()), timeout=60)
    assert result.returncode == 1  # a runtime failure, not a usage error
    assert f"port {port} is already in use" in result.stderr
    assert "Traceback" not in result.stderr
