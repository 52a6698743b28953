"""The consumer's Parquet writer (arrow): one file per table and micro-batch,
typed as the table says, never visible half-written, and replaced (not
duplicated) when Spark re-runs a micro-batch after a failure."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from caesar.errors import CaesarError, ConfigError
from caesar.examples import model_path
from caesar.jobs.job_model import JobModel
from caesar.jobs.output_tables import output_tables
from caesar.jobs.table_writers import ArrowParquetWriter, _missing_package, make_writer

LR = JobModel.load(model_path("linear_road"))


def test_batch_file_is_typed_and_a_rerun_replaces_it(tmp_path: Path) -> None:
    table = output_tables(LR, LR.codec())["TollNotification"]
    row = (7, 120, 0, 1, 33, 38, 162, 1_700_000_000_000, "lr-tolls", 0, 11,
           1_700_000_000_500, 4)
    writer = ArrowParquetWriter(tmp_path)
    writer.write("TollNotification", table.arrow([row]), 4)
    written = pq.read_table(tmp_path / "TollNotification")
    assert written.schema.field("time").type == pa.int32()  # the schema's own int
    assert written.schema.field("kafka_ms").type == pa.int64()
    assert written.to_pylist()[0]["toll"] == 162
    # Spark re-runs batch 4 (same offsets, here one more record): the file is replaced.
    writer.write("TollNotification", table.arrow([row, (8, *row[1:])]), 4)
    files = sorted(p.name for p in (tmp_path / "TollNotification").iterdir())
    assert files == ["part-00000004.parquet"]  # no temporary file left behind
    assert pq.read_table(tmp_path / "TollNotification").num_rows == 2


def test_writer_choice_and_missing_packages_are_clear() -> None:
    with pytest.raises(ConfigError, match="--writer spark"):
        make_writer("arrow", None, "s3a://bucket/out", "app")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown table format"):
        make_writer("orc", None, "out", "app")  # type: ignore[arg-type]
    with pytest.raises(CaesarError, match="delta tables need"):
        _missing_package(RuntimeError("[DATA_SOURCE_NOT_FOUND] Failed to find the data "
                                      "source: delta."), "delta", "delta-spark")
    with pytest.raises(CaesarError, match="built for another Spark"):
        _missing_package(RuntimeError("An error occurred while calling o68.save.\n: "
                                      "java.lang.NoSuchMethodError: 'void org.apache.spark"
                                      ".sql.execution.LogicalRDD.<init>(...)'"), "delta", "x")
    _missing_package(RuntimeError("disk full"), "delta", "delta-spark")  # not about packages
