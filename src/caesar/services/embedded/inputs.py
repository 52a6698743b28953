"""Reading input events from files for embedded runs: JSON lines or CSV.

A line that cannot be parsed is not skipped: it is handed on as undecodable
(value None, with the error) so the scheduler dead-letters it with its reason.
CSV cells are converted with the model's field types; a cell that does not
convert stays a string, which the scheduler then rejects as a schema violation.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from caesar.errors import CaesarError
from caesar.plans.execution import ExecutionPlan

Decoded = tuple[dict[str, Any] | None, str | None, bytes]


def detect_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv"):
        return "csv"
    if suffix in (".json", ".jsonl", ".ndjson"):
        return "jsonl"
    raise CaesarError(f"{path}: cannot tell the input format from the suffix; "
                      "pass --format jsonl or --format csv")


def read_events(path: Path, plan: ExecutionPlan, fmt: str = "auto",
                type_field: str = "type") -> Iterator[Decoded]:
    if not path.exists():
        raise CaesarError(f"input file {path} does not exist")
    fmt = detect_format(path) if fmt == "auto" else fmt
    if fmt == "jsonl":
        inputs = [t for t in plan.event_types if t.topic is not None] or list(plan.event_types)
        default = inputs[0].name if len(inputs) == 1 else None
        for value, error, raw in _jsonl(path):
            if value is not None and default is not None and type_field not in value:
                value[type_field] = default  # a file of one event type needs no type field
            yield value, error, raw
    elif fmt == "csv":
        yield from _csv(path, plan, type_field)
    else:
        raise CaesarError(f"unknown input format {fmt!r} (use jsonl or csv)")


def _jsonl(path: Path) -> Iterator[Decoded]:
    with path.open("rb") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                yield None, f"line {number}: not JSON ({exc})", line.rstrip(b"\n")
                continue
            if not isinstance(value, dict):
                yield None, f"line {number}: a JSON object was expected", line.rstrip(b"\n")
                continue
            yield value, None, line.rstrip(b"\n")


def _convert(text: str, kind: str) -> Any:
    if text == "":
        return None
    try:
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
        if kind == "bool":
            low = text.strip().lower()
            if low in ("true", "1", "yes"):
                return True
            if low in ("false", "0", "no"):
                return False
            return text
    except ValueError:
        return text
    return text


def _csv(path: Path, plan: ExecutionPlan, type_field: str) -> Iterator[Decoded]:
    types = {t.name: t for t in plan.event_types}
    inputs = [t for t in plan.event_types if t.topic is not None] or list(plan.event_types)
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        for row in reader:
            name = row.get(type_field) or (inputs[0].name if len(inputs) == 1 else None)
            etype = types.get(name) if name else None
            raw = ",".join("" if v is None else str(v) for v in row.values()).encode()
            if etype is None:
                yield dict(row), None, raw  # scheduler reports the unknown type
                continue
            value: dict[str, Any] = {type_field: etype.name}
            for key, text in row.items():
                if key is None or key == type_field:
                    continue
                kind = etype.fields.get(key, "int" if key == etype.ts_field else "string")
                if key == etype.ts_field:
                    kind = "int"
                value[key] = _convert(text or "", kind)
            yield value, None, raw
