"""Replay generated Linear Road reports through the embedded pipeline on a
virtual clock and measure latency and CPU time.

Pacing (computed after the run from the measured batch times, so one run
serves every acceleration): the reports of simulated second t (fanned out per segment as the
producer sends them, src/caesar/examples/linear_road/partitioning.py) arrive at virtual time
(t - t0) / acceleration; acceleration 1 is real-time pace. Each second's batch
is fed to the pipeline as soon as it has arrived and the previous batch is
done; its processing is timed with the wall clock. Instead of sleeping through
idle time, the clock jumps to the next arrival (a trace-driven replay: the
measured processing times are the same, the idle waits are not spent), so a
3-hour real-time replay is not needed to know the queueing a real-time
source would cause.

After each second's batch the scheduler gets an input watermark t + 1 (what
the Linear Road producer sends after each slice): the source has sent all of
second t, so second t is released at once instead of waiting for the next
report (the generator's warm-up has seconds without any report; waiting for
them would measure the traffic gaps, not the system).

Latency of an output = virtual time its batch finished - arrival of the report
that triggered it (its end_ts).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from caesar.examples.linear_road.generator import GeneratorConfig, generate
from caesar.examples.linear_road.partitioning import wire_records
from caesar.examples.linear_road.records import PositionReport
from caesar.plans.execution import ExecutionPlan
from caesar.services.common.messages import InputRecord
from caesar.services.embedded.pipeline import EmbeddedPipeline

TOPIC = "lr-position-reports"


@dataclass(frozen=True)
class Workload:
    seconds: tuple[tuple[int, tuple[dict[str, Any], ...]], ...]  # (t, fanned-out records)
    reports: int

    @property
    def events(self) -> int:
        return sum(len(r) for _, r in self.seconds)


def make_workload(config: GeneratorConfig) -> Workload:
    reports = [r for r in generate(config) if isinstance(r, PositionReport)]
    seconds = []
    for t, group in groupby(reports, key=lambda r: r.time):
        seconds.append((t, tuple(rec for _, rec in wire_records(group, fanout=True))))
    return Workload(tuple(seconds), len(reports))


@dataclass(frozen=True)
class ReplayResult:
    events: int
    outputs: int
    cpu_s: float  # process CPU time while the pipeline ran
    wall_s: float  # wall time the pipeline was processing
    skipped_events: int  # stage inputs the router suspended
    output_counts: dict[str, int]
    # Share of the input routed to each single-context stage's context (CA only).
    coverage: dict[str, float]
    output_keys: Counter  # (type, fields) of every output, to check modes agree
    # Per fed batch: arrival second, CPU and wall processing time; per output:
    # the batch that produced it and its triggering report's second.
    batch_ts: tuple[int, ...]
    batch_cpu: tuple[float, ...]
    batch_wall: tuple[float, ...]
    output_batch: tuple[int, ...]
    output_ts: tuple[int, ...]

    def latencies(self, acceleration: float = 1.0, clock: str = "cpu") -> list[float]:
        """Queue the batches on a virtual clock: batch i arrives at
        (ts_i - ts_0) / acceleration, starts when it has arrived and the
        previous one is done, takes its measured time (`clock`: "cpu" = its
        process CPU time, as on a dedicated core; "wall" = elapsed time on this
        shared machine). Output latency = its batch's finish - its report's arrival."""
        took = self.batch_cpu if clock == "cpu" else self.batch_wall
        t0 = self.batch_ts[0] if self.batch_ts else 0
        finish = []
        now = 0.0
        for ts, d in zip(self.batch_ts, took, strict=True):
            now = max(now, (ts - t0) / acceleration) + d
            finish.append(now)
        return [finish[b] - (ts - t0) / acceleration
                for b, ts in zip(self.output_batch, self.output_ts, strict=True)]

    def max_latency(self, acceleration: float = 1.0, clock: str = "cpu") -> float:
        return max(self.latencies(acceleration, clock), default=0.0)


def replay(plan: ExecutionPlan, workload: Workload, keep_keys: bool = False) -> ReplayResult:
    """Feed the workload second by second; time every batch (see module doc)."""
    pipe = EmbeddedPipeline(plan)
    batch_ts: list[int] = []
    batch_cpu: list[float] = []
    batch_wall: list[float] = []
    out_batch: list[int] = []
    out_ts: list[int] = []
    counts: dict[str, int] = {}
    keys: list[tuple] = []
    offset = 0

    def timed(ts: int, work) -> None:
        c0, w0 = time.process_time(), time.perf_counter()
        alerts = work()
        batch_wall.append(time.perf_counter() - w0)
        batch_cpu.append(time.process_time() - c0)
        batch_ts.append(ts)
        for a in alerts:
            out_batch.append(len(batch_ts) - 1)
            out_ts.append(a.end_ts)
            counts[a.event_type] = counts.get(a.event_type, 0) + 1
            if keep_keys:
                keys.append((a.event_type, tuple(sorted(a.fields.items()))))

    for ts, values in workload.seconds:
        recs = [InputRecord(TOPIC, 0, offset + i, v) for i, v in enumerate(values)]
        offset += len(recs)
        # End of second ts from the source (module doc): release it at once,
        # through the embedded pipeline's own hop for scheduler output.
        timed(ts, lambda recs=recs, ts=ts: pipe.feed(recs)
              + pipe._downstream(pipe.scheduler.advance(ts + 1)))
    if batch_ts:
        timed(batch_ts[-1], pipe.finish)
    coverage = {}
    for stage in plan.matcher_stages:
        if len(stage.contexts) == 1 and workload.events:
            skipped = pipe.router.skipped_events.get(stage.plan.plan_id, 0)
            coverage[stage.contexts[0]] = 1 - skipped / workload.events
    return ReplayResult(
        coverage=coverage, events=workload.events, outputs=len(out_ts), cpu_s=sum(batch_cpu),
        wall_s=sum(batch_wall), skipped_events=sum(pipe.router.skipped_events.values()),
        output_counts=counts, output_keys=Counter(keys), batch_ts=tuple(batch_ts),
        batch_cpu=tuple(batch_cpu), batch_wall=tuple(batch_wall),
        output_batch=tuple(out_batch), output_ts=tuple(out_ts))
