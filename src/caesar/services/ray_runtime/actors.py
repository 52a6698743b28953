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
from caesar.services.common.collector import CLOCK
from caesar.services.common.config import (
    DEFAULT_CHECKPOINT_INTERVAL_S,
    DEFAULT_CHECKPOINT_SHARE,
    RunnerOptions,
    ServiceConfig,
)
from caesar.services.common.watchdog import DEFAULT_STALL_S, watch
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
        self.nice = os.nice(0)
        if self.nice > 0:
            log.warning("caesar %s actor runs at nice %d (Ray's worker_niceness): under CPU "
                        "contention it yields to the broker and the producers, and its latency "
                        "grows; start the raylet with RAY_worker_niceness=0", service, self.nice)
        bus = KafkaBus(settings.kafka)
        cfg = ServiceConfig(plan=plan, topics=settings.topics, codec=make_codec(settings),
                            partitions=tuple(partitions), actor_id=actor_id,
                            allowance=options.get("allowance", 0),
                            max_ahead=options.get("max_ahead"),
                            ahead_confirm=options.get("ahead_confirm", 100),
                            engine_factory=options.get("engine_factory"))
        self.loop = make_loop(service, cfg, bus, group_prefix=options.get("group_prefix", "caesar"),
                              batch_size=settings.kafka.consume_batch_size,
                              batch_bytes=settings.kafka.consume_batch_bytes,
                              commit_interval_s=options.get("commit_interval_s", 1.0),
                              max_commit_share=options.get("max_commit_share", 0.25),
                              checkpoint_interval_s=options.get(
                                  "checkpoint_interval_s", DEFAULT_CHECKPOINT_INTERVAL_S),
                              max_checkpoint_share=options.get(
                                  "max_checkpoint_share", DEFAULT_CHECKPOINT_SHARE),
                              transaction_timeout_s=settings.kafka.transaction_timeout_ms / 1000,
                              poll_timeout_s=settings.kafka.poll_timeout_s)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"caesar-{actor_id}", daemon=True)
        self._thread.start()
        watch(self.loop, self._thread, options.get("stall_timeout_s", DEFAULT_STALL_S),
              self._stalled, self._stop.is_set)

    def _stalled(self, report: str) -> None:
        self.error = report
        log.error("caesar %s actor stalled, restarting: %s", self.service, report)
        logging.shutdown()
        os._exit(1)

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
                "nice": self.nice,
                "records_in": s.records_in,
                "records_out": s.records_out, "batches": s.batches, "commits": s.commits,
                "commit_s": round(s.commit_s, 3), "checkpoints": s.checkpoints,
                "checkpoint_s": round(s.checkpoint_s, 6),
                "checkpoint_interval_s": round(self.loop.checkpoint_interval(), 2),
                "replayed": s.replayed,
                "aborts": s.aborts, "recoveries": s.recoveries, "state_bytes": s.state_bytes,
                "restore_s": s.restore_s, "restore_records": s.restore_records,
                "restore_bytes": s.restore_bytes, "restored_from": s.restored_from, "error": self.error,
                "plans": self.plan_versions(),
                "alive": self._thread.is_alive(), "uptime_s": time.time() - self.started,
                "hop_ms": s.hop_ms.as_dict(), "lag": self._lag(), **CLOCK.as_dict(),
                **_counters(self.loop.handler)}

    def _lag(self) -> int | None:
        try:
            return self.loop.lag()
        except Exception:  # the broker is away: the stats call must still answer
            log.warning("%s: consumer lag unavailable", self.service, exc_info=True)
            return None

    # -- model upgrades (Deployment.update) --------------------------------
    def stage_plan(self, plan_json: str) -> str:
        """Know this plan version before the switch reaches this actor."""
        from caesar.plans.serialize import plan_from_json

        return str(self.loop.plan_book.add(plan_from_json(plan_json)))

    def request_plan(self, version: str) -> None:
        """Scheduler: switch every partition at the next transaction boundary."""
        self.loop.plan_book.requested = version

    def plan_versions(self) -> dict[int, str]:
        versions: dict[int, str] = self.loop.handler.plan_versions()  # type: ignore[attr-defined]
        return versions

    def plan_json(self) -> str:
        """The plan most of this actor's partitions run."""
        from collections import Counter

        from caesar.plans.serialize import plan_json

        counts = Counter(self.plan_versions().values())
        return plan_json(self.loop.plan_book.get(counts.most_common(1)[0][0]))

    def tables(self, as_of: int | None = None) -> dict[str, Any]:
        """The acep service's shared tables (AcepHandler.tables); a request
        it cannot answer comes back as {"error": reason}."""
        from caesar.services.scheduler.acep.processor import HistoryError

        handler = self.loop.handler  # read anew: a restore replaces it
        if not hasattr(handler, "tables"):
            return {"error": f"the {self.service} service holds no tables"}
        try:
            answer: dict[str, Any] = handler.tables(as_of)
        except HistoryError as exc:
            return {"error": str(exc)}
        return answer

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
