"""Avro records framed the way the project's codec frames them, encodable on a
Spark executor without a codec or a registry client there.

A frame is `header + Avro binary body`, and the header is fixed per schema:
0xC3 0x01 + the CRC-64-AVRO fingerprint (single-object encoding), or 0x00 + the
schema id (Schema Registry framing). The driver computes the headers with the
codec the settings ask for (registering the schemas once); executors get this
small picklable object and write `header + body` themselves. The bytes are the
codec's own (tests/jobs/test_frames.py compares them).

fastavro writes what fits its varints, such as 2**40 in an Avro "int"; the
schemas in `checked` are validated first (ranges included), so a record a Java
reader would reject is refused here."""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from caesar.codecs import Codec
from caesar.codecs.errors import SchemaViolationError
from caesar.codecs.ranges import check_ranges, numeric_fields


@dataclass
class FrameEncoder:
    headers: dict[str, bytes]  # schema full name -> frame header
    schemas: dict[str, Any]  # schema full name -> the schema JSON (standalone)
    checked: frozenset[str] = frozenset()  # validated before writing
    _parsed: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _numbers: dict[str, tuple[tuple[str, str], ...]] = field(
        default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_codec(cls, codec: Codec, schema_names: Iterable[str],
                   checked: Iterable[str] = ()) -> FrameEncoder:
        from caesar.codecs.single_object import MAGIC, SingleObjectCodec

        headers: dict[str, bytes] = {}
        schemas: dict[str, Any] = {}
        for name in dict.fromkeys(schema_names):
            entry = codec.repository.get(name)
            if isinstance(codec, SingleObjectCodec):
                headers[entry.name] = MAGIC + entry.fingerprint_bytes
            else:
                from caesar.codecs.registry import HEADER, RegistryCodec
                from caesar.codecs.registry import MAGIC as SR_MAGIC

                if not isinstance(codec, RegistryCodec):
                    raise TypeError(f"unknown codec {type(codec).__name__}")
                headers[entry.name] = HEADER.pack(SR_MAGIC, codec.schema_id(entry.name))
            schemas[entry.name] = entry.raw
        return cls(headers, schemas, frozenset(codec.repository.get(n).name for n in checked))

    def __getstate__(self) -> dict[str, Any]:
        return {"headers": self.headers, "schemas": self.schemas,  # not fastavro's objects
                "checked": self.checked}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.headers, self.schemas, self.checked = (state["headers"], state["schemas"],
                                                    state["checked"])
        self._parsed = {}
        self._numbers = {}

    def encode(self, schema_name: str, record: Mapping[str, Any]) -> bytes:
        from fastavro import parse_schema, schemaless_writer
        from fastavro.validation import ValidationError, validate

        parsed = self._parsed.get(schema_name)
        if parsed is None:
            parsed = self._parsed[schema_name] = parse_schema(self.schemas[schema_name],
                                                              _write_hint=False)
        if schema_name in self.checked:
            try:
                validate(record, parsed, raise_errors=True)
            except ValidationError as verr:
                raise SchemaViolationError(f"record does not match {schema_name}: {verr}") \
                    from verr
        else:
            numbers = self._numbers.get(schema_name)
            if numbers is None:
                numbers = self._numbers[schema_name] = numeric_fields(parsed)
            check_ranges(schema_name, numbers, record)
        out = io.BytesIO()
        out.write(self.headers[schema_name])
        try:
            schemaless_writer(out, parsed, record)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            try:  # fastavro's own errors are terse; validate names the field
                validate(record, parsed, raise_errors=True)
            except ValidationError as verr:
                raise SchemaViolationError(f"record does not match {schema_name}: {verr}") from exc
            raise SchemaViolationError(f"record does not match {schema_name}: {exc!r}") from exc
        return out.getvalue()
