"""What fastavro's writer lets through and an Avro reader does not: an int
field takes any Python int (written as a long varint, which a Java reader
rejects or misreads) and a bool (an int subclass) goes into int, long, float
and double fields. Unions are not affected: fastavro checks the branch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from caesar.codecs.errors import SchemaViolationError

_NUMBERS = frozenset({"int", "long", "float", "double"})
INT32 = (-(2**31), 2**31)  # [low, high)


def numeric_fields(parsed: Any) -> tuple[tuple[str, str], ...]:
    """(field, Avro type) of a parsed record schema's plain numeric fields
    (logical types such as timestamp-millis take other Python types)."""
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        return ()
    out = []
    for f in parsed["fields"]:
        kind = f["type"]
        if isinstance(kind, dict) and "logicalType" not in kind:
            kind = kind.get("type")
        if isinstance(kind, str) and kind in _NUMBERS:
            out.append((f["name"], kind))
    return tuple(out)


def check_ranges(schema_name: str, fields: tuple[tuple[str, str], ...],
                 record: Mapping[str, Any]) -> None:
    """Raise SchemaViolationError, naming the field, for a bool in a numeric
    field or an int outside 32 bits in an int field."""
    low, high = INT32
    for name, kind in fields:
        value = record.get(name)
        if value.__class__ is bool:
            raise SchemaViolationError(
                f"record does not match {schema_name}: {name} is a boolean ({value}) "
                f"where Avro {kind} is declared")
        if kind == "int" and isinstance(value, int) and not low <= value < high:
            raise SchemaViolationError(
                f"record does not match {schema_name}: {name} = {value} is outside "
                "Avro int's 32 bits (declare the field long)")
