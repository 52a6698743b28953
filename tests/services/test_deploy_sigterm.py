"""Unit: `caesar deploy` stops its actors on SIGTERM (a Kubernetes pod
shutdown), as on Ctrl-C. Ray and the deployment are stand-ins here; the real
deployment is exercised by tests/services/test_ray_kafka.py."""

from __future__ import annotations

import os
import signal
import sys
import threading
import types

from caesar.services.ray_runtime import deployment


class _FakeDeployment:
    instances: list[_FakeDeployment] = []

    def __init__(self, plan, settings, options=None) -> None:
        self.counts = {"scheduler": 1, "deriver": 1, "router": 1, "matcher": 1}
        self.stopped = False
        _FakeDeployment.instances.append(self)

    def start(self) -> None:
        pass

    def stats(self) -> dict:
        return {}

    def stop(self) -> None:
        self.stopped = True


class _Console:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def print(self, text: str) -> None:
        self.lines.append(text)


def test_sigterm_stops_the_deployment(monkeypatch):
    fake_ray = types.ModuleType("ray")
    fake_ray.init = lambda **kwargs: None
    monkeypatch.setitem(sys.modules, "ray", fake_ray)
    monkeypatch.setattr(deployment, "Deployment", _FakeDeployment)
    plan = types.SimpleNamespace(model="m")

    def unhandled(signum, frame):  # what runs if deploy_model does not handle SIGTERM
        raise AssertionError("SIGTERM reached the caller's handler")

    before = signal.signal(signal.SIGTERM, unhandled)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM))
    try:
        timer.start()
        console = _Console()
        deployment.deploy_model(plan, model_text="", settings_file=None, ray_address=None,
                                run_for=0, console=console,
                                observe_port=0)  # returns only when signalled
        timer.join()
        assert _FakeDeployment.instances[-1].stopped
        assert console.lines[-1] == "stopped"
        assert signal.getsignal(signal.SIGTERM) is unhandled  # the caller's handler is back
    finally:
        signal.signal(signal.SIGTERM, before)
