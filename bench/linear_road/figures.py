"""The CAESAR paper's context-aware experiment (section 7.3.1, Figure 12) on
the public Linear Road data: context-aware (CA) versus context-independent
(CI) execution of the same workload, in one run, interleaved.

    .venv/bin/python -m bench.linear_road.figures [--quick] [--data L1.dat]

The paper's setup (7.3.1): "Unless stated otherwise, in Figures 12 and 13, we
consider 3 roads and assume that 2 critical non-overlapping context windows of
length 3 minutes process 10 event queries each. These queries can be
suspended in other contexts." Figure 12 varies (a) the queries per window,
(b) the roads, (c) the window length and (d) the number of windows, and
reports the win ratio CI / CA.

Here (what differs from the paper, and why):
* Input: the public generator's standard data (L1.dat), its first
  `--minutes` simulated minutes, thinned to the cars with vid % `--thin` == 0
  (every report of a kept car: its trips stay whole) so that one run of the
  whole figure fits in minutes on this 2-core machine; roads = copies of the
  expressway (`Reports.xways`, as the generator makes L expressways). The
  paper ran 3 hours of 3 roads on 16 cores.
* Context windows: the paper's come from the data ("context window related
  parameters can be varied only through input data manipulation"); here a
  window is a span of simulated time, entered and left by deriving queries on
  the report's time (SWITCH CONTEXT critical WHERE p.time in the span), so
  length and count are exact parameters and the data stays the public one.
* Workload: in every context the benchmark's segment statistics (average
  speed and car count per segment and minute, the toll's inputs); in the
  critical context `queries` replicas of the paper's Figure 3 sequence
  NewTravelingCar, SEQ(PositionReport a, PositionReport b) per car with b in a
  new segment, replica i WITHIN 60 + i seconds (distinct queries, so sub-plan
  sharing cannot merge them; every replica sees every report).
* CI = `compile_model(model, context_aware=False)`: every query runs all the
  time and its context filters its outputs. Both modes must derive the same
  events (checked every run; the sequences' runs may start before a window
  in CI, so only outputs inside the windows count, and those are equal).
  Contexts hold per partition (xway, dir), switched by its own reports: a
  partition's window runs from its first report in the span to its first
  report at or after the span's end (`partition_windows`), which on thinned
  data can be seconds after the span's bounds.
* CPU time: `time.process_time()` around the embedded pipeline's calls
  (scheduler -> deriver -> router -> matcher processors, one process), fed
  one simulated second at a time with an input watermark after each.
  Rounds interleave CA and CI point by point, the two modes' order swapped
  every other round, after one untimed warm-up run; the ratio is of medians.

Figure 14 (7.3.2, workload sharing of overlapping context windows; `--figure
14`): `windows` contexts w0..w(n-1) of `window_s` seconds, w(k+1) initiated
inside w(k) `step_s` seconds after it (so at most ceil(window_s / step_s)
hold at once, the "maximal number of overlapping context windows"), each
running the same `queries` NewTravelingCar replicas. Shared = the optimizer
as it is (context window grouping, section 5.3, then shared sub-plans: one
instance of a query for the grouped windows); non-shared = the same model
compiled without the shared_subplans rule (one instance per window). Both
must derive the same set of events (each non-shared copy derives its own
duplicate: counts differ, sets must not). 1 road; the paper's default is 30
windows of 15 minutes overlapping by 10 (step 5 min, at most 3 at once), 4
queries each; (a) varies the maximal overlap (15-minute windows every 20 s:
up to 45 at once in 30 minutes), (c) the queries per window (30 windows of 3
minutes every minute: at most 3 at once, as in the paper's default, scaled to
30 minutes of input); (b) the length of the overlap at the paper's 30 windows
of 15 minutes: overlaps of 10, 12, 14 and 15 minutes (a window every 5, 3, 1
and 0 minutes), each point on its windows' span of input (160, 102, 44 and
15 minutes from the start of the data, `--thin14` of the cars). Overlaps
under 10 minutes need more than the data's 3 hours (5 minutes: 305) and are
not run.
"""

from __future__ import annotations

import argparse
import csv
import gc
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.linear_road.standard import Reports, load

RESULTS = Path(__file__).parent / "results"
FIELDS = ("time", "vid", "spd", "xway", "lane", "dir", "seg", "pos")


@dataclass(frozen=True)
class Point:
    figure: str  # "a", "b", "c", "d"
    queries: int  # per critical window
    roads: int
    window_s: int
    windows: int

    @property
    def label(self) -> str:
        return {"a": f"{self.queries} queries", "b": f"{self.roads} roads",
                "c": f"{self.window_s // 60} min", "d": f"{self.windows} windows"}[self.figure]


def spans(windows: int, window_s: int, start: int, end: int) -> list[tuple[int, int]]:
    """`windows` non-overlapping spans of `window_s` seconds, spread evenly
    (uniform distribution, as the paper settles on for Figure 12) over
    [start, end)."""
    gap = (end - start - windows * window_s) / (windows + 1)
    if gap < 0:
        raise ValueError(f"{windows} windows of {window_s} s do not fit in {end - start} s")
    return [(int(start + gap * (k + 1) + window_s * k),
             int(start + gap * (k + 1) + window_s * (k + 1))) for k in range(windows)]


def model_text(queries: int, windows: list[tuple[int, int]]) -> str:
    inside = " OR ".join(f"(p.time >= {a} AND p.time < {b})" for a, b in windows) or "FALSE"
    events = [f"EVENT NewTravelingCar{i}(vid INT, time INT, xway INT, dir INT, seg INT)"
              for i in range(queries)]
    travel = "".join(
        f"  DERIVE NewTravelingCar{i}(b.vid, b.time, b.xway, b.dir, b.seg)\n"
        "    PATTERN SEQ(PositionReport a, PositionReport b)\n"
        f"    WHERE [vid] AND b.seg != a.seg\n    WITHIN {60 + i} SECONDS\n"
        for i in range(queries))
    return f"""MODEL figure12
TIME UNIT SECONDS
PARTITION BY xway, dir
STRATEGY skip_till_next_match

EVENT PositionReport(time INT, vid INT, spd INT, xway INT, lane INT, dir INT, seg INT, pos INT)
  TIMESTAMP time
EVENT SegmentSpeed(seg INT, lav FLOAT, cars INT)
{chr(10).join(events)}

-- Every context: the toll's inputs (average speed and cars per segment).
DERIVE SegmentSpeed(seg, avg(r.spd) AS lav, count(DISTINCT vid) AS cars)
  FROM PositionReport r
  GROUP BY seg
  WINDOW TUMBLING 1 MINUTE

DEFAULT CONTEXT normal {{
  SWITCH CONTEXT critical
    PATTERN PositionReport p
    WHERE {inside}
}}

CONTEXT critical {{
{travel}  SWITCH CONTEXT normal
    PATTERN PositionReport p
    WHERE NOT ({inside})
}}
"""


def input_records(reports: Reports) -> list[list[Any]]:
    """The reports as decoded input records, one list per simulated second."""
    from caesar.services.common.messages import InputRecord

    out, offset = [], 0
    for _, second in reports.seconds():
        cols = [second.columns[f].tolist() for f in FIELDS]
        values = [{"type": "PositionReport", **dict(zip(FIELDS, row, strict=True))}
                  for row in zip(*cols, strict=True)]
        out.append([InputRecord("figure12-input", 0, offset + i, v)
                    for i, v in enumerate(values)])
        offset += len(values)
    return out


def run_mode(plan: Any, seconds: list[list[Any]]) -> tuple[float, Counter[tuple]]:
    """CPU seconds of the embedded pipeline over the input, and its
    NewTravelingCar outputs (type, (xway, dir), vid, time): the stream
    partition is part of the key, as contexts hold per partition."""
    from bench.linear_road.throughput import TimedPipeline
    from caesar.services.common.collector import sweep

    # The previous run's garbage is not this run's cost, nor this process's
    # memory. A discarded pipeline frees itself; cycles left elsewhere are
    # frozen where survivors are (main: tune_collector), and only `sweep`
    # walks them; gc.collect for a process that does not freeze (tests).
    sweep()
    gc.collect()
    pipe = TimedPipeline(plan)
    outs: list[Any] = []
    for records in seconds:
        outs += pipe.second(records)
    outs += pipe.finish()
    got: Counter[tuple] = Counter()
    for o in outs:
        if o.event_type.startswith("NewTravelingCar"):
            f = o.fields
            got[(o.event_type, (f["xway"], f["dir"]), f["vid"], f["time"])] += 1
    return sum(pipe.cpu.values()), got


def warm_up(plan: Any, seconds: list[list[Any]]) -> None:
    """One untimed run before the first timed one, which would otherwise pay
    the process's first-use costs (lazy imports, caches, the allocator's
    growth): in one run the first point's shared plan took 1.67 CPU-s and
    its identical non-shared plan 1.37."""
    run_mode(plan, seconds)


def in_order(modes: tuple[Any, Any], rnd: int) -> tuple[Any, Any]:
    """The two modes in round `rnd`'s order: swapped every other round, so
    neither always runs on the other's leftovers (heap, caches)."""
    return modes if rnd % 2 else (modes[1], modes[0])


Partition = tuple[int, int]  # (xway, dir): the model's PARTITION BY


def partition_windows(reports: Reports,
                      windows: list[tuple[int, int]]) -> dict[Partition, list[tuple[int, float]]]:
    """Each stream partition's critical windows (ti, tt], as the model's
    deriving queries make them: contexts hold per partition and are switched
    by that partition's own reports. The first report of a second t in a span
    [a, b) switches to critical, the first one outside every span switches
    back; a switch derived from the reports of second t holds from the next
    transaction on (docs/language.md: windows are half-open (ti, tt]). So a
    partition with no report at a or at b opens or closes later than the span
    (its next report's second); one that never reports in a span never opens
    it; tt is infinite when the input ends inside a window."""
    cols = reports.columns
    out: dict[Partition, list[tuple[int, float]]] = {}
    keys = np.stack([cols["xway"], cols["dir"]], axis=1)
    for xway, dir_ in np.unique(keys, axis=0).tolist():
        mine = (cols["xway"] == xway) & (cols["dir"] == dir_)
        held: list[tuple[int, float]] = []
        opened: int | None = None
        for t in np.unique(cols["time"][mine]).tolist():
            inside = any(a <= t < b for a, b in windows)
            if opened is None and inside:
                opened = t
            elif opened is not None and not inside:
                held.append((opened, t))
                opened = None
        if opened is not None:
            held.append((opened, float("inf")))
        out[(xway, dir_)] = held
    return out


def check(ca: Counter[tuple], ci: Counter[tuple],
          held: dict[Partition, list[tuple[int, float]]]) -> str:
    """'' when the modes agree, else what differs. `held`: each partition's
    windows (ti, tt] (`partition_windows`). CA's outputs must all be CI's and
    inside their partition's windows; CI may have more only where a sequence
    started at or before its partition's ti (its first report suspended in
    CA) and ended inside the window: ti < t <= tt and, as WITHIN d bounds
    last.ts - first.ts < d, t - ti < d."""
    extra_ca = ca - ci
    if extra_ca:
        return f"{sum(extra_ca.values())} outputs in CA only, e.g. {next(iter(extra_ca))}"
    for name, part, _vid, t in ca:
        if not any(ti < t <= tt for ti, tt in held.get(part, [])):
            return f"CA output {name} at {t} in partition {part} is outside its windows"
    for name, part, _vid, t in ci - ca:
        within = 60 + int(name.removeprefix("NewTravelingCar"))
        if not any(ti < t <= tt and t - ti < within for ti, tt in held.get(part, [])):
            return (f"CI output {name} at {t} in partition {part} is not explained by "
                    "a window start")
    return ""


def points(quick: bool) -> list[Point]:
    if quick:
        return [Point("a", q, 1, 60, 2) for q in (0, 2)] + [Point("d", 2, 1, 60, 1)]
    base = dict(queries=10, roads=3, window_s=180, windows=2)  # the paper's defaults
    out = [Point("a", **{**base, "queries": q}) for q in (0, 5, 10, 20)]
    out += [Point("b", **{**base, "roads": r}) for r in (1, 2, 3, 5)]
    out += [Point("c", **{**base, "window_s": m * 60}) for m in (1, 3, 6, 9)]
    out += [Point("d", **{**base, "windows": w}) for w in (1, 2, 4, 6)]
    return out


def measure(reports: Reports, pts: list[Point], rounds: int, start: int, end: int,
            log: Any = print) -> list[dict[str, Any]]:
    """Per point and round: CA and CI on the same input (one point's modes
    back to back, rounds repeating the whole list: interleaved; the order of
    the modes alternates by round, after one untimed warm-up run)."""
    from caesar.language import compile_model

    inputs: dict[int, list[list[Any]]] = {}
    roads: dict[int, Reports] = {}
    rows = []
    if pts:
        pt = pts[0]
        roads[pt.roads] = reports.xways(pt.roads)
        inputs[pt.roads] = input_records(roads[pt.roads])
        warm_up(compile_model(model_text(pt.queries, spans(pt.windows, pt.window_s, start, end))),
                inputs[pt.roads])
    for rnd in range(1, rounds + 1):
        for pt in pts:
            if pt.roads not in inputs:
                roads[pt.roads] = reports.xways(pt.roads)
                inputs[pt.roads] = input_records(roads[pt.roads])
            seconds = inputs[pt.roads]
            windows = spans(pt.windows, pt.window_s, start, end)
            held = partition_windows(roads[pt.roads], windows)
            text = model_text(pt.queries, windows)
            cpu, got = {}, {}
            for mode in in_order(("CA", "CI"), rnd):
                plan = compile_model(text, context_aware=mode == "CA")
                cpu[mode], got[mode] = run_mode(plan, seconds)
            n = sum(len(s) for s in seconds)
            covered = sum(b - a for a, b in windows) / (end - start)
            problem = check(got["CA"], got["CI"], held)
            row = {"round": rnd, "figure": pt.figure, "label": pt.label,
                   "queries": pt.queries, "roads": pt.roads, "window_s": pt.window_s,
                   "windows": pt.windows, "reports": n,
                   "critical_share": round(covered, 3),
                   "suspendable_share": round(1 - covered, 3),
                   "ca_cpu_s": round(cpu["CA"], 3), "ci_cpu_s": round(cpu["CI"], 3),
                   "ci_over_ca": round(cpu["CI"] / cpu["CA"], 2) if cpu["CA"] else 0.0,
                   "ca_outputs": sum(got["CA"].values()), "ci_outputs": sum(got["CI"].values()),
                   "agree": not problem}
            rows.append(row)
            log(f"round {rnd} fig 12({pt.figure}) {pt.label:>10}: {n:,} reports, "
                f"CA {cpu['CA']:.2f} s, CI {cpu['CI']:.2f} s, CI/CA {row['ci_over_ca']}, "
                f"suspendable {1 - covered:.0%}" + (f"  MISMATCH: {problem}" if problem else ""))
    return rows


def medians(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per point: median CPU per mode over the rounds, their ratio."""
    by: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault((r["figure"], r["label"]), []).append(r)
    out = []
    for group in by.values():
        ca = statistics.median(r["ca_cpu_s"] for r in group)
        ci = statistics.median(r["ci_cpu_s"] for r in group)
        out.append({**{k: group[0][k] for k in ("figure", "label", "queries", "roads",
                                                  "window_s", "windows", "reports",
                                                  "suspendable_share")},
                    "ca_cpu_s": round(ca, 3), "ci_cpu_s": round(ci, 3),
                    "ci_over_ca": round(ci / ca, 2) if ca else 0.0,
                    "agree": all(r["agree"] for r in group)})
    return out


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def plot(path: Path, summary: list[dict[str, Any]], title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figs = [f for f in "abcd" if any(r["figure"] == f for r in summary)]
    fig, axes = plt.subplots(1, len(figs), figsize=(4.2 * len(figs), 3.8), squeeze=False)
    names = {"a": "queries per window", "b": "roads", "c": "window length",
             "d": "context windows"}
    for ax, f in zip(axes[0], figs, strict=True):
        rows = [r for r in summary if r["figure"] == f]
        x = np.arange(len(rows))
        ax.bar(x - 0.2, [r["ca_cpu_s"] for r in rows], 0.4, label="CA")
        ax.bar(x + 0.2, [r["ci_cpu_s"] for r in rows], 0.4, label="CI")
        for i, r in enumerate(rows):
            ax.text(i, max(r["ca_cpu_s"], r["ci_cpu_s"]), f"{r['ci_over_ca']}x\n"
                    f"{r['suspendable_share']:.0%}", ha="center", va="bottom", fontsize=7)
        ax.set_xticks(x, [r["label"] for r in rows], fontsize=8)
        ax.set_title(f"12({f}) {names[f]}", fontsize=9)
        ax.set_ylabel("CPU s")
        ax.margins(y=0.25)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(title + "  (labels: CI/CA, share of the stream where the queries are "
                 "suspendable)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def thinned(reports: Reports, thin: int) -> Reports:
    keep = reports.columns["vid"] % thin == 0
    return Reports({k: v[keep] for k, v in reports.columns.items()})


def figure14_model(windows: int, window_s: int, step_s: int, queries: int) -> str:
    spans_ = [(k * step_s, k * step_s + window_s) for k in range(windows)]
    events = "\n".join(f"EVENT NewTravelingCar{i}(vid INT, time INT, xway INT, dir INT, seg INT)"
                       for i in range(queries))
    travel = "".join(
        f"  DERIVE NewTravelingCar{i}(b.vid, b.time, b.xway, b.dir, b.seg)\n"
        "    PATTERN SEQ(PositionReport a, PositionReport b)\n"
        f"    WHERE [vid] AND b.seg != a.seg\n    WITHIN {60 + i} SECONDS\n"
        for i in range(queries))

    def initiate(k: int) -> str:
        a, b = spans_[k]
        return (f"  INITIATE CONTEXT w{k}\n    PATTERN PositionReport p\n"
                f"    WHERE p.time >= {a} AND p.time < {b}\n")

    parts = [f"""MODEL figure14
TIME UNIT SECONDS
PARTITION BY xway, dir
STRATEGY skip_till_next_match

EVENT PositionReport(time INT, vid INT, spd INT, xway INT, lane INT, dir INT, seg INT, pos INT)
  TIMESTAMP time
{events}

DEFAULT CONTEXT normal {{
{initiate(0)}}}
"""]
    for k, (_, b) in enumerate(spans_):
        nxt = initiate(k + 1) if k + 1 < windows else ""
        parts.append(f"CONTEXT w{k} {{\n{travel}{nxt}  TERMINATE CONTEXT w{k}\n"
                     f"    PATTERN PositionReport p\n    WHERE p.time >= {b}\n}}\n")
    return "\n".join(parts)


@dataclass(frozen=True)
class Point14:
    figure: str  # "a", "b", "c"
    windows: int
    window_s: int
    step_s: int
    queries: int

    @property
    def overlapping(self) -> int:
        if self.step_s == 0:
            return self.windows
        return min(self.windows, -(-self.window_s // self.step_s))

    @property
    def span_s(self) -> int:
        """Seconds from the first window's start to the last one's end."""
        return (self.windows - 1) * self.step_s + self.window_s

    @property
    def label(self) -> str:
        if self.figure == "a":
            return f"{self.overlapping} overlap"
        if self.figure == "b":
            return f"{(self.window_s - self.step_s) // 60} min"
        return f"{self.queries} queries"


def points14(quick: bool) -> list[Point14]:
    if quick:
        return [Point14("a", 3, 60, 20, 2)]
    out = [Point14("a", m, 900, 20, 4) for m in (1, 5, 15, 30, 45)]
    # (b): the paper's 30 windows of 15 minutes, 4 queries, overlapping by
    # 10-15 minutes (each point on its own span of input)
    out += [Point14("b", 30, 900, 900 - 60 * overlap, 4) for overlap in (10, 12, 14, 15)]
    # (c): 30 windows, at most 3 at once as in the paper, scaled to the 30 minutes
    # of input (the paper's 15-minute windows every 5 minutes need 2.7 hours).
    return out + [Point14("c", 30, 180, 60, q) for q in (1, 4, 10)]


def measure14(reports: Reports, pts: list[Point14], rounds: int,
              log: Any = print, long_input: Reports | None = None) -> list[dict[str, Any]]:
    """`reports` feeds the (a) and (c) points; `long_input` (default: `reports`)
    the (b) points, each cut to its windows' span."""
    from caesar.language import compile_phases
    from caesar.language.optimizer import RULES

    inputs: dict[int | None, list[list[Any]]] = {None: input_records(reports)}
    for pt in pts:
        if pt.figure == "b" and pt.span_s not in inputs:
            inputs[pt.span_s] = input_records((long_input or reports).window(0, pt.span_s))
    unshared = tuple(r for r in RULES if r[0] != "shared_subplans")
    rows = []
    if pts:
        pt = pts[0]
        warm_up(compile_phases(figure14_model(pt.windows, pt.window_s, pt.step_s, pt.queries),
                               rules=RULES).execution, inputs[None])
    for rnd in range(1, rounds + 1):
        for pt in pts:
            seconds = inputs[pt.span_s if pt.figure == "b" else None]
            n = sum(len(x) for x in seconds)
            text = figure14_model(pt.windows, pt.window_s, pt.step_s, pt.queries)
            cpu, got, stages = {}, {}, {}
            for mode, rules in in_order((("shared", RULES), ("non-shared", unshared)), rnd):
                plan = compile_phases(text, rules=rules).execution
                stages[mode] = len(plan.matcher_stages)
                cpu[mode], got[mode] = run_mode(plan, seconds)
            agree = set(got["shared"]) == set(got["non-shared"])
            row = {"round": rnd, "figure": pt.figure, "label": pt.label,
                   "windows": pt.windows, "window_s": pt.window_s, "step_s": pt.step_s,
                   "max_overlapping": pt.overlapping, "queries": pt.queries, "reports": n,
                   "shared_stages": stages["shared"], "non_shared_stages": stages["non-shared"],
                   "shared_cpu_s": round(cpu["shared"], 3),
                   "non_shared_cpu_s": round(cpu["non-shared"], 3),
                   "non_shared_over_shared": round(cpu["non-shared"] / cpu["shared"], 2)
                   if cpu["shared"] else 0.0,
                   "distinct_outputs": len(got["shared"]), "agree": agree}
            rows.append(row)
            log(f"round {rnd} fig 14({pt.figure}) {pt.label:>11}: {pt.windows} windows, "
                f"stages {stages['shared']} / {stages['non-shared']}, shared "
                f"{cpu['shared']:.2f} s, non-shared {cpu['non-shared']:.2f} s, ratio "
                f"{row['non_shared_over_shared']}" + ("" if agree else "  MISMATCH"))
    return rows


def medians14(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault((r["figure"], r["label"]), []).append(r)
    out = []
    for group in by.values():
        sh = statistics.median(r["shared_cpu_s"] for r in group)
        ns = statistics.median(r["non_shared_cpu_s"] for r in group)
        keep = ("figure", "label", "windows", "window_s", "step_s", "max_overlapping",
                "queries", "reports", "shared_stages", "non_shared_stages")
        out.append({**{k: group[0][k] for k in keep}, "shared_cpu_s": round(sh, 3),
                    "non_shared_cpu_s": round(ns, 3),
                    "non_shared_over_shared": round(ns / sh, 2) if sh else 0.0,
                    "agree": all(r["agree"] for r in group)})
    return out


def plot14(path: Path, summary: list[dict[str, Any]], title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figs = [f for f in "abc" if any(r["figure"] == f for r in summary)]
    fig, axes = plt.subplots(1, len(figs), figsize=(5 * len(figs), 3.8), squeeze=False)
    names = {"a": "max. overlapping windows (15 min, step 20 s)",
             "b": "overlap length (30 windows of 15 min)",
             "c": "queries per window (30 windows, 3 at once)"}
    for ax, f in zip(axes[0], figs, strict=True):
        rows = [r for r in summary if r["figure"] == f]
        x = np.arange(len(rows))
        ax.bar(x - 0.2, [r["shared_cpu_s"] for r in rows], 0.4, label="shared")
        ax.bar(x + 0.2, [r["non_shared_cpu_s"] for r in rows], 0.4, label="non-shared")
        for i, r in enumerate(rows):
            ax.text(i, max(r["shared_cpu_s"], r["non_shared_cpu_s"]),
                    f"{r['non_shared_over_shared']}x", ha="center", va="bottom", fontsize=8)
        ax.set_xticks(x, [r["label"] for r in rows], fontsize=8)
        ax.set_title(f"14({f}) {names[f]}", fontsize=9)
        ax.set_ylabel("CPU s")
        ax.margins(y=0.2)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(title + "  (labels: non-shared / shared)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--figure", choices=("12", "14", "all"), default="all")
    ap.add_argument("--data", default=None, help="standard data file (default: as standard.py)")
    ap.add_argument("--minutes", type=int, default=30, help="simulated minutes from the start")
    ap.add_argument("--thin", type=int, default=20, help="keep cars with vid %% thin == 0")
    ap.add_argument("--thin14", type=int, default=50, help="--thin for Figure 14 (1 road)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    ap.add_argument("--default-point", action="store_true",
                    help="Figure 12: only the paper's default point (10 queries, 3 roads, "
                         "2 windows of 3 minutes), e.g. with --minutes 180 as in the paper")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--label", default=None,
                    help="this run's name, in the summaries' `run` column (default: "
                         "'figures' and the start time); report.py passes its own")
    return ap


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    from caesar.services.common.collector import tune_collector

    tune_collector()  # as the services do (throughput.py too)
    minutes, thin, thin14 = (6, 50, 50) if args.quick else (args.minutes, args.thin, args.thin14)
    rounds = 1 if args.quick else args.rounds
    end = 60 * minutes
    full = load(args.data)
    data = full.window(0, end)
    tag = "-quick" if args.quick else ""
    run = args.label or time.strftime("figures %Y-%m-%d %H:%M")
    ok = True
    if args.figure in ("12", "all"):
        pts12, tag12 = points(args.quick), tag
        if args.default_point:
            pts12 = [Point("a", queries=10, roads=3, window_s=180, windows=2)]
            tag12 += f"-default-{minutes}min"
        ok &= figure12(thinned(data, thin), minutes, thin, end, rounds, args.out, tag12, pts12,
                       run)
    if args.figure in ("14", "all"):
        pts = points14(args.quick)
        longest = max(p.span_s for p in pts if p.figure == "b") if not args.quick else 0
        long_input = thinned(full.window(0, longest), thin14) if longest > end else None
        ok &= figure14(thinned(data, thin14), minutes, thin14, rounds, args.out, tag, pts,
                       long_input, run)
    if not ok:
        raise SystemExit("the two modes disagree (see MISMATCH above)")


def figure12(reports: Reports, minutes: int, thin: int, end: int, rounds: int, out: Path,
             tag: str, pts: list[Point], run: str = "") -> bool:
    print(f"Figure 12: standard data, seconds [0, {end}), cars with vid % {thin} == 0: "
          f"{len(reports):,} reports per road")
    t0 = time.monotonic()
    rows = measure(reports, pts, rounds, 0, end)
    summary = [{**r, "run": run} for r in medians(rows)]
    write_csv(out / f"figure12{tag}.csv", rows)
    write_csv(out / f"figure12{tag}-summary.csv", summary)
    plot(out / f"figure12{tag}.png", summary,
         f"Figure 12 on LR standard data ({minutes} min, 1/{thin} of the cars)")
    print(f"\n{'fig':<4} {'point':>11} {'reports':>9} {'suspendable':>11} {'CA s':>7} "
          f"{'CI s':>7} {'CI/CA':>6} agree")
    for r in summary:
        print(f"12({r['figure']}) {r['label']:>11} {r['reports']:>9,} "
              f"{r['suspendable_share']:>11.0%} {r['ca_cpu_s']:>7.2f} {r['ci_cpu_s']:>7.2f} "
              f"{r['ci_over_ca']:>6} {r['agree']}")
    print(f"({time.monotonic() - t0:.0f} s; {out / f'figure12{tag}.csv'})\n")
    return all(r["agree"] for r in summary)


def figure14(reports: Reports, minutes: int, thin: int, rounds: int, out: Path, tag: str,
             pts: list[Point14], long_input: Reports | None, run: str = "") -> bool:
    print(f"Figure 14: standard data, {minutes} min, 1 road, cars with vid % {thin} == 0: "
          f"{len(reports):,} reports" + (f"; (b) on up to {len(long_input):,} reports"
                                         if long_input is not None else ""))
    t0 = time.monotonic()
    rows = measure14(reports, pts, rounds, long_input=long_input)
    summary = [{**r, "run": run} for r in medians14(rows)]
    write_csv(out / f"figure14{tag}.csv", rows)
    write_csv(out / f"figure14{tag}-summary.csv", summary)
    plot14(out / f"figure14{tag}.png", summary,
           f"Figure 14 on LR standard data ({minutes} min; 14(b): each point's span, "
           f"up to 160 min; 1 road, 1/{thin} of the cars)")
    print(f"\n{'fig':<4} {'point':>11} {'windows':>7} {'stages sh/non':>13} {'shared s':>8} "
          f"{'non-sh s':>8} {'ratio':>6} agree")
    for r in summary:
        print(f"14({r['figure']}) {r['label']:>11} {r['windows']:>7} "
              f"{r['shared_stages']:>6} / {r['non_shared_stages']:<4} {r['shared_cpu_s']:>8.2f} "
              f"{r['non_shared_cpu_s']:>8.2f} {r['non_shared_over_shared']:>6} {r['agree']}")
    print(f"({time.monotonic() - t0:.0f} s; {out / f'figure14{tag}.csv'})")
    return all(r["agree"] for r in summary)


if __name__ == "__main__":
    main()
