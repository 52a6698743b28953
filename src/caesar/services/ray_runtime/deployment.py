"""`caesar deploy`: the services of one model as Ray actors against Kafka.

Parallelism: the internal topics have P partitions; each service runs
`actors_per_service` actors, actor i owning the partitions j with
j % actors_per_service == i (its group). Consumer group per service.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from caesar.errors import CaesarError, RuntimeEnvironmentError
from caesar.logs import settings_from_env
from caesar.plans.execution import ExecutionPlan
from caesar.services.common.config import RunnerOptions, ServiceConfig
from caesar.services.wiring import SERVICES, service_topics
from caesar.settings import Settings


def partition_groups(partitions: int, actors: int) -> list[tuple[int, ...]]:
    actors = max(1, min(actors, partitions))
    return [tuple(j for j in range(partitions) if j % actors == i) for i in range(actors)]


class Deployment:
    def __init__(self, plan: ExecutionPlan, settings: Settings, *, actors_per_service: int | None = None,
                 options: RunnerOptions | None = None) -> None:
        if plan.acep is not None:
            raise CaesarError("shared tables and rules (ACEP) run in embedded mode "
                              "(caesar run, model.session()); not yet on Kafka + Ray")
        self.plan, self.settings = plan, settings
        self.options: RunnerOptions = options.copy() if options else {}
        # The actors log like this driver (caesar.logs): level and format.
        level, fmt = settings_from_env()
        caesar_level = logging.getLogger("caesar").level
        self.options.setdefault("log_level", logging.getLevelName(caesar_level)
                                if caesar_level else level)
        self.options.setdefault("log_format", fmt)
        self.actors_per_service = actors_per_service or settings.ray.actors_per_service
        self.actors: dict[str, list[Any]] = {}

    def create_topics(self) -> list[str]:
        from caesar.bus.kafka import KafkaBus
        from caesar.codecs import make_codec

        bus = KafkaBus(self.settings.kafka)
        try:
            cfg = ServiceConfig(self.plan, self.settings.topics, make_codec(self.settings),
                                (), "setup")
            return bus.create_topics(service_topics(cfg))
        finally:
            bus.close()

    def start(self) -> None:
        from caesar.services.ray_runtime.actors import RemoteServiceActor

        self.create_topics()
        groups = partition_groups(self.settings.topics.partitions, self.actors_per_service)
        settings_json = self.settings.model_dump_json()
        prefix = self.options.get("group_prefix", "caesar")
        for service in SERVICES:
            self.actors[service] = [
                RemoteServiceActor.options(name=f"{prefix}-{service}-{i}").remote(
                    service, self.plan, settings_json, group, f"{service}-{i}", self.options)
                for i, group in enumerate(groups)]

    def stats(self) -> dict[str, list[dict[str, Any]]]:
        import ray

        return {s: ray.get([a.stats.remote() for a in actors], timeout=60)
                for s, actors in self.actors.items()}

    def kill(self, service: str, index: int = 0) -> None:
        """Kill one actor; Ray restarts it (max_restarts=-1)."""
        import ray

        ray.kill(self.actors[service][index], no_restart=False)

    def stop(self) -> dict[str, list[dict[str, Any]]]:
        import ray

        final = {}
        for s, actors in self.actors.items():
            final[s] = ray.get([a.stop.remote() for a in actors], timeout=120)
            for a in actors:
                ray.kill(a, no_restart=True)
        self.actors = {}
        return final


def deploy_model(plan: ExecutionPlan, *, model_text: str, settings_file: Path | None,
                 ray_address: str | None, run_for: float, console: Any,
                 options: RunnerOptions | None = None, observe_host: str = "127.0.0.1",
                 observe_port: int = 9464) -> None:
    import ray

    from caesar.settings import load_settings

    settings = load_settings(settings_file)
    address = ray_address or settings.ray.address
    try:
        ray.init(address=address, namespace=settings.ray.namespace, include_dashboard=False,
                 log_to_driver=False, ignore_reinit_error=True)
    except Exception as exc:  # ConnectionError and Ray's own errors
        raise RuntimeEnvironmentError(f"cannot reach Ray at {address or 'local'}: {exc}") from exc
    dep = Deployment(plan, settings, options=options)
    dep.start()
    console.print(f"deployed {plan.model}: {len(SERVICES)} services x {dep.actors_per_service} "
                  f"actor(s) on {settings.topics.partitions} partition(s), Kafka "
                  f"{settings.kafka.bootstrap_servers}")
    started = time.monotonic()
    restore = _stop_on_sigterm()
    observation = None
    try:
        if observe_port:
            from caesar.observe import observe

            observation = observe(dep, host=observe_host, port=observe_port)
            console.print(f"metrics {observation.url}/metrics, live context view "
                          f"{observation.url}/")
        while run_for <= 0 or time.monotonic() - started < run_for:
            time.sleep(min(5.0, run_for) if run_for > 0 else 5.0)
            for service, stats in dep.stats().items():
                for st in stats:
                    console.print(f"{service}: in {st['records_in']} out {st['records_out']} "
                                  f"commits {st['commits']}" + (f" ERROR {st['error']}"
                                                                if st["error"] else ""))
    except KeyboardInterrupt:
        pass
    finally:
        restore()
        if observation is not None:
            observation.stop()
        dep.stop()
        console.print("stopped")


def _stop_on_sigterm() -> Callable[[], None]:
    """Treat SIGTERM (Kubernetes stopping the driver pod) like Ctrl-C, so the
    actors are stopped before the driver exits; returns the undo."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    return restore
