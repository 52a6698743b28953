from __future__ import annotations

import pytest

from caesar.bus.partitioner import murmur2, partition_for_key


# Values from Apache Kafka's UtilsTest.testMurmur2 (Java client).
@pytest.mark.parametrize("text, expected", [
    ("21", -973932308),
    ("foobar", -790332482),
    ("a-little-bit-long-string", -985981536),
    ("a-little-bit-longer-string", -1486304829),
    ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    ("abc", 479470107),
])
def test_murmur2_matches_kafka(text, expected):
    assert murmur2(text.encode()) == expected


def test_partition_is_positive_modulo():
    for i in range(200):
        key = f"key-{i}".encode()
        p = partition_for_key(key, 7)
        assert 0 <= p < 7
        assert p == (murmur2(key) & 0x7FFFFFFF) % 7
