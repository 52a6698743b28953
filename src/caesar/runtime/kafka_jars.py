"""Where the cached Kafka broker jars are, and fetching them when missing."""

from __future__ import annotations

import os
import subprocess
from importlib.resources import files
from pathlib import Path

from caesar.errors import RuntimeEnvironmentError
from caesar.settings import CACHE_DIR

# Shipped inside the package, so an installed CAESAR can fetch its broker too.
FETCH_SCRIPT = Path(str(files("caesar.runtime") / "fetch_kafka.sh"))


def kafka_libs(version: str) -> Path:
    return CACHE_DIR / "kafka" / version / "libs"


def jars_cached(version: str) -> bool:
    return (CACHE_DIR / "kafka" / version / ".complete").is_file()


def ensure_kafka_jars(version: str, *, quiet: bool = False) -> Path:
    """The libs dir, fetching the jars with src/caesar/runtime/fetch_kafka.sh first if needed."""
    libs = kafka_libs(version)
    if jars_cached(version):
        return libs
    if not FETCH_SCRIPT.is_file():
        raise RuntimeEnvironmentError(f"Kafka {version} jars are not cached in {libs} and "
                                      f"{FETCH_SCRIPT} is missing")
    result = subprocess.run(
        ["bash", str(FETCH_SCRIPT)],
        env={**os.environ, "CAESAR_KAFKA_VERSION": version,
             "CAESAR_CACHE": str(CACHE_DIR)},
        capture_output=quiet, text=True)
    if result.returncode != 0 or not jars_cached(version):
        detail = (result.stderr or result.stdout or "")[-2000:] if quiet else ""
        raise RuntimeEnvironmentError(
            f"fetching the Kafka {version} jars failed (exit {result.returncode}); "
            f"run `bash {FETCH_SCRIPT}` to see why\n{detail}")
    return libs
