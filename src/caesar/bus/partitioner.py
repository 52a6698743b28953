"""Kafka's default key partitioner (Java client `BuiltInPartitioner`):
partition = (murmur2(key) & 0x7fffffff) % partitions. The embedded bus uses it,
and KafkaBus configures librdkafka with `murmur2_random` (its default,
`consistent_random`, is CRC32 and would put keys elsewhere than Spark/Java
producers do)."""

from __future__ import annotations

import struct

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_SEED = 0x9747B28C


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2` as a signed 32-bit int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    blocks = length // 4
    for (k,) in struct.iter_unpack("<I", data[: blocks * 4]):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    base = blocks * 4
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions
