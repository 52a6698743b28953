"""Engine state of nested Python values as plain data for the state format.

The pattern engines keep their partial matches as tuples, lists, dicts with
tuple keys, bytes (a stack's raw rows) and a few small record classes
(DerivedEvent, the reference engine's Ev and held matches). `encode` turns
such a value into what msgpack stores (services/store/state_format.py),
tagging what msgpack would lose: tuples, sets, maps with non-string keys,
integers beyond 64 bits, and the record classes by name. `decode` builds
back only those: a class not registered here is refused, so a crafted
changelog record cannot make a service build anything else.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from caesar.services.store.state_format import StateFormatError

_CLASSES: dict[str, type] = {}
_SINGLETONS: dict[str, Any] = {}  # name -> a marker object (e.g. a missing value)
_INT64 = (-(2**63), 2**64 - 1)  # msgpack holds signed and unsigned 64-bit integers


def register(cls: type) -> type:
    """Allow a dataclass in engine state (by its name)."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__} is not a dataclass")
    _CLASSES[cls.__name__] = cls
    return cls


def register_singleton(name: str, obj: Any) -> None:
    """Allow a marker object in engine state (stored by name, restored as itself)."""
    if type(obj) in _SCALARS or type(obj) in (int, list, tuple):
        raise TypeError(f"a {type(obj).__name__} cannot be a state marker (it is stored as data)")
    _SINGLETONS[name] = obj
    _MARKERS[id(obj)] = name


_SCALARS = frozenset((type(None), bool, float, str, bytes))
_INT = {int}
_LO, _HI = _INT64
_MARKERS: dict[int, str] = {}  # id(marker) -> name (markers live in _SINGLETONS)


def encode(value: Any) -> Any:
    # Snapshots run at every commit over the engines' whole state (a few
    # 100K values): exact types first, one call per container, not per value.
    t = type(value)
    if t is int:
        return value if _LO <= value <= _HI else {"$i": str(value)}
    if t in _SCALARS:
        return value
    if t is list:
        return _items(value)
    if t is tuple:
        return {"$t": _items(value)}
    return _encode_other(value)


def _items(values: list[Any] | tuple[Any, ...]) -> list[Any]:
    kinds = set(map(type, values))  # (map, set, min and max run in C)
    if kinds == _INT:
        if min(values) >= _LO and max(values) <= _HI:
            return list(values)
    elif kinds <= _SCALARS:
        return list(values)
    out = []
    for v in values:
        t = type(v)
        if (t is int and _LO <= v <= _HI) or t in _SCALARS:
            out.append(v)
        else:
            out.append(encode(v))
    return out


def _encode_other(value: Any) -> Any:
    """Markers, subclasses of the plain types, sets, maps and records."""
    name = _MARKERS.get(id(value))
    if name is not None and _SINGLETONS.get(name) is value:
        return {"$o": name}
    if value is None or isinstance(value, bool | float | str | bytes):
        return value
    if isinstance(value, int):
        return value if _LO <= value <= _HI else {"$i": str(value)}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, tuple):
        return {"$t": [encode(v) for v in value]}
    if isinstance(value, set | frozenset):
        return {"$s": [encode(v) for v in sorted(value, key=repr)]}
    if isinstance(value, dict):
        return _encode_map(value)
    return _encode_record(value)


def _encode_map(value: dict[Any, Any]) -> Any:
    if all(isinstance(k, str) and not k.startswith("$") for k in value):
        return {k: encode(v) for k, v in value.items()}
    return {"$d": [[encode(k), encode(v)] for k, v in value.items()]}


def _encode_record(value: Any) -> Any:
    name = type(value).__name__
    if _CLASSES.get(name) is type(value) and dataclasses.is_dataclass(value):
        return {"$c": name, "f": {f.name: encode(getattr(value, f.name))
                                  for f in dataclasses.fields(value)}}
    raise StateFormatError(f"engine state holds a {name}, which the state format does not "
                           "store (register it in services/store/tagged.py)")


def decode(data: Any) -> Any:
    if isinstance(data, list):
        return [decode(v) for v in data]
    if not isinstance(data, dict):
        return data
    if "$t" in data:
        return tuple(decode(v) for v in data["$t"])
    if "$s" in data:
        return {decode(v) for v in data["$s"]}
    if "$d" in data:
        return {_key(decode(k)): decode(v) for k, v in data["$d"]}
    if "$i" in data:
        return int(data["$i"])
    if "$o" in data:
        if data["$o"] not in _SINGLETONS:
            raise StateFormatError(f"engine state names the marker {str(data['$o'])[:80]!r}, "
                                   "which is not one the engines store")
        return _SINGLETONS[data["$o"]]
    if "$c" in data:
        return _decode_record(data)
    return {k: decode(v) for k, v in data.items()}


def _decode_record(data: dict[str, Any]) -> Any:
    cls = _CLASSES.get(data["$c"])
    if cls is None:
        raise StateFormatError(f"engine state names the class {str(data['$c'])[:80]!r}, "
                               "which is not one the engines store")
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: decode(v) for k, v in data["f"].items() if k in names})


def _key(k: Any) -> Any:
    if isinstance(k, list | dict | set):
        raise StateFormatError("engine state has a map key that is not hashable")
    return k
