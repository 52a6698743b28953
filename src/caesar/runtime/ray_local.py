"""A local Ray head node for `caesar up`, run as `ray start --head --block` in
its own process group: that process supervises every Ray daemon it started and
stops them when it gets SIGTERM, so `stop` needs only its PID (never
`ray stop`, which would kill every Ray cluster of this user on the machine)."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from caesar.errors import RuntimeEnvironmentError
from caesar.runtime.processes import (
    PidFileProcess,
    free_port,
    pid_alive,
    port_open,
    stop_pid,
    tail,
    wait_for_port,
)

AUTH_TOKEN_FILE = Path.home() / ".ray" / "auth_token"  # Ray's default token path


def ensure_auth_token() -> None:
    """The token Ray's token authentication uses: from RAY_AUTH_TOKEN or
    RAY_AUTH_TOKEN_PATH when set, else Ray's default file, created (random,
    readable by this user only) when missing."""
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return
    if AUTH_TOKEN_FILE.is_file() and AUTH_TOKEN_FILE.stat().st_size:
        return
    AUTH_TOKEN_FILE.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(AUTH_TOKEN_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secrets.token_hex(32))


def use_token_auth() -> None:
    """Call before importing ray in a driver of the local head: its clients
    authenticate with the token (Ray reads RAY_AUTH_MODE when it is imported).
    A cluster without authentication is reached with RAY_AUTH_MODE=disabled
    set by the user, which this leaves alone."""
    if "ray" not in sys.modules:
        os.environ.setdefault("RAY_AUTH_MODE", "token")
    if os.environ.get("RAY_AUTH_MODE") == "token":
        ensure_auth_token()


@dataclass
class RayConfig:
    directory: Path
    port: int = 6379
    num_cpus: int = 2
    memory_mb: int = 3072
    object_store_mb: int = 512
    dashboard: bool = False

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


class LocalRay(PidFileProcess):
    def __init__(self, config: RayConfig) -> None:
        self.config = config
        self.dir = config.directory
        self.pid_file = self.dir / "ray.pid"
        self.log_file = self.dir / "ray.log"
        self.temp_link = self.dir / "ray-temp"  # -> the short temp dir Ray uses
        self.killed = False  # the last stop needed SIGKILL
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return self.config.address


    def start(self, timeout_s: float = 60.0) -> None:
        if self.running():
            raise RuntimeEnvironmentError(f"a Ray head from {self.dir} is already running (pid {self.pid})")
        if port_open(self.config.port):
            raise RuntimeEnvironmentError(
                f"port {self.config.port} is already in use; pick another Ray port "
                "(--ray-port or CAESAR_RUNTIME__RAY_PORT)")
        ray_bin = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
        if ray_bin is None:
            raise RuntimeEnvironmentError("the `ray` command is not installed in this environment")
        self.dir.mkdir(parents=True, exist_ok=True)
        # Ray's unix socket paths must stay short (<108 bytes): use a short temp dir.
        temp_dir = Path(tempfile.mkdtemp(prefix="caesar-ray-", dir="/tmp"))
        self.temp_link.unlink(missing_ok=True)
        self.temp_link.symlink_to(temp_dir)
        c = self.config
        cmd = [ray_bin, "start", "--head", "--block", "--disable-usage-stats",
               "--node-ip-address", "127.0.0.1", "--port", str(c.port),
               "--num-cpus", str(c.num_cpus), "--num-gpus", "0",
               "--memory", str(c.memory_mb * 1024 * 1024),
               "--object-store-memory", str(c.object_store_mb * 1024 * 1024),
               "--include-dashboard", "true" if c.dashboard else "false",
               # Free ports for everything else, so several clusters can coexist.
               "--ray-client-server-port", str(free_port()),
               "--dashboard-agent-listen-port", str(free_port()),
               "--dashboard-agent-grpc-port", str(free_port()),
               "--runtime-env-agent-port", str(free_port()),
               "--metrics-export-port", str(free_port()),
               "--temp-dir", str(temp_dir)]
        if c.dashboard:
            cmd += ["--dashboard-port", str(free_port())]
        # A fresh log: readiness is read from it (keep the previous run's as .prev).
        if self.log_file.exists():
            self.log_file.replace(self.log_file.with_suffix(".log.prev"))
        with open(self.log_file, "wb") as log:  # the head keeps its own descriptor
            # No Serve here: skip Ray's 30 s drain on SIGTERM so `down` is quick.
            # Token auth on: Ray 2.60 binds its GCS, raylet and agents on every
            # interface whatever --node-ip-address says, so the token is what
            # keeps others off (clients: use_token_auth()).
            ensure_auth_token()
            # Ray starts its workers at nice 15 (worker_niceness), below the
            # broker and producers at 0: under contention the services, which
            # carry the latency, would yield to them. They are this head's
            # whole workload, so they run at 0 unless the user set otherwise.
            env = {"RAY_worker_niceness": "0", **os.environ,
                   "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
                   "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token"}
            self._process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                             stdin=subprocess.DEVNULL, start_new_session=True)
        self.pid_file.write_text(str(self._process.pid))
        if not wait_for_port(c.port, timeout_s, self._alive) or not self._wait_ready(timeout_s):
            died = not self._alive()
            self.stop()
            what = "exited" if died else f"was not ready within {timeout_s:.0f} s"
            raise RuntimeEnvironmentError(
                f"the Ray head {what}; last lines of {self.log_file}:\n{tail(self.log_file)}")

    def _wait_ready(self, timeout_s: float) -> bool:
        # The GCS port opens before the raylet registers; `ray start` prints its
        # banner ("Ray runtime started") once the node is up.
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if "Ray runtime started" in tail(self.log_file, 200):
                return True
            if not self._alive():
                return False
            time.sleep(0.1)
        return False

    def stop(self, timeout_s: float = 30.0) -> bool:
        pid = self.pid
        if pid is None:
            return False
        was_running = pid_alive(pid)
        self.killed = stop_pid(pid, timeout_s) if was_running else False
        if self._process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=5)
            self._process = None
        self.pid_file.unlink(missing_ok=True)
        if self.temp_link.is_symlink():
            shutil.rmtree(self.temp_link.resolve(), ignore_errors=True)
            self.temp_link.unlink(missing_ok=True)
        return was_running
