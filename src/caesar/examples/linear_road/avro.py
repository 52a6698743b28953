"""Avro (single-object encoding) for the Linear Road topics, usable inside Spark.

pyspark 4.3 ships no spark-avro and Maven Central has none for 4.3 yet, so the
jobs encode/decode with the project's codec (fastavro) in Python: encoding on the
driver (the producer already holds the records there), decoding in a Python UDF.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from caesar.codecs import SchemaRepository, SingleObjectCodec

if TYPE_CHECKING:
    from pyspark.sql import Column

NAMESPACE = "caesar.linear_road"
POSITION_REPORT = f"{NAMESPACE}.PositionReport"
TOLL_NOTIFICATION = f"{NAMESPACE}.TollNotification"
ACCIDENT_ALERT = f"{NAMESPACE}.AccidentAlert"
TOLL_CHARGE = f"{NAMESPACE}.TollCharge"
ACCOUNT_BALANCE = f"{NAMESPACE}.AccountBalance"
DAILY_EXPENDITURE = f"{NAMESPACE}.DailyExpenditure"
BALANCE_QUERY = f"{NAMESPACE}.AccountBalanceQuery"
EXPENDITURE_QUERY = f"{NAMESPACE}.DailyExpenditureQuery"
HISTORICAL_TOLL = f"{NAMESPACE}.HistoricalToll"

# Spark DDL of each record (field order of the .avsc files; PositionReport without the
# transport fields `pseg` and `ts`, which WIRE_DDL adds for decoding the input topic).
SPARK_DDL = {
    POSITION_REPORT: "time INT, vid INT, spd INT, xway INT, lane INT, dir INT, seg INT, pos INT",
    TOLL_NOTIFICATION: "vid INT, time INT, xway INT, dir INT, seg INT, lav INT, toll INT, "
                       "ingest_ms BIGINT",
    ACCIDENT_ALERT: "vid INT, time INT, xway INT, dir INT, seg INT, acc_seg INT, ingest_ms BIGINT",
    TOLL_CHARGE: "ts INT, vid INT, time INT, toll INT",
    ACCOUNT_BALANCE: "vid INT, time INT, qid INT, balance INT, ingest_ms BIGINT",
    DAILY_EXPENDITURE: "vid INT, time INT, qid INT, toll INT, ingest_ms BIGINT",
}


SCHEMAS_DIR = Path(str(files("caesar.examples.linear_road") / "schemas"))


def repository() -> SchemaRepository:
    """CAESAR's own schemas plus Linear Road's (package data of this example)."""
    repo = SchemaRepository.from_directory()
    repo.load_directory(SCHEMAS_DIR)
    return repo


@cache
def codec() -> SingleObjectCodec:
    """One codec per process (driver or Python worker)."""
    return SingleObjectCodec(repository())


def encode(schema_name: str, records: list[dict[str, Any]]) -> list[bytes]:
    return codec().encode_many(schema_name, records)


WIRE_DDL = {**SPARK_DDL, POSITION_REPORT: SPARK_DDL[POSITION_REPORT] + ", pseg INT, ts INT"}


def decode_column(schema_name: str, value: Column) -> Column:
    """A struct column of `schema_name` decoded from a binary single-object column.

    A record that is not a valid `schema_name` record decodes to a struct whose
    `_error` says why (the caller routes those to its dead letters / error count)."""
    from pyspark.sql.functions import udf
    from pyspark.sql.types import StringType, StructField, StructType, _parse_datatype_string

    struct = _parse_datatype_string(WIRE_DDL[schema_name])
    assert isinstance(struct, StructType)  # the DDL is a field list
    fields = struct.fields
    out_type = StructType([*fields, StructField("_error", StringType(), True)])
    names = [f.name for f in fields]

    def _decode(data: bytes | None) -> tuple:
        from caesar.codecs import CodecError

        try:
            if data is None:
                raise CodecError("null value")
            record = codec().decode_as(schema_name, bytes(data))
        except CodecError as exc:
            return (*([None] * len(names)), str(exc))
        return (*(record[n] for n in names), None)

    return udf(_decode, out_type, useArrow=False)(value)
