"""src/caesar/runtime/fetch_kafka.sh is idempotent: with the jars cached it does nothing."""

from __future__ import annotations

import os
import subprocess

import pytest

from caesar.runtime.kafka_jars import FETCH_SCRIPT, ensure_kafka_jars, kafka_libs

pytestmark = pytest.mark.integration


def test_fetch_is_a_noop_when_cached():
    libs = ensure_kafka_jars("4.1.1")  # fetches only if setup has not
    jars = sorted(p.name for p in libs.iterdir())
    assert "kafka_2.13-4.1.1.jar" in jars and "kafka-clients-4.1.1.jar" in jars
    assert any(j.startswith("log4j-slf4j-impl-") for j in jars)  # the logging binding
    assert (libs.parent / "dependency-tree.txt").read_text().count(":jar:") == len(jars)
    before = {p.name: p.stat().st_mtime_ns for p in libs.iterdir()}
    result = subprocess.run(["bash", str(FETCH_SCRIPT)], capture_output=True, text=True,
                            timeout=60, env={**os.environ, "CAESAR_KAFKA_VERSION": "4.1.1"})
    assert result.returncode == 0, result.stderr
    assert "already cached" in result.stdout
    assert {p.name: p.stat().st_mtime_ns for p in kafka_libs("4.1.1").iterdir()} == before
