"""The Avro schemas CAESAR knows: every `*.avsc` under `schemas/` (recursively)
plus any registered at run time, indexed by full name and by fingerprint."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from importlib.resources import files
from pathlib import Path
from typing import Any

from fastavro import parse_schema
from fastavro.schema import SchemaParseException, UnknownType, to_parsing_canonical_form

from caesar.codecs.errors import CodecError, UnknownSchemaError
from caesar.codecs.fingerprint import crc64_avro
from caesar.codecs.ranges import numeric_fields


def default_schema_dir() -> Path:
    env = os.environ.get("CAESAR_SCHEMAS_DIR")
    return Path(env) if env else Path(str(files("caesar") / "schemas"))


@dataclass(frozen=True)
class SchemaEntry:
    name: str  # full name, e.g. "caesar.DeadLetter"
    raw: dict[str, Any] | str | list[Any]  # the JSON as written (named types expanded)
    parsed: Any  # fastavro parsed schema
    canonical: str  # parsing canonical form
    fingerprint: int  # CRC-64-AVRO of the canonical form

    @cached_property
    def numbers(self) -> tuple[tuple[str, str], ...]:
        """The record's plain numeric fields, checked before each write."""
        return numeric_fields(self.parsed)

    @property
    def fingerprint_bytes(self) -> bytes:
        return self.fingerprint.to_bytes(8, "little")

    def field_names(self) -> list[str]:
        """The fields of a record schema, in order."""
        if not isinstance(self.raw, dict) or self.raw.get("type") != "record":
            raise CodecError(f"{self.name} is not a record schema")
        return [f["name"] for f in self.raw["fields"]]


class SchemaRepository:
    """Schemas by full name and fingerprint. Several versions of one name may be
    known (for decoding old records); `get(name)` returns the latest added."""

    def __init__(self) -> None:
        self._named: dict[str, Any] = {}  # fastavro named-type registry
        self._by_name: dict[str, SchemaEntry] = {}
        self._by_fingerprint: dict[int, SchemaEntry] = {}

    @classmethod
    def from_directory(cls, directory: Path | None = None) -> SchemaRepository:
        repo = cls()
        repo.load_directory(directory or default_schema_dir())
        return repo

    def load_directory(self, directory: Path) -> None:
        if not directory.is_dir():
            raise CodecError(f"schema directory {directory} does not exist")
        pending: list[tuple[Path, Any]] = []
        for path in sorted(directory.rglob("*.avsc")):
            try:
                pending.append((path, json.loads(path.read_text())))
            except json.JSONDecodeError as exc:
                raise CodecError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from exc
        # Files may reference named types of other files: add in dependency order.
        while pending:
            failed: list[tuple[Path, Any, Exception]] = []
            for path, raw in pending:
                try:
                    self.add(raw)
                except UnknownType as exc:
                    failed.append((path, raw, exc))
                except (SchemaParseException, CodecError, ValueError) as exc:
                    raise CodecError(f"{path}: invalid Avro schema: {exc}") from exc
            if len(failed) == len(pending):
                path, _, unknown = failed[0]
                raise CodecError(f"{path}: refers to an unknown named type: {unknown}")
            pending = [(p, r) for p, r, _ in failed]

    def add(self, raw: dict[str, Any] | str | list[Any]) -> SchemaEntry:
        if isinstance(raw, str) and raw.lstrip().startswith(("{", "[", '"')):
            raw = json.loads(raw)
        named = dict(self._named)
        parsed = parse_schema(raw, named_schemas=named, _write_hint=False)
        name = _full_name(parsed)
        # Standalone form: named types from other files inlined at first use, so
        # the canonical form (and fingerprint) matches what Java/other writers compute.
        standalone = _inline(parsed, named, set())
        canonical = to_parsing_canonical_form(standalone)
        parsed = parse_schema(standalone, _write_hint=False)
        entry = SchemaEntry(name, standalone, parsed, canonical, crc64_avro(canonical))
        self._named = named
        self._by_name[name] = entry
        self._by_fingerprint[entry.fingerprint] = entry
        return entry

    def get(self, name: str) -> SchemaEntry:
        entry = self._by_name.get(name) or self._by_name.get(f"caesar.{name}")
        if entry is None:
            known = ", ".join(sorted(self._by_name)) or "none"
            raise UnknownSchemaError(f"no schema named {name!r} (known: {known})")
        return entry

    def by_fingerprint(self, fingerprint: int) -> SchemaEntry:
        entry = self._by_fingerprint.get(fingerprint)
        if entry is None:
            raise UnknownSchemaError(
                f"no schema with fingerprint {fingerprint:016x} (CRC-64-AVRO); the writer used a "
                "schema this reader has not loaded — add its .avsc to schemas/")
        return entry

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def entries(self) -> Iterable[SchemaEntry]:
        return self._by_fingerprint.values()


def _inline(schema: Any, named: dict[str, Any], defined: set[str]) -> Any:
    """Copy of a parsed schema with references to named types replaced by their
    definition at first occurrence (Avro allows a name only after its definition)."""
    if isinstance(schema, str):
        if schema in named and schema not in defined:
            return _inline(named[schema], named, defined)
        return schema
    if isinstance(schema, list):
        return [_inline(branch, named, defined) for branch in schema]
    if isinstance(schema, dict):
        out = {k: v for k, v in schema.items() if not k.startswith("__")}
        kind = out.get("type")
        if kind in ("record", "error", "enum", "fixed"):
            defined.add(out["name"])
        if kind in ("record", "error"):
            out["fields"] = [{**f, "type": _inline(f["type"], named, defined)}
                             for f in out["fields"]]
        elif kind == "array":
            out["items"] = _inline(out["items"], named, defined)
        elif kind == "map":
            out["values"] = _inline(out["values"], named, defined)
        elif isinstance(kind, (dict, list)) or (isinstance(kind, str) and kind in named):
            out["type"] = _inline(kind, named, defined)
        return out
    return schema


def _full_name(parsed: Any) -> str:
    if isinstance(parsed, dict) and "name" in parsed:
        return str(parsed["name"])
    if isinstance(parsed, str):
        return parsed
    raise CodecError("only named schemas (record, enum, fixed) or primitives can be registered")
