"""Ray actors for the services: one actor per (service, group of Kafka
partitions), each running the service's ServiceLoop in a background thread.

Actors are restartable (`max_restarts=-1`): when one dies, Ray runs
`__init__` again with the same arguments, the loop restores the newest
checkpoint and resumes its inputs from the offsets it covers. Calls into an
actor are only for control and statistics; the data goes through Kafka in
batches.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from typing import Any

import ray

from caesar.services.common.config import ServiceConfig
from caesar.services.wiring import make_loop


@ray.remote(max_restarts=-1, max_task_retries=3, num_cpus=0)
class ServiceActor:
    def __init__(self, service: str, plan: Any, settings_json: str, partitions: tuple[int, ...],
                 actor_id: str, options: dict[str, Any]) -> None:
        from caesar.bus.kafka import KafkaBus
        from caesar.codecs import make_codec
        from caesar.services.common.collector import tune_collector
        from caesar.settings import Settings

        tune_collector()
        settings = Settings.model_validate_json(settings_json)
        self.service = service
        self.started = time.time()
        self.error: str | None = None
        bus = KafkaBus(settings.kafka)
        cfg = ServiceConfig(plan=plan, topics=settings.topics, codec=make_codec(settings),
                            partitions=tuple(partitions), actor_id=actor_id,
                            allowance=options.get("allowance", 0),
                            idle_flush_s=options.get("idle_flush_s"),
                            engine_factory=options.get("engine_factory"))
        self.loop = make_loop(service, cfg, bus, group_prefix=options.get("group_prefix", "caesar"),
                              batch_size=settings.kafka.consume_batch_size,
                              commit_interval_s=options.get("commit_interval_s", 1.0),
                              poll_timeout_s=settings.kafka.poll_timeout_s)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"caesar-{actor_id}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.loop.run(self._stop.is_set)
        except Exception:
            # A dead loop in a live actor would stall the pipeline silently:
            # report, then end the process so Ray restarts the actor, which
            # restores its last checkpoint.
            self.error = traceback.format_exc()
            print(f"caesar {self.service} actor failed, restarting:\n{self.error}",
                  file=sys.stderr, flush=True)
            os._exit(1)

    def stats(self) -> dict[str, Any]:
        s = self.loop.stats
        return {"service": self.service, "pid": os.getpid(), "records_in": s.records_in,
                "records_out": s.records_out, "batches": s.batches, "commits": s.commits,
                "restored_from": s.restored_from, "error": self.error,
                "alive": self._thread.is_alive(), "uptime_s": time.time() - self.started,
                **_counters(self.loop.handler)}

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(timeout=30)
        stats = self.stats()
        self.loop.close()
        return stats


def _counters(handler: Any) -> dict[str, Any]:
    """Service-specific counters: events the router kept from suspended plans,
    dead letters of the scheduler."""
    out: dict[str, Any] = {}
    procs = getattr(handler, "procs", {}).values()
    skipped: dict[str, int] = {}
    for p in procs:
        for pid, n in getattr(p, "skipped_events", {}).items():
            skipped[pid] = skipped.get(pid, 0) + n
        if hasattr(p, "dead"):
            out["dead_letters"] = out.get("dead_letters", 0) + p.dead
    if skipped:
        out["skipped_events"] = skipped
    return out
