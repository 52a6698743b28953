"""TPStream benchmark: the Cython temporal engine side by side with its
baselines, in one process, on the same streams (rounds interleaved: the
machine is shared and noisy).

1. Listing 1 (src/caesar/examples/aggressive_driving/model.caesar) on car
   sensor data: events/s of the Cython engine, of the 2-phase reference (the
   paper's first straw man, pure Python, on a prefix; both engines' matches
   compared there), and of the paper's setting of section 6.2.1 (percentile
   thresholds, no duration bounds; full and simplified pattern).
2. The paper's second straw man with CAESAR's own SEQ/Kleene constructs:
   `A OVERLAPS B` as SEQ(A-only, both+, B-only) under strict contiguity on
   the Cython SEQ engine, vs the temporal engine; detections compared.
3. Figure 7(a): latency gain per relation and A:B duration ratio -- how much
   earlier than at the last situation's end (where ISEQ and a 2-phase
   matcher report) each match is reported, on the paper's random situation
   generator (10-100 s, gaps 10-50 s, 1 Hz; A's mean 55 s).
4. Figure 5(c)/7(b): events/s vs window size for the disconnected pattern
   `A BEFORE B AND B OVERLAPS C` (section 6.2.2).
5. Section 6.4.2: adaptive join order vs the fixed initial order on
   `A BEFORE B AND A BEFORE C AND B BEFORE C` while the occurrence ratio of
   A, B and C changes.

Prints tables; writes bench/tpstream/results/{results.json,*.csv,tpstream.png}.

Usage: .venv/bin/python -m bench.tpstream.run [--quick]
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from bench.tpstream.workload import (
    car_batches,
    car_columns,
    situation_batches,
    situation_columns,
)
from caesar.events.batch import EventBatch
from caesar.examples import model_path
from caesar.language import compile_model
from caesar.plans.pattern import PatternPlan
from caesar.plans.temporal import TemporalPlan
from caesar.services.matcher.engine import CythonEngine
from caesar.services.matcher.tpstream.engine import TemporalEngine
from caesar.services.matcher.tpstream.reference import TwoPhaseReference

RESULTS = Path(__file__).parent / "results"
RATIOS = (("2:1", 0.5), ("4:3", 0.75), ("1:1", 1.0), ("2:3", 1.5), ("1:2", 2.0))
RELATIONS = ("before", "meets", "overlaps", "starts", "during", "finishes", "equals")
WINDOWS = (500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000)
CAR_HEAD = """MODEL bench
TIME UNIT SECONDS
PARTITION BY car_id
EVENT CarSensor(ts INT, car_id INT, speed FLOAT, accel FLOAT) FROM TOPIC "cs"
"""
SIT_HEAD = """MODEL bench
TIME UNIT SECONDS
PARTITION BY p
EVENT E(ts INT, p INT, s0 INT, s1 INT, s2 INT) FROM TOPIC "e"
"""


def temporal_plan(text: str) -> TemporalPlan:
    plan = compile_model(text)
    return next(s.plan for s in plan.matcher_stages if isinstance(s.plan, TemporalPlan))


def pattern_plan(text: str) -> PatternPlan:
    plan = compile_model(text)
    return next(s.plan for s in plan.matcher_stages if isinstance(s.plan, PatternPlan))


CPU: dict[str, list[float]] = {}  # engine label -> events per CPU second, per run


def timed(engine: Any, batches: list[EventBatch], advance: bool = True,
          label: str | None = None, keep: bool = True) -> tuple[float, list]:
    """Events/s (wall clock) of feeding `batches` to a fresh engine; with a
    label, also events per second of this process's CPU time (the machine is
    shared: CPU time is what "on one core" means). keep=False: count the
    matches (a list of None) instead of holding them."""
    out: list = []
    n = sum(len(b) for b in batches)
    c0 = time.process_time()
    t0 = time.perf_counter()
    for b in batches:
        got = engine.process(b)
        if advance:
            got += engine.advance(int(max(c.ts[-1] for c in b.by_type.values())) + 1)
        out += got if keep else [None] * len(got)
    if hasattr(engine, "finish"):
        out += engine.finish()
    wall = time.perf_counter() - t0
    if label is not None:
        CPU.setdefault(label, []).append(n / max(time.process_time() - c0, 1e-9))
    return n / wall, out


def interleaved(makers: dict[str, Any], batches: dict[str, list[EventBatch]], rounds: int,
                tag: str = "", keep: bool = True) -> dict[str, tuple[float, list]]:
    """Median events/s per engine over `rounds` alternating runs (fresh engines);
    the CPU-time rates go to CPU[tag + name]."""
    rates: dict[str, list[float]] = {k: [] for k in makers}
    outs: dict[str, list] = {}
    for _ in range(rounds):
        for name, make in makers.items():
            rate, out = timed(make(), batches[name], label=tag + name, keep=keep)
            rates[name].append(rate)
            outs[name] = out
    return {k: (statistics.median(v), outs[k]) for k, v in rates.items()}


def cpu(label: str) -> float:
    return statistics.median(CPU[label])


def key(d: Any) -> tuple:
    return (d.partition, d.end_ts, tuple(sorted(
        (k, round(v, 6) if isinstance(v, float) else v) for k, v in d.fields.items())))


# ---------------------------------------------------------------- 1. Listing 1
def listing1(quick: bool) -> dict:
    plan = temporal_plan(model_path("aggressive_driving").read_text())
    cars, secs = (500, 300) if quick else (2_000, 600)
    cols = car_columns(cars, secs)
    full = car_batches(cols, 20_000)
    prefix_cols = car_columns(100 if quick else 200, 300, seed=5)
    prefix = car_batches(prefix_cols, 5_000)
    res = interleaved({"cython": lambda: TemporalEngine([plan]),
                       "reference": lambda: _Ref(plan)},
                      {"cython": full, "reference": prefix}, rounds=3, tag="l1.")
    cy_rate, cy_out = res["cython"]
    ref_rate, _ = res["reference"]
    # same answers on the prefix
    _, cy_prefix = timed(TemporalEngine([plan]), prefix)
    ref = TwoPhaseReference(plan)
    for b in prefix:
        ref.process(b)
    agree = Counter(key(d) for d in cy_prefix) == Counter(key(d) for d in ref.matches())
    # the paper's setting (6.2.1): percentile thresholds, no duration bounds
    speed99 = float(np.percentile(cols["speed"], 99))
    acc90 = float(np.percentile(cols["accel"][cols["accel"] > 0], 90))
    dec90 = float(np.percentile(-cols["accel"][cols["accel"] < 0], 90))
    paper = {}
    for name, pattern in (
            ("full", "A MEETS B; A OVERLAPS B; A STARTS B; A DURING B AND C DURING B; "
                     "B FINISHED BY C; B OVERLAPS C; B MEETS C AND A BEFORE C"),
            ("simplified", "A MEETS B; A OVERLAPS B AND B MEETS C; B OVERLAPS C "
                           "AND A BEFORE C")):
        q = temporal_plan(CAR_HEAD + f"""
DERIVE AggressiveDriver(first(B.car_id) AS id, avg(B.speed) AS avg_speed)
  FROM CarSensor CS
  DEFINE A AS CS.accel > {acc90:.3f}, B AS CS.speed > {speed99:.3f}, C AS CS.accel < {-dec90:.3f}
  PATTERN {pattern}
  WITHIN 5 MINUTES""")
        rate, out = interleaved({"c": lambda q=q: TemporalEngine([q])}, {"c": full}, 3,
                                tag=f"paper.{name}.")["c"]
        paper[name] = {"events_per_s": rate, "cpu_events_per_s": cpu(f"paper.{name}.c"),
                       "matches": len(out)}
    row = {"events": sum(len(b) for b in full), "cars": cars, "cython_eps": cy_rate,
           "cython_cpu_eps": cpu("l1.cython"), "reference_cpu_eps": cpu("l1.reference"),
           "cython_matches": len(cy_out), "reference_events": sum(len(b) for b in prefix),
           "reference_eps": ref_rate, "ratio": cy_rate / ref_rate, "agree_on_prefix": agree,
           "paper_setting": paper,
           "thresholds": {"speed_p99": speed99, "accel_p90": acc90, "decel_p90": -dec90}}
    print(f"\n1. Listing 1, {row['events']:,} readings of {cars:,} cars "
          f"({len(cy_out):,} matches)")
    print(f"  Cython temporal engine   {cy_rate:>12,.0f} events/s "
          f"({row['cython_cpu_eps']:,.0f} per CPU second)")
    print(f"  2-phase reference        {ref_rate:>12,.0f} events/s  (on {row['reference_events']:,}"
          f" events; same matches there: {agree})  -> {row['ratio']:,.0f}x")
    for name, r in paper.items():
        print(f"  paper's setting, {name:10s} {r['events_per_s']:>10,.0f} events/s "
              f"({r['matches']:,} matches; no duration bounds, percentile thresholds)")
    return row


class _Ref:
    """The 2-phase reference as an engine: phase 1 and 2 run at the end (timed)."""

    def __init__(self, plan: TemporalPlan) -> None:
        self.ref = TwoPhaseReference(plan)

    def process(self, batch: EventBatch) -> list:
        self.ref.process(batch)
        return []

    def advance(self, watermark: int) -> list:
        return []

    def finish(self) -> list:
        return self.ref.matches()


# ---------------------------------------------------------------- 2. SEQ / Kleene
def seq_vs_temporal(quick: bool) -> dict:
    cars, secs = (500, 300) if quick else (2_000, 600)
    batches = car_batches(car_columns(cars, secs, seed=9), 20_000)
    tp = temporal_plan(CAR_HEAD + """
DERIVE Overlap(first(A.car_id) AS car)
  DEFINE A AS CarSensor.accel > 8, B AS CarSensor.speed > 70
  PATTERN A OVERLAPS B
  WITHIN 5 MINUTES""")
    seq = pattern_plan(CAR_HEAD + """
DERIVE Overlap(c.car_id AS car)
  PATTERN SEQ(CarSensor a, CarSensor+ ab FILTER(ab.accel > 8 AND ab.speed > 70), CarSensor c)
  WHERE a.accel > 8 AND NOT a.speed > 70 AND c.speed > 70 AND NOT c.accel > 8
  WITHIN 5 MINUTES
  STRATEGY strict_contiguity""")
    res = interleaved({"temporal": lambda: TemporalEngine([tp]),
                       "seq": lambda: CythonEngine([seq])},
                      {"temporal": batches, "seq": batches}, rounds=3, tag="seq.")
    t_rate, t_out = res["temporal"]
    s_rate, s_out = res["seq"]
    got_t = {(d.partition, d.end_ts) for d in t_out}
    got_s = {(d.partition, d.end_ts) for d in s_out}
    row = {"events": sum(len(b) for b in batches), "temporal_eps": t_rate, "seq_eps": s_rate,
           "temporal_cpu_eps": cpu("seq.temporal"), "seq_cpu_eps": cpu("seq.seq"),
           "ratio": t_rate / s_rate, "temporal_matches": len(t_out), "seq_matches": len(s_out),
           "same_detections": len(got_t & got_s), "only_temporal": len(got_t - got_s),
           "only_seq": len(got_s - got_t)}
    print(f"\n2. A OVERLAPS B: temporal engine vs SEQ(A-only, both+, B-only) strict contiguity "
          f"on the Cython SEQ engine, {row['events']:,} readings")
    print(f"  temporal engine  {t_rate:>12,.0f} events/s  {len(t_out):,} matches")
    print(f"  SEQ/Kleene       {s_rate:>12,.0f} events/s  {len(s_out):,} matches  "
          f"-> temporal {row['ratio']:.1f}x")
    print(f"  same (car, detection time): {row['same_detections']:,}; only temporal "
          f"{row['only_temporal']}, only SEQ {row['only_seq']} (WITHIN counts from A's start "
          "in TPStream, from the last A-only reading in SEQ)")
    return row


# ---------------------------------------------------------------- 3. Figure 7(a)
def latency_gain(quick: bool) -> list[dict]:
    secs = 60_000 if quick else 400_000
    rows = []
    print("\n3. Figure 7(a): latency gain (s) per relation and A:B duration ratio: "
          "last situation end - detection time, mean over matches")
    print("  relation      " + "".join(f"{r:>9}" for r, _ in RATIOS) + "   paper")
    for rel in RELATIONS:
        line = f"  {rel:12s}"
        for label, k in RATIOS:
            cols = situation_columns(2, secs, scale=(1.0, k), seed=11)
            batches = situation_batches(cols)
            plan = temporal_plan(SIT_HEAD + f"""
DERIVE M(count(A) AS n)
  DEFINE A AS E.s0 = 1, B AS E.s1 = 1
  PATTERN A {rel.upper()} B
  WITHIN 1000""")
            _, out = timed(TemporalEngine([plan]), batches)
            a_end, b_end = _runs(cols["s0"], cols["ts"]), _runs(cols["s1"], cols["ts"])
            gains = []
            for d in out:
                ends = [a_end.get(d.fields["A_ts"]), b_end.get(d.fields["B_ts"])]
                if None in ends:
                    continue  # still running at the end of the stream
                gains.append(max(ends) - d.end_ts)
            b_dur = [te - ts for ts, te in b_end.items()]
            rows.append({"relation": rel, "ratio": label, "matches": len(gains),
                         "gain_s": float(np.mean(gains)) if gains else 0.0,
                         "b_duration_s": float(np.mean(b_dur)),
                         "paper": _paper_gain(rel, label, float(np.mean(b_dur)))})
            line += f"{rows[-1]['gain_s']:9.1f}"
        line += "   " + _paper_text(rel)
        print(line)
    line = "  B duration  " + "".join(
        f"{next(r['b_duration_s'] for r in rows if r['ratio'] == lab):9.1f}" for lab, _ in RATIOS)
    print(line)
    return rows


def _runs(flag: np.ndarray, ts: np.ndarray) -> dict[int, int]:
    """Situation start -> end of a 1 Hz 0/1 column (one partition): the
    maximal runs of 1s, [first 1, first 0 after them); runs still going at
    the end are left out."""
    edges = np.diff(np.concatenate(([0], flag.astype(np.int8), [0])))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)
    return {int(ts[a]): int(ts[b]) for a, b in zip(starts, ends, strict=True) if b < len(ts)}


def _paper_gain(rel: str, ratio: str, b_dur: float) -> float | None:
    """What the paper's section 6.3.1 states: before/meets gain B's mean
    duration; overlaps at 1:1 about 35 s (6.3.2); equals/finishes none."""
    if rel in ("before", "meets"):
        return b_dur
    if rel == "overlaps" and ratio == "1:1":
        return 35.0
    if rel in ("equals", "finishes"):
        return 0.0
    return None


def _paper_text(rel: str) -> str:
    return {"before": "= mean B duration", "meets": "= mean B duration",
            "overlaps": "~35 at 1:1 (6.3.2)", "during": "worst case B.duration/2",
            "starts": "(figure only)", "finishes": "none (A.te = B.te)",
            "equals": "none (A.te = B.te)"}[rel]


# ---------------------------------------------------------------- 4. window sweep
def window_sweep(quick: bool) -> list[dict]:
    parts, secs = (5, 40_000) if quick else (10, 100_000)
    cols = situation_columns(3, secs, partitions=parts, seed=21)
    batches = situation_batches(cols, 20_000)
    rows = []
    print(f"\n4. events/s vs window, A BEFORE B AND B OVERLAPS C "
          f"({sum(len(b) for b in batches):,} events, {parts} partitions)")
    for w in WINDOWS if not quick else WINDOWS[:5]:
        plan = temporal_plan(SIT_HEAD + f"""
DERIVE M(count(A) AS n)
  DEFINE A AS E.s0 = 1, B AS E.s1 = 1, C AS E.s2 = 1
  PATTERN A BEFORE B AND B OVERLAPS C
  WITHIN {w}""")
        rate, out = interleaved({"c": lambda plan=plan: TemporalEngine([plan])},
                                {"c": batches}, 2, tag=f"w{w}.", keep=False)["c"]
        rows.append({"window": w, "events_per_s": rate, "cpu_events_per_s": cpu(f"w{w}.c"),
                     "matches": len(out)})
        print(f"  WITHIN {w:>7,}  {rate:>12,.0f} events/s  {len(out):>10,} matches")
    return rows


# ---------------------------------------------------------------- 5. adaptivity
def adaptivity(quick: bool) -> dict:
    """Q3 = A BEFORE B AND A BEFORE C AND B BEFORE C (section 6.4.2) while the
    occurrence ratio A:B:C goes 1:1:1 -> 1:30:30 -> 30:1:30 (the "1" streams
    get 30x longer gaps). Events/s and, deterministic, the constraint checks
    the joins made per event: adaptive re-planning vs the initial order."""
    secs = 30_000 if quick else 120_000
    phases = [("1:1:1", (1.0, 1.0, 1.0)), ("1:30:30", (1 / 30, 1.0, 1.0)),
              ("30:1:30", (1.0, 1 / 30, 1.0))]
    plan = temporal_plan(SIT_HEAD + """
DERIVE M(count(A) AS n)
  DEFINE A AS E.s0 = 1, B AS E.s1 = 1, C AS E.s2 = 1
  PATTERN A BEFORE B AND A BEFORE C AND B BEFORE C
  WITHIN 1000""")
    streams = []
    offset = 0
    for i, (_label, rates) in enumerate(phases):
        cols = situation_columns(3, secs, partitions=4, seed=31 + i, rates=rates)
        cols["ts"] = cols["ts"] + offset
        offset = int(cols["ts"][-1]) + 2000
        streams.append(situation_batches(cols, 20_000))
    row: dict = {}
    for mode in ("adaptive", "fixed"):
        rates_: list[list[float]] = [[] for _ in phases]
        checks: list[float] = [0.0] * len(phases)
        matches = [0] * len(phases)
        replans = 0
        for _ in range(3):
            engine = TemporalEngine([plan], adaptive=mode == "adaptive")
            p = next(iter(engine.plans.values()))
            for i, batches in enumerate(streams):
                before = int(p.runner.checked_a.sum())
                rate, out = timed(engine, batches)
                rates_[i].append(rate)
                checks[i] = (int(p.runner.checked_a.sum()) - before) / sum(len(b) for b in batches)
                matches[i] = len(out)
            replans = p.adaptive.replans if p.adaptive is not None else 0
        row[mode] = {"phases": {label: {"events_per_s": statistics.median(r),
                                        "checks_per_event": c, "matches": m}
                                for (label, _), r, c, m in zip(phases, rates_, checks, matches,
                                                              strict=True)},
                     "replans": replans}
    print("\n5. adaptive join order (section 5.4.1), Q3 = A BEFORE B AND A BEFORE C AND "
          "B BEFORE C, WITHIN 1000; per phase (A:B:C occurrence): events/s, checks/event")
    for mode in ("adaptive", "fixed"):
        cells = "  ".join(f"{label} {row[mode]['phases'][label]['events_per_s']:>10,.0f} "
                          f"{row[mode]['phases'][label]['checks_per_event']:6.3f}"
                          for label, _ in phases)
        print(f"  {mode:9s} {cells}   (re-plans: {row[mode]['replans']})")
    return row


# ---------------------------------------------------------------- output
def write(results: dict) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "results.json").write_text(json.dumps(results, indent=2))
    with (RESULTS / "latency_gain.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, ["relation", "ratio", "matches", "gain_s", "b_duration_s", "paper"])
        w.writeheader()
        w.writerows(results["latency_gain"])
    with (RESULTS / "window.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, ["window", "events_per_s", "cpu_events_per_s", "matches"])
        w.writeheader()
        w.writerows(results["window"])
    with (RESULTS / "throughput.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["engine", "workload", "events_per_s", "cpu_events_per_s"])
        l1 = results["listing1"]
        w.writerow(["cython temporal", "listing 1", round(l1["cython_eps"]),
                    round(l1["cython_cpu_eps"])])
        w.writerow(["2-phase reference", "listing 1", round(l1["reference_eps"]),
                    round(l1["reference_cpu_eps"])])
        for name, r in l1["paper_setting"].items():
            w.writerow(["cython temporal", f"listing 1, paper setting, {name}",
                        round(r["events_per_s"]), round(r["cpu_events_per_s"])])
        sv = results["seq"]
        w.writerow(["cython temporal", "A OVERLAPS B", round(sv["temporal_eps"]),
                    round(sv["temporal_cpu_eps"])])
        w.writerow(["cython SEQ/Kleene", "A OVERLAPS B", round(sv["seq_eps"]),
                    round(sv["seq_cpu_eps"])])
    plot(results)


def plot(results: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    ax = axes[0]
    labels = [r for r, _ in RATIOS]
    for rel in RELATIONS:
        ys = [next(x["gain_s"] for x in results["latency_gain"]
                   if x["relation"] == rel and x["ratio"] == lab) for lab in labels]
        ax.plot(labels, ys, marker="o", label=rel)
    bd = [next(x["b_duration_s"] for x in results["latency_gain"] if x["ratio"] == lab)
          for lab in labels]
    ax.plot(labels, bd, "k--", label="B duration")
    ax.set_title("(a) latency gain per relation (Fig. 7a)")
    ax.set_xlabel("situation duration ratio (A:B)")
    ax.set_ylabel("latency improvement (s)")
    ax.legend(fontsize=7)
    ax = axes[1]
    ws = [r["window"] for r in results["window"]]
    ax.plot(ws, [r["events_per_s"] / 1e6 for r in results["window"]], marker="o")
    ax.set_xscale("log")
    ax.set_title("(b) A BEFORE B AND B OVERLAPS C")
    ax.set_xlabel("WITHIN (s)")
    ax.set_ylabel("million events/s")
    ax = axes[2]
    l1, sv = results["listing1"], results["seq"]
    names = ["Listing 1\nCython", "Listing 1\n2-phase ref.", "A OVERLAPS B\ntemporal",
             "A OVERLAPS B\nSEQ/Kleene"]
    vals = [l1["cython_eps"], l1["reference_eps"], sv["temporal_eps"], sv["seq_eps"]]
    ax.bar(names, [v / 1e6 for v in vals], color=["C0", "C7", "C0", "C1"])
    ax.set_yscale("log")
    ax.set_ylabel("million events/s (log)")
    ax.set_title("(c) throughput, same stream and process")
    for i, v in enumerate(vals):
        ax.text(i, v / 1e6, f"{v / 1e6:.2f}M" if v >= 1e5 else f"{v / 1e3:.0f}K",
                ha="center", va="bottom", fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / "tpstream.png", dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small runs (smoke test)")
    args = ap.parse_args()
    results = {"listing1": listing1(args.quick), "seq": seq_vs_temporal(args.quick),
               "latency_gain": latency_gain(args.quick), "window": window_sweep(args.quick),
               "adaptivity": adaptivity(args.quick), "quick": args.quick}
    if not args.quick:
        write(results)
        print(f"\nwrote {RESULTS}/results.json, *.csv and tpstream.png")


if __name__ == "__main__":
    main()
