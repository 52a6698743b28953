"""`caesar.jobs.hops.read_topic` gives up on a stall, not on a topic's
length: a 30-minute 4-expressway run's 12M outputs took longer to read than
the whole timeout (session 21), each poll of them did not."""

from __future__ import annotations

from typing import Any

import pytest

from caesar.bus.memory import InMemoryBus
from caesar.bus.records import OutRecord, Record, TopicSpec
from caesar.jobs import hops


class Clock:
    """hops' `time`: each poll of SlowConsumer advances it by a second."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


class SlowConsumer:
    """Hands out one record per poll, and none after `stall_after` of them."""

    def __init__(self, inner: Any, clock: Clock, stall_after: int | None) -> None:
        self.inner, self.clock, self.left = inner, clock, stall_after

    def poll(self, max_records: int, timeout_s: float) -> list[Record]:
        self.clock.now += 1.0
        if self.left == 0:
            return []
        if self.left is not None:
            self.left -= 1
        return self.inner.poll(1, 0.0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class SlowBus:
    def __init__(self, inner: InMemoryBus, clock: Clock, stall_after: int | None) -> None:
        self.inner, self.clock, self.stall_after = inner, clock, stall_after

    def consumer(self, group_id: str, **kw: Any) -> SlowConsumer:
        return SlowConsumer(self.inner.consumer(group_id, **kw), self.clock, self.stall_after)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def bus_with(n: int, clock: Clock, stall_after: int | None) -> SlowBus:
    bus = InMemoryBus()
    bus.create_topics([TopicSpec("out", 2)])
    producer = bus.producer()
    producer.produce(OutRecord("out", str(i).encode(), partition=i % 2) for i in range(n))
    producer.flush()
    return SlowBus(bus, clock, stall_after)


def test_a_topic_that_takes_longer_than_the_timeout_is_read_whole(monkeypatch) -> None:
    clock = Clock()
    monkeypatch.setattr(hops, "time", clock)
    got = hops.read_topic(bus_with(40, clock, None), "out", timeout_s=5.0)  # type: ignore[arg-type]
    assert clock.now >= 40 > 5
    assert sorted(int(r.value or b"") for r in got) == list(range(40))


def test_a_stall_times_out_after_the_timeout_without_a_record(monkeypatch) -> None:
    clock = Clock()
    monkeypatch.setattr(hops, "time", clock)
    with pytest.raises(TimeoutError, match="still short of the end offsets"):
        hops.read_topic(bus_with(40, clock, 12), "out", timeout_s=5.0)  # type: ignore[arg-type]
    # 12 polls with a record, then the timeout's worth without one
    assert 12 + 5 <= clock.now <= 12 + 7
