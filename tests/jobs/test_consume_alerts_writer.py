"""The alert consumer's Parquet writer (arrow): one file per micro-batch, typed as
the Spark DDL says, never visible half-written, and replaced (not duplicated)
when Spark re-runs a micro-batch after a failure."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from caesar.examples.linear_road.avro import TOLL_NOTIFICATION
from caesar.examples.linear_road.consume_alerts import _OUT_DDL, _decode, write_batch_file


def test_batch_file_is_typed_and_a_rerun_replaces_it(tmp_path: Path) -> None:
    ddl = _OUT_DDL[TOLL_NOTIFICATION]
    rows = [(7, 120, 0, 1, 33, 38, 162, 1_700_000_000_000, 1_700_000_000_500, 4)]
    path = write_batch_file(tmp_path / "TollNotification", ddl, rows, 4)
    table = pq.read_table(path)
    assert table.schema.field("time").type == pa.int32()
    assert table.schema.field("alert_kafka_ms").type == pa.int64()
    assert table.to_pylist()[0]["toll"] == 162
    # Spark re-runs batch 4 with one more record: the batch's file is replaced.
    write_batch_file(tmp_path / "TollNotification", ddl, rows + [(8, *rows[0][1:])], 4)
    files = sorted(p.name for p in (tmp_path / "TollNotification").iterdir())
    assert files == ["part-00000004.parquet"]  # no temporary file left behind
    assert pq.read_table(tmp_path / "TollNotification").num_rows == 2


def test_undecodable_records_say_why() -> None:
    assert _decode(TOLL_NOTIFICATION, b"not avro") != ()
    assert isinstance(_decode(TOLL_NOTIFICATION, b"not avro"), str)
    assert _decode(TOLL_NOTIFICATION, None) == "null value"
    assert isinstance(_decode(None, b"x"), str)


def test_a_toll_decodes_to_the_ddl_order() -> None:
    from caesar.examples.linear_road.avro import encode

    record = {"vid": 7, "time": 120, "xway": 0, "dir": 1, "seg": 33, "lav": 38, "toll": 162,
              "ingest_ms": 1_700_000_000_000}
    [value] = encode(TOLL_NOTIFICATION, [record])
    assert _decode(TOLL_NOTIFICATION, value) == (7, 120, 0, 1, 33, 38, 162, 1_700_000_000_000)
