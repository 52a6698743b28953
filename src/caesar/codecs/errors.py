"""Errors raised while encoding or decoding records."""

from __future__ import annotations

from caesar.errors import CaesarError


class CodecError(CaesarError):
    """A record cannot be encoded or decoded."""


class UnknownSchemaError(CodecError):
    """The header names a schema (fingerprint or registry id) nobody registered."""


class CorruptRecordError(CodecError):
    """The bytes are not a valid record (bad header, truncated or corrupt body)."""


class SchemaViolationError(CodecError):
    """A record to encode does not match its schema."""
