"""Restart time as uptime grows (issue 11, "Bounded storage"): one deployment
of the Linear Road model on Kafka + Ray (bench/faults/harness.py: a local
KRaft broker, a Ray head, `caesar deploy` in a driver process), fed the
standard load faster than real time, its driver killed (kill -9, its actors
die with it) and started again at increasing uptimes.

    .venv/bin/python -m bench.faults.restart [--at 1,3,6,10,14] [--minutes 15] [--speed 3]
    .venv/bin/python -m bench.faults.restart --report-only   # restart.txt/png from the CSV

The input: `--minutes` of wall time of the standard load of one expressway
from simulated second `--start` on (the soak's plateau), segments
`--segments`, at `--speed` simulated seconds per wall second, an input
watermark per second. At each uptime in `--at` (wall minutes into the
input), before the kill: the records ever written to each changelog topic
and to the checkpoints topic (the sum of their partitions' end offsets: what
an uncompacted log would hold and a restore from its start would read), their
bytes on the broker's disk, each service's state and consumer lag. After the
new driver starts: how long until every actor has restored (its stats answer
with `restore_s` set), each service's restore time and the changelog
records/bytes its restore read (ServiceLoop.stats), the first alert
committed after the start (any input) and the first alert of an input
produced after the start (the fault bench's recovery time, which includes
catching up the input that arrived while the pipeline was down). At the end
the committed alerts must equal the embedded pipeline's on the same input
(FaultLab.judge): 0 lost, 0 duplicated, no stuck partition.

"Flat": the last restart's restore reads (records, bytes) and times within
1.5x of the first's while the records written to the state topics grew
several-fold; reads and times are judged apart (times follow the machine's
load, recorded per restart).
Writes results/restart.csv (one row per restart), restart.json, .png, .txt.
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
from bench.faults.harness import SERVICES, Deployed, FaultLab, InputProducer, RunResult, Stream
from bench.faults.soak import PLATEAU_S, RESULTS, save_logs, slope_per_10min, write_csv
from caesar.bus.records import TopicPartition
from caesar.codecs import make_codec
from caesar.services.store.checkpoint import StateStore

FLAT = 1.5  # restore reads/time at the last restart within 1.5x of the first: flat
# The restore's first window (offsets from the end of a changelog partition):
# 64 before this bench (it read ~20 checkpoints), 4 now (about one).
WINDOWS = {"old": 64, "new": 4}


def state_topics(d: Deployed) -> dict[str, str]:
    """column name -> topic: each service's changelog and the checkpoints topic."""
    t = d.settings.topics
    return {**{s: t.changelog_topic(s) for s in SERVICES}, "checkpoints": t.checkpoints}


def written(d: Deployed) -> dict[str, int]:
    """Records ever written per state topic: its partitions' end offsets
    (transaction markers included), which compaction does not lower."""
    found = d.bus.list_topics()
    out = {}
    for name, topic in state_topics(d).items():
        tps = [TopicPartition(topic, j) for j in range(found.get(topic, 0))]
        out[name] = sum(d.bus.end_offsets(tps).values()) if tps else 0
    return out


def probe(d: Deployed, point: int) -> dict[str, Any]:
    """Every service's restore of every partition done from here with the old
    and the new first window, side by side (alternating which goes first):
    records and bytes read and seconds, all services summed."""
    t, codec = d.settings.topics, make_codec(d.settings)
    row: dict[str, Any] = {}
    names = list(WINDOWS) if point % 2 == 0 else list(reversed(WINDOWS))
    for name in names:
        records = size = 0
        began = time.monotonic()
        for s in SERVICES:
            store = StateStore(d.bus, codec, changelog_topic=t.changelog_topic(s),
                               checkpoints_topic=t.checkpoints, service=s,
                               first_window=WINDOWS[name])
            for j in range(t.partitions):
                store.load(j)
            records += store.read_records
            size += store.read_bytes
        row[f"probe_{name}_s"] = round(time.monotonic() - began, 3)
        row[f"probe_{name}_records"] = records
        row[f"probe_{name}_bytes"] = size
    return row


def wait_restored(d: Deployed, timeout_s: float = 300.0) -> dict[str, dict[str, Any]]:
    """Every service's new actor has finished its restore: its stats."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            stats = d.driver.stats()
            if all(st["restore_s"] > 0 for st in stats.values()):
                return stats
        except Exception:  # noqa: BLE001 - the actors are not there yet
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def restart(lab: FaultLab, d: Deployed, producer: InputProducer, point: int,
            records_by_t: dict[int, int]) -> dict[str, Any]:
    """Figures before the kill, the kill, the start, the restore: one row."""
    before = d.driver.stats()
    sim_t = producer.produced_t
    row: dict[str, Any] = {
        "point": point, "uptime_s": round(time.monotonic() - producer.started, 1),
        "sim_t": sim_t, "records_in": records_by_t.get(sim_t or 0, 0),
        "load1": os.getloadavg()[0]}
    for name, n in written(d).items():
        row[f"written_{name}"] = n
    disk = lab.topic_bytes(d.prefix)
    for name, topic in state_topics(d).items():
        row[f"disk_bytes_{name}"] = disk.get(topic, 0)
    for s in SERVICES:
        row[f"state_bytes_{s}"] = before[s]["state_bytes"]
        row[f"lag_{s}"] = before[s]["lag"]
    row.update(probe(d, point))
    killed = time.monotonic()
    d.driver.kill()
    d.driver.wait_actors_gone()
    started = time.monotonic()
    d.driver.start()
    after = wait_restored(d)
    restored = time.monotonic()
    row["down_s"] = round(started - killed, 2)  # until the old actors were gone
    row["ready_s"] = round(restored - started, 2)  # driver start -> every actor restored
    for s in SERVICES:
        row[f"restore_s_{s}"] = round(after[s]["restore_s"], 3)
        row[f"restore_records_{s}"] = after[s]["restore_records"]
        row[f"restore_bytes_{s}"] = after[s]["restore_bytes"]
    row["restore_s"] = max(row[f"restore_s_{s}"] for s in SERVICES)
    row["restore_records"] = sum(after[s]["restore_records"] for s in SERVICES)
    row["restore_bytes"] = sum(after[s]["restore_bytes"] for s in SERVICES)
    row["_started"] = started  # monotonic: first outputs are found after the run
    return row


def first_outputs(d: Deployed, row: dict[str, Any]) -> None:
    """first_output_s: driver start -> first alert committed after it;
    recovery_s: -> first alert of an input produced after it."""
    started = row.pop("_started")
    with d.tail._lock:
        arrivals = [arrived for arrived, _ in d.tail.seen if arrived > started]
    row["first_output_s"] = round(min(arrivals) - started, 2) if arrivals else None
    row["recovery_s"] = d.tail.recovery(started)


def run(lab: FaultLab, d: Deployed, stream: Stream, args: argparse.Namespace,
        rows: list[dict[str, Any]], result: RunResult) -> None:
    records_by_t: dict[int, int] = {}
    total = 0
    for t, records in stream.seconds:
        total += len(records)
        records_by_t[t] = total
    producer = InputProducer(d.bus, d.input_topic, stream, args.speed)
    producer.start()
    for i, minute in enumerate(args.at):
        while time.monotonic() - producer.started < minute * 60 and producer.alive():
            time.sleep(0.2)
        if not producer.alive():
            raise RuntimeError(f"the input ended before the restart at {minute} min")
        row = restart(lab, d, producer, i, records_by_t)
        rows.append(row)
        print(f"restart {i} at {row['uptime_s'] / 60:.1f} min (sim {row['sim_t']}, "
              f"{row['records_in']:,} input records): changelog records written "
              f"{sum(row[f'written_{s}'] for s in SERVICES):,}, on disk "
              f"{sum(row[f'disk_bytes_{s}'] for s in SERVICES) / 2**20:.1f} MiB; restored in "
              f"{row['ready_s']:.1f} s after the start (restore "
              + "/".join(f"{row[f'restore_s_{s}']:.2f}" for s in SERVICES)
              + f" s), read {row['restore_records']:,} records, "
              f"{row['restore_bytes'] / 1024:,.0f} KiB; side by side, old/new window: "
              f"{row['probe_old_bytes'] / 1024:,.0f}/{row['probe_new_bytes'] / 1024:,.0f} KiB "
              f"in {row['probe_old_s']:.2f}/{row['probe_new_s']:.2f} s", flush=True)
    producer.join()
    if producer.error is not None:
        raise RuntimeError("the input producer failed") from producer.error
    lab.judge(d, stream, result, time.monotonic(), args.drain_timeout)
    for row in rows:
        first_outputs(d, row)


# ------------------------------------------------------------------ report
def table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'uptime':>7} {'load':>4} {'input recs':>10} {'cl written':>10} {'cl MiB disk':>11} "
            f"{'state KiB':>9} {'ready s':>7} {'restore s (sch/der/rou/mat)':>27} "
            f"{'read recs':>9} {'read KiB':>8} {'1st out s':>9} {'recov s':>7} "
            f"{'old/new window: KiB read':>24} {'s':>11}")
    lines = [head, "-" * len(head)]
    for r in rows:
        restore = "/".join(f"{r[f'restore_s_{s}']:.2f}" for s in SERVICES)
        first = "-" if r["first_output_s"] is None else f"{r['first_output_s']:.1f}"
        recov = "-" if r["recovery_s"] is None else f"{r['recovery_s']:.1f}"
        lines.append(
            f"{r['uptime_s'] / 60:6.1f}m {r['load1']:>4.1f} {r['records_in']:>10,} "
            f"{sum(r[f'written_{s}'] for s in SERVICES):>10,} "
            f"{sum(r[f'disk_bytes_{s}'] for s in SERVICES) / 2**20:>11.1f} "
            f"{sum(r[f'state_bytes_{s}'] or 0 for s in SERVICES) / 1024:>9,.0f} "
            f"{r['ready_s']:>7.1f} {restore:>27} {r['restore_records']:>9,} "
            f"{r['restore_bytes'] / 1024:>8,.0f} {first:>9} {recov:>7} "
            f"{r['probe_old_bytes'] / 1024:>11,.0f}/{r['probe_new_bytes'] / 1024:<12,.0f} "
            f"{r['probe_old_s']:>5.2f}/{r['probe_new_s']:<5.2f}")
    return "\n".join(lines)


def verdict(rows: list[dict[str, Any]]) -> list[str]:
    first, last = rows[0], rows[-1]

    def ratio(column: str) -> float:
        a, b = float(first[column] or 0), float(last[column] or 0)
        return b / a if a else math.nan

    grew = sum(last[f"written_{s}"] for s in SERVICES) / \
        max(1, sum(first[f"written_{s}"] for s in SERVICES))
    out = [f"From the first restart to the last: input records x{ratio('records_in'):.1f}, "
           f"changelog records written x{grew:.1f}; restore read x{ratio('restore_bytes'):.2f} "
           f"bytes, x{ratio('restore_records'):.2f} records; restore time (slowest service) "
           f"x{ratio('restore_s'):.2f}; start -> restored x{ratio('ready_s'):.2f}; "
           f"start -> first output x{ratio('first_output_s'):.2f}."]
    old = sum(r["probe_old_bytes"] for r in rows)
    new = sum(r["probe_new_bytes"] for r in rows)
    out.append(f"Side by side at every restart: a restore with the old 64-offset first window "
               f"read {old / 2**20:.1f} MiB in all, with the new one {new / 2**20:.1f} MiB "
               f"({old / max(1, new):.1f}x less).")
    reads = all(ratio(c) <= FLAT for c in ("restore_bytes", "restore_records"))
    times = all(ratio(c) <= FLAT for c in ("restore_s", "ready_s", "first_output_s"))
    out.append(f"Restore reads {'FLAT' if reads else 'NOT FLAT'}, restart times "
               f"{'FLAT' if times else 'NOT FLAT'} (last/first at most {FLAT}x while the "
               f"changelogs grew x{grew:.1f}; load average {first['load1']:.1f} at the first "
               f"restart, {last['load1']:.1f} at the last: times on this shared 2-core "
               f"machine move with it).")
    slopes = []
    for column, label in (("ready_s", "start -> restored"), ("restore_s", "restore"),
                          ("first_output_s", "start -> first output")):
        points = [(float(r["uptime_s"]), float(r[column])) for r in rows
                  if r[column] not in (None, "")]
        mean = sum(v for _, v in points) / max(1, len(points))
        slope = slope_per_10min(points)
        slopes.append(f"{label} {slope:+.2f} s ({100 * slope / mean:+.0f} % of its mean "
                      f"{mean:.1f} s)")
    out.append("Trend over all restarts (least squares, per 10 minutes of uptime): "
               + "; ".join(slopes) + ".")
    return out


def plot(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [r["uptime_s"] / 60 for r in rows]
    fig, axes = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    ax = axes[0]
    ax.plot(x, [r["ready_s"] for r in rows], "o-", label="start -> every actor restored")
    ax.plot(x, [max(r[f"restore_s_{s}"] for s in SERVICES) for r in rows], "s-",
            label="restore (slowest service)")
    ax.plot(x, [r["first_output_s"] for r in rows], "^-", label="start -> first committed alert")
    ax.plot(x, [r["recovery_s"] for r in rows], "v:",
            label="start -> first alert of input after the start")
    ax.set_ylabel("seconds")
    ax.set_title(textwrap.fill(title, 100), fontsize=8)
    ax = axes[1]
    ax.plot(x, [r["restore_bytes"] / 2**20 for r in rows], "o-", label="read on restore")
    ax.plot(x, [r["probe_old_bytes"] / 2**20 for r in rows], "^:",
            label="read by a restore with the old 64-offset window (side by side)")
    ax.plot(x, [sum(r[f"disk_bytes_{s}"] for s in SERVICES) / 2**20 for r in rows], "s--",
            label="changelogs on disk")
    ax.plot(x, [sum((r[f"state_bytes_{s}"] or 0) for s in SERVICES) / 2**20 for r in rows],
            "x:", label="state (newest checkpoints)")
    ax.set_ylabel("MiB")
    ax = axes[2]
    ax.plot(x, [sum(r[f"written_{s}"] for s in SERVICES) for r in rows], "o-",
            label="changelog records written (end offsets)")
    ax.plot(x, [r["restore_records"] for r in rows], "s-", label="changelog records read on "
            "restore")
    ax.plot(x, [r["records_in"] for r in rows], "x:", label="input records so far")
    ax.set_yscale("log")
    ax.set_ylabel("records")
    ax.set_xlabel("uptime at the restart (minutes of input)")
    for a in axes:
        a.legend(fontsize=7)
    axes[0].set_ylim(bottom=0)
    axes[1].set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def report(rows: list[dict[str, Any]], result: RunResult, header: str, out: Path) -> int:
    plot(rows, out / "restart.png", header[:header.index(";")])
    text = "\n".join([header, "", table(rows), "", *verdict(rows),
                      f"Outputs: expected {result.expected:,}, got {result.got:,}, lost "
                      f"{result.lost}, duplicated {result.duplicated}, stuck partitions "
                      f"{len(result.stuck)}: {'EXACT' if result.ok else 'NOT EXACT'}."])
    if result.stuck:
        text += "\nstuck: " + "; ".join(result.stuck)
    (out / "restart.txt").write_text(text + "\n")
    print(text)
    return 0 if result.ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--at", default="1,3,6,10,14",
                    help="wall minutes into the input at which the driver is restarted")
    ap.add_argument("--minutes", type=float, default=15.0, help="wall minutes of input")
    ap.add_argument("--speed", type=float, default=3.0,
                    help="simulated seconds per wall second (faster than real time)")
    ap.add_argument("--segments", default="86:87")
    ap.add_argument("--start", type=int, default=PLATEAU_S)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--drain-timeout", type=float, default=600.0)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--logs", type=Path, default=None)
    ap.add_argument("--report-only", action="store_true",
                    help="no run: restart.txt/png again from OUT/restart.csv and .json")
    args = ap.parse_args(argv)
    args.at = [float(v) for v in args.at.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        saved = json.loads((args.out / "restart.json").read_text())
        with open(args.out / "restart.csv", newline="") as fh:
            table_rows = [{k: cell(v) for k, v in r.items()} for r in csv.DictReader(fh)]
        return report(table_rows, RunResult(**saved["result"]), saved["header"], args.out)
    if max(args.at) >= args.minutes:
        ap.error("every --at must fall within --minutes of input")
    lo, hi = (int(v) for v in args.segments.split(":"))
    duration = int(args.minutes * 60 * args.speed)
    began = time.monotonic()
    stream = Stream.make(duration, args.seed, segments=(lo, hi), start_s=args.start)
    wire = sum(len(records) for _, records in stream.seconds)
    expected = sum(stream.expected.values())
    header = (f"Restart time vs uptime: {args.minutes:g} min of input, Linear Road standard "
              f"load, 1 expressway, simulated seconds {args.start}-{args.start + duration} at "
              f"x{args.speed:g}, segments {lo}-{hi}, seed {args.seed}: {stream.reports:,} "
              f"reports, {wire:,} records on the wire ({wire / args.minutes / 60:.0f}/s), "
              f"{expected:,} expected alerts; driver killed and started again at "
              f"{', '.join(f'{m:g}' for m in args.at)} min; 1 actor per service, 4 partitions.")
    print(header + f" (prepared in {time.monotonic() - began:.0f} s)", flush=True)
    work = Path(tempfile.mkdtemp(prefix="caesar-restart-"))
    logs = args.logs or Path(tempfile.mkdtemp(prefix="caesar-restart-logs-"))
    rows: list[dict[str, Any]] = []
    result = RunResult(0, "driver", args.seed, 0.0, 0.0, None, expected, 0, 0, 0)
    try:
        with FaultLab(work, log=lambda m: print(m, flush=True)) as lab:
            try:
                with lab.deployed(f"rs-{uuid.uuid4().hex[:6]}") as d:
                    run(lab, d, stream, args, rows, result)
            finally:
                save_logs(lab, logs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_csv(rows, args.out / "restart.csv")
    (args.out / "restart.json").write_text(json.dumps(
        {"header": header, "result": dataclasses.asdict(result)}, indent=1))
    return report(rows, result, header, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
