"""Avro codecs for every CAESAR topic.

Default: Avro single-object encoding (fingerprint header, schemas from
`schemas/`). With `kafka.schema_registry_url` set: Confluent Schema Registry
framing. Both offer the same methods (the `Codec` protocol).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from caesar.codecs.errors import (
    CodecError,
    CorruptRecordError,
    SchemaViolationError,
    UnknownSchemaError,
)
from caesar.codecs.schemas import SchemaEntry, SchemaRepository
from caesar.codecs.single_object import SingleObjectCodec

if TYPE_CHECKING:
    from caesar.settings import Settings


class Codec(Protocol):
    repository: SchemaRepository

    def encode(self, schema_name: str, record: Mapping[str, Any]) -> bytes: ...

    def encode_many(self, schema_name: str, records: Iterable[Mapping[str, Any]]) -> list[bytes]: ...

    def decode(self, data: bytes) -> tuple[str, dict[str, Any]]: ...

    def decode_as(self, schema_name: str, data: bytes) -> dict[str, Any]: ...


def make_codec(settings: Settings | None = None,
               repository: SchemaRepository | None = None) -> Codec:
    """The codec the settings ask for."""
    repository = repository or SchemaRepository.from_directory()
    kafka = settings.kafka if settings is not None else None
    if kafka is not None and kafka.schema_registry_url:
        from caesar.codecs.registry import RegistryCodec

        return RegistryCodec(kafka.schema_registry_url, repository, kafka.schema_registry_config)
    return SingleObjectCodec(repository)


__all__ = [
    "Codec",
    "CodecError",
    "CorruptRecordError",
    "SchemaEntry",
    "SchemaRepository",
    "SchemaViolationError",
    "SingleObjectCodec",
    "UnknownSchemaError",
    "make_codec",
]
