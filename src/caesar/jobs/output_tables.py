"""Records of a model's output topics -> rows of one table per output type
(no Spark here; the consumer runs it on the driver over each micro-batch).

What the matcher writes (services/matcher/runner.py OutputEncoder): an output
type with a SCHEMA of its own is written in that schema; any other as a
caesar.DerivedEvent (event type, its fields as a map, partition key, start
and end time, ingest_ms of the triggering input, emit_ms). A table holds:

  - the type's fields: the model's declared fields, typed (derived events), or
    the fields of its own schema;
  - for derived events: plan_id, partition_key, start_ts, end_ts, ingest_ms,
    emit_ms (a model field of the same name wins);
  - where the record came from: kafka_topic, kafka_partition, kafka_offset,
    kafka_ms (its Kafka timestamp), batch_id (the micro-batch that wrote it).

A record that does not decode, or that names no output type of the model,
goes to the `_undecodable` table with the reason, never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from caesar.codecs import Codec, CodecError
from caesar.jobs.job_model import JobModel
from caesar.services.common.wire import DERIVED

if TYPE_CHECKING:
    import pyarrow as pa

UNDECODABLE = "_undecodable"
# Arrow type names (pyarrow factory functions) of the model's field kinds and Avro types.
KIND_TYPES = {"int": "int64", "float": "float64", "string": "string", "bool": "bool_"}
AVRO_TYPES = {"int": "int32", "long": "int64", "float": "float32", "double": "float64",
              "boolean": "bool_", "string": "string", "bytes": "binary"}
DERIVED_META = [("plan_id", "string"), ("partition_key", "string"), ("start_ts", "int64"),
                ("end_ts", "int64"), ("ingest_ms", "int64"), ("emit_ms", "int64")]
SOURCE_META = [("kafka_topic", "string"), ("kafka_partition", "int32"),
               ("kafka_offset", "int64"), ("kafka_ms", "int64"), ("batch_id", "int64")]
UNDECODABLE_COLUMNS = [("kafka_topic", "string"), ("kafka_partition", "int32"),
                       ("kafka_offset", "int64"), ("kafka_ms", "int64"), ("batch_id", "int64"),
                       ("error", "string"), ("value", "binary")]


@dataclass(frozen=True)
class OutputTable:
    name: str  # the output event type (or UNDECODABLE)
    columns: tuple[tuple[str, str], ...]  # (column, Arrow type name)
    own_schema: str | None = None  # the Avro schema the matcher writes it in, if its own
    from_record: int = 0  # the first columns come from the record, the rest are SOURCE_META

    @property
    def names(self) -> list[str]:
        return [c for c, _ in self.columns]

    def arrow_schema(self) -> pa.Schema:
        import pyarrow as pa

        return pa.schema([(c, getattr(pa, t)()) for c, t in self.columns])

    def arrow(self, rows: list[tuple]) -> pa.Table:
        import pyarrow as pa

        schema = self.arrow_schema()
        columns = list(zip(*rows, strict=True)) if rows else [()] * len(schema)
        return pa.Table.from_arrays([pa.array(list(c), type=f.type)
                                     for c, f in zip(columns, schema, strict=True)],
                                    schema=schema)


def output_tables(model: JobModel, codec: Codec) -> dict[str, OutputTable]:
    """Output type -> its table (plus the `_undecodable` table)."""
    own = {etype: schema for schema, etype in model.own_schema_types(codec.repository).items()}
    tables: dict[str, OutputTable] = {}
    for name in model.output_types():
        schema = own.get(name)
        if schema is not None:
            raw: Any = codec.repository.get(schema).raw  # a record schema (the model's SCHEMA)
            fields = [(f["name"], _avro_type(f["type"])) for f in raw["fields"]]
        else:
            etype = model.types[name]
            fields = [(f, KIND_TYPES[k]) for f, k in etype.fields.items()]
            taken = {f for f, _ in fields}
            fields += [(c, t) for c, t in DERIVED_META if c not in taken]
        taken = {f for f, _ in fields}
        n = len(fields)
        fields += [(c, t) for c, t in SOURCE_META if c not in taken]
        tables[name] = OutputTable(name, tuple(fields), schema, n)
    tables[UNDECODABLE] = OutputTable(UNDECODABLE, tuple(UNDECODABLE_COLUMNS))
    return tables


def _avro_type(avro: Any) -> str:
    if isinstance(avro, list):  # a union: nullable X -> X
        branches = [b for b in avro if b != "null"]
        return _avro_type(branches[0]) if len(branches) == 1 else "string"
    if isinstance(avro, dict):  # e.g. {"type": "long", "logicalType": "timestamp-millis"}
        return AVRO_TYPES.get(avro.get("type", ""), "string")
    return AVRO_TYPES.get(avro, "string")


class OutputDecoder:
    """Kafka records of the output topics -> (table name, row)."""

    def __init__(self, model: JobModel, codec: Codec) -> None:
        self.codec = codec
        self.tables = output_tables(model, codec)
        self.topics = model.output_topics()
        self.by_schema = {t.own_schema: t for t in self.tables.values() if t.own_schema}

    def decode(self, topic: str, partition: int, offset: int, value: bytes | None,
               kafka_ms: int, batch_id: int) -> tuple[str, tuple]:
        source = (topic, partition, offset, kafka_ms, batch_id)
        try:
            if value is None:
                raise CodecError("null value")
            schema, record = self.codec.decode(bytes(value))
            if schema == DERIVED:
                table = self.tables.get(record["event_type"])
                expected = self.topics.get(topic)  # None: a topic the model does not name
                if table is None or table.own_schema is not None \
                        or (expected is not None and record["event_type"] not in expected):
                    raise CodecError(f"a {record['event_type']} event is not an output of the "
                                     f"model on topic {topic!r}")
                values = {**record, **record["fields"]}
            else:
                table = self.by_schema.get(schema)
                if table is None:
                    raise CodecError(f"a {schema} record is not an output of the model")
                values = record
        except Exception as exc:  # CodecError, or fastavro's own on garbage
            return UNDECODABLE, (*source, f"{type(exc).__name__}: {exc}",
                                 None if value is None else bytes(value))
        meta = dict(zip([c for c, _ in SOURCE_META], source, strict=True))
        names = table.names
        row = [values.get(c) for c in names[:table.from_record]]
        row += [meta[c] for c in names[table.from_record:]]
        return table.name, tuple(row)
