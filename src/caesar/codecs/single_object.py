"""Avro single-object encoding: 0xC3 0x01, the writer schema's 8-byte
little-endian CRC-64-AVRO fingerprint, then the Avro binary body. The reader
finds the writer schema by fingerprint in its SchemaRepository."""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping
from typing import Any

from fastavro import schemaless_reader, schemaless_writer
from fastavro.validation import ValidationError, validate

from caesar.codecs.errors import CorruptRecordError, SchemaViolationError, UnknownSchemaError
from caesar.codecs.ranges import check_ranges
from caesar.codecs.schemas import SchemaEntry, SchemaRepository

MAGIC = b"\xc3\x01"
HEADER_LEN = 10


class SingleObjectCodec:
    def __init__(self, repository: SchemaRepository | None = None) -> None:
        self.repository = repository or SchemaRepository.from_directory()

    def encode(self, schema_name: str, record: Mapping[str, Any]) -> bytes:
        entry = self.repository.get(schema_name)
        out = io.BytesIO()
        out.write(MAGIC)
        out.write(entry.fingerprint_bytes)
        _write(out, entry, record)
        return out.getvalue()

    def encode_many(self, schema_name: str, records: Iterable[Mapping[str, Any]]) -> list[bytes]:
        entry = self.repository.get(schema_name)
        header = MAGIC + entry.fingerprint_bytes
        result = []
        out = io.BytesIO()
        for record in records:
            out.seek(0)
            out.truncate()
            out.write(header)
            _write(out, entry, record)
            result.append(out.getvalue())
        return result

    def decode(self, data: bytes) -> tuple[str, dict[str, Any]]:
        """(writer schema full name, record)."""
        entry = self._writer_entry(data)
        return entry.name, _read(data, entry, entry)

    def decode_as(self, schema_name: str, data: bytes) -> dict[str, Any]:
        """Decode into `schema_name` (Avro schema resolution from an older/newer writer)."""
        reader = self.repository.get(schema_name)
        writer = self._writer_entry(data)
        if writer.name != reader.name:
            raise UnknownSchemaError(
                f"expected a {reader.name} record, got a {writer.name} record")
        return _read(data, writer, reader)

    def _writer_entry(self, data: bytes) -> SchemaEntry:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise CorruptRecordError(f"expected bytes, got {type(data).__name__}")
        if len(data) < HEADER_LEN:
            raise CorruptRecordError(
                f"record of {len(data)} bytes is shorter than the 10-byte single-object header")
        if bytes(data[:2]) != MAGIC:
            raise CorruptRecordError(
                f"not an Avro single-object record: header starts with {bytes(data[:2]).hex()}, "
                "expected c301 (is the producer using Schema Registry framing or plain JSON?)")
        return self.repository.by_fingerprint(int.from_bytes(data[2:HEADER_LEN], "little"))


def _write(out: io.BytesIO, entry: SchemaEntry, record: Mapping[str, Any]) -> None:
    if entry.numbers:
        check_ranges(entry.name, entry.numbers, record)
    try:
        schemaless_writer(out, entry.parsed, record)
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
        # fastavro's own errors are terse; validate to name the offending field.
        try:
            validate(record, entry.parsed, raise_errors=True)
        except ValidationError as verr:
            raise SchemaViolationError(f"record does not match {entry.name}: {verr}") from exc
        raise SchemaViolationError(f"record does not match {entry.name}: {exc!r}") from exc


def _read(data: bytes, writer: SchemaEntry, reader: SchemaEntry, offset: int = HEADER_LEN
          ) -> dict[str, Any]:
    body = io.BytesIO(bytes(data[offset:]))
    try:
        record = schemaless_reader(body, writer.parsed,
                                   reader.parsed if reader is not writer else None)
    except (EOFError, StopIteration) as exc:
        raise CorruptRecordError(f"{writer.name} body is truncated") from exc
    except Exception as exc:  # fastavro raises assorted errors on garbage input
        raise CorruptRecordError(f"{writer.name} body is corrupt: {exc!r}") from exc
    rest = len(body.getbuffer()) - body.tell()
    if rest:
        raise CorruptRecordError(
            f"{writer.name} body has {rest} unexpected trailing bytes (corrupt or wrong schema)")
    if not isinstance(record, dict):
        raise CorruptRecordError(f"{writer.name} is not a record schema")
    return record
