"""L-rating of the Kafka + Ray deployment on Linear Road standard data.

    python -m bench.linear_road.kafka_ray [--xways 1 2 4] [--data L1.dat]
        [--window 6000 7800] [--history 600] [--history-pace 5]
        [--actors 1 matcher=2] [--commit-interval 0.25] [--max-commit-share 0.5]

For each level L (expressways): a fresh local KRaft broker and Ray head
(free ports), the CAESAR services of the Linear Road model deployed as Ray
actors (caesar.services.ray_runtime.deployment, as `caesar deploy` does),
then the standard data of L expressways (copy i of every report on
expressway i, vid + i * 10^7, as the LR generator makes independent roads)
produced to the input topic by this process, one simulated second at a time
as one burst:

* the `history` seconds before the window at `history-pace` times real
  time (the state the window needs), then a pause until the services have
  caught up; the last `warmup` seconds of the history (default 60) go at
  real-time pace right before the window, without a pause: the window
  starts on a pipeline at the steady state of real time, as in the
  benchmark, which has no faster phase (its outputs are compared, not
  timed; their worst latency is reported as `warmup_visible_max_s`);
* the window [start, end) (default: the 30 peak minutes, ~2,860 reports/s
  per expressway) at real-time pace: second t's burst at wall time t.

Latency of an output = when a read-committed consumer of its topic
(lr-tolls / lr-accident-alerts) got it (the transaction that holds it
committed) - `ingest_ms`, the Kafka timestamp of the report that triggered
it; the level's figure is the maximum over every output of the window. (The
output's own Kafka timestamp is when the matcher produced it, before its
commit: `topic_*` columns, reported beside the `visible_*` ones; the hop
table is in those terms.) A level holds when that maximum is under 5 s and every output of the
whole run equals the oracle's (src/caesar/examples/linear_road/oracle.py, on
the same reports) with no dead letters. The L-rating is the largest level
measured that holds, with every level below it measured holding.

The input topic has one partition per road and direction (2 L), so no
partition is ever without reports and the scheduler's watermark moves with
event time alone: no idle flush, nothing released on a timer. Per hop:
where the latency goes (caesar.jobs.hops) and what each service costs (CPU
seconds of its actor process during the window, per report). The machine's
load average is recorded with each level.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.linear_road import host_stalls
from bench.linear_road.standard import PEAK, Reports, data_path, load
from bench.linear_road.throughput import append_row, commit
from caesar.services.common.collector import longest_pause
from caesar.services.common.config import DEFAULT_CHECKPOINT_INTERVAL_S, DEFAULT_CHECKPOINT_SHARE
from caesar.services.names import PIPELINE as SERVICES

RESULTS = Path(__file__).parent / "results"
BOUND_S = 5.0
INPUT_TOPIC = "lr-position-reports"
OUTPUTS = {"lr-tolls": "TollNotification", "lr-accident-alerts": "AccidentAlert"}
VID_STRIDE = 10_000_000


# ------------------------------------------------------------------ expected
def expected_outputs(reports: Reports, cache: Path | None) -> dict[str, np.ndarray]:
    """The oracle's tolls and alerts of one expressway as int64 row arrays
    (cached next to the data: the oracle takes minutes on 40 minutes of data)."""
    from caesar.examples.linear_road.oracle import expected_outputs as oracle

    if cache is not None and cache.exists():
        with np.load(cache) as z:
            return {k: z[k] for k in z.files}
    exp = oracle(reports.position_reports())  # outputs at t < end need reports < end only
    out = {"TollNotification": np.array([tuple(r) for r in exp.tolls], dtype=np.int64)
           .reshape(-1, 7),
           "AccidentAlert": np.array([tuple(r) for r in exp.alerts], dtype=np.int64)
           .reshape(-1, 6)}
    if cache is not None:
        np.savez(cache, **out)
    return out


def differences(one: np.ndarray, got: np.ndarray, xways: int) -> int:
    """Missing plus extra rows of `got` (int64 rows of all expressways)
    against `one` (expressway 0's expected rows): expressway i's are
    expressway 0's with xway = i and vid + i * 10^7 (columns: vid, time,
    xway, ...). Compared as multisets in numpy, one expressway at a time:
    a Counter of tuples for 20M outputs (8 expressways, 30 minutes) took
    ~7 GB per side."""
    total = 0
    inside = (got[:, 2] >= 0) & (got[:, 2] < xways)
    total += int((~inside).sum())
    for i in range(xways):
        rows = got[got[:, 2] == i]
        rows[:, 0] -= i * VID_STRIDE
        rows[:, 2] = 0
        total += _multiset_differences(rows, one)
    return total


def _multiset_differences(a: np.ndarray, b: np.ndarray) -> int:
    """How many rows one has more of than the other, summed over rows."""
    if not len(a) or not len(b):
        return len(a) + len(b)
    rows = np.concatenate([a, b])
    sign = np.concatenate([np.ones(len(a), dtype=np.int64), -np.ones(len(b), dtype=np.int64)])
    order = np.lexsort(rows.T[::-1])
    rows, sign = rows[order], sign[order]
    new = np.concatenate([[True], (rows[1:] != rows[:-1]).any(axis=1)])
    net = np.bincount(np.cumsum(new) - 1, weights=sign)
    return int(np.abs(net).sum())


# ------------------------------------------------------------------ producing
Packed = tuple[bytes, np.ndarray]  # records one after the other, and where each ends


def encode_seconds(reports: Reports, xways: int, last_ts: dict[tuple[int, int], int] | None = None
                   ) -> list[tuple[int, dict[int, Packed]]]:
    """Per simulated second of `reports` (one expressway), copied to `xways`
    expressways as Reports.xways makes them: Kafka partition (2 * xway +
    dir) -> its encoded reports; into `last_ts`, (second, partition) -> the
    burst's largest ts. One bytes object per partition and second, not per
    record, and the copies made a second at a time: 54M records (8
    expressways, 40 minutes) as bytes objects took ~4 GB."""
    from caesar.codecs.flat import FlatCodec
    from caesar.examples.linear_road.avro import POSITION_REPORT, repository
    from caesar.examples.linear_road.partitioning import ms_timestamps

    flat = FlatCodec(repository().get(POSITION_REPORT))
    out = []
    for t, one in reports.seconds():
        sec = one.xways(xways)
        cols = dict(sec.columns)
        cols["pseg"] = np.full(len(sec), -1, dtype=np.int64)
        cols["ts"] = ms_timestamps(cols["time"], [cols["xway"], cols["dir"]], cols["pos"])
        order = np.argsort(cols["ts"], kind="stable")  # non-decreasing ts per partition
        cols = {k: v[order] for k, v in cols.items()}
        encoded = flat.encode(cols)
        part = cols["xway"] * 2 + cols["dir"]
        by_part: dict[int, Packed] = {}
        for p in np.unique(part).tolist():
            rows = np.flatnonzero(part == p)
            values = [encoded[i] for i in rows.tolist()]
            by_part[p] = (b"".join(values), np.cumsum([len(v) for v in values]))
            if last_ts is not None:
                last_ts[(t, p)] = int(cols["ts"][rows[-1]])  # ts is non-decreasing per partition
        out.append((t, by_part))
    return out


class Producer:
    """confluent-kafka straight (no per-record callbacks: the bench's own
    CPU is part of the machine's load), keys = "xway|dir"."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Producer as KProducer

        self.p = KProducer({"bootstrap.servers": bootstrap, "linger.ms": 2,
                            "batch.size": 1_000_000, "queue.buffering.max.messages": 2_000_000,
                            "acks": "1"})
        self.keys = {}

    def send(self, by_part: dict[int, Packed]) -> int:
        """Send one second; returns the wall ms the burst started."""
        ms = int(time.time() * 1000)
        produce = self.p.produce
        for part, (blob, ends) in by_part.items():
            key = self.keys.setdefault(part, f"{part // 2}|{part % 2}".encode())
            begin = 0
            for end in ends.tolist():
                v, begin = blob[begin:end], end
                while True:
                    try:
                        produce(INPUT_TOPIC, v, key, partition=part, timestamp=ms)
                        break
                    except BufferError:
                        self.p.poll(0.01)
        self.p.poll(0)
        return ms

    def flush(self) -> None:
        left = self.p.flush(60)
        if left:
            raise RuntimeError(f"{left} input records not delivered")

    def close(self) -> None:
        """Drop what is still queued and the client itself, before the broker
        stops (else its threads log a refused connection every few ms)."""
        self.p.purge()
        self.p.flush(0)
        del self.p  # the last reference: librdkafka's client is destroyed here


# ------------------------------------------------------------------ CPU
class CpuMeter:
    """CPU seconds (user + system) of processes, read at two instants."""

    def __init__(self, groups: dict[str, list[int]]) -> None:
        import psutil

        self.procs = {g: [psutil.Process(p) for p in pids] for g, pids in groups.items()}

    def read(self) -> dict[str, float]:
        import psutil

        out = {}
        for g, procs in self.procs.items():
            total = 0.0
            for p in procs:
                try:
                    t = p.cpu_times()
                    total += t.user + t.system
                except psutil.Error:
                    pass
            out[g] = total
        return out


def tree(pid: int | None, exclude: set[int] = frozenset()) -> list[int]:  # type: ignore[assignment]
    import psutil

    if pid is None:
        return []
    try:
        root = psutil.Process(pid)
        return [p.pid for p in [root, *root.children(recursive=True)] if p.pid not in exclude]
    except psutil.Error:
        return []


# ------------------------------------------------------------------ one level
def run_level(reports: Reports, one_expected: dict[str, np.ndarray], xways: int, *,
              start: int, end: int, history_pace: float, pace: float, actors: int,
              service_actors: dict[str, int] | None = None,
              model: Path, commit_interval_s: float, max_commit_share: float = 0.25,
              warmup: int = 0,
              checkpoint_interval_s: float = DEFAULT_CHECKPOINT_INTERVAL_S,
              max_checkpoint_share: float = DEFAULT_CHECKPOINT_SHARE,
              log: Any = print) -> dict[str, Any]:
    from caesar.runtime.ray_local import use_token_auth

    use_token_auth()  # the local head has token auth on (before importing ray)
    import ray

    from caesar.bus.kafka import KafkaBus
    from caesar.bus.records import TopicPartition
    from caesar.codecs.flat import FlatCodec
    from caesar.examples.linear_road.avro import repository
    from caesar.jobs.hops import breakdown, read_topic
    from caesar.language import compile_model
    from caesar.runtime.local import LocalRuntime
    from caesar.runtime.processes import free_port
    from caesar.services.ray_runtime.deployment import Deployment
    from caesar.settings import CACHE_DIR, load_settings

    # `reports` runs one second past the window: its burst releases the
    # window's last second (nothing is released on a timer); its own outputs
    # are not compared or timed.
    n_expected = xways * sum(len(v) for v in one_expected.values())
    last_ts: dict[tuple[int, int], int] = {}
    seconds = encode_seconds(reports, xways, last_ts)
    t = reports.columns["time"]
    window_reports = xways * int(((t >= start) & (t < end)).sum())
    partitions = 2 * xways
    plan = compile_model(model)
    base = load_settings()
    broker_port = free_port()
    runtime = LocalRuntime(base.runtime.model_copy(update={
        "runtime_dir": CACHE_DIR / f"bench-lr-{os.getpid()}", "broker_port": broker_port,
        "controller_port": free_port(), "ray_port": free_port()}))
    shutil.rmtree(runtime.dir, ignore_errors=True)
    # The deployment creates its topics at 2 partitions per expressway; the
    # runtime's defaults (4) were too few from 4 expressways on.
    runtime.up(base, create_topics=False, progress=lambda *_: None)
    settings = base.model_copy(update={
        "kafka": base.kafka.model_copy(update={"bootstrap_servers": runtime.bootstrap,
                                               "poll_timeout_s": 0.05}),
        "topics": base.topics.model_copy(update={
            "partitions": partitions, "partitions_by_topic": dict.fromkeys(OUTPUTS, 1),
            "alerts_copy": False})})
    bus = KafkaBus(settings.kafka)
    dep = None
    watcher: subprocess.Popen[bytes] | None = None
    producer: Producer | None = None
    try:
        ray.init(address=runtime.ray().address, namespace=settings.ray.namespace,
                 include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
        dep = Deployment(plan, settings, actors_per_service=actors, actors=service_actors,
                         options={"commit_interval_s": commit_interval_s,
                                  "max_commit_share": max_commit_share,
                                  "checkpoint_interval_s": checkpoint_interval_s,
                                  "max_checkpoint_share": max_checkpoint_share})
        dep.start()
        stats = dep.stats()  # every actor is up and polling
        actor_pids = {s: [st["pid"] for st in sts] for s, sts in stats.items()}
        every_actor = {p for pids in actor_pids.values() for p in pids}
        meter = CpuMeter({**actor_pids,
                          "broker": tree(runtime.broker().pid),
                          "ray (head, raylet)": tree(runtime.ray().pid, every_actor),
                          "bench producer": [os.getpid()]})
        stalls_file = runtime.dir / "host_stalls.jsonl"
        watcher = subprocess.Popen([sys.executable, "-m", "bench.linear_road.host_stalls",
                                    str(stalls_file)])
        producer = Producer(runtime.bootstrap)
        log(f"L={xways}: {xways * len(reports):,} reports, {partitions} input partitions, "
            f"actors {', '.join(f'{s} {n}' for s, n in dep.counts.items())}; history at x{history_pace:g} (its last "
            f"{warmup} s at x{pace:g}), window from {start} at x{pace:g}; "
            f"{n_expected:,} outputs expected")
        arrivals: dict[int, list[tuple[int, int]]] = {}  # partition -> [(last ts, ms)]
        hist = [(t, b) for t, b in seconds if t < start - warmup]
        window = [(t, b) for t, b in seconds if t >= start - warmup]
        _pace(producer, hist, history_pace, arrivals, last_ts)
        caught = _wait_caught_up(bus, producer, settings, hist[-1][0] if hist else start)
        caught += _wait_idle(dep)
        log(f"  history produced and processed ({caught:.0f} s after the last burst)")
        out_tps = [TopicPartition(t, 0) for t in OUTPUTS]
        tail = VisibleTail(runtime.bootstrap, list(OUTPUTS),
                           {tp.topic: o for tp, o in bus.end_offsets(out_tps).items()})
        tail.start()
        tail.polling.wait(60)
        at_start: dict[str, Any] = {}

        def window_starts() -> None:  # measured from the window's first burst on
            at_start.update(cpu=meter.read(), load=os.getloadavg(), wall=time.monotonic(),
                            stats=dep.stats(), since=time.time())

        lag_max = _pace(producer, window, pace, arrivals, last_ts, at=(start, window_starts))
        cpu0, load0, wall0, start_stats, since = (
            at_start[k] for k in ("cpu", "load", "wall", "stats", "since"))
        commits0 = _commit_totals(start_stats)
        checkpoints0 = _sum_stat(start_stats, "checkpoints")
        ckpt_s0 = _sum_stat(start_stats, "checkpoint_s")
        produce_wall = time.monotonic() - wall0
        deadline = time.monotonic() + 300
        last_count, still = -1, 0
        # done after 30 s without a new output (commits may be spaced several
        # seconds apart when snapshots are big: max_commit_share)
        while time.monotonic() < deadline and still < 60:
            count = sum(bus.end_offsets(out_tps).values())
            still = still + 1 if count == last_count else 0
            last_count = count
            time.sleep(0.5)
        time.sleep(1.0)
        tail.stop()
        watcher.terminate()
        watcher.wait(10)
        cpu1, load1 = meter.read(), os.getloadavg()
        end_stats = dep.stats()
        dep.stop()  # the actors' memory back before ~12M outputs are read (4 xways, 30 min)
        dep = None
        commits1 = _commit_totals(end_stats)
        checkpoints1 = _sum_stat(end_stats, "checkpoints")
        ckpt_s1 = _sum_stat(end_stats, "checkpoint_s")
        flat = {etype: FlatCodec(repository().get(f"caesar.linear_road.{etype}"))
                for etype in OUTPUTS.values()}
        every = max(1, -(-n_expected // HOPS_SAMPLE))
        seen = _read_outputs(bus, tail, flat, start, end, warmup, every)
        latencies, visible, warm = seen.latencies, seen.visible, seen.warm
        worst, unseen = seen.worst, seen.unseen
        diffs = {k: differences(one_expected[k], seen.rows(k, one_expected[k].shape[1]), xways)
                 for k in one_expected}
        dead = len(read_topic(bus, settings.topics.dead_letters))
        from caesar.codecs import make_codec

        hops = breakdown(bus, make_codec(settings, repository()), _series(arrivals),
                         settings.topics, seen.outputs)
        cpu = {g: cpu1[g] - cpu0[g] for g in cpu0}
        row: dict[str, Any] = {
            "xways": xways, "actors_per_service": actors,
            "actors": " ".join(f"{s}={n}" for s, n in (service_actors or {}).items()),
            "commit_interval_s": commit_interval_s,
            "max_commit_share": max_commit_share, "checkpoint_interval_s": checkpoint_interval_s,
            "max_checkpoint_share": max_checkpoint_share,
            "reports_window": window_reports,
            "reports_per_s": round(window_reports / max(1, end - start), 1),
            "outputs": seen.count, "expected": n_expected, "hops_sample_every": every,
            "differences_tolls": diffs["TollNotification"],
            "differences_alerts": diffs["AccidentAlert"], "dead_letters": dead,
            "topic_p50_s": round(_pct(latencies, 0.5), 3),
            "topic_p99_s": round(_pct(latencies, 0.99), 3),
            "topic_max_s": round(_max(latencies), 3),
            "visible_p50_s": round(_pct(visible, 0.5), 3),
            "visible_p99_s": round(_pct(visible, 0.99), 3),
            "visible_max_s": round(_max(visible), 3),
            "visible_unseen": unseen,
            "visible_max_at_s": worst[1] - start,  # window second of the worst output
            "warmup_s": warmup, "warmup_visible_max_s": round(_max(warm), 3),
            "producer_lag_max_s": round(lag_max, 3), "produce_wall_s": round(produce_wall, 1),
            "load_before": round(load0[0], 2), "load_after": round(load1[0], 2),
            **{f"cpu_{g.split()[0]}_s": round(v, 1) for g, v in cpu.items()},
            **{f"{s}_us_per_report": round(1e6 * cpu.get(s, 0.0) / max(1, window_reports), 1)
               for s in SERVICES},
            # commits during the window and the wall seconds they took, per service
            **{f"{s}_commits": commits1.get(s, (0, 0.0))[0] - commits0.get(s, (0, 0.0))[0]
               for s in SERVICES},
            **{f"{s}_commit_s": round(commits1.get(s, (0, 0.0))[1]
                                      - commits0.get(s, (0, 0.0))[1], 2) for s in SERVICES},
            **{f"{s}_checkpoints": checkpoints1.get(s, 0) - checkpoints0.get(s, 0)
               for s in SERVICES},
            # wall seconds the window's checkpoints took, and the interval the
            # loops stretched theirs to at its end (the longest of the actors')
            **{f"{s}_checkpoint_s": round(ckpt_s1.get(s, 0.0) - ckpt_s0.get(s, 0.0), 2)
               for s in SERVICES},
            **{f"{s}_checkpoint_every_s": max((st.get("checkpoint_interval_s", 0.0)
                                               for st in end_stats.get(s, [])), default=0.0)
               for s in SERVICES},
            # a restarted actor or a failed commit shows here (and its replay)
            **{f"{s}_{k}": v for k in ("aborts", "replayed")
               for s, v in _sum_stat(end_stats, k).items()},
            # the cyclic collector in the window: seconds, and its longest pause
            **{f"{s}_gc_s": round(_gc(end_stats, s) - _gc(start_stats, s), 2)
               for s in SERVICES},
            **{f"{s}_gc_max_s": round(max((longest_pause(st.get("gc_pauses", []), since)
                                           for st in end_stats.get(s, [])), default=0.0), 3)
               for s in SERVICES},
        }
        row["hops_ms"] = hops.as_json()["hops_ms"]
        # each actor's collector pauses in the window: [window s, seconds,
        # generation, young objects at its start, unreachable found]
        row["gc_pauses"] = {s: [[[round(p[0] - since, 3), *p[1:]] for p in st.get("gc_pauses", [])
                                 if p[0] >= since] for st in end_stats.get(s, [])]
                            for s in SERVICES}
        # and the host's seconds (host_stalls.py), to tell its stalls from theirs
        row["gc_pauses"]["host"] = [[round(r[0] - since, 3), *r[1:]]
                                    for r in host_stalls.read(stalls_file, since)]
        log(hops.render())
        return row
    finally:
        if watcher is not None and watcher.poll() is None:
            watcher.kill()
        if dep is not None:
            dep.stop()
        if ray.is_initialized():
            ray.shutdown()
        if producer is not None:
            producer.close()
        bus.close()
        runtime.down(progress=lambda *_: None)
        if not os.environ.get("CAESAR_BENCH_KEEP"):
            shutil.rmtree(runtime.dir, ignore_errors=True)
        else:
            log(f"  runtime kept: {runtime.dir}")


class VisibleTail(threading.Thread):
    """A read-committed consumer of the output topics from `starts` (their
    end offsets as the window begins): when each output became visible. Per
    polled batch it keeps only (topic, partition) -> (last offset, wall ms),
    so it costs little beside the run. (It read from the topics' start until
    session 14: the history's ~1.5M outputs first, so the window's first
    seconds were seen late and the visible max and p99 were too high.)"""

    def __init__(self, bootstrap: str, topics: list[str], starts: dict[str, int]) -> None:
        super().__init__(daemon=True, name="visible-tail")
        from confluent_kafka import Consumer

        self.consumer = Consumer({"bootstrap.servers": bootstrap,
                                  "group.id": f"bench-visible-{os.getpid()}",
                                  "isolation.level": "read_committed",
                                  "enable.auto.commit": False})
        self.topics = topics
        self.starts = starts
        self.batches: dict[tuple[str, int], tuple[list[int], list[int]]] = {}
        self._done = threading.Event()
        self.polling = threading.Event()  # assigned, and its first poll returned

    def run(self) -> None:
        from confluent_kafka import TopicPartition as KTP

        self.consumer.assign([KTP(t, 0, self.starts[t]) for t in self.topics])
        try:
            while not self._done.is_set():
                msgs = self.consumer.consume(10_000, 0.05)
                self.polling.set()
                now = int(time.time() * 1000)
                last: dict[tuple[str, int], int] = {}
                for m in msgs:
                    if m.error() is None:
                        tp = (m.topic(), m.partition())
                        last[tp] = max(last.get(tp, -1), m.offset())
                for tp, off in last.items():
                    offsets, stamps = self.batches.setdefault(tp, ([], []))
                    offsets.append(off)
                    stamps.append(now)
        finally:
            self.consumer.close()

    def stop(self) -> None:
        self._done.set()
        self.join(timeout=30)

    def seen_at(self, topic: str, partition: int, offset: int) -> int | None:
        """Wall ms of the poll that returned `offset` (None: not seen)."""
        offsets, stamps = self.batches.get((topic, partition), ([], []))
        i = bisect.bisect_left(offsets, offset)
        return stamps[i] if i < len(stamps) else None

    def seen_at_many(self, topic: str, partition: int, offsets: np.ndarray) -> np.ndarray:
        """`seen_at` of every offset (-1: not seen)."""
        last, stamps = self.batches.get((topic, partition), ([], []))
        i = np.searchsorted(np.asarray(last, dtype=np.int64), offsets, "left")
        out = np.asarray(stamps + [-1], dtype=np.int64)
        return out[np.minimum(i, len(stamps))]


@dataclass
class _Seen:
    """The outputs of a run as read back: what they are (per type, int64
    rows for the comparison) and when each became visible, as arrays."""

    got: dict[str, list[np.ndarray]] = field(default_factory=dict)
    count: int = 0  # outputs before the window's end
    latencies: np.ndarray = field(default_factory=lambda: np.empty(0))  # produced, window
    visible: np.ndarray = field(default_factory=lambda: np.empty(0))  # seen by the tail, window
    warm: np.ndarray = field(default_factory=lambda: np.empty(0))  # seen by the tail, warm-up
    worst: tuple[float, int] = (-1.0, 0)  # the highest visible latency and its second
    unseen: int = 0
    # window outputs for the hop table (caesar.jobs.hops.Output), one in `every`
    outputs: list[Any] = field(default_factory=list)

    def rows(self, etype: str, width: int) -> np.ndarray:
        parts = self.got.get(etype, [])
        return np.concatenate(parts) if parts else np.empty((0, width), dtype=np.int64)


# The hop table times at most about this many window outputs (one in every
# n): its inputs are Python objects, 20M of them (8 expressways, 30 minutes)
# ~3 GB beside the run's other data on a 24 GB host.
HOPS_SAMPLE = 3_000_000


def _read_outputs(bus: Any, tail: VisibleTail, flat: dict[str, Any], start: int, end: int,
                  warmup: int, every: int = 1) -> _Seen:
    from caesar.jobs.hops import Output

    seen = _Seen()
    lat: list[np.ndarray] = []
    vis: list[np.ndarray] = []
    warm: list[np.ndarray] = []
    nth = 0
    for topic, etype in OUTPUTS.items():
        fields = [f for f in flat[etype].names if f != "ingest_ms"]
        for recs in _topic_chunks(bus, topic):
            values = [r.value for r in recs if r.value is not None]
            recs = [r for r in recs if r.value is not None]
            cols = flat[etype].decode(values)
            assert cols is not None, f"{topic}: records not of {etype}"
            ts, ingest = cols["time"], cols["ingest_ms"]
            inside = ts < end
            seen.got.setdefault(etype, []).append(
                np.stack([cols[f][inside] for f in fields], axis=1).astype(np.int64))
            seen.count += int(inside.sum())
            produced = np.array([r.timestamp_ms for r in recs], dtype=np.int64)
            at = tail.seen_at_many(topic, 0, np.array([r.offset for r in recs], dtype=np.int64))
            shown = at >= 0
            window = inside & (ts >= start)
            lat.append((produced[window] - ingest[window]) / 1000)
            seen.unseen += int((window & ~shown).sum())
            w = window & shown
            vis.append((at[w] - ingest[w]) / 1000)
            if w.any():
                i = int(np.argmax(np.where(w, at - ingest, -(2**62))))
                seen.worst = max(seen.worst, ((int(at[i]) - int(ingest[i])) / 1000, int(ts[i])))
            pre = inside & (ts >= start - warmup) & (ts < start) & shown
            warm.append((at[pre] - ingest[pre]) / 1000)
            # outputs carry their second, transactions the ms event time
            for i in np.flatnonzero(window).tolist():
                if nth % every == 0:
                    r = recs[i]
                    seen.outputs.append(Output(r.key.decode() if r.key else "", int(ts[i]) * 1000,
                                               int(ingest[i]), r.timestamp_ms, span_ms=1000))
                nth += 1
    seen.latencies = np.concatenate(lat) if lat else np.empty(0)
    seen.visible = np.concatenate(vis) if vis else np.empty(0)
    seen.warm = np.concatenate(warm) if warm else np.empty(0)
    return seen


def _topic_chunks(bus: Any, topic: str, size: int = 500_000) -> Iterator[list[Any]]:
    """The records of one-partition `topic` from its start to its end offset
    now, `size` at a time (caesar.jobs.hops.read_topic holds them all)."""
    from caesar.bus.records import TopicPartition

    tp = TopicPartition(topic, 0)
    end = bus.end_offsets([tp]).get(tp, 0)
    if end <= 0:
        return
    consumer = bus.consumer(f"bench-read-{os.getpid()}-{topic}")
    consumer.assign([tp], {tp: 0})
    pos, idle = 0, time.monotonic()
    chunk: list[Any] = []
    try:
        while pos < end:
            if time.monotonic() - idle > 60:
                raise TimeoutError(f"reading {topic}: still short of its end offset")
            batch = consumer.poll(10_000, 0.5)
            if batch:
                idle = time.monotonic()
            chunk += [r for r in batch if r.offset < end]
            pos = max([pos] + [r.offset + 1 for r in batch])
            # transactional topics end with commit markers no poll returns
            found = consumer.position([tp]).get(tp)
            if found is not None:
                pos = max(pos, found)
            if len(chunk) >= size:
                yield chunk
                chunk = []
        if chunk:
            yield chunk
    finally:
        consumer.close()


def _max(values: np.ndarray) -> float:
    return float(values.max()) if len(values) else float("nan")


def _sum_stat(stats: dict[str, list[dict[str, Any]]], name: str) -> dict[str, Any]:
    """service -> the stat summed over its actors."""
    return {s: sum(st.get(name, 0) for st in sts) for s, sts in stats.items()}


def _gc(stats: dict[str, list[dict[str, Any]]], service: str) -> float:
    """The collector's seconds so far over a service's actors."""
    return sum(sum(st.get("gc_s", ())) for st in stats.get(service, []))


def _commit_totals(stats: dict[str, list[dict[str, Any]]]) -> dict[str, tuple[int, float]]:
    """service -> (commits, seconds spent committing) over its actors so far."""
    return {s: (sum(st["commits"] for st in sts), sum(st.get("commit_s", 0.0) for st in sts))
            for s, sts in stats.items()}


def _pace(producer: Producer, seconds: list[tuple[int, dict[int, Packed]]], pace: float,
          arrivals: dict[int, list[tuple[int, int]]],
          last_ts: dict[tuple[int, int], int],
          at: tuple[int, Callable[[], None]] | None = None) -> float:
    """Send each second at its due wall time; returns the largest lateness (s)
    from second `at[0]` on, calling `at[1]` just before sending the first
    second from there."""
    if not seconds:
        return 0.0
    started = time.monotonic()
    first = seconds[0][0]
    lag_max = 0.0
    for t, by_part in seconds:
        due = started + (t - first) / pace
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        if at is not None and t >= at[0]:
            at[1]()
            at, lag_max = None, 0.0
        lag_max = max(lag_max, time.monotonic() - due)
        ms = producer.send(by_part)
        for p in by_part:
            arrivals.setdefault(p, []).append((last_ts[(t, p)], ms))
    producer.flush()
    return lag_max


def _wait_idle(dep: Any, timeout_s: float = 600.0) -> float:
    """Until no actor has input left to handle, twice in a row: the matcher's
    progress can pass the history while a service still replays after a
    failed commit (its outputs were committed before), and the window would
    start behind."""
    t0 = time.monotonic()
    quiet = 0
    while quiet < 2 and time.monotonic() - t0 < timeout_s:
        lags = [st.get("lag") or 0 for sts in dep.stats().values() for st in sts]
        quiet = quiet + 1 if max(lags, default=0) == 0 else 0
        time.sleep(1.0)
    return time.monotonic() - t0


def _wait_caught_up(bus: Any, producer: Producer, settings: Any, last: int,
                    timeout_s: float = 900.0) -> float:
    """Until the matcher's progress passes the history (its watermark is on
    the progress topic), so the window starts on an idle pipeline."""
    from caesar.bus.records import TopicPartition
    from caesar.codecs import make_codec
    from caesar.examples.linear_road.avro import repository
    from caesar.services.common.wire import PROGRESS

    codec = make_codec(settings, repository())
    t0 = time.monotonic()
    consumer = bus.consumer(f"bench-progress-{os.getpid()}")
    tps = [TopicPartition(settings.topics.progress, j) for j in range(settings.topics.partitions)]
    consumer.assign(tps, {tp: 0 for tp in tps})
    done: dict[int, int] = {}
    try:
        while time.monotonic() - t0 < timeout_s:
            for r in consumer.poll(5000, 0.5):
                schema, value = codec.decode(r.value)
                if schema == PROGRESS:
                    done[r.partition] = max(done.get(r.partition, -1), value["ts"])
            # the last second is released when the window's first burst comes
            if len(done) == len(tps) and min(done.values()) >= last - 1:
                break
    finally:
        consumer.close()
    return time.monotonic() - t0


def _series(arrivals: dict[int, list[tuple[int, int]]]) -> dict[int, list[tuple[list[int], list[int]]]]:
    """Per input partition, the rising event times (ms) its bursts reached and when."""
    return {p: [([ts for ts, _ in rows], [ms for _, ms in rows])] for p, rows in arrivals.items()}


def holds(row: dict[str, Any]) -> bool:
    """Every output of the window visible within the bound, all exact (a row
    as run_level returns it, or as read back from the CSV)."""
    n = {k: float(row[k]) for k in ("visible_max_s", "visible_unseen", "differences_tolls",
                                    "differences_alerts", "dead_letters", "outputs", "expected")}
    return (n["visible_max_s"] < BOUND_S and not n["visible_unseen"]
            and not n["differences_tolls"] and not n["differences_alerts"]
            and not n["dead_letters"] and n["outputs"] == n["expected"])


def _pct(values: Any, p: float) -> float:
    v = np.sort(np.asarray(values, dtype=float))
    return float(v[min(len(v) - 1, int(round(p * (len(v) - 1))))]) if len(v) else float("nan")


# ------------------------------------------------------------------ output
def plot_runs(csv_path: Path, since: str, out: Path) -> None:
    """The runs of `csv_path` from `since` (a `when` value) on, one bar group
    per label: latency p50 / max and the actors' CPU per report."""
    import csv

    from bench.linear_road import bars

    with csv_path.open() as fh:
        rows = [r for r in csv.DictReader(fh) if r["when"] >= since]
    labels = [f"{r['label']}\n({r['commit']}, {r['xways']} xway)" for r in rows]
    checkpoints = any(r.get("matcher_checkpoint_s") for r in rows)  # since session 19
    fig, axes = bars.subplots(3 if checkpoints else 2, 19 if checkpoints else 13)
    axes[0].axhline(BOUND_S, color="red", lw=1, label="5 s bound")
    bars.grouped(axes[0], labels, {
        "p50, produced": [r["topic_p50_s"] for r in rows],
        "max, produced": [r["topic_max_s"] for r in rows],
        # visible (read committed) since session 13; earlier rows have none
        "max, visible": [r.get("visible_max_s") or "nan" for r in rows]},
        ylabel="latency (s)", rotation=20,
        title=f"latency at real time, windows {', '.join(sorted({r['window'] for r in rows}))}")
    top = max([float(r["topic_max_s"]) for r in rows] + [float(r.get("visible_max_s") or 0)
                                                          for r in rows])
    if top > 12:  # one run far off the bound would flatten the others: clip, say so
        axes[0].set_ylim(0, 12)
        axes[0].text(0.01, 0.97, f"clipped at 12 s (highest {top:.1f} s)",
                     transform=axes[0].transAxes, va="top", fontsize=7)
    bars.stacked(axes[1], labels, {s: [r[f"{s}_us_per_report"] for r in rows] for s in SERVICES},
                 ylabel="actor CPU µs per report", title="cost per service", rotation=20)
    if checkpoints:
        writers = ("deriver", "matcher")
        bars.stacked(axes[2], labels,
                     {s: [r.get(f"{s}_checkpoint_s") or 0 for r in rows] for s in writers},
                     colors=[f"C{SERVICES.index(s)}" for s in writers], rotation=20,
                     ylabel="wall s writing states, all actors",
                     title="checkpoints in the window")
    bars.save(fig, out)


def write_results(rows: list[dict[str, Any]], out: Path, tag: str) -> None:
    from bench.linear_road import bars

    out.mkdir(parents=True, exist_ok=True)
    (out / f"kafka_ray{tag}_hops.json").write_text(
        json.dumps({str(r["xways"]): r["hops_ms"] for r in rows}, indent=1))
    (out / f"kafka_ray{tag}_pauses.json").write_text(
        json.dumps({str(r["xways"]): r["gc_pauses"] for r in rows}))
    rows = sorted(rows, key=lambda r: r["xways"])
    xs = [r["xways"] for r in rows]
    fig, axes = bars.subplots(2, 11)
    axes[0].plot(xs, [r["visible_max_s"] for r in rows], "o-", label="max")
    axes[0].plot(xs, [r["visible_p99_s"] for r in rows], "s--", label="p99")
    axes[0].plot(xs, [r["visible_p50_s"] for r in rows], "^:", label="p50")
    axes[0].plot(xs, [r["topic_max_s"] for r in rows], "x", color="grey",
                 label="max, produced (before the commit)")
    axes[0].axhline(BOUND_S, color="red", lw=1, label="5 s bound")
    axes[0].set_xlabel("expressways (L)")
    axes[0].set_ylabel("latency until visible, read committed (s)")
    axes[0].set_title("Kafka + Ray, standard data, peak window, real time")
    axes[0].set_xticks(xs)
    axes[0].legend()
    bars.stacked(axes[1], [str(x) for x in xs],
                 {s: [r[f"{s}_us_per_report"] for r in rows] for s in SERVICES},
                 ylabel="actor CPU µs per report", title="cost per service")
    axes[1].set_xlabel("expressways (L)")
    bars.save(fig, out / f"kafka_ray{tag}.png")


def parser() -> argparse.ArgumentParser:
    from caesar.examples import model_path

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="LR data file (default: $CAESAR_LR_DATA)")
    ap.add_argument("--xways", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--window", type=int, nargs=2, default=list(PEAK), metavar=("START", "END"))
    ap.add_argument("--history", type=int, default=600)
    ap.add_argument("--history-pace", type=float, default=5.0)
    ap.add_argument("--warmup", type=int, default=60,
                    help="the history's last seconds, sent at --pace right before the window "
                         "(0: none; the window then starts after the fast history and a pause)")
    ap.add_argument("--pace", type=float, default=1.0)
    # The defaults are the settings report.py rates with (those of every
    # rating since session 21); a 10 s commit interval, the old default,
    # alone made every output wait past the 5 s bound.
    ap.add_argument("--actors", type=_actor_count, nargs="+", default=[("", 1), ("matcher", 2)],
                    help="actors per service, then SERVICE=N for one service's "
                         "(default: 1 matcher=2)")
    ap.add_argument("--commit-interval", type=float, default=0.25,
                    help="s between commits")
    ap.add_argument("--checkpoint-interval", type=float, default=DEFAULT_CHECKPOINT_INTERVAL_S,
                    help="s between two state checkpoints of the deriver and the matcher "
                         "(0: with every commit); a restore replays their inputs since")
    ap.add_argument("--max-checkpoint-share", type=float, default=DEFAULT_CHECKPOINT_SHARE,
                    help="checkpoints take at most this share of a service loop's time: "
                         "the interval stretches (0 = off)")
    ap.add_argument("--max-commit-share", type=float, default=0.5,
                    help="commits take at most this share of a service loop's time (1 = off)")
    ap.add_argument("--model", type=Path,
                    default=model_path("linear_road").with_name("model_per_segment.caesar"))
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--tag", default="")
    ap.add_argument("--plot-runs", type=Path, metavar="CSV",
                    help="only draw CSV's runs side by side into CSV.png (e.g. an A/B)")
    ap.add_argument("--label", default="")
    return ap


def _actor_count(text: str) -> tuple[str, int]:
    """'2' (every service) or 'matcher=2' (one service)."""
    service, _, n = text.rpartition("=")
    try:
        count = int(n)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: N or SERVICE=N") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: at least 1 actor")
    return service, count


def _actors(items: list[tuple[str, int] | int]) -> dict[str, Any]:
    default, per = 1, {}
    for item in items:
        service, n = item if isinstance(item, tuple) else ("", item)
        if service:
            per[service] = n
        else:
            default = n
    return {"actors": default, "service_actors": per}


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    if args.plot_runs is not None:
        plot_runs(args.plot_runs, "", args.plot_runs.with_suffix(".png"))
        return
    start, end = args.window
    data = data_path(args.data)
    every = load(data)
    reports = every.window(start - args.history, end + 1)
    # v2: the oracle of the validator's semantics (issue 13); v1 caches are stale
    cache = data.with_name(f"{data.stem}.oracle-v2-{start - args.history}-{end}.npz")
    if not os.access(cache.parent, os.W_OK):
        cache = None  # type: ignore[assignment]
    t0 = time.time()
    one = expected_outputs(every.window(start - args.history, end), cache)
    print(f"oracle: {sum(len(v) for v in one.values()):,} outputs per expressway "
          f"({time.time() - t0:.0f} s)")
    rows: list[dict[str, Any]] = []
    for xw in args.xways:
        row = run_level(reports, one, xw, start=start, end=end, history_pace=args.history_pace,
                        pace=args.pace, model=args.model, **_actors(args.actors),
                        commit_interval_s=args.commit_interval,
                        max_commit_share=args.max_commit_share,
                        checkpoint_interval_s=args.checkpoint_interval,
                        max_checkpoint_share=args.max_checkpoint_share, warmup=args.warmup)
        row = {"label": args.label, "commit": commit(), "when": time.strftime("%Y-%m-%d %H:%M"),
               "window": f"{start}-{end}", "history_s": args.history, **row}
        rows.append(row)
        flat = {k: v for k, v in row.items() if k not in ("hops_ms", "gc_pauses")}
        print(json.dumps(flat), flush=True)
        args.out.mkdir(parents=True, exist_ok=True)
        append_row(args.out / f"kafka_ray{args.tag}.csv", flat)
        write_results(rows, args.out, args.tag)
        held = holds(row)
        if not held:
            break
    held_levels = []
    for r in sorted(rows, key=lambda r: r["xways"]):
        if not holds(r):
            break
        held_levels.append(r["xways"])
    print(f"L-rating (Kafka + Ray, standard data {start}-{end}, x{args.pace:g}): "
          f"{held_levels[-1] if held_levels else 0} (levels measured: "
          f"{[r['xways'] for r in rows]})")


if __name__ == "__main__":
    main()
