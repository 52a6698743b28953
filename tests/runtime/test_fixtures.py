"""The session fixtures other tests rely on work as documented."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def test_kafka_bootstrap_is_a_reachable_loopback_broker(kafka_bootstrap, kafka_bus):
    host, port = kafka_bootstrap.split(":")
    assert host == "127.0.0.1" and int(port) > 0
    assert isinstance(kafka_bus.list_topics(), dict)


def test_ray_session_gives_two_cpus(ray_session):
    import ray

    assert ray.is_initialized()
    assert ray.cluster_resources()["CPU"] == 2

    @ray.remote
    def square(x: int) -> int:
        return x * x

    assert ray.get([square.remote(i) for i in range(4)]) == [0, 1, 4, 9]


def test_unique_names_differ(unique_name):
    assert unique_name("t") != unique_name("t")
