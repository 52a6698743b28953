"""The local runtime `caesar up` manages: one KRaft broker and one Ray head,
their PIDs, logs and ports recorded in `<runtime_dir>/state.json` so `down`
and `status` (other processes) find them."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from caesar.runtime.broker import BrokerConfig, LocalBroker
from caesar.runtime.kafka_jars import ensure_kafka_jars, jars_cached
from caesar.runtime.processes import pid_alive, port_open
from caesar.runtime.ray_local import LocalRay, RayConfig
from caesar.settings import LocalRuntimeSettings, Settings

Progress = Callable[[str], object]  # where progress lines go (print by default)


@dataclass
class ComponentStatus:
    name: str
    running: bool
    pid: int | None
    address: str
    log: Path
    detail: str = ""


@dataclass
class UpReport:
    seconds: dict[str, float] = field(default_factory=dict)
    fetched_jars: bool = False
    created_topics: list[str] = field(default_factory=list)


class LocalRuntime:
    def __init__(self, runtime: LocalRuntimeSettings) -> None:
        self.settings = runtime
        self.dir = Path(runtime.runtime_dir).expanduser()
        self.state_file = self.dir / "state.json"

    # state ---------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        try:
            return json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return {}

    def _save(self, state: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.state_file.write_text(json.dumps(state, indent=2))

    def broker(self) -> LocalBroker:
        st = self._state().get("broker", {})
        s = self.settings
        return LocalBroker(BrokerConfig(
            directory=self.dir / "kafka", port=st.get("port", s.broker_port),
            controller_port=st.get("controller_port", s.controller_port),
            kafka_version=st.get("kafka_version", s.kafka_version), heap=s.broker_heap))

    def ray(self) -> LocalRay:
        st = self._state().get("ray", {})
        s = self.settings
        return LocalRay(RayConfig(
            directory=self.dir / "ray", port=st.get("port", s.ray_port), num_cpus=s.ray_num_cpus,
            memory_mb=s.ray_memory_mb, object_store_mb=s.ray_object_store_mb,
            dashboard=s.ray_dashboard))

    @property
    def bootstrap(self) -> str:
        return self.broker().bootstrap

    # lifecycle -----------------------------------------------------------
    def up(self, settings: Settings | None = None, *, create_topics: bool = True,
           progress: Progress = print) -> UpReport:
        report = UpReport()
        s = self.settings
        state = self._state()
        started = time.monotonic()
        if not jars_cached(s.kafka_version):
            progress(f"Kafka {s.kafka_version} jars not cached: fetching from Maven Central (once)")
            t = time.monotonic()
            ensure_kafka_jars(s.kafka_version)
            report.fetched_jars = True
            report.seconds["fetch jars"] = time.monotonic() - t
        # Broker and Ray start in parallel: each is mostly waiting on its own JVM /
        # daemons, so `up` takes about as long as the slower of the two.
        broker, start_broker = self._planned_broker(progress)
        ray, start_ray = self._planned_ray(progress)
        jobs = {name: job for name, job in (("kafka", start_broker), ("ray", start_ray))
                if job is not None}
        errors = _run_parallel(jobs, report)
        if "kafka" in jobs and broker.running():
            state["broker"] = {"port": s.broker_port, "controller_port": s.controller_port,
                               "kafka_version": s.kafka_version, "pid": broker.pid}
        if "ray" in jobs and ray.running():
            state["ray"] = {"port": s.ray_port, "pid": ray.pid}
        self._save(state)
        if errors:
            # Leave nothing half-started behind.
            if "kafka" in jobs:
                broker.stop()
            if "ray" in jobs:
                ray.stop()
            raise errors[0]
        if create_topics and settings is not None:
            t = time.monotonic()
            report.created_topics = _create_topics(settings, broker.bootstrap)
            report.seconds["topics"] = time.monotonic() - t
        report.seconds["total"] = time.monotonic() - started
        return report

    def _planned_broker(self, progress: Progress) -> tuple[LocalBroker, Callable[[], None] | None]:
        """The broker, and how to start it unless it runs already."""
        s = self.settings
        broker = self.broker()
        if broker.running():
            progress(f"Kafka broker already running at {broker.bootstrap} (pid {broker.pid})")
            return broker, None
        broker = LocalBroker(BrokerConfig(
            directory=self.dir / "kafka", port=s.broker_port, controller_port=s.controller_port,
            kafka_version=s.kafka_version, heap=s.broker_heap))
        progress(f"starting Kafka {s.kafka_version} (KRaft) on {broker.bootstrap}")
        return broker, partial(broker.start, timeout_s=s.start_timeout_s)

    def _planned_ray(self, progress: Progress) -> tuple[LocalRay, Callable[[], None] | None]:
        """The Ray head, and how to start it unless it runs already or is off."""
        s = self.settings
        ray = self.ray()
        if not s.ray:
            return ray, None
        if ray.running():
            progress(f"Ray already running at {ray.address} (pid {ray.pid})")
            return ray, None
        ray = LocalRay(RayConfig(
            directory=self.dir / "ray", port=s.ray_port, num_cpus=s.ray_num_cpus,
            memory_mb=s.ray_memory_mb, object_store_mb=s.ray_object_store_mb,
            dashboard=s.ray_dashboard))
        progress(f"starting Ray head on {ray.address} ({s.ray_num_cpus} CPUs, "
                 f"{s.ray_memory_mb} MB, dashboard {'on' if s.ray_dashboard else 'off'})")
        return ray, partial(ray.start, timeout_s=s.start_timeout_s)

    def down(self, progress: Progress = print) -> list[str]:
        stopped = []
        state = self._state()
        for name, component, label in (("ray", self.ray(), "Ray"),
                                       ("broker", self.broker(), "Kafka broker")):
            pid = component.pid
            t = time.monotonic()
            if component.stop():
                stopped.append("kafka" if name == "broker" else name)
                how = "killed after the grace period" if component.killed else "stopped"
                progress(f"{how} {label} (pid {pid}) in {time.monotonic() - t:.1f}s")
        # Keep the ports (status shows where they ran); drop the PIDs.
        for key in ("ray", "broker"):
            state.get(key, {}).pop("pid", None)
        if self.dir.exists():
            self._save(state)
        return stopped

    def status(self) -> list[ComponentStatus]:
        broker, ray = self.broker(), self.ray()
        out = []
        b_pid = broker.pid
        b_running = b_pid is not None and pid_alive(b_pid)
        detail = ""
        if b_running and not port_open(broker.config.port):
            detail = "process alive, port closed (starting or stuck)"
        out.append(ComponentStatus("kafka", b_running, b_pid if b_running else None,
                                   broker.bootstrap, broker.log_file, detail))
        r_pid = ray.pid
        r_running = r_pid is not None and pid_alive(r_pid)
        out.append(ComponentStatus("ray", r_running, r_pid if r_running else None,
                                   ray.address, ray.log_file))
        return out


def _run_parallel(jobs: dict[str, Callable[[], None]], report: UpReport) -> list[BaseException]:
    """Run the start jobs side by side; their seconds go to the report."""

    def timed(job: Callable[[], None]) -> float:
        t = time.monotonic()
        job()
        return time.monotonic() - t

    errors: list[BaseException] = []
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(timed, job) for name, job in jobs.items()}
        for name, fut in futures.items():
            try:
                report.seconds[name] = fut.result()
            except BaseException as exc:  # noqa: BLE001 - re-raised by the caller after cleanup
                errors.append(exc)
    return errors


def _create_topics(settings: Settings, bootstrap: str) -> list[str]:
    from caesar.bus.kafka import KafkaBus
    from caesar.bus.topics import topic_specs

    kafka = settings.kafka.model_copy(update={"bootstrap_servers": bootstrap})
    bus = KafkaBus(kafka)
    try:
        return bus.create_topics(topic_specs(settings.topics))
    finally:
        bus.close()
