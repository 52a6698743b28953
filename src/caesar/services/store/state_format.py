"""The format of persisted state: data, never code.

State goes to Kafka (changelog topics) as msgpack, which can hold only nil,
booleans, 64-bit integers, floats, strings, bytes, arrays and maps; decoding
builds nothing else (no extension types, no classes), so bytes written to a
changelog topic by anyone cannot run code in the services. Every service
turns its objects into such plain values itself (`snapshot` methods) and
back (`restore`), so the layout is explicit and versioned by STATE_FORMAT.

Format history:
  2  pickle (before exactly-once): rejected with a clear error, never read.
  3  msgpack, per Kafka partition of a service, per query identity.
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

from caesar.errors import CaesarError

STATE_FORMAT = 3
PICKLE_FORMAT = 2
# Far above any real state, far below what would exhaust memory on a bad record.
_MAX_LEN = 1 << 31


class StateFormatError(CaesarError):
    """Persisted state cannot be encoded or decoded."""


class StateCompatibilityError(CaesarError):
    """Stored state cannot be carried over to this plan (names the query)."""


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    raise StateFormatError(f"state holds a {type(value).__name__}, which the state format "
                           "does not store; convert it in the snapshot")


def pack(value: Any) -> bytes:
    """Plain data -> bytes (tuples become arrays, sets sorted arrays)."""
    try:
        return msgpack.packb(value, use_bin_type=True, default=_plain)
    except (TypeError, ValueError, OverflowError) as exc:
        raise StateFormatError(f"cannot encode state: {exc}") from exc


def _no_ext(code: int, data: bytes) -> Any:
    raise StateFormatError(f"state holds a msgpack extension type {code}; the state format "
                           "has none (not CAESAR state, or corrupted)")


def unpack(data: bytes) -> Any:
    """Bytes -> plain data (arrays come back as lists); never builds objects."""
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False, use_list=True,
                               ext_hook=_no_ext, max_bin_len=_MAX_LEN, max_str_len=_MAX_LEN,
                               max_array_len=_MAX_LEN, max_map_len=_MAX_LEN)
    except StateFormatError:
        raise
    except Exception as exc:  # msgpack raises several unrelated types on bad input
        raise StateFormatError(f"cannot decode state ({type(exc).__name__}: {exc})") from exc


def pairs(mapping: Any) -> list[list[Any]]:
    """A map with tuple (or other non-scalar) keys as [[key, value], ...]."""
    return [[list(k) if isinstance(k, tuple) else k, v] for k, v in mapping.items()]


def from_pairs(items: list[list[Any]], tuple_keys: bool = True) -> dict[Any, Any]:
    return {(tuple(k) if tuple_keys and isinstance(k, list) else k): v for k, v in items}
