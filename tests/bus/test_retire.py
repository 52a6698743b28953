"""Retired Kafka clients are closed and destroyed on a thread of their own
(caesar.bus.retire): a close or destroy blocked on a lost connection must
not stop the service loop that replaced the client."""

from __future__ import annotations

import gc
import threading
import time
import weakref

from caesar.bus.kafka import KafkaProducer
from caesar.bus.retire import retire


class Client:
    def __init__(self, release: threading.Event, seen: dict[str, str]) -> None:
        self.release = release
        self.seen = seen

    def close(self) -> None:
        self.seen["close"] = threading.current_thread().name
        self.release.wait(10)  # a close blocked on the connection it lost

    def __del__(self) -> None:
        self.seen["destroy"] = threading.current_thread().name


def test_a_blocked_close_does_not_block_the_caller_and_destruction_happens_aside():
    release, seen = threading.Event(), {}
    started = time.monotonic()
    retire(Client(release, seen), "test")
    assert time.monotonic() - started < 1.0
    deadline = time.monotonic() + 5
    while "close" not in seen and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen == {"close": "retire-test"}  # still closing, not destroyed
    release.set()
    deadline = time.monotonic() + 5
    while "destroy" not in seen and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen["destroy"] == "retire-test"


def test_a_producer_goes_with_its_last_reference_not_with_the_collector():
    """No cycle through the error callback: dropping the last reference
    destroys the producer right there (on the retiring thread), never later
    on whichever thread the garbage collector happens to run."""
    gc.disable()
    try:
        producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:1"})
        ref = weakref.ref(producer)
        del producer
        assert ref() is None
    finally:
        gc.enable()
