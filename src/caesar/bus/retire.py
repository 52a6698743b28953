"""Retiring Kafka clients off the caller's thread.

A client replaced after a broker restart or pause is closed and destroyed
on a daemon thread of its own: librdkafka's close and destroy can block on
the connection the client lost (confluentinc/librdkafka#776, #1640, #3470),
and a service loop blocked there stops for good while its actor looks alive
(seen once in CI: the router stuck after a broker kill, its records
unconsumed). The caller hands over its only reference; the thread drops it
last, so the destruction (rd_kafka_destroy, run when the Python object goes)
happens there too.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Protocol


class Closable(Protocol):
    def close(self) -> None: ...


def retire(client: Closable, name: str = "client") -> None:
    """Close `client` and let it go on a daemon thread; the caller must hold
    no other reference to it."""
    box = [client]
    del client
    threading.Thread(target=_reap, args=(box,), daemon=True, name=f"retire-{name}").start()


def _reap(box: list[Closable], wait_s: float = 5.0) -> None:
    client = box.pop()
    with contextlib.suppress(Exception):
        client.close()
    # The caller's own references (its argument, a temporary) go within
    # microseconds; a helper thread still inside a call on the client holds it
    # longer and then destroys it on its own thread, which is just as good.
    deadline = time.monotonic() + wait_s
    while sys.getrefcount(client) > 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    del client
