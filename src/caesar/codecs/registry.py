"""Confluent Schema Registry framing: magic byte 0, the 4-byte big-endian
schema id, then the Avro binary body. Schemas are registered under the
record's full name (RecordNameStrategy) so one topic can carry several types.
Use with a real registry URL or confluent-kafka's in-memory `mock://`."""

from __future__ import annotations

import io
import json
import struct
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from fastavro import parse_schema
from fastavro.schema import to_parsing_canonical_form

from caesar.codecs.errors import CodecError, CorruptRecordError, UnknownSchemaError
from caesar.codecs.fingerprint import crc64_avro
from caesar.codecs.schemas import SchemaEntry, SchemaRepository
from caesar.codecs.single_object import _read, _write

MAGIC = 0
HEADER = struct.Struct(">bI")


class RegistryCodec:
    def __init__(self, url: str, repository: SchemaRepository | None = None,
                 client_config: Mapping[str, str] | None = None,
                 client: SchemaRegistryClient | None = None) -> None:
        self.repository = repository or SchemaRepository.from_directory()
        # new_client returns the in-memory mock for "mock://" URLs.
        # (each mock instance has its own store: pass `client` to share one).
        self.client = client or SchemaRegistryClient.new_client(
            {"url": url, **(client_config or {})})
        self._ids: dict[str, int] = {}  # schema name -> registered id
        self._by_id: dict[int, SchemaEntry] = {}
        self._lock = threading.Lock()

    def schema_id(self, schema_name: str) -> int:
        entry = self.repository.get(schema_name)
        found = self._ids.get(entry.name)
        if found is None:
            with self._lock:
                try:
                    found = self.client.register_schema(
                        entry.name, Schema(json.dumps(entry.raw), "AVRO"))
                except SchemaRegistryError as exc:
                    raise CodecError(f"cannot register {entry.name} in the schema registry: {exc}") from exc
                self._ids[entry.name] = found
                self._by_id[found] = entry
        return found

    def encode(self, schema_name: str, record: Mapping[str, Any]) -> bytes:
        entry = self.repository.get(schema_name)
        out = io.BytesIO()
        out.write(HEADER.pack(MAGIC, self.schema_id(entry.name)))
        _write(out, entry, record)
        return out.getvalue()

    def encode_many(self, schema_name: str, records: Iterable[Mapping[str, Any]]) -> list[bytes]:
        return [self.encode(schema_name, r) for r in records]

    def decode(self, data: bytes) -> tuple[str, dict[str, Any]]:
        entry = self._writer_entry(data)
        return entry.name, _read(data, entry, entry, HEADER.size)

    def decode_as(self, schema_name: str, data: bytes) -> dict[str, Any]:
        reader = self.repository.get(schema_name)
        writer = self._writer_entry(data)
        if writer.name != reader.name:
            raise UnknownSchemaError(f"expected a {reader.name} record, got a {writer.name} record")
        return _read(data, writer, reader, HEADER.size)

    def _writer_entry(self, data: bytes) -> SchemaEntry:
        if not isinstance(data, (bytes, bytearray, memoryview)) or len(data) < HEADER.size:
            raise CorruptRecordError("record is shorter than the 5-byte Schema Registry header")
        magic, schema_id = HEADER.unpack_from(data)
        if magic != MAGIC:
            raise CorruptRecordError(
                f"not a Schema Registry framed record: magic byte {magic & 0xFF:#04x}, expected 0x00")
        entry = self._by_id.get(schema_id)
        if entry is None:
            try:
                schema = self.client.get_schema(schema_id)
            except SchemaRegistryError as exc:
                raise UnknownSchemaError(f"schema id {schema_id} is not in the registry: {exc}") from exc
            if schema.schema_str is None:
                raise UnknownSchemaError(f"schema id {schema_id} has no schema text in the registry")
            entry = self._entry_for(json.loads(schema.schema_str))
            with self._lock:
                self._by_id[schema_id] = entry
        return entry

    def _entry_for(self, raw: Any) -> SchemaEntry:
        """Writer schema for a registry id: ours if the fingerprint matches, else the
        registered schema as is (registered by another producer)."""
        parsed = parse_schema(raw, _write_hint=False)
        canonical = to_parsing_canonical_form(parsed)
        fp = crc64_avro(canonical)
        for known in self.repository.entries():
            if known.fingerprint == fp:
                return known
        return SchemaEntry(str(parsed.get("name", parsed)) if isinstance(parsed, dict) else str(parsed),
                           raw, parsed, canonical, fp)


__all__ = ["RegistryCodec"]
