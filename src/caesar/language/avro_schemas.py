"""The Avro schema an input event declaration names (`SCHEMA "file.avsc"`):
found next to the model, read, and checked against the declared attributes."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def avro_type(t: Any) -> str | None:
    """The model type an Avro field type maps to (None: no model type)."""
    if isinstance(t, list):
        non_null = [x for x in t if x != "null"]
        return avro_type(non_null[0]) if len(non_null) == 1 else None
    if isinstance(t, dict):
        if t.get("logicalType") in ("timestamp-millis", "timestamp-micros"):
            return "int"
        return avro_type(t.get("type"))
    return {"int": "int", "long": "int", "float": "float", "double": "float", "string": "string",
            "boolean": "bool"}.get(t)


def find_schema(ref: str, model_file: str) -> Path | None:
    path = Path(ref)
    if path.is_absolute():
        return path if path.is_file() else None
    base = Path(model_file).resolve().parent if model_file and not model_file.startswith("<") \
        else Path.cwd()
    for folder in [base, *base.parents][:4]:
        if (folder / path).is_file():
            return folder / path
    return None
