"""Small process helpers: free ports, waiting for a port, stopping by PID."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def wait_for_port(port: int, timeout_s: float, alive: Callable[[], bool],
                  host: str = "127.0.0.1") -> bool:
    """True once the port accepts connections; False on timeout or when `alive` says
    the process died (no point waiting longer)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if port_open(port, host):
            return True
        if not alive():
            return False
        time.sleep(0.1)
    return False


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    # A zombie (exited, not reaped) counts as dead.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return True


def stop_pid(pid: int, timeout_s: float = 20.0, group: bool = True) -> bool:
    """SIGTERM the process (its process group when `group`), SIGKILL after
    `timeout_s`. True if it had to be killed."""
    def send(sig: int) -> None:
        try:
            if group:
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:
            os.kill(pid, sig)

    if not pid_alive(pid):
        return False
    send(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        _reap(pid)
        if not pid_alive(pid):
            return False
        time.sleep(0.1)
    send(signal.SIGKILL)
    for _ in range(50):
        _reap(pid)
        if not pid_alive(pid):
            break
        time.sleep(0.1)
    return True


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class PidFileProcess:
    """A local daemon whose PID file lets any process (e.g. `caesar down`) find it."""

    pid_file: Path
    _process: subprocess.Popen[bytes] | None  # set when this process started it

    @property
    def pid(self) -> int | None:
        return read_pid(self.pid_file)

    def running(self) -> bool:
        pid = self.pid
        return pid is not None and pid_alive(pid)

    def _alive(self) -> bool:
        # A child we started is polled (and reaped); otherwise go by the PID file.
        if self._process is not None:
            return self._process.poll() is None
        return self.running()
