"""One way to build the SparkSession the jobs use: local mode by default, Kafka
connector jars from the cache that fetch_spark_jars.sh (package data) fills."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

from caesar.errors import CaesarError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JARS_DIR = Path(os.environ.get("CAESAR_SPARK_JARS",
                               Path.home() / ".cache" / "caesar" / "spark-jars"))


FETCH_SCRIPT = Path(str(files("caesar.jobs") / "fetch_spark_jars.sh"))


class SparkJarsMissing(CaesarError):
    """The Kafka connector jars are not in the cache."""


def ensure_spark_jars() -> None:
    """Fetch the connector matching this interpreter's pyspark (once, cached; needs Maven)."""
    if any(JARS_DIR.glob("spark-sql-kafka*.jar")):
        return
    env = {**os.environ, "CAESAR_PYTHON": sys.executable, "CAESAR_SPARK_JARS": str(JARS_DIR)}
    if subprocess.run(["bash", str(FETCH_SCRIPT)], env=env).returncode != 0:
        raise SparkJarsMissing(f"fetching Spark's Kafka connector into {JARS_DIR} failed "
                               "(see the output above; Maven must reach Maven Central)")


def kafka_jars() -> list[str]:
    jars = sorted(str(p) for p in JARS_DIR.glob("*.jar"))
    if not any("spark-sql-kafka" in j for j in jars):
        raise SparkJarsMissing(
            f"Spark's Kafka connector is not in {JARS_DIR}: run `bash {FETCH_SCRIPT}` "
            "or call caesar.jobs.spark_session.ensure_spark_jars()")
    return jars


def _under_spark_submit() -> bool:
    """Launched by spark-submit (or the Spark operator): its --master stands."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def spark_session(app_name: str, master: str | None = None, kafka: bool = False,
                  shuffle_partitions: int = 4, conf: dict[str, str] | None = None
                  ) -> SparkSession:
    """A (shared, if one is active) SparkSession; `kafka=True` puts the connector on it;
    `conf`: more Spark settings (e.g. Delta's packages and extension), `spark.jars`
    added to the connector's.

    Spark allows one SparkContext per process: a later call gets the active session,
    which must already have the Kafka jars if it needs them (build it with kafka=True
    first).
    """
    from pyspark.sql import SparkSession

    # Python workers must run this interpreter (the venv with fastavro and the project).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName(app_name)
    master = master or os.environ.get("CAESAR_SPARK_MASTER")
    if master is not None or not _under_spark_submit():
        builder = builder.master(master or "local[2]")
    builder = (
        builder
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.pythonUDF.arrow.enabled", "false")
        .config("spark.driver.memory", os.environ.get("CAESAR_SPARK_DRIVER_MEMORY", "1g"))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.ansi.enabled", "true")
    )
    extra = dict(conf or {})
    jars = [*(kafka_jars() if kafka else []), *filter(None, extra.pop("spark.jars", "").split(","))]
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    for key, value in extra.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(os.environ.get("CAESAR_SPARK_LOG_LEVEL", "WARN"))
    return session
