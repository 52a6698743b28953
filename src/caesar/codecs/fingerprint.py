"""CRC-64-AVRO (Rabin) fingerprints, as defined by the Avro specification
("Schema Fingerprints"); single-object encoding puts them little-endian in the
header."""

from __future__ import annotations

EMPTY = 0xC15D213AA4D7A795


def _table() -> list[int]:
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (EMPTY & -(fp & 1))
        table.append(fp & 0xFFFFFFFFFFFFFFFF)
    return table


_TABLE = _table()


def crc64_avro(data: bytes) -> int:
    """The 64-bit Rabin fingerprint of `data` (a schema's parsing canonical form)."""
    fp = EMPTY
    for byte in data:
        fp = (fp >> 8) ^ _TABLE[(fp ^ byte) & 0xFF]
    return fp
