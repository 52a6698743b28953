"""Soak: a long run of the Linear Road model on Kafka + Ray at a steady rate
(bench/faults/harness.py: a local KRaft broker, a Ray head, `caesar deploy`).

    .venv/bin/python -m bench.faults.soak [--minutes 30] [--speed 1] [--segments 84:88]

The input: the standard load of one expressway (the LR generator) from
simulated second `--start` on (default 4,500: the plateau of the load curve,
where the sine peaks at 5,400 and the road is full, so the rate of reports
stays steady; from second 0 it would keep rising for the whole run), the
reports of `--segments` only (fanned out per segment as the producer sends
them), `--minutes` of wall time at `--speed` simulated seconds per wall
second, an input watermark after every second.

Every `--sample` seconds: the RSS of each service's actor process (and of
the driver and the broker, for reference), the state each service reports
(the newest checkpoint of each of its partitions, summed: `state_bytes` in
its stats), the bytes on the broker's disk of the changelog and checkpoint
topics (compacted) and of the other topics, the consumer lag of each
service, how late the producer runs and the latency of the alerts committed
since the last sample. After the input, the committed alerts must equal the
embedded pipeline's on the same input exactly (FaultLab.judge).

Flatness is judged after a warm-up (`--warmup`, 2 minutes: the processes'
imports, caches and the first checkpoints): the mean of the first 5 minutes
after it against the mean of the last 5 minutes of input, and a least-squares
slope over everything after it. Writes results/soak.csv (one row per
sample), soak.png and soak.txt.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import os
import shutil
import tempfile
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

from bench.csv_cells import cell
from bench.faults.harness import (
    SERVICES,
    Deployed,
    FaultLab,
    InputProducer,
    RunResult,
    Stream,
)

RESULTS = Path(__file__).parent / "results"
PLATEAU_S = 4500  # 75 minutes into the standard load: its curve peaks at 90
WINDOW_S = 300.0  # first / last 5 minutes compared
FLAT = 0.10  # last / first within +-10 %: flat; above: grows; below: lower


def rss_mb(pid: int | None) -> tuple[float, float]:
    """(VmRSS, RssAnon) of a process in MiB; NaN when it is gone. RssAnon is
    its own heap, without the shared libraries and files it maps."""
    if pid is None:
        return math.nan, math.nan
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return math.nan, math.nan
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)

    def mb(name: str) -> float:
        return int(fields[name].split()[0]) / 1024 if name in fields else math.nan

    return mb("VmRSS"), mb("RssAnon")


class Sampler:
    """One row of figures per call."""

    def __init__(self, lab: FaultLab, d: Deployed, producer: InputProducer) -> None:
        self.lab, self.d, self.producer = lab, d, producer
        self.started = producer.started
        self.last = time.monotonic()
        self.pids: dict[str, int] = {}
        self.restarts = 0  # actor processes replaced during the run

    def sample(self, phase: str) -> dict[str, Any]:
        now = time.monotonic()
        row: dict[str, Any] = {"t_s": round(now - self.started, 1), "phase": phase,
                               "sim_t": self.producer.produced_t,
                               "input_late_s": round(self.producer.late_s, 2),
                               "load1": os.getloadavg()[0]}
        try:
            stats = self.d.driver.stats()
        except Exception as exc:  # noqa: BLE001 - a sample without stats is still a sample
            print(f"  stats unavailable: {type(exc).__name__}: {exc}", flush=True)
            stats = {}
        for s in SERVICES:
            st = stats.get(s, {})
            pid = st.get("pid")
            if pid is not None and self.pids.get(s, pid) != pid:
                self.restarts += 1
                print(f"  the {s} actor has a new process ({self.pids[s]} -> {pid})", flush=True)
            if pid is not None:
                self.pids[s] = pid
            rss, anon = rss_mb(pid)
            row[f"rss_mb_{s}"] = round(rss, 1)
            row[f"anon_mb_{s}"] = round(anon, 1)
            row[f"state_bytes_{s}"] = st.get("state_bytes")
            row[f"lag_{s}"] = st.get("lag")
            row[f"records_in_{s}"] = st.get("records_in")
        driver = self.d.driver.proc
        row["rss_mb_driver"] = round(rss_mb(driver.pid if driver else None)[0], 1)
        row["rss_mb_broker"] = round(rss_mb(self.lab.broker.pid)[0], 1)
        topics = self.lab.topic_bytes(self.d.prefix)
        t = self.d.settings.topics
        state_topics = {t.changelog_topic(s): f"changelog_bytes_{s}" for s in SERVICES}
        state_topics[t.checkpoints] = "checkpoints_bytes"
        for topic, column in state_topics.items():
            row[column] = topics.pop(topic, 0)
        row["other_topics_bytes"] = sum(topics.values())
        row["alerts"] = len(self.d.tail.latencies(self.last))
        newest = self.d.tail.newest_ts
        # How far the committed outputs trail the input, in event time: the
        # second last produced - the newest alert's (an alert for second t
        # needs the watermark past t, so ~1-2 s when the pipeline keeps up).
        row["output_behind_s"] = (round(self.producer.produced_t - newest / 1000, 1)
                                  if newest and self.producer.produced_t is not None else None)
        self.last = now
        return row


# ------------------------------------------------------------------ summary
def series() -> dict[str, list[str]]:
    """The columns judged for flatness, by group."""
    return {"RSS per actor (MiB)": [f"rss_mb_{s}" for s in SERVICES],
            "state size (bytes)": [f"state_bytes_{s}" for s in SERVICES],
            "changelog/checkpoint topics (bytes on disk)":
                [*(f"changelog_bytes_{s}" for s in SERVICES), "checkpoints_bytes"]}


def _values(rows: list[dict[str, Any]], column: str, lo: float, hi: float
            ) -> list[tuple[float, float]]:
    out = []
    for r in rows:
        v = r.get(column)
        if r["phase"] == "input" and lo <= r["t_s"] <= hi and v not in (None, "") \
                and not (isinstance(v, float) and math.isnan(v)):
            out.append((float(r["t_s"]), float(v)))
    return out


def slope_per_10min(points: list[tuple[float, float]]) -> float:
    if len(points) < 2:
        return math.nan
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return 600 * sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else math.nan


def summary(rows: list[dict[str, Any]], warmup_s: float, result: RunResult,
            header: list[str]) -> str:
    inputs = [r for r in rows if r["phase"] == "input"]
    end = max(r["t_s"] for r in inputs)
    window = min(WINDOW_S, max(30.0, (end - warmup_s) / 2))
    lines = [*header, "",
             f"Flatness after a {warmup_s:.0f} s warm-up (left out): mean of the first "
             f"{window:.0f} s after it ({warmup_s:.0f}-{warmup_s + window:.0f} s) vs the last "
             f"{window:.0f} s of input ({end - window:.0f}-{end:.0f} s); slope by least squares "
             f"over {warmup_s:.0f}-{end:.0f} s, per 10 minutes, as % of the overall mean. "
             f"Flat: last/first within +-{FLAT:.0%}; GROWS above, lower below.", ""]
    verdicts = []
    for group, columns in series().items():
        lines.append(f"{group}:")
        lines.append(f"  {'series':<26} {'first':>12} {'last':>12} {'last/first':>10} "
                     f"{'slope %/10min':>13}  verdict")
        for c in columns:
            first = [v for _, v in _values(rows, c, warmup_s, warmup_s + window)]
            last = [v for _, v in _values(rows, c, end - window, end)]
            judged = _values(rows, c, warmup_s, end)
            if not first or not last:
                lines.append(f"  {c:<26} (no samples)")
                continue
            f, la = sum(first) / len(first), sum(last) / len(last)
            ratio = la / f if f else math.nan
            mean = sum(v for _, v in judged) / len(judged)
            slope = 100 * slope_per_10min(judged) / mean if mean else math.nan
            grows = ratio > 1 + FLAT
            verdicts.append(not grows)
            verdict = "GROWS" if grows else "flat" if ratio >= 1 - FLAT else "lower"
            lines.append(f"  {c:<26} {f:>12,.1f} {la:>12,.1f} {ratio:>10.3f} {slope:>13.2f}  "
                         f"{verdict}")
        lines.append("")
    lags = {s: [r[f"lag_{s}"] for r in inputs if r["t_s"] >= warmup_s
                and r.get(f"lag_{s}") not in (None, "")] for s in SERVICES}
    lines.append("Consumer lag after the warm-up (records not handled yet, max / mean): " +
                 ", ".join(f"{s} {max(v, default=0):,} / {sum(v) / max(1, len(v)):,.1f}"
                           for s, v in lags.items()))
    late = [r["input_late_s"] for r in inputs]
    behind = [r["output_behind_s"] for r in inputs
              if r["t_s"] >= warmup_s and r["output_behind_s"] is not None]
    lines.append(f"Producer behind its schedule: max {max(late, default=0):.2f} s. Committed "
                 f"outputs behind the input (event time: the last second produced - the newest "
                 f"alert's) after the warm-up: {min(behind, default=math.nan):.1f}-"
                 f"{max(behind, default=math.nan):.1f} s, mean "
                 f"{sum(behind) / max(1, len(behind)):.1f} s.")
    lines.append(f"Outputs: expected {result.expected:,}, got {result.got:,}, lost "
                 f"{result.lost}, duplicated {result.duplicated}, stuck partitions "
                 f"{len(result.stuck)}, drained {result.drain_s:.1f} s after the input "
                 f"ended: {'EXACT' if result.ok else 'NOT EXACT'}.")
    lines.append(f"{sum(verdicts)} of {len(verdicts)} series do not grow (flat or lower).")
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], warmup_s: float, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r["phase"] == "input"]  # not the drained pipeline's
    fig, axes = plt.subplots(4, 1, figsize=(9, 11), sharex=True)
    minutes = [r["t_s"] / 60 for r in rows]

    def line(ax: Any, column: str, label: str, scale: float = 1.0, **kw: Any) -> None:
        ys = [math.nan if r.get(column) in (None, "") else float(r[column]) / scale
              for r in rows]
        ax.plot(minutes, ys, label=label, **kw)

    for s in SERVICES:
        line(axes[0], f"rss_mb_{s}", s)
    line(axes[0], "rss_mb_driver", "driver", linestyle=":")
    axes[0].set_ylabel("RSS (MiB)")
    axes[0].set_title(textwrap.fill(title, 110), fontsize=9)
    for s in SERVICES:
        line(axes[1], f"state_bytes_{s}", s, 1024)
    axes[1].set_ylabel("state (KiB, newest\ncheckpoints, compressed)")
    for s in SERVICES:
        line(axes[2], f"changelog_bytes_{s}", f"changelog {s}", 2**20)
    line(axes[2], "checkpoints_bytes", "checkpoints", 2**20, linestyle="--")
    axes[2].set_ylabel("topic on disk (MiB)")
    for s in SERVICES:
        line(axes[3], f"lag_{s}", f"lag {s}")
    axes[3].set_ylabel("consumer lag (records)")
    ax2 = axes[3].twinx()
    line(ax2, "output_behind_s", "outputs behind input (s)", color="black", linestyle=":")
    ax2.set_ylabel("outputs behind input\n(event time, s)")
    axes[3].set_xlabel("minutes into the input")
    for ax in axes:
        ax.axvspan(0, warmup_s / 60, color="0.9", zorder=0)
        ax.legend(fontsize=7, loc="upper left", ncol=3)
        ax.set_ylim(bottom=0)
    ax2.set_ylim(bottom=0)
    ax2.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def save_logs(lab: FaultLab, logs: Path) -> None:
    """The driver's log and Ray's session logs (the actors' output), kept
    after the lab's directories are gone."""
    shutil.copytree(lab.workdir / "drivers", logs / "drivers", dirs_exist_ok=True)
    session = lab.ray.temp_link.resolve() / "session_latest" / "logs"
    if session.is_dir():
        shutil.copytree(session, logs / "ray", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("*.sock"))
    print(f"logs kept in {logs}", flush=True)


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    columns = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, columns)
        w.writeheader()
        w.writerows(rows)


def progress(row: dict[str, Any]) -> str:
    mib = 2 ** 20
    return (f"{row['t_s'] / 60:5.1f} min  sim {row['sim_t']}  late {row['input_late_s']:.1f} s"
            "  RSS " + " ".join(f"{s[:3]} {row[f'rss_mb_{s}']:.0f}" for s in SERVICES) +
            "  state KiB " +
            " ".join(f"{(row[f'state_bytes_{s}'] or 0) / 1024:.0f}" for s in SERVICES) +
            f"  changelogs MiB {sum(row[f'changelog_bytes_{s}'] for s in SERVICES) / mib:.1f}"
            f" ckpt {row['checkpoints_bytes'] / mib:.1f}  lag " +
            "/".join(str(row[f"lag_{s}"]) for s in SERVICES) +
            f"  alerts {row['alerts']} behind {row['output_behind_s']} s"
            f"  load {row['load1']:.1f}")


def soak(lab: FaultLab, d: Deployed, stream: Stream, args: argparse.Namespace,
         rows: list[dict[str, Any]], result: RunResult) -> Sampler:
    """The input at its pace, a sample every `args.sample` s into `rows`
    (and the CSV), then the outputs judged into `result`."""
    producer = InputProducer(d.bus, d.input_topic, stream, args.speed)
    producer.start()
    sampler = Sampler(lab, d, producer)
    next_at = producer.started + args.sample
    while producer.alive():
        time.sleep(max(0.0, min(1.0, next_at - time.monotonic())))
        if time.monotonic() < next_at:
            continue
        next_at += args.sample
        rows.append(sampler.sample("input"))
        write_csv(rows, args.out / "soak.csv")  # as it goes: a cut run keeps its figures
        print(progress(rows[-1]), flush=True)
    producer.join()
    if producer.error is not None:
        raise RuntimeError("the input producer failed") from producer.error
    ended = time.monotonic()
    print(f"input done ({len(stream.seconds)} s simulated, the producer at most "
          f"{producer.late_max_s:.2f} s behind); draining and checking the outputs", flush=True)
    lab.judge(d, stream, result, ended, args.drain_timeout)
    rows.append(sampler.sample("after"))
    result.restarts = sampler.restarts
    return sampler


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30.0, help="wall minutes of input")
    ap.add_argument("--speed", type=float, default=1.0,
                    help="simulated seconds per wall second (1 = real time)")
    ap.add_argument("--segments", default="84:88",
                    help="LO:HI, the segments of the standard load kept (the rate)")
    ap.add_argument("--start", type=int, default=PLATEAU_S,
                    help="the simulated second the input starts at")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--sample", type=float, default=30.0, help="seconds between samples")
    ap.add_argument("--warmup", type=float, default=120.0,
                    help="seconds left out of the flatness judgement")
    ap.add_argument("--drain-timeout", type=float, default=600.0)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--logs", type=Path, default=None,
                    help="where the driver's and Ray's logs are kept (default: a temp dir)")
    ap.add_argument("--report-only", action="store_true",
                    help="no run: soak.png and soak.txt again from OUT/soak.csv and soak.json")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        saved = json.loads((args.out / "soak.json").read_text())
        with open(args.out / "soak.csv", newline="") as fh:
            table = [{k: cell(v) for k, v in r.items()} for r in csv.DictReader(fh)]
        return report(table, RunResult(**saved["result"]), saved["header"], args.warmup,
                      saved["restarts"], args.out)
    lo, hi = (int(v) for v in args.segments.split(":"))
    duration = int(args.minutes * 60 * args.speed)
    began = time.monotonic()
    print(f"generating {duration} s of the standard load from second {args.start} "
          f"(segments {lo}-{hi}) and the embedded pipeline's outputs...", flush=True)
    stream = Stream.make(duration, args.seed, segments=(lo, hi), start_s=args.start)
    wire = sum(len(records) for _, records in stream.seconds)
    expected = sum(stream.expected.values())
    rate = stream.reports / duration * args.speed
    header = [f"Soak: {args.minutes:g} min of input, Linear Road standard load, 1 expressway, "
              f"simulated seconds {args.start}-{args.start + duration} at x{args.speed:g}, "
              f"segments {lo}-{hi}, seed {args.seed}: {stream.reports:,} reports "
              f"({rate:.1f}/s), {wire:,} records on the wire ({wire / duration * args.speed:.1f}"
              f"/s, fanned out per segment), {expected:,} expected alerts; 1 actor per "
              f"service, 4 partitions; sampled every {args.sample:g} s."]
    print(header[0] + f" (prepared in {time.monotonic() - began:.0f} s)", flush=True)
    work = Path(tempfile.mkdtemp(prefix="caesar-soak-"))
    rows: list[dict[str, Any]] = []
    result = RunResult(0, "soak", args.seed, 0.0, 0.0, None, expected, 0, 0, 0)
    csv_path = args.out / "soak.csv"
    logs = args.logs or Path(tempfile.mkdtemp(prefix="caesar-soak-logs-"))
    try:
        with FaultLab(work, log=lambda m: print(m, flush=True)) as lab:
            try:
                with lab.deployed(f"soak-{uuid.uuid4().hex[:6]}") as d:
                    sampler = soak(lab, d, stream, args, rows, result)
            finally:
                save_logs(lab, logs)
    finally:
        if rows:
            write_csv(rows, csv_path)
        shutil.rmtree(work, ignore_errors=True)
    (args.out / "soak.json").write_text(json.dumps(
        {"header": header, "restarts": sampler.restarts, "result": dataclasses.asdict(result)},
        indent=1))
    return report(rows, result, header, args.warmup, sampler.restarts, args.out)


def report(rows: list[dict[str, Any]], result: RunResult, header: list[str], warmup_s: float,
           restarts: int, out: Path) -> int:
    """soak.png and soak.txt (printed too); 0 when the outputs were exact."""
    plot(rows, warmup_s, out / "soak.png",
         header[0][:header[0].index(";")] + f"; warm-up ({warmup_s:.0f} s) shaded")
    text = summary(rows, warmup_s, result, header)
    if result.stuck:
        text += "\nstuck: " + "; ".join(result.stuck)
    if restarts:
        text += f"\n{restarts} actor process(es) replaced during the run."
    (out / "soak.txt").write_text(text + "\n")
    print(text)
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
