"""A service loop that stops making progress restarts its actor.

Every call a loop step makes to the broker is bounded (caesar.bus.kafka's
_bounded, the consumer's timeouts), so a step that runs far longer than
those bounds is stuck in something that never returns: a librdkafka call
past its own timeout, a lock. An actor whose loop thread is stuck still
answers stats and looks alive while its partitions wait forever; the
watchdog logs the loop thread's stack (where it is stuck) and ends the
process, so Ray restarts the actor from its last checkpoint, as for a
crash. Flink's task cancellation watchdog and Kafka's max.poll.interval.ms
make the same trade.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger(__name__)

# Above the longest bounded path of one step: a failed commit's recovery
# (new producers: init_transactions within 120 s; committed offsets: 60 s).
DEFAULT_STALL_S = 300.0


class Beating(Protocol):
    beat: float  # time.monotonic() when the current step began


def stalled_for(loop: Beating, now: float | None = None) -> float:
    return (time.monotonic() if now is None else now) - loop.beat


def thread_stack(thread: threading.Thread) -> str:
    frame = sys._current_frames().get(thread.ident or -1)
    return "".join(traceback.format_stack(frame)) if frame is not None else "(no frame)"


def watch(loop: Beating, thread: threading.Thread, stall_s: float, on_stall: Callable[[str], None],
          stopped: Callable[[], bool], every_s: float = 1.0) -> threading.Thread:
    """Start a daemon thread calling on_stall(report) once the loop thread's
    current step has run longer than stall_s."""

    def run() -> None:
        while not stopped() and thread.is_alive():
            took = stalled_for(loop)
            if took > stall_s:
                on_stall(f"{thread.name}: one step has run {took:.0f} s (limit {stall_s:.0f} s); "
                         f"it is at:\n{thread_stack(thread)}")
                return
            time.sleep(every_s)

    watcher = threading.Thread(target=run, daemon=True, name=f"watchdog-{thread.name}")
    watcher.start()
    return watcher
