"""CAESAR side by side with Esper and Flink CEP on one event stream.

    .venv/bin/python -m bench.peers.run            # every workload (~30 min on 2 cores)
    .venv/bin/python -m bench.peers.run --quick    # small sizes, a smoke run
    .venv/bin/python -m bench.peers.run --only sweep,negation --reps 3

Fetches Esper and Flink CEP from Maven Central into ~/.cache/caesar/peers
(once), compiles the Java harness in bench/peers/java, writes each
workload's stream to one event file, and runs CAESAR (the Cython engine,
in this process), Esper and Flink CEP (one long-lived JVM each) on it
interleaved: round r runs every engine once, in the same order, before
round r+1 starts; the first `--warmup` rounds are not counted (JIT warm-up)
and the first of them records every engine's matches, which must equal
CAESAR's (same query, same seq numbers, same multiplicity).

Writes results/peers.csv (one row per workload and engine), results/peers.md
(the table) and results/peers.png. Method and caveats: README.md here.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.peers.caesar_side import (
    CaesarResult,
    plans_for,
    run_caesar,
    run_pipeline,
    run_temporal,
    stream_values,
)
from bench.peers.events import Stream, sase_stream, to_batches, write_events
from bench.peers.jvm import (
    ESPER_VERSION,
    FLINK_VERSION,
    Harness,
    java_available,
    read_matches,
    settle,
)
from bench.peers.patterns import esper_match_recognize, esper_module, flink_spec
from bench.peers.workloads import (
    CAESAR,
    CAESAR_FORMS,
    CAESAR_OBJECTS,
    ESPER,
    ESPER_2PHASE,
    ESPER_FORMS,
    ESPER_KEYED,
    ESPER_LOWLAT,
    ESPER_MR,
    FLINK,
    FORMS,
    GROUPS,
    Workload,
)

RESULTS = Path(__file__).parent / "results"
MatchSet = Counter[tuple[int, tuple[int, ...]]]


@dataclass
class Runs:
    form: str
    wall: list[int] = field(default_factory=list)
    thread_cpu: list[int] = field(default_factory=list)
    process_cpu: list[int] = field(default_factory=list)
    setup: list[int] = field(default_factory=list)
    matches: int = -1
    same: bool | None = None
    diff: str = ""

    def add(self, wall: int, thread_cpu: int, process_cpu: int, setup: int) -> None:
        self.wall.append(wall)
        self.thread_cpu.append(thread_cpu)
        self.process_cpu.append(process_cpu)
        self.setup.append(setup)


def _median(xs: list[int]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


def compare(caesar: MatchSet, other: MatchSet) -> str:
    """'' when equal, else a short description of the difference."""
    if caesar == other:
        return ""
    only_c = caesar - other
    only_o = other - caesar
    return (f"{sum(only_c.values())} only in CAESAR (e.g. {sorted(only_c)[:2]}), "
            f"{sum(only_o.values())} only in the peer (e.g. {sorted(only_o)[:2]})")


class Bench:
    def __init__(self, workdir: Path, engines: set[str]) -> None:
        self.workdir = workdir
        self.harness: dict[str, Harness] = {}
        why = java_available()
        if why and engines - set(CAESAR_FORMS):
            print(f"[peers] JVM peers skipped: {why}")
            engines = engines & set(CAESAR_FORMS)
        self.engines = engines
        if engines & set(ESPER_FORMS):
            self.harness["esper"] = Harness("esper")
        if FLINK in engines:
            self.harness["flink"] = Harness("flink")
        self._loaded: dict[str, Path] = {}
        self.settled = 0.0  # seconds waited for quiet JVMs before runs (jvm.settle)

    def close(self) -> None:
        for h in self.harness.values():
            h.close()

    def _jvm(self, form: str) -> Harness:
        return self.harness["flink" if form == FLINK else "esper"]

    def _write_queries(self, w: Workload, forms: list[str]) -> dict[str, Path]:
        """Each JVM form's query text, in the file its harness reads."""
        files: dict[str, Path] = {}
        for form in forms:
            if form in CAESAR_FORMS:
                continue
            path = self.workdir / f"{form}.{'spec' if form == FLINK else 'epl'}"
            if form in w.epl_forms:
                path.write_text(w.epl_forms[form])
            elif form == ESPER:
                path.write_text(w.epl or esper_module(w.queries))
            elif form == ESPER_KEYED:
                attr = w.partition_by or w.queries[0].equivalence[0]
                path.write_text(esper_module(w.queries, keyed_by=attr))
            elif form == ESPER_MR:
                (q,) = w.queries
                path.write_text(esper_match_recognize(q))
            elif form == FLINK:
                path.write_text(flink_spec(w.queries))
            files[form] = path
        return files

    def run(self, w: Workload, n_events: int, warmup: int, reps: int) -> dict[str, Runs]:
        forms = [f for f in w.forms
                 if f == CAESAR or (f in self.engines and f not in w.unsupported)]
        caesar_forms = [f for f in forms if f in CAESAR_FORMS]
        stream = (w.stream(n_events) if w.stream is not None
                  else sase_stream(n_events, domains=w.domains, num_types=w.num_types))
        events_file = write_events(stream, self.workdir / "events.bin")
        t0 = time.perf_counter()
        local = {f: _caesar_runner(w, stream, columnar=f == CAESAR) for f in caesar_forms}
        compile_s = (time.perf_counter() - t0) / len(local)
        files = self._write_queries(w, forms)
        for h in self.harness.values():
            if any(self._jvm(f) is h for f in forms if f not in CAESAR_FORMS):
                h.load(events_file)
        runs = {f: Runs(f) for f in forms}
        truth: MatchSet = Counter()
        for r in range(warmup + reps):
            counted = r >= warmup
            for form in forms:
                record = r == 0
                self.settled += settle([h.pid for h in self.harness.values()])
                if form in local:
                    res = local[form](record)
                    if record and form == CAESAR:
                        truth = Counter(res.found or [])
                    elif record:
                        runs[form].diff = compare(truth, Counter(res.found or []))
                        runs[form].same = not runs[form].diff
                    wall, tcpu, pcpu, setup, count = (res.wall_ns, res.thread_cpu_ns,
                                                      res.process_cpu_ns,
                                                      res.setup_ns + int(compile_s * 1e9),
                                                      res.matches)
                else:
                    out = self.workdir / f"{form}.matches" if record else None
                    jr = self._jvm(form).run(files[form], out)
                    wall, tcpu, pcpu, setup, count = (jr.wall_ns, jr.thread_cpu_ns,
                                                      jr.process_cpu_ns, jr.setup_ns, jr.matches)
                    if out is not None:
                        found = Counter(read_matches(out))
                        runs[form].diff = compare(truth, found)
                        runs[form].same = not runs[form].diff
                        out.unlink()
                runs[form].matches = count
                if counted:
                    runs[form].add(wall, tcpu, pcpu, setup)
                print(f"  round {r + 1}/{warmup + reps} {form:<12} {n_events / wall * 1e9:>12,.0f} "
                      f"events/s  {count:>9,} matches{'' if counted else '  (warm-up)'}",
                      flush=True)
        runs[CAESAR].same = True
        return runs


def _caesar_runner(w: Workload, stream: Stream, columnar: bool = True,
                   ) -> Callable[[bool], CaesarResult]:
    """CAESAR's run of the workload (record: keep the matches), inputs
    prepared: the queries' plans on the Cython engine (matches as columns,
    or one DerivedEvent each), a TPStream model on the temporal engine, or a
    model with contexts through the pipeline."""
    text = w.caesar_text
    if text is not None and w.caesar_runner == "pipeline":
        values = stream_values(stream)
        return lambda record: run_pipeline(text, values, record=record)
    batches = to_batches(stream, partition_by=w.partition_by, with_ts=text is not None)
    if text is not None:
        return lambda record: run_temporal(text, batches, record=record)
    plans, index = plans_for(w.queries, w.partition_by)
    return lambda record: run_caesar(plans, index, batches, record=record, columnar=columnar)


def summarize(w: Workload, n_events: int, runs: dict[str, Runs]) -> list[dict]:
    c = runs[CAESAR]
    rows = []
    for form, rr in runs.items():
        med_wall = _median(rr.wall)
        row = {
            "workload": w.name, "group": w.group, "engine": form, "events": n_events,
            "queries": len(w.queries), "reps": len(rr.wall),
            "median_eps": n_events / med_wall * 1e9, "best_eps": n_events / min(rr.wall) * 1e9,
            "median_wall_s": med_wall / 1e9,
            "median_thread_cpu_s": _median(rr.thread_cpu) / 1e9,
            "median_process_cpu_s": _median(rr.process_cpu) / 1e9,
            "setup_s": _median(rr.setup) / 1e9,
            "matches": rr.matches, "matches_per_event": rr.matches / n_events,
            "same_matches": rr.same, "difference": rr.diff,
            # CAESAR's advantage: > 1 means CAESAR is faster / uses less CPU
            "caesar_speedup": med_wall / _median(c.wall),
            "caesar_thread_cpu_ratio": _median(rr.thread_cpu) / _median(c.thread_cpu),
            "caesar_process_cpu_ratio": _median(rr.process_cpu) / _median(c.process_cpu),
            "description": w.description,
        }
        rows.append(row)
    for form, why in w.unsupported.items():
        rows.append({"workload": w.name, "group": w.group, "engine": form, "events": n_events,
                     "queries": len(w.queries), "reps": 0, "difference": why,
                     "description": w.description})
    return rows


def _x(ratio: float) -> str:
    """CAESAR's advantage as read in a table: 2.5 (CAESAR 2.5x faster), or
    1/58 (the peer 58x faster)."""
    return f"{ratio:.1f}" if ratio >= 0.95 else f"1/{1 / ratio:.0f}" if ratio < 0.5 \
        else f"{ratio:.2f}"


def markdown(rows: list[dict]) -> str:
    lines = ["| workload | engine | median ev/s | best ev/s | CAESAR x (wall) | "
             "CAESAR x (thread CPU) | CAESAR x (process CPU) | matches | same matches |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if not r.get("reps"):
            lines.append(f"| {r['workload']} | {r['engine']} | n/a | | | | | | "
                         f"{r['difference']} |")
            continue
        me = r["engine"] == CAESAR
        lines.append(
            f"| {r['workload']} | {r['engine']} | {r['median_eps']:,.0f} | {r['best_eps']:,.0f} | "
            + ("" if me else _x(r["caesar_speedup"])) + " | "
            + ("" if me else _x(r["caesar_thread_cpu_ratio"])) + " | "
            + ("" if me else _x(r["caesar_process_cpu_ratio"])) + " | "
            f"{r['matches']:,} | {'yes' if r['same_matches'] else 'NO: ' + r['difference']} |")
    return "\n".join(lines) + "\n"


def summary(rows: list[dict]) -> str:
    """One line per workload: CAESAR, its best Esper form, Flink CEP."""
    lines = ["| workload | matches/event | CAESAR ev/s | best Esper form | Esper ev/s | "
             "CAESAR x Esper (wall / thread CPU) | Flink ev/s | CAESAR x Flink |",
             "|---|---|---|---|---|---|---|---|"]
    names: list[str] = []
    for r in rows:
        if r["workload"] not in names:
            names.append(r["workload"])
    for name in names:
        mine = {r["engine"]: r for r in rows if r["workload"] == name and r.get("reps")}
        c = mine[CAESAR]
        esper = [mine[f] for f in ESPER_FORMS if f in mine]
        best = max(esper, key=lambda r: r["median_eps"]) if esper else None
        flink = mine.get(FLINK)
        lines.append(
            f"| {name} | {c['matches_per_event']:.3g} | {c['median_eps']:,.0f} | "
            + (f"{best['engine']} | {best['median_eps']:,.0f} | {_x(best['caesar_speedup'])} / "
               f"{_x(best['caesar_thread_cpu_ratio'])} | " if best else "n/a | | | ")
            + (f"{flink['median_eps']:,.0f} | {_x(flink['caesar_speedup'])} |" if flink
               else "n/a | |"))
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names: list[str] = []
    for r in rows:
        if r["workload"] not in names:
            names.append(r["workload"])
    forms = [f for f in FORMS if any(r["engine"] == f and r.get("reps") for r in rows)]
    colors = {CAESAR: "#1f77b4", CAESAR_OBJECTS: "#aec7e8", ESPER: "#ff7f0e", ESPER_KEYED: "#ffbb78", ESPER_MR: "#d62728",
              ESPER_2PHASE: "#9467bd", ESPER_LOWLAT: "#8c564b", FLINK: "#2ca02c"}
    width = 0.8 / max(len(forms), 1)
    fig, ax = plt.subplots(figsize=(max(10, len(names) * 0.9), 5))
    for k, form in enumerate(forms):
        xs, ys = [], []
        for i, name in enumerate(names):
            for r in rows:
                if r["workload"] == name and r["engine"] == form and r.get("reps"):
                    xs.append(i + (k - (len(forms) - 1) / 2) * width)
                    ys.append(r["median_eps"])
        ax.bar(xs, ys, width, label=form, color=colors[form])
    ax.set_yscale("log")
    ax.set_xticks(range(len(names)), names, rotation=40, ha="right")
    ax.set_ylabel("events/s (median, higher is better)")
    ax.set_title(f"CAESAR (Cython engine) vs Esper {ESPER_VERSION} and Flink CEP {FLINK_VERSION}"
                 " — same stream, interleaved runs")
    ax.grid(axis="y", which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


FIELDS = ["workload", "group", "engine", "events", "queries", "reps", "median_eps",
          "best_eps", "median_wall_s", "median_thread_cpu_s", "median_process_cpu_s",
          "setup_s", "matches", "matches_per_event", "same_matches", "caesar_speedup",
          "caesar_thread_cpu_ratio", "caesar_process_cpu_ratio", "difference", "description"]
_INT_FIELDS = {"events", "queries", "reps", "matches"}
_TEXT_FIELDS = {"workload", "group", "engine", "difference", "description"}


def load_rows(path: Path) -> list[dict]:
    """The rows of an earlier peers.csv, with their numbers as numbers."""
    out = []
    with path.open(newline="") as fh:
        for raw in csv.DictReader(fh):
            row: dict = {}
            for k, v in raw.items():
                if k in _TEXT_FIELDS:
                    row[k] = v
                elif v == "":
                    continue
                elif k == "same_matches":
                    row[k] = v == "True"
                else:
                    row[k] = int(float(v)) if k in _INT_FIELDS else float(v)
            out.append(row)
    return out


def merge_rows(old: list[dict], new: list[dict], fresh: list[str]) -> list[dict]:
    """The earlier rows in their order, a re-run workload's rows in place of
    its old ones (a workload the earlier run lacked goes last)."""
    out: list[dict] = []
    placed: set[str] = set()
    for r in old:
        name = r["workload"]
        if name not in fresh:
            out.append(r)
        elif name not in placed:
            out += [n for n in new if n["workload"] == name]
            placed.add(name)
    out += [n for n in new if n["workload"] not in placed]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=300_000,
                    help="events per workload (workloads with many queries use fewer)")
    ap.add_argument("--reps", type=int, default=5, help="measured rounds per workload")
    ap.add_argument("--warmup", type=int, default=2, help="uncounted rounds first (JIT warm-up)")
    ap.add_argument("--only", default="", help=f"comma-separated groups of {list(GROUPS)}"
                    " or workload names")
    ap.add_argument("--engines", default=",".join(FORMS),
                    help="engine forms to run (CAESAR always runs: it is the baseline)")
    ap.add_argument("--quick", action="store_true", help="50,000 events, 2 reps, 1 warm-up")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--merge", action="store_true",
                    help="keep the other workloads' rows of the existing results/peers.csv "
                         "(a partial re-run updates its own rows; the report says which)")
    args = ap.parse_args(argv)
    if args.quick:
        args.events, args.reps, args.warmup = 50_000, 2, 1
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    workloads = [w for name, make in GROUPS.items() for w in make()
                 if not only or name in only or w.name in only]
    engines = {e.strip() for e in args.engines.split(",")} | {CAESAR}
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    t0 = time.time()
    print(f"[peers] {len(workloads)} workloads, {args.warmup} warm-up + {args.reps} measured "
          f"rounds; Esper {ESPER_VERSION}, Flink CEP {FLINK_VERSION}; "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="caesar-peers-") as tmp:
        bench = Bench(Path(tmp), engines)
        try:
            for w in workloads:
                n = w.events if (w.events and not args.quick) else args.events
                if args.quick and w.events:
                    n = min(n, w.events // 10 if len(w.queries) > 1000 else w.events)
                print(f"\n== {w.name}: {w.description} ({n:,} events)", flush=True)
                runs = bench.run(w, n, args.warmup, args.reps)
                rows += summarize(w, n, runs)
            print(f"[peers] waited {bench.settled:.0f} s in all for quiet JVMs before runs")
        finally:
            bench.close()
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    header = (f"Run {stamp}, {time.time() - t0:.0f} s, {args.warmup} warm-up + {args.reps} "
              f"measured rounds per workload.")
    if args.merge and (args.out / "peers.csv").exists():
        fresh = [w.name for w in workloads]
        old_md = args.out / "peers.md"
        before = old_md.read_text().splitlines()[0] if old_md.exists() else "an earlier run"
        rows = merge_rows(load_rows(args.out / "peers.csv"), rows, fresh)
        header = (f"Rows of {', '.join(fresh)}: {header[0].lower()}{header[1:]} "
                  f"Every other row: from the earlier run ({before.rstrip('.')}).")
    with (args.out / "peers.csv").open("w", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=FIELDS)
        wr.writeheader()
        for r in rows:
            wr.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v)
                         for k, v in r.items() if k in FIELDS})
    table = summary(rows) + "\nEvery engine form:\n\n" + markdown(rows)
    (args.out / "peers.md").write_text(f"{header}\n\n{table}")
    plot(rows, args.out / "peers.png")
    print("\n" + table)
    print(f"wrote {args.out / 'peers.csv'}, {args.out / 'peers.md'}, {args.out / 'peers.png'}")
    bad = [r for r in rows if r.get("reps") and r.get("same_matches") is False]
    if bad:
        print(f"MATCH SETS DIFFER in {len(bad)} rows", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
