"""Fault injection on the real thing: a local Kafka broker (KRaft) and Ray
head, the Linear Road model's services deployed by `caesar deploy` (a driver
process of its own), a Linear Road stream produced at a steady pace with an
input watermark after every second, and one fault at a point of the stream:

    actor:<service>  kill -9 one actor of the service (Ray restarts it)
    driver           kill -9 the `caesar deploy` driver (its actors die with
                     it), then start it again
    broker-kill      kill -9 the broker, then start it again on its data
    broker-pause     SIGSTOP the broker longer than the transaction timeout
                     (and the producers' request timeout), then SIGCONT

Every run is judged the same way: the read-committed alerts topic must hold
exactly the outputs of a clean run (the embedded pipeline on the same input,
the processors the services run): lost = expected - got, duplicated = got -
expected (as multisets); no partition may be stuck (every topic's last stable
offset equals its high watermark, no transaction left open, every consumer
group caught up). Recovery time: from the end of the fault to the first alert
(committed) that an input produced after the fault triggered.

Each run has its own topics, consumer groups, transactional ids and actor
names (a prefix), on one broker and Ray head for the whole session.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any

from caesar.bus.kafka import KafkaBus
from caesar.bus.records import OutRecord, TopicPartition
from caesar.codecs import make_codec
from caesar.examples import model_path
from caesar.examples.linear_road.avro import POSITION_REPORT, encode
from caesar.examples.linear_road.generator import GeneratorConfig, generate
from caesar.examples.linear_road.partitioning import wire_records
from caesar.examples.linear_road.records import PositionReport, position_reports
from caesar.language import compile_model
from caesar.plans.execution import ExecutionPlan
from caesar.runtime.broker import BrokerConfig, LocalBroker
from caesar.runtime.processes import free_port, port_open
from caesar.runtime.ray_local import LocalRay, RayConfig, use_token_auth
from caesar.services.common.messages import END_OF_TIME
from caesar.services.common.wire import DERIVED, alert_from
from caesar.services.embedded.pipeline import EmbeddedPipeline
from caesar.services.names import PIPELINE as SERVICES
from caesar.services.scheduler.runner import watermark_record
from caesar.settings import KafkaSettings, Settings, TopicSettings

KINDS = (*(f"actor:{s}" for s in SERVICES), "driver", "broker-kill", "broker-pause")
PARTITIONS = 4
TXN_TIMEOUT_MS = 10_000  # a broker pause of more than this aborts open transactions
INPUT = "lr-in"


@dataclass
class Stream:
    """One Linear Road input and what a clean run makes of it."""

    seconds: list[tuple[int, list[tuple[bytes, bytes]]]]  # (t, [(key, value)])
    expected: Counter[tuple]  # alert identities (a multiset)
    reports: int

    @classmethod
    def make(cls, duration_s: int, seed: int, segments: tuple[int, int] = (80, 90),
             start_s: int = 0) -> Stream:
        """`duration_s` of the standard load on one expressway from simulated
        second `start_s` on (the road as the generator has filled it by then),
        the reports of `segments` only (the pipeline need not keep up with a
        whole road here: what counts is what a fault does to the outputs)."""
        config = GeneratorConfig(xways=1, duration_s=start_s + duration_s, seed=seed,
                                 segments=segments)
        seconds = []
        count = 0

        def reports() -> Iterator[PositionReport]:
            nonlocal count
            for r in position_reports(generate(config)):
                if r.time >= start_s:
                    count += 1
                    yield r

        def events() -> Iterator[dict[str, Any]]:
            """The wire records second by second: encoded into `seconds` and
            decoded for the clean run as they go (a long stream is never
            held whole in its decoded form)."""
            wire = wire_records(reports(), fanout=True)
            for t, group in groupby(wire, key=lambda pair: pair[1]["time"]):
                pairs = list(group)
                values = encode(POSITION_REPORT, [rec for _, rec in pairs])
                seconds.append((t, [(k.encode(), v)
                                    for (k, _), v in zip(pairs, values, strict=True)]))
                for _, rec in pairs:
                    yield {"type": "PositionReport", **rec}

        plan = compile_model(model_path("linear_road"))
        expected = Counter(a.identity() for a in EmbeddedPipeline(plan).run_values(events()).alerts)
        return cls(seconds, expected, count)


@dataclass
class RunResult:
    run: int
    kind: str
    seed: int
    fault_at_s: float  # wall seconds into the input
    fault_s: float  # how long the fault lasted (down or paused)
    recovery_s: float | None  # fault end -> first alert of input produced after it
    expected: int
    got: int
    lost: int
    duplicated: int
    stuck: list[str] = field(default_factory=list)
    drain_s: float = 0.0  # input end -> every expected alert committed
    restarts: int = 0  # actors that restored a checkpoint
    # input records the restored actors handled again with their outputs
    # dropped (their checkpoint trailed the committed offsets)
    replayed: int = 0
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.duplicated == 0 and not self.stuck


class FaultLab:
    """A broker and a Ray head for a session of runs, in `workdir`."""

    def __init__(self, workdir: Path, log: Any = print) -> None:
        self.workdir = workdir
        self.log = log
        workdir.mkdir(parents=True, exist_ok=True)
        self.broker = LocalBroker(BrokerConfig(
            directory=workdir / "kafka", port=free_port(), controller_port=free_port(),
            dev=True))
        self.ray = LocalRay(RayConfig(directory=workdir / "ray", port=free_port(), num_cpus=4,
                                      memory_mb=4096))
        self.plan_text = model_path("linear_road").read_text()

    # -------------------------------------------------------------- session
    def __enter__(self) -> FaultLab:
        self.broker.start(timeout_s=120)
        self.ray.start(timeout_s=120)
        use_token_auth()
        import ray

        if ray.is_initialized():  # (tests: the session's local Ray; it starts again later)
            ray.shutdown()
        ray.init(address=self.ray.address, namespace="caesar-faults", log_to_driver=False,
                 include_dashboard=False)
        return self

    def __exit__(self, *exc: object) -> None:
        import ray

        with contextlib.suppress(Exception):
            ray.shutdown()
        self.ray.stop()
        self.broker.stop()

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def settings(self, prefix: str) -> Settings:
        p = prefix
        topics = TopicSettings.under(p, partitions=PARTITIONS, changelog_prefix=f"{p}.cl.")
        return Settings(kafka=KafkaSettings(bootstrap_servers=self.bootstrap,
                                            transaction_timeout_ms=TXN_TIMEOUT_MS,
                                            poll_timeout_s=0.1),
                        topics=topics)

    def model_file(self, prefix: str) -> Path:
        """The LR model on this run's topics (next to a copy of its schemas)."""
        folder = self.workdir / "models" / prefix
        folder.mkdir(parents=True, exist_ok=True)
        schemas = folder / "schemas"
        if not schemas.exists():
            schemas.symlink_to(model_path("linear_road").parent / "schemas")
        text = (self.plan_text.replace('"lr-position-reports"', f'"{prefix}.{INPUT}"')
                .replace('"lr-tolls"', f'"{prefix}.tolls"')
                .replace('"lr-accident-alerts"', f'"{prefix}.accidents"'))
        path = folder / "model.caesar"
        path.write_text(text)
        return path

    # -------------------------------------------------------------- one run
    def run(self, run: int, kind: str | None, stream: Stream, *, speed: float, seed: int,
            fault_at_s: float, pause_s: float = 14.0, drain_timeout_s: float = 240.0
            ) -> RunResult:
        result = RunResult(run, kind or "none", seed, fault_at_s, 0.0, None,
                           sum(stream.expected.values()), 0, 0, 0)
        with self.deployed(f"f{run}-{uuid.uuid4().hex[:6]}") as d:
            fault_end: float | None = None
            producer = InputProducer(d.bus, d.input_topic, stream, speed)
            producer.start()
            if kind is not None:
                while time.monotonic() - producer.started < fault_at_s and producer.alive():
                    time.sleep(0.05)
                self.log(f"run {run}: {kind} at {time.monotonic() - producer.started:.1f} s")
                began = time.monotonic()
                fault_end = self.inject(kind, d.driver, d.prefix, pause_s)
                result.fault_s = round(fault_end - began, 2)
            producer.join()
            self.judge(d, stream, result, time.monotonic(), drain_timeout_s)
            if fault_end is not None:
                result.recovery_s = d.tail.recovery(fault_end)
        return result

    @contextlib.contextmanager
    def deployed(self, prefix: str) -> Iterator[Deployed]:
        """The LR model deployed under `prefix` (every actor ready) and the
        tail of its alerts; stopped on the way out."""
        settings = self.settings(prefix)
        model = self.model_file(prefix)
        # The lab's own clients (input producer, alert tail) log only what is
        # critical: during a broker fault they would print a "connection refused"
        # every 50 ms and bury a failing run's report.
        quiet = {"log_level": "2"}
        bus = KafkaBus(settings.kafka.model_copy(update={"producer": quiet,
                                                         "consumer": quiet}))
        d = Deployed(prefix, settings, compile_model(model), Driver(self, model, settings, prefix),
                     bus, AlertTail(bus, settings, make_codec(settings)))
        try:
            d.driver.start()
            d.driver.wait_ready()
            d.tail.start()
            yield d
        finally:
            d.tail.stop()
            d.driver.stop()
            bus.close()

    def judge(self, d: Deployed, stream: Stream, result: RunResult, ended: float,
              drain_timeout_s: float) -> None:
        """After the input `ended`: wait for the expected alerts (or the
        timeout), then compare the committed alerts with the clean run's and
        look for stuck partitions; into `result`."""
        while d.tail.count() < result.expected and time.monotonic() - ended < drain_timeout_s:
            time.sleep(0.5)
        result.drain_s = round(time.monotonic() - ended, 2)
        time.sleep(3.0)  # stragglers (duplicates) would show up by now
        got = Counter(a.identity() for a in read_alerts(d.bus, d.settings))
        result.got = sum(got.values())
        result.lost = sum((stream.expected - got).values())
        result.duplicated = sum((got - stream.expected).values())
        result.stuck = stuck_partitions(d.bus, d.settings, d.plan)
        result.restarts = d.driver.restarts()
        result.replayed = d.driver.replayed()
        if result.stuck or result.lost:
            result.note = d.driver.describe() + self.keep_actor_logs(d.prefix, d.driver.began)

    def keep_actor_logs(self, prefix: str, since: float, tail: int = 6) -> str:
        """Copy the Ray worker logs written since `since` (wall time; one run
        is deployed at a time: its actors') out of the Ray temp dir, which is
        removed when the head stops, next to the driver's log; returns where
        they went and their last warnings, for a failed run's report (they
        name the call that failed)."""
        logs = self.ray.temp_link / "session_latest" / "logs"
        kept = self.workdir / "drivers" / f"{prefix}-actors"
        lines = []
        for path in sorted(logs.glob("worker-*")):
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < since:
                    continue
                text = path.read_text(errors="replace")
                kept.mkdir(parents=True, exist_ok=True)
                (kept / path.name).write_text(text)
                warned = [line for line in text.splitlines()
                          if " WARNING " in line or " ERROR " in line or "Error" in line]
                lines += [f"{path.name}: {line[:300]}" for line in warned[-tail:]]
        if not kept.exists():
            return f"; no actor logs found under {logs}"
        return f"; actor logs in {kept}" + "".join(f"\n  {line}" for line in lines)

    def topic_bytes(self, prefix: str) -> dict[str, int]:
        """Bytes on the broker's disk per topic under `prefix`: the log
        segments (*.log) of every partition; segments compaction or retention
        has replaced (*.deleted, awaiting removal) do not count."""
        sizes: dict[str, int] = {}
        for folder in self.broker.data_dir.glob(f"{prefix}.*-*"):
            topic = folder.name.rsplit("-", 1)[0]
            with contextlib.suppress(FileNotFoundError):  # the cleaner swaps files
                size = sum(f.stat().st_size for f in folder.glob("*.log"))
                sizes[topic] = sizes.get(topic, 0) + size
        return sizes

    def inject(self, kind: str, driver: Driver, prefix: str, pause_s: float) -> float:
        """Apply the fault; returns the monotonic time it ended."""
        if kind.startswith("actor:"):
            pid = driver.actor_pid(kind.split(":", 1)[1])
            os.kill(pid, signal.SIGKILL)
            return time.monotonic()
        if kind == "driver":
            driver.kill()
            driver.wait_actors_gone()
            driver.start()
            return time.monotonic()
        broker = self.broker.pid
        assert broker is not None
        if kind == "broker-kill":
            os.kill(broker, signal.SIGKILL)
            self._restart_broker()
            return time.monotonic()
        if kind == "broker-pause":
            os.kill(broker, signal.SIGSTOP)
            time.sleep(pause_s)
            os.kill(broker, signal.SIGCONT)
            return time.monotonic()
        raise ValueError(f"unknown fault {kind!r}")

    def _restart_broker(self) -> None:
        """Start the killed broker again on its data and ports. A JVM killed on
        a loaded machine can take a while to go, and its ports with it."""
        process = self.broker._process
        if process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=120)  # reaped
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if not port_open(self.broker.config.port) and \
                    not port_open(self.broker.config.controller_port):
                break
            time.sleep(0.2)
        self.broker.pid_file.unlink(missing_ok=True)
        self.broker._process = None
        self.broker.start(timeout_s=120)


@dataclass
class Deployed:
    """One run's deployment (FaultLab.deployed): its topics are under `prefix`."""

    prefix: str
    settings: Settings
    plan: ExecutionPlan
    driver: Driver
    bus: KafkaBus
    tail: AlertTail

    @property
    def input_topic(self) -> str:
        return f"{self.prefix}.{INPUT}"


class Driver:
    """`caesar deploy MODEL` in a process of its own (the Ray driver)."""

    def __init__(self, lab: FaultLab, model: Path, settings: Settings, prefix: str) -> None:
        self.lab, self.model, self.settings, self.prefix = lab, model, settings, prefix
        self.proc: subprocess.Popen[bytes] | None = None
        self.began = time.time()  # the first start (wall time)
        self.log_file = lab.workdir / "drivers" / f"{prefix}.log"
        self.log_file.parent.mkdir(parents=True, exist_ok=True)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CAESAR_")}
        env.update(_settings_env(self.settings))
        env["CAESAR_RAY__ADDRESS"] = self.lab.ray.address
        env["CAESAR_RAY__NAMESPACE"] = "caesar-faults"
        env["RAY_AUTH_MODE"] = "token"
        return env

    def start(self) -> None:
        caesar = str(Path(sys.executable).parent / "caesar")
        with open(self.log_file, "ab") as log:
            self.proc = subprocess.Popen(
                [caesar, "deploy", str(self.model), "--prefix", self.prefix,
                 "--observe-port", "0"],
                env=self.env(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def _actor(self, service: str) -> Any:
        import ray

        return ray.get_actor(f"{self.prefix}-{service}-0", namespace="caesar-faults")

    def wait_ready(self, timeout_s: float = 180.0) -> None:
        """Every actor answers (after its restore)."""
        import ray

        deadline = time.monotonic() + timeout_s
        while True:
            try:
                ray.get([self._actor(s).stats.remote() for s in SERVICES], timeout=30)
                return
            except Exception as exc:
                if self.proc is not None and self.proc.poll() is not None:
                    raise RuntimeError(f"the driver exited; see {self.log_file}") from exc
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def stats(self) -> dict[str, dict[str, Any]]:
        """Each service's actor's stats (ServiceActor.stats: pid, state_bytes, lag...)."""
        import ray

        found = ray.get([self._actor(s).stats.remote() for s in SERVICES], timeout=60)
        return dict(zip(SERVICES, found, strict=True))

    def actor_pid(self, service: str) -> int:
        import ray

        return int(ray.get(self._actor(service).stats.remote(), timeout=60)["pid"])

    def restarts(self) -> int:
        import ray

        stats = ray.get([self._actor(s).stats.remote() for s in SERVICES], timeout=60)
        return sum(1 for st in stats if st["restored_from"])

    def replayed(self) -> int:
        import ray

        stats = ray.get([self._actor(s).stats.remote() for s in SERVICES], timeout=60)
        return sum(st.get("replayed", 0) for st in stats)

    def describe(self) -> str:
        """Each actor's loop as it is now, for the report of a failed run."""
        keys = ("pid", "alive", "uptime_s", "records_in", "records_out", "commits", "aborts",
                "recoveries", "lag", "restored_from", "error")
        try:
            found = self.stats()
        except Exception as exc:  # noqa: BLE001 - a description, never a failure
            return f"actor stats unavailable: {exc}"
        return "; ".join(f"{service}: " + ", ".join(f"{k}={st.get(k)}" for k in keys)
                         for service, st in found.items())

    def kill(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def wait_actors_gone(self, timeout_s: float = 60.0) -> None:
        """A dead driver's actors die with it; its names are free again."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            alive = 0
            for s in SERVICES:
                try:
                    self._actor(s)
                    alive += 1
                except ValueError:
                    pass
            if not alive:
                return
            time.sleep(0.3)
        raise RuntimeError("the killed driver's actors are still there")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)  # stops its actors first
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _settings_env(settings: Settings) -> dict[str, str]:
    env = {"CAESAR_KAFKA__BOOTSTRAP_SERVERS": settings.kafka.bootstrap_servers,
           "CAESAR_KAFKA__TRANSACTION_TIMEOUT_MS": str(settings.kafka.transaction_timeout_ms),
           "CAESAR_KAFKA__POLL_TIMEOUT_S": str(settings.kafka.poll_timeout_s)}
    for name, value in settings.topics.model_dump().items():
        if isinstance(value, str | int):
            env[f"CAESAR_TOPICS__{name.upper()}"] = str(value)
    return env


class InputProducer(threading.Thread):
    """The stream at `speed` simulated seconds per wall second: each second's
    records in one burst, then an input watermark per partition."""

    def __init__(self, bus: KafkaBus, topic: str, stream: Stream, speed: float) -> None:
        super().__init__(daemon=True, name="lr-input")
        self.bus, self.topic, self.stream, self.speed = bus, topic, stream, speed
        self.started = time.monotonic()
        self.error: BaseException | None = None
        self.produced_t: int | None = None  # the last simulated second sent
        self.late_s = 0.0  # how far behind its schedule that second went out
        self.late_max_s = 0.0

    def alive(self) -> bool:
        return self.is_alive()

    def run(self) -> None:
        try:
            producer = self.bus.producer()
            first = self.stream.seconds[0][0]
            for t, records in self.stream.seconds:
                due = self.started + (t - first) / self.speed
                if due > time.monotonic():
                    time.sleep(due - time.monotonic())
                producer.produce(OutRecord(self.topic, v, k) for k, v in records)
                producer.produce(watermark_record(self.topic, j, t + 1)
                                 for j in range(PARTITIONS))
                producer.flush(timeout_s=300)  # a paused or restarting broker: wait it out
                self.produced_t = t
                self.late_s = max(0.0, time.monotonic() - due)
                self.late_max_s = max(self.late_max_s, self.late_s)
            producer.produce(watermark_record(self.topic, j, END_OF_TIME)
                             for j in range(PARTITIONS))
            producer.flush(timeout_s=300)
        except BaseException as exc:  # noqa: BLE001 - reported by the run
            self.error = exc
            raise


class AlertTail(threading.Thread):
    """Reads the alerts topic (read committed) as it grows: when each alert
    became visible, and the input time (ingest_ms) of what triggered it."""

    def __init__(self, bus: KafkaBus, settings: Settings, codec: Any) -> None:
        super().__init__(daemon=True, name="alert-tail")
        self.bus, self.settings, self.codec = bus, settings, codec
        self.seen: list[tuple[float, int]] = []  # (monotonic arrival, ingest_ms)
        self.newest_ts = 0  # the latest event time (end_ts, ms) of an alert seen
        self._done = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        consumer = self.bus.consumer(f"tail-{uuid.uuid4().hex[:8]}")
        tps = [TopicPartition(self.settings.topics.alerts, j) for j in range(PARTITIONS)]
        consumer.assign(tps, {tp: 0 for tp in tps})
        offset = time.time() - time.monotonic()
        try:
            while not self._done.is_set():
                try:
                    records = consumer.poll(5000, 0.2)
                except Exception:  # the broker is away: go on when it is back
                    time.sleep(0.5)
                    continue
                now = time.monotonic()
                rows = []
                for r in records:
                    if r.value is None:
                        continue
                    alert = alert_from(self.codec.decode_as(DERIVED, r.value))
                    rows.append((now, alert.ingest_ms - int(offset * 1000)))
                    self.newest_ts = max(self.newest_ts, alert.end_ts)
                with self._lock:
                    self.seen.extend(rows)
        finally:
            consumer.close()

    def count(self) -> int:
        with self._lock:
            return len(self.seen)

    def latencies(self, since: float) -> list[float]:
        """Seconds from input to committed alert, of the alerts that became
        visible after `since` (monotonic)."""
        with self._lock:
            return [arrived - ingest / 1000 for arrived, ingest in self.seen if arrived > since]

    def recovery(self, fault_end: float) -> float | None:
        """Fault end -> first alert of an input produced after it (monotonic
        seconds; ingest_ms turned to the monotonic clock)."""
        end_ms = fault_end * 1000
        with self._lock:
            after = [arrived for arrived, ingest in self.seen if ingest >= end_ms]
        return round(min(after) - fault_end, 2) if after else None

    def stop(self) -> None:
        self._done.set()
        if self.is_alive():
            self.join(timeout=10)


def read_alerts(bus: KafkaBus, settings: Settings) -> list[Any]:
    from caesar.bus.reading import read_all

    codec = make_codec(settings)
    records = read_all(bus, [TopicPartition(settings.topics.alerts, j)
                             for j in range(PARTITIONS)], timeout_s=120)
    return [alert_from(codec.decode_as(DERIVED, r.value)) for r in records if r.value]


def stuck_partitions(bus: KafkaBus, settings: Settings, plan: ExecutionPlan) -> list[str]:
    """Partitions left with an open transaction (last stable offset below the
    high watermark) or a consumer group behind its input."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KTP

    t = settings.topics
    topics = [t.transactions, t.context_changes, t.transactions + ".routed", t.alerts,
              t.progress, t.dead_letters, *(t.changelog_topic(s) for s in SERVICES),
              *(s.output_topic for s in plan.matcher_stages if s.output_topic)]
    found = bus.list_topics()
    raw = Consumer({"bootstrap.servers": settings.kafka.bootstrap_servers,
                    "group.id": f"stuck-{uuid.uuid4().hex[:8]}",
                    "isolation.level": "read_uncommitted"})
    stuck = []
    try:
        for topic in dict.fromkeys(topics):
            for j in range(found.get(topic, 0)):
                tp = TopicPartition(topic, j)
                deadline = time.monotonic() + 30  # a marker may still be on its way
                while True:
                    stable = bus.end_offsets([tp])[tp]
                    _, high = raw.get_watermark_offsets(KTP(topic, j), timeout=30)
                    if stable == high or time.monotonic() > deadline:
                        break
                    time.sleep(0.5)
                if stable != high:
                    stuck.append(f"{topic}[{j}] open transaction ({stable} < {high})")
    finally:
        raw.close()
    return stuck + groups_behind(bus, settings)


def groups_behind(bus: KafkaBus, settings: Settings) -> list[str]:
    """Input partitions a service's consumer group has records left in, past
    its committed offset (markers aside: the committed offset of a
    transactional input sits before its commit marker)."""
    from caesar.bus.reading import read_all

    t = settings.topics
    prefix = t.transactions.rsplit(".txn", 1)[0]
    inputs = {"scheduler": [f"{prefix}.{INPUT}"],
              "deriver": [t.transactions], "router": [t.transactions, t.context_changes],
              "matcher": [t.transactions + ".routed"]}
    behind = []
    for service, topics in inputs.items():
        consumer = bus.consumer(f"{prefix}-{service}")
        try:
            tps = [TopicPartition(topic, j) for topic in topics for j in range(PARTITIONS)]
            committed = consumer.committed(tps)
        finally:
            consumer.close()
        for tp in tps:
            left = read_all(bus, [tp], {tp: committed.get(tp) or 0}, timeout_s=60)
            if left:
                behind.append(f"{service} group: {len(left)} records left in "
                              f"{tp.topic}[{tp.partition}]")
    return behind


def to_json(results: list[RunResult]) -> str:
    return json.dumps([dataclasses.asdict(r) for r in results], indent=1)
