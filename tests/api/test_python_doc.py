"""Every ```python block of docs/python.md runs, in order, in one namespace
(the doc is the API's specification). The deploy examples need a broker and
Ray, so they run in the integration test below with the session fixtures."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "python.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
DEPLOY = [b for b in BLOCKS if "caesar.deploy(" in b]
LOCAL = [b for b in BLOCKS if b not in DEPLOY]


def _run(blocks: list[str], namespace: dict[str, object]) -> None:
    for i, block in enumerate(blocks):
        # Our own documentation, compiled as a test program (not user input).
        code = compile(block, f"{DOC.name}[block {i}]", "exec")
        exec(code, namespace)  # noqa: S102


def test_the_doc_has_examples() -> None:
    assert len(LOCAL) >= 6 and len(DEPLOY) == 2


def test_local_examples_run() -> None:
    _run(LOCAL, {})


@pytest.mark.integration
def test_deploy_example_runs(kafka_bootstrap: str, ray_session: None) -> None:
    namespace: dict[str, object] = {"BOOTSTRAP": kafka_bootstrap}
    # the models they deploy: `model`, and `rules` (shared tables)
    _run([LOCAL[0], *(b for b in LOCAL if "rules = caesar.compile(" in b)], namespace)
    _run(DEPLOY, namespace)
