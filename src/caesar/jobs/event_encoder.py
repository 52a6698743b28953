"""Source rows -> Kafka records of the model's input topics (runs on Spark
executors, in `mapInArrow`): each row converted and checked (input_rows.py),
encoded with the model's Avro schema in the project's framing (frames.py),
keyed by the model's PARTITION BY, its Kafka partition computed the way
Kafka's default partitioner does (murmur2), so the job can write every topic
partition from one task in event-time order. A row that fails becomes a
dead letter (caesar.DeadLetter) with the reason and the row as JSON.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from caesar.bus.partitioner import partition_for_key
from caesar.codecs.errors import CodecError
from caesar.jobs.frames import FrameEncoder
from caesar.jobs.input_rows import RowConverter, row_json
from caesar.services.common.messages import DeadLetter
from caesar.services.common.wire import DEAD, dead_record

if TYPE_CHECKING:
    import pyarrow as pa

# One output row per source row; `ok` false = a dead letter (topic/value then
# hold the dead-letter record when a dead-letter topic is configured).
ENCODED_DDL = ("seq BIGINT, ok BOOLEAN, topic STRING, partition INT, key BINARY, value BINARY, "
               "ts BIGINT, event_type STRING, reason STRING, detail STRING, raw STRING")
SERVICE = "spark-produce"


@dataclass
class EventEncoder:
    rows: RowConverter
    schema_names: dict[str, str]  # input type -> Avro schema full name
    partitions: dict[str, int]  # input topic -> its number of Kafka partitions
    frames: FrameEncoder  # the input schemas and caesar.DeadLetter
    dead_topic: str | None = None  # None: dead letters go to a path, not Kafka
    source: str = "source"  # named in dead letters

    def encode(self, row: dict[str, Any], seq: int) -> tuple:
        converted = self.rows.convert(row)
        etype, record = converted.etype, converted.record
        if etype is None or record is None or converted.reason:
            return self._dead(row, seq, etype.name if etype else None,
                              converted.reason, converted.detail, etype.topic if etype else None)
        try:
            value = self.frames.encode(self.schema_names[etype.name], record)
        except CodecError as exc:
            return self._dead(row, seq, etype.name, "schema", str(exc), etype.topic)
        topic = etype.topic or ""
        key = self.rows.key(record).encode()
        partition = partition_for_key(key, self.partitions[topic])
        return (seq, True, topic, partition, key, value, record[etype.ts_field], etype.name,
                None, None, None)

    def _dead(self, row: dict[str, Any], seq: int, etype: str | None, reason: str,
              detail: str, topic: str | None) -> tuple:
        raw = row_json(row)
        value = None
        if self.dead_topic is not None:
            letter = DeadLetter(reason, detail, topic or self.source, -1, seq, raw.encode())
            value = self.frames.encode(DEAD, dead_record(letter, SERVICE))
        return (seq, False, self.dead_topic, None, None, value, None, etype, reason, detail, raw)

    def encode_batches(self, batches: Iterator[pa.RecordBatch], seq_column: str
                       ) -> Iterator[pa.RecordBatch]:
        """The `mapInArrow` function: source batches (with a row-number column) ->
        batches of ENCODED_DDL."""
        import pyarrow as pa

        schema = encoded_schema()
        for batch in batches:
            out = [self.encode({k: v for k, v in r.items() if k != seq_column}, r[seq_column])
                   for r in batch.to_pylist()]
            columns = list(zip(*out, strict=True)) if out else [()] * len(schema)
            yield pa.RecordBatch.from_arrays(
                [pa.array(list(c), type=f.type) for c, f in zip(columns, schema, strict=True)],
                schema=schema)


@cache
def encoded_schema() -> Any:
    """ENCODED_DDL as an Arrow schema."""
    import pyarrow as pa

    return pa.schema([("seq", pa.int64()), ("ok", pa.bool_()), ("topic", pa.string()),
                      ("partition", pa.int32()), ("key", pa.binary()), ("value", pa.binary()),
                      ("ts", pa.int64()), ("event_type", pa.string()), ("reason", pa.string()),
                      ("detail", pa.string()), ("raw", pa.string())])
