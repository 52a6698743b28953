"""Source rows -> input events of a model, checked as the scheduler checks them
(no Spark here: the jobs run this on executors, tests run it directly).

A row's event type comes from a type column, from `--event-type`, or is the
model's only input type. Each field of the type is read from the column of the
same name unless mapped (`field=column` for every type, `Type.field=column`
for one). Values are converted to the field's type the way the wire would carry
them: text (CSV) is parsed, an int in a FLOAT field becomes a float, a
timestamp or date in an INT field becomes event time in the model's TIME UNIT.
What does not convert is left as it is and the check names it.

A row that is not a valid event is not dropped: it comes back with the reason
(`schema` or `unknown_type`) and the row as JSON, for the dead letters.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from caesar.errors import ConfigError
from caesar.plans.execution import EventTypeDef
from caesar.services.common.messages import partition_key
from caesar.services.scheduler.processor import event_problem

DEFAULT_TYPE_COLUMN = "type"
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_TRUE, _FALSE = ("true", "1", "yes", "t", "y"), ("false", "0", "no", "f", "n")


@dataclass(frozen=True)
class ColumnMapping:
    """Which column holds what. `fields`: "field" or "Type.field" -> column;
    `type_values`: value of the type column -> event type."""

    type_column: str | None = None
    event_type: str | None = None
    fields: dict[str, str] = field(default_factory=dict)
    type_values: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, *, type_column: str | None = None, event_type: str | None = None,
              maps: Sequence[str] = (), type_maps: Sequence[str] = ()) -> ColumnMapping:
        return cls(type_column, event_type, _pairs(maps, "--map", "FIELD=COLUMN"),
                   _pairs(type_maps, "--map-type", "VALUE=TYPE"))

    def column(self, etype: str, name: str) -> str:
        return self.fields.get(f"{etype}.{name}") or self.fields.get(name) or name


def _pairs(items: Sequence[str], option: str, form: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ConfigError(f"{option} expects {form}, got {item!r}")
        out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True)
class Converted:
    """One source row: the event (etype, record) or why it is not one."""

    etype: EventTypeDef | None
    record: dict[str, Any] | None
    reason: str = ""  # "" | "schema" | "unknown_type"
    detail: str = ""


@dataclass(frozen=True)
class RowConverter:
    types: dict[str, EventTypeDef]  # the model's input types
    partition_by: tuple[str, ...]
    mapping: ColumnMapping
    unit_ms: int = 1000

    def __post_init__(self) -> None:
        m = self.mapping
        if m.event_type is not None and m.event_type not in self.types:
            raise ConfigError(f"--event-type {m.event_type!r} is not an input event type of "
                              f"the model (input types: {', '.join(self.types)})")
        for value, name in m.type_values.items():
            if name not in self.types:
                raise ConfigError(f"--map-type {value}={name}: {name!r} is not an input event "
                                  f"type of the model (input types: {', '.join(self.types)})")
        for key in m.fields:
            etype, dot, name = key.rpartition(".")
            if dot and etype not in self.types:
                raise ConfigError(f"--map {key}: {etype!r} is not an input event type")
            known = (self.types[etype].fields if dot
                     else {f for t in self.types.values() for f in t.fields})
            if name not in known:
                raise ConfigError(f"--map {key}: no input event type has a field {name!r}")

    @property
    def fixed_type(self) -> str | None:
        """The type of every row when no type column says it."""
        if self.mapping.event_type:
            return self.mapping.event_type
        return next(iter(self.types)) if len(self.types) == 1 else None

    def for_source(self, available: Sequence[str]) -> RowConverter:
        """This converter for a source with columns `available`: with no type column
        named and no single type, a column called `type` names the types. Raises
        ConfigError, naming what is missing, before any job runs."""
        converter = self
        m = self.mapping
        if m.type_column is None and self.fixed_type is None and DEFAULT_TYPE_COLUMN in available:
            converter = replace(self, mapping=replace(m, type_column=DEFAULT_TYPE_COLUMN))
        converter.required_columns(available)
        return converter

    def required_columns(self, available: Sequence[str]) -> list[str]:
        """The source columns the conversion reads; raises ConfigError naming what is
        missing (checked on the driver before any job runs)."""
        have = set(available)
        wanted: list[str] = []
        m = self.mapping
        if m.type_column is not None:
            if m.type_column not in have:
                raise ConfigError(f"type column {m.type_column!r} is not in the source "
                                  f"(columns: {', '.join(available)})")
            wanted.append(m.type_column)
            types = list(self.types.values())
        elif self.fixed_type is not None:
            types = [self.types[self.fixed_type]]
        else:
            raise ConfigError(
                f"the model has {len(self.types)} input event types "
                f"({', '.join(self.types)}): say which column names each row's type "
                "(--type-column) or that every row is of one type (--event-type)")
        for t in types:
            missing = [f"{f} (column {self.mapping.column(t.name, f)!r})" for f in t.fields
                       if self.mapping.column(t.name, f) not in have]
            if missing and (m.type_column is None or len(missing) == len(t.fields)):
                raise ConfigError(f"{t.name}: the source has no column for "
                                  f"{', '.join(missing)}; columns are {', '.join(available)} "
                                  "(map them with --map FIELD=COLUMN or --map TYPE.FIELD=COLUMN)")
            wanted += [self.mapping.column(t.name, f) for f in t.fields
                       if self.mapping.column(t.name, f) in have]
        return list(dict.fromkeys(wanted))

    def convert(self, row: Mapping[str, Any]) -> Converted:
        name = self._type_of(row)
        etype = self.types.get(name) if name is not None else None
        if etype is None:
            return Converted(None, None, "unknown_type",
                             f"{name!r} is not an input event type of the model "
                             f"(input types: {', '.join(self.types)})")
        record: dict[str, Any] = {}
        for attr, kind in etype.fields.items():
            value = row.get(self.mapping.column(etype.name, attr))
            record[attr] = convert_value(value, kind, self.unit_ms)
        problem = event_problem(etype, record, self.partition_by) or _range_problem(etype, record)
        if problem:
            return Converted(etype, record, "schema", problem)
        return Converted(etype, record)

    def key(self, record: Mapping[str, Any]) -> str:
        return partition_key(record, self.partition_by)

    def _type_of(self, row: Mapping[str, Any]) -> str | None:
        column = self.mapping.type_column
        if column is None:
            return self.fixed_type
        value = row.get(column)
        if value is None:
            return None
        text = str(value)
        return self.mapping.type_values.get(text, text)


def convert_value(value: Any, kind: str, unit_ms: int) -> Any:
    """`value` as the wire carries a `kind` field, or unchanged when it does not convert."""
    if value is None:
        return None
    if isinstance(value, str):
        return _from_text(value, kind)
    if kind == "int":
        if isinstance(value, dt.datetime):
            aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
            return (aware - _EPOCH) // dt.timedelta(milliseconds=unit_ms)
        if isinstance(value, dt.date):
            return (dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC)
                    - _EPOCH) // dt.timedelta(milliseconds=unit_ms)
        if isinstance(value, Decimal) and value == value.to_integral_value():
            return int(value)
        return value
    if kind == "float":
        if isinstance(value, int | Decimal) and not isinstance(value, bool):
            return float(value)
        return value
    return value


def _from_text(text: str, kind: str) -> Any:
    stripped = text.strip()
    if kind == "string":
        return text
    if stripped == "":
        return None
    try:
        if kind == "int":
            return int(stripped)
        if kind == "float":
            return float(stripped)
    except ValueError:
        return text
    if kind == "bool":
        low = stripped.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
    return text


def _range_problem(etype: EventTypeDef, record: Mapping[str, Any]) -> str:
    for attr, kind in etype.fields.items():
        v = record.get(attr)
        if kind == "int" and v is not None and not INT64_MIN <= v <= INT64_MAX:
            return f"{etype.name}.{attr}: {v} does not fit a 64-bit int (Avro long)"
    return ""


def row_json(row: Mapping[str, Any]) -> str:
    """The source row as JSON text, for a dead letter."""
    return json.dumps(dict(row), default=str, ensure_ascii=False)
