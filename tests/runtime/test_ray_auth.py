"""The local Ray head keeps strangers out (issue 11): Ray 2.60 binds its GCS
and raylet on every interface whatever --node-ip-address says, so the head
runs with token authentication and a client without the token is refused."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from caesar.runtime.processes import free_port
from caesar.runtime.ray_local import LocalRay, RayConfig

pytestmark = pytest.mark.integration

CLIENT = """
import sys
{auth}
import ray
ray.init(address=sys.argv[1], log_to_driver=False, include_dashboard=False)
print("answer", ray.get(ray.remote(lambda: 41 + 1).remote()))
"""


def client(address: str, auth: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env["RAY_gcs_rpc_server_reconnect_timeout_s"] = "5"  # a refused client gives up soon
    return subprocess.run([sys.executable, "-c", CLIENT.format(auth=auth), address],
                          capture_output=True, text=True, timeout=180, env=env)


def test_head_refuses_clients_without_the_token(tmp_path: Path):
    head = LocalRay(RayConfig(directory=tmp_path / "ray", port=free_port()))
    head.start(timeout_s=120)
    try:
        ok = client(head.address,
                    "from caesar.runtime.ray_local import use_token_auth; use_token_auth()")
        assert "answer 42" in ok.stdout, ok.stderr[-2000:]
        stranger = client(head.address, "import os; os.environ['RAY_AUTH_MODE'] = 'disabled'")
        assert stranger.returncode != 0
        assert "answer" not in stranger.stdout
        assert "token" in stranger.stderr.lower(), stranger.stderr[-2000:]
    finally:
        head.stop()
