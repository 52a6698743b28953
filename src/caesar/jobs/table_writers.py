"""Where the consumer lands each micro-batch: one table per output type, written
so that a micro-batch Spark runs again after a failure (same batch id, same
records: Spark re-runs a batch from its offset log) replaces what its first
attempt wrote instead of adding to it.

  arrow    Parquet from the driver with pyarrow: one file per table and batch,
           `part-<batch>.parquet`, written under a hidden name and renamed into
           place (readers never see half a file; a re-run replaces it). Local
           or mounted paths; ~20 ms per batch.
  spark    Parquet with Spark: the batch's rows overwrite the directory
           `<table>/batch_id=<batch>` (any Hadoop file system: s3a://, hdfs://);
           Spark reads `batch_id` back as a partition column. ~1 s per batch.
  delta    Delta Lake tables `<to>/<table>`, appended with Delta's idempotent
           writes (txnAppId = this consumer, txnVersion = batch id: Delta skips
           a version it has committed). Needs the delta-spark package.
  iceberg  Iceberg tables `<to>.<table>` in a catalog (`--to catalog.db`); each
           append records the consumer and batch id in its snapshot summary and
           a batch already there is skipped. Needs Iceberg's runtime jar.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from caesar.errors import CaesarError, ConfigError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

WRITERS = ("arrow", "spark", "delta", "iceberg")


class TableWriter(Protocol):
    def write(self, table: str, rows: pa.Table, batch_id: int) -> None: ...

    def location(self, table: str) -> str: ...


class ArrowParquetWriter:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def location(self, table: str) -> str:
        return str(self.root / table)

    def write(self, table: str, rows: pa.Table, batch_id: int) -> None:
        write_parquet_file(self.root / table, rows, batch_id)


def write_parquet_file(folder: Path, rows: pa.Table, batch_id: int) -> Path:
    """`rows` as the Parquet file of micro-batch `batch_id` in `folder`: written under
    a hidden name, then renamed into place (a re-run of the batch replaces it)."""
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"part-{batch_id:08d}.parquet"
    tmp = folder / f".{final.name}.tmp"  # names starting with "." are hidden from Spark
    pq.write_table(rows, tmp)
    tmp.replace(final)
    return final


class SparkParquetWriter:
    def __init__(self, spark: SparkSession, root: str) -> None:
        self.spark, self.root = spark, root.rstrip("/")

    def location(self, table: str) -> str:
        return f"{self.root}/{table}"

    def write(self, table: str, rows: pa.Table, batch_id: int) -> None:
        frame = _frame(self.spark, rows.drop_columns(["batch_id"]))
        frame.write.mode("overwrite").parquet(f"{self.location(table)}/batch_id={batch_id}")


class DeltaWriter:
    def __init__(self, spark: SparkSession, root: str, app_id: str) -> None:
        self.spark, self.root, self.app_id = spark, root.rstrip("/"), app_id

    def location(self, table: str) -> str:
        return f"{self.root}/{table}"

    def write(self, table: str, rows: pa.Table, batch_id: int) -> None:
        try:
            (_frame(self.spark, rows).write.format("delta").mode("append")
             .option("txnAppId", f"{self.app_id}-{table}").option("txnVersion", batch_id)
             .save(self.location(table)))
        except Exception as exc:
            _missing_package(exc, "delta", "io.delta:delta-spark_2.13 (pip install delta-spark, "
                                           "or spark.jars.packages)")
            raise


class IcebergWriter:
    def __init__(self, spark: SparkSession, namespace: str, app_id: str) -> None:
        if not re.fullmatch(r"[\w]+(\.[\w]+)+", namespace):
            raise ConfigError(f"--to {namespace!r}: an Iceberg target is a catalog namespace "
                              "such as my_catalog.db (tables are created in it per output type)")
        self.spark, self.namespace, self.app_id = spark, namespace, app_id

    def location(self, table: str) -> str:
        return f"{self.namespace}.{_snake(table)}"

    def write(self, table: str, rows: pa.Table, batch_id: int) -> None:
        name = self.location(table)
        frame = _frame(self.spark, rows)
        try:
            if not self.spark.catalog.tableExists(name):
                frame.limit(0).writeTo(name).using("iceberg").create()
            done = self.spark.sql(
                f"SELECT 1 FROM {name}.snapshots WHERE summary['caesar.consumer'] = "
                f"'{self.app_id}' AND summary['caesar.batch'] = '{batch_id}' LIMIT 1").count()
            if done:
                return  # this batch is in the table already (a re-run after a failure)
            (frame.writeTo(name).option("snapshot-property.caesar.consumer", self.app_id)
             .option("snapshot-property.caesar.batch", str(batch_id)).append())
        except Exception as exc:
            _missing_package(exc, "iceberg", "org.apache.iceberg:iceberg-spark-runtime and a "
                                             "catalog (spark.sql.catalog.<name>)")
            raise


def make_writer(kind: str, spark: SparkSession, to: str, app_id: str) -> TableWriter:
    if kind == "arrow":
        if "://" in to:
            raise ConfigError(f"--writer arrow writes local (or mounted) paths; for {to} use "
                              "--writer spark")
        return ArrowParquetWriter(to)
    if kind == "spark":
        return SparkParquetWriter(spark, to)
    if kind == "delta":
        return DeltaWriter(spark, to, app_id)
    if kind == "iceberg":
        return IcebergWriter(spark, to, app_id)
    raise ConfigError(f"unknown table format {kind!r} (one of {', '.join(WRITERS)})")


def _frame(spark: SparkSession, rows: pa.Table) -> DataFrame:
    return spark.createDataFrame(rows)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower().lstrip("_")


def _missing_package(exc: Exception, source: str, what: str) -> None:
    """Raise a clear CaesarError when `exc` says the package is absent or does not
    fit this Spark (e.g. delta-spark 4.2, built for Spark 4.1, on Spark 4.3)."""
    text = str(exc)
    first = next((line for line in text.splitlines() if line.strip()), text)
    if "DATA_SOURCE_NOT_FOUND" in text or "Failed to find data source" in text \
            or "ClassNotFoundException" in text or "CATALOG_NOT_FOUND" in text:
        raise CaesarError(f"{source} tables need {what} on the Spark session "
                          f"({first})") from exc
    if "NoSuchMethodError" in text or "NoClassDefFoundError" in text \
            or "AbstractMethodError" in text:
        import pyspark

        raise CaesarError(f"the {source} package on the Spark session was built for another "
                          f"Spark than {pyspark.__version__}; use the release made for it "
                          f"({first[:300]})") from exc
