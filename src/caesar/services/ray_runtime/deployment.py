"""`caesar deploy`: the services of one model as Ray actors against Kafka.

Parallelism: the internal topics have P partitions; each service runs
`actors_per_service` actors (`settings.ray.actors` per service, e.g. more
matchers than schedulers), actor i of n owning the partitions j with
j % n == i (its group). Consumer group per service; each service's groups
are its own, since services meet only through topics.

`update(plan)` (`caesar deploy --update MODEL`) swaps the model while input
keeps flowing: the driver checks that every query's state can carry over
(services/common/plans.py), puts the new plan on the plans topic, stages it
in every actor, then asks the schedulers to switch; the switch crosses every
service in the data, partition by partition (services/common/switching.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from caesar.errors import CaesarError, ConfigError, RuntimeEnvironmentError
from caesar.logs import settings_from_env
from caesar.plans.execution import ExecutionPlan
from caesar.runtime.ray_local import use_token_auth
from caesar.services.common.config import RunnerOptions, ServiceConfig
from caesar.services.common.plans import UpgradeError, UpgradePlan, check_upgrade, publish_plan
from caesar.services.wiring import OPTIONAL, SERVICES, create_service_topics, services_of
from caesar.settings import RaySettings, Settings


@dataclass(frozen=True)
class TablesAt:
    """The shared tables at timestamp `ts` (None: their initial rows)."""

    ts: int | None
    tables: dict[str, list[dict[str, Any]]]


def partition_groups(partitions: int, actors: int) -> list[tuple[int, ...]]:
    actors = max(1, min(actors, partitions))
    return [tuple(j for j in range(partitions) if j % actors == i) for i in range(actors)]


class Deployment:
    def __init__(self, plan: ExecutionPlan, settings: Settings, *, actors_per_service: int | None = None,
                 actors: Mapping[str, int] | None = None,
                 options: RunnerOptions | None = None) -> None:
        local = [f.name for f in plan.functions if f.target is None]
        if local:
            # actors import functions by path (a plan carries no code)
            raise ConfigError(f"function(s) {', '.join(local)} cannot be deployed: define "
                              "them at module level in an importable module, or pass "
                              "'package.module:function' (settings.functions)")
        self.plan, self.settings = plan, settings
        self.options: RunnerOptions = options.copy() if options else {}
        # The actors log like this driver (caesar.logs): level and format.
        level, fmt = settings_from_env()
        caesar_level = logging.getLogger("caesar").level
        self.options.setdefault("log_level", logging.getLevelName(caesar_level)
                                if caesar_level else level)
        self.options.setdefault("log_format", fmt)
        # Per service: the default, the settings' overrides, the arguments'
        # (checked as settings are: RaySettings knows the services).
        try:
            ray_settings = RaySettings.model_validate({
                **settings.ray.model_dump(),
                "actors_per_service": actors_per_service or settings.ray.actors_per_service,
                "actors": {**settings.ray.actors, **(actors or {})}})
        except ValidationError as exc:
            raise ConfigError("; ".join(
                f"ray.{'.'.join(map(str, e['loc']))}: {e['msg']}" if e["type"] != "value_error"
                else str(e["ctx"]["error"]) for e in exc.errors())) from None
        self.actors_per_service = ray_settings.actors_per_service
        self.counts: dict[str, int] = {s: ray_settings.actors_of(s) for s in SERVICES}
        self.actors: dict[str, list[Any]] = {}

    def create_topics(self) -> list[str]:
        from caesar.bus.kafka import KafkaBus
        from caesar.codecs import make_codec

        bus = KafkaBus(self.settings.kafka)
        try:
            cfg = ServiceConfig(self.plan, self.settings.topics, make_codec(self.settings),
                                (), "setup")
            return create_service_topics(bus, cfg)
        finally:
            bus.close()

    @property
    def prefix(self) -> str:
        return str(self.options.get("group_prefix", "caesar"))

    def _publish(self, plan: ExecutionPlan) -> str:
        from caesar.bus.kafka import KafkaBus

        bus = KafkaBus(self.settings.kafka)
        try:
            return publish_plan(bus, self.settings.topics.plans, plan)
        finally:
            bus.close()

    def start(self) -> None:
        from caesar.services.ray_runtime.actors import RemoteServiceActor

        self.create_topics()
        self._publish(self.plan)
        partitions = self.settings.topics.partitions
        settings_json = self.settings.model_dump_json()
        prefix = self.options.get("group_prefix", "caesar")
        for service in services_of(self.plan):
            # One ACEP actor owns every partition: the tables are shared by all.
            owned = [tuple(range(partitions))] if service == "acep" \
                else partition_groups(partitions, self.counts[service])
            # Named in the settings' namespace (not the driver's): `attach`
            # and `caesar tables` look them up there.
            self.actors[service] = [
                RemoteServiceActor.options(name=f"{prefix}-{service}-{i}",
                                           namespace=self.settings.ray.namespace).remote(
                    service, self.plan, settings_json, group, f"{service}-{i}", self.options)
                for i, group in enumerate(owned)]

    def stats(self) -> dict[str, list[dict[str, Any]]]:
        import ray

        return {s: ray.get([a.stats.remote() for a in actors], timeout=60)
                for s, actors in self.actors.items()}

    @classmethod
    def attach(cls, settings: Settings, group_prefix: str = "caesar") -> Deployment:
        """The deployment running under `group_prefix` (its actors found by
        name in the settings' Ray namespace), e.g. to update it from another
        process. RuntimeEnvironmentError when none runs."""
        import ray

        from caesar.plans.serialize import plan_from_json

        actors: dict[str, list[Any]] = {}
        for service in [*SERVICES, *OPTIONAL]:
            found: list[Any] = []
            while True:
                try:
                    found.append(ray.get_actor(f"{group_prefix}-{service}-{len(found)}",
                                               namespace=settings.ray.namespace))
                except ValueError:
                    break
            if found:
                actors[service] = found
            elif service in SERVICES:
                raise RuntimeEnvironmentError(
                    f"no running deployment {group_prefix!r} in Ray namespace "
                    f"{settings.ray.namespace!r} (no actor {group_prefix}-{service}-0); "
                    "start one with `caesar deploy MODEL` (same settings and --prefix)")
        plan = plan_from_json(ray.get(actors["matcher"][0].plan_json.remote(), timeout=60))
        dep = cls(plan, settings, actors_per_service=len(actors["scheduler"]),
                  actors={s: len(found) for s, found in actors.items() if s in SERVICES},
                  options={"group_prefix": group_prefix})
        dep.actors = actors
        return dep

    def tables_at(self, as_of: int | None = None) -> TablesAt:
        """The shared tables (ACEP) of the running model as the acep actor
        holds them: the newest checkpointed version, or (`as_of`) the one
        after the s-transactions up to that timestamp while it is kept."""
        import ray

        actors = self.actors.get("acep")
        if not actors:
            raise ConfigError(f"deployment {self.prefix!r} runs model {self.plan.model!r}, "
                              "which declares no TABLE (it has no acep service)")
        answer = ray.get(actors[0].tables.remote(as_of), timeout=60)
        if "error" in answer:
            raise CaesarError(f"deployment {self.prefix!r}: {answer['error']}")
        return TablesAt(answer["ts"], answer["tables"])

    def tables(self, as_of: int | None = None) -> dict[str, list[dict[str, Any]]]:
        """Each shared table's rows in key order (like `Session.tables()`),
        as of the newest checkpoint or of timestamp `as_of` (`tables_at`)."""
        return self.tables_at(as_of).tables

    def update(self, plan: ExecutionPlan, timeout_s: float = 300.0,
               progress: Callable[[str], None] | None = None) -> UpgradePlan:
        """Swap the running model for `plan` without stopping the input:
        UpgradeError (nothing changed) when a query's state cannot carry over."""
        import ray

        from caesar.plans.serialize import plan_json

        change = check_upgrade(self.plan, plan)
        old_inputs = {t.topic for t in self.plan.event_types if t.topic}
        new_inputs = {t.topic for t in plan.event_types if t.topic}
        if old_inputs != new_inputs:
            raise UpgradeError(f"the input topics changed ({sorted(old_inputs)} -> "
                               f"{sorted(new_inputs)}): the schedulers read a fixed set; "
                               "deploy the new model anew instead")
        say = progress or (lambda _: None)
        old_plan, self.plan = self.plan, plan
        try:
            self.create_topics()  # the new model's output topics
        finally:
            self.plan = old_plan
        version = self._publish(plan)
        text = plan_json(plan)
        actors = [a for group in self.actors.values() for a in group]
        ray.get([a.stage_plan.remote(text) for a in actors], timeout=120)
        say(f"staged plan {version} in {len(actors)} actors; switching: {change.summary()}")
        deadline = time.monotonic() + timeout_s
        while True:
            # asked again until done: a scheduler restarted meanwhile forgot the request
            ray.get([a.request_plan.remote(version) for a in self.actors["scheduler"]],
                    timeout=60)
            versions = ray.get([a.plan_versions.remote() for a in actors], timeout=60)
            behind = sum(1 for v in versions for got in v.values() if got != version)
            if not behind:
                break
            if time.monotonic() > deadline:
                raise RuntimeEnvironmentError(
                    f"the model upgrade to {version} did not reach {behind} partition(s) "
                    f"within {timeout_s:.0f} s (it goes on; see `stats()`)")
            time.sleep(0.5)
        self.plan = plan
        say(f"every partition of every service runs plan {version}")
        return change

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
    use_token_auth()
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
    counts = ", ".join(f"{s} {n}" for s, n in dep.counts.items())
    console.print(f"deployed {plan.model}: actors {counts} "
                  f"on {settings.topics.partitions} partition(s), Kafka "
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


def update_model(plan: ExecutionPlan, *, settings_file: Path | None, ray_address: str | None,
                 prefix: str, console: Any) -> UpgradePlan:
    """`caesar deploy --update MODEL`: attach to the running deployment, swap its model."""
    use_token_auth()
    import ray

    from caesar.settings import load_settings

    settings = load_settings(settings_file)
    address = ray_address or settings.ray.address
    try:
        ray.init(address=address, namespace=settings.ray.namespace, include_dashboard=False,
                 log_to_driver=False, ignore_reinit_error=True)
    except Exception as exc:  # ConnectionError and Ray's own errors
        raise RuntimeEnvironmentError(f"cannot reach Ray at {address or 'local'}: {exc}") from exc
    dep = Deployment.attach(settings, prefix)
    change = dep.update(plan, progress=lambda text: console.print(text, soft_wrap=True))
    console.print(f"updated {prefix} to {plan.model} ({change.new}): {change.summary()}",
                  soft_wrap=True)
    return change


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
