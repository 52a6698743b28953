"""CRC-64-AVRO (Rabin) fingerprints, as defined by the Avro specification
("Schema Fingerprints"), computed by fastavro; single-object encoding puts
them little-endian in the header."""

from __future__ import annotations

from fastavro.schema import fingerprint


def crc64_avro(canonical: str) -> int:
    """The 64-bit Rabin fingerprint of a schema's parsing canonical form."""
    # fastavro gives the fingerprint's little-endian bytes as hex.
    return int.from_bytes(bytes.fromhex(fingerprint(canonical, "CRC-64-AVRO")), "little")
