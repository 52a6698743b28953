"""The loop watchdog (caesar.services.common.watchdog): a step that runs far
past every bound restarts the actor, and says where it was stuck."""

from __future__ import annotations

import threading
import time

from caesar.services.common.watchdog import watch


class Loop:
    def __init__(self) -> None:
        self.beat = time.monotonic()


def stuck_in_destroy(release: threading.Event) -> None:
    release.wait(10)  # stands for a librdkafka call that never returns


def test_a_stuck_step_is_reported_with_where_it_is_stuck():
    loop, release, reports = Loop(), threading.Event(), []
    worker = threading.Thread(target=stuck_in_destroy, args=(release,), name="caesar-x")
    worker.start()
    try:
        watch(loop, worker, 0.3, reports.append, lambda: False, every_s=0.02).join(5)
        assert len(reports) == 1
        assert "caesar-x: one step has run" in reports[0]
        assert "stuck_in_destroy" in reports[0]
    finally:
        release.set()
        worker.join()


def test_a_loop_making_progress_is_left_alone():
    loop, done, reports = Loop(), threading.Event(), []

    def steps() -> None:
        while not done.is_set():
            loop.beat = time.monotonic()
            time.sleep(0.02)

    worker = threading.Thread(target=steps)
    worker.start()
    watcher = watch(loop, worker, 0.3, reports.append, lambda: False, every_s=0.02)
    time.sleep(1.0)
    done.set()
    worker.join()
    watcher.join(5)
    assert reports == [] and not watcher.is_alive()
