"""Ray actors for the services: one actor per (service, group of Kafka
partitions), each running the service's ServiceLoop in a background thread.

Actors are restartable (`max_restarts=-1`): when one dies, Ray runs
`__init__` again with the same arguments, the loop restores the newest
checkpoint and resumes its inputs from the offsets it covers. Calls into an
actor are only for control and statistics; the data goes through Kafka in
batches.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import traceback
from typing import Any

import ray

from caesar.plans.execution import ExecutionPlan
from caesar.services.common.config import RunnerOptions, ServiceConfig
from caesar.services.wiring import make_loop

log = logging.getLogger(__name__)


class ServiceActor:
    def __init__(self, service: str, plan: ExecutionPlan, settings_json: str,
                 partitions: tuple[int, ...], actor_id: str, options: RunnerOptions) -> None:
        from caesar.bus.kafka import KafkaBus
        from caesar.codecs import make_codec
        from caesar.logs import configure
        from caesar.services.common.collector import tune_collector
        from caesar.settings import Settings

        tune_collector()
        configure(options.get("log_level"), options.get("log_format"))
        settings = Settings.model_validate_json(settings_json)
        self.service = service
        self.actor_id = actor_id
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
            log.exception("caesar %s actor failed, restarting", self.service)
            logging.shutdown()  # flush the handlers: os._exit skips it
            os._exit(1)

    def stats(self) -> dict[str, Any]:
        s = self.loop.stats
        return {"service": self.service, "actor": self.actor_id, "pid": os.getpid(),
                "records_in": s.records_in,
                "records_out": s.records_out, "batches": s.batches, "commits": s.commits,
                "restored_from": s.restored_from, "error": self.error,
                "alive": self._thread.is_alive(), "uptime_s": time.time() - self.started,
                "hop_ms": s.hop_ms.as_dict(), "lag": self._lag(),
                "state_bytes": sum(st.last_bytes for st in self.loop.stores.values()),
                **_counters(self.loop.handler)}

    def _lag(self) -> int | None:
        try:
            return self.loop.lag()
        except Exception:  # the broker is away: the stats call must still answer
            log.warning("%s: consumer lag unavailable", self.service, exc_info=True)
            return None

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(timeout=30)
        stats = self.stats()
        self.loop.close()
        return stats



# Applied here rather than as a class decorator so type checkers see the actor
# class Ray makes (ActorClass: `.options(...)`, `.remote(...)`).
RemoteServiceActor = ray.remote(max_restarts=-1, max_task_retries=3, num_cpus=0)(ServiceActor)

def _counters(handler: Any) -> dict[str, Any]:
    """Service-specific counters: events the router kept from suspended plans,
    dead letters of the scheduler by reason, the matcher's alert latency."""
    out: dict[str, Any] = {}
    procs = getattr(handler, "procs", {}).values()
    skipped: dict[str, int] = {}
    for p in procs:
        for pid, n in getattr(p, "skipped_events", {}).items():
            skipped[pid] = skipped.get(pid, 0) + n
        if hasattr(p, "dead"):
            out["dead_letters"] = out.get("dead_letters", 0) + p.dead
        for reason, n in getattr(p, "dead_by_reason", {}).items():
            by_reason = out.setdefault("dead_letters_by_reason", {})
            by_reason[reason] = by_reason.get(reason, 0) + n
    if skipped:
        out["skipped_events"] = skipped
    outputs = getattr(handler, "outputs", None)
    if outputs is not None and hasattr(outputs, "latency"):
        out["alert_latency_ms"] = outputs.latency.as_dict()
    return out
