"""Issue 18's figures from one command: embedded reports per CPU-second
against the plain loop, the Kafka + Ray L-rating on the standard profile's
peak with its per-hop table, and the paper's Figures 12 and 14 (CI / CA and
non-shared / shared ratios), on the public Linear Road standard data.

    python -m bench.linear_road.report [--data L1.dat] [--quick] [--skip PART ...]

Runs, one after the other (each in its own process, as when run alone; none
of them beside another, the machine has 2 cores):

1. `throughput`: the embedded pipeline and the plain loop, interleaved, on
   the 30 peak minutes after 600 s of history (the window Kafka + Ray runs;
   3 rounds, ~7 min), each rated on the window alone: the pipeline's per-car
   state ages over a long run and costs more (session 46), so a short
   history would flatter it (until session 45: 6600-6660 after 60 s); every
   run in a process of its own (session 48: in one, a pipeline after the
   first ran on the heap the earlier one's state left);
2. `kafka_ray`: the L-rating on the 30 peak minutes (6000-7800, after 600 s
   of history and a 60 s warm-up at pace), the issue's target level 4 then 5
   until one does not hold (~45 min per level; `--xways 1 2 3 4` tries each
   from 1), with the settings that held level 4 in session 21: one actor per
   service and two matchers, commit interval 0.25 s, max commit share 0.5;
3. `figures`: Figures 12 and 14 (~13 min).

`--quick` runs each small (a 30 s throughput window, 2 minutes of the peak at
1 expressway, the figures' tiny sizes): ~15 minutes in all, for a check that
it all works, not for the figures. Each part appends its rows to its own CSV
in bench/linear_road/results (and draws its PNG); this command then writes
`report.md` and `report.json` there with the rows of this run (label
"report <time>"). Exits non-zero if any part failed or any output differed.
`--render` runs nothing and writes those two again from the last run's rows
(e.g. after a change to this file).
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import time
from pathlib import Path
from statistics import median
from typing import Any

RESULTS = Path(__file__).parent / "results"
PARTS = ("throughput", "kafka_ray", "figures")
SERVICES = ("scheduler", "deriver", "router", "matcher")


def commands(args: argparse.Namespace, label: str) -> dict[str, list[str]]:
    data = ["--data", args.data] if args.data else []
    data += ["--out", str(args.out)]
    if args.quick:
        return {
            "throughput": [*data, "--window", "6600", "6630", "--history", "30", "--rounds", "1",
                           "--models", "model_per_segment", "--label", label],
            "kafka_ray": [*data, "--xways", "1", "--window", "6600", "6720", "--history", "600",
                          "--actors", *args.actors, "--commit-interval", "0.25", "--max-commit-share", "0.5",
                          "--label", label, "--tag=-report-quick"],
            "figures": [*data, "--quick", "--label", label],
        }
    return {
        "throughput": [*data, "--window", "6000", "7800", "--history", "600", "--rounds", "3",
                       "--models", "model_per_segment", "--label", label],
        "kafka_ray": [*data, "--xways", *map(str, args.xways), "--history", "600",
                      "--warmup", "60", "--actors", *args.actors,
                      "--commit-interval", "0.25", "--max-commit-share", "0.5",
                      "--label", label],
        "figures": [*data, "--rounds", "2", "--label", label],
    }


def csv_rows(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open() as f:
        return list(csv.DictReader(f))


def rows_of(path: Path, label: str) -> list[dict[str, str]]:
    """The rows of one run (its label)."""
    return [r for r in csv_rows(path) if r.get("label") == label]


def summarize(label: str, quick: bool, status: dict[str, int], out: Path) -> dict[str, Any]:
    """What this run measured, from the rows its parts appended."""
    from bench.linear_road.kafka_ray import holds
    report: dict[str, Any] = {"label": label, "quick": quick, "exit_codes": status}
    thr = rows_of(out / "throughput_vs_plain.csv", label)
    pipe = [float(r["reports_per_cpu_s"]) for r in thr if r["config"] != "plain loop"]
    plain = [float(r["reports_per_cpu_s"]) for r in thr
             if r["config"] == "plain loop" and r.get("reports_per_cpu_s")]
    plain_all = [float(r["all_reports_per_cpu_s"]) for r in thr if r["config"] == "plain loop"]
    pipe_all = [float(r["all_reports_per_cpu_s"]) for r in thr if r["config"] != "plain loop"]
    if pipe:
        report["embedded"] = {
            # medians of the rounds, as throughput.py prints them; the window's
            # rates and ratio, then the whole input's (history + window)
            "window": thr[0]["window"], "history_s": int(thr[0]["history_s"]),
            "reports_per_cpu_s": round(median(pipe)),
            "plain_loop_reports_per_cpu_s": round(median(plain)) if plain else None,
            "ratio_to_plain": round(median(pipe) / median(plain), 3) if plain else None,
            "ratio_to_plain_whole_input": round(median(pipe_all) / median(plain_all), 3)
            if plain_all else None,
            "exact": all(r["differences_tolls"] in ("0", "") and r["differences_alerts"]
                         in ("0", "") for r in thr),
            "target": 100_000,
        }
    kr = rows_of(out / ("kafka_ray-report-quick.csv" if quick else "kafka_ray.csv"), label)
    if kr:
        levels: list[dict[str, Any]] = []
        for r in sorted(kr, key=lambda r: int(r["xways"])):
            held = holds(r)  # the bench's own verdict, on its CSV row
            levels.append({"xways": int(r["xways"]), "window": r["window"], "held": held,
                           **{k: float(r[k]) for k in ("visible_p50_s", "visible_p99_s",
                                                       "visible_max_s", "topic_max_s")},
                           "outputs": int(r["outputs"]), "expected": int(r["expected"]),
                           # per service, then SERVICE=N ("1 matcher=2")
                           "actors": " ".join(filter(None, (r.get("actors_per_service"),
                                                            r.get("actors")))),
                           # CPU per window report, by service (rows of older runs lack some)
                           "us_per_report": {s: float(r[f"{s}_us_per_report"]) for s in SERVICES
                                             if r.get(f"{s}_us_per_report")},
                           "broker_cpu_s": float(r["cpu_broker_s"]) if r.get("cpu_broker_s")
                           else None})
        rating = 0
        for lv in levels:
            if not lv["held"]:
                break
            rating = lv["xways"]
        hops_file = out / ("kafka_ray-report-quick_hops.json" if quick else "kafka_ray_hops.json")
        report["kafka_ray"] = {"l_rating": rating, "levels": levels, "target": 4,
                               "hops_ms": json.loads(hops_file.read_text())
                               if hops_file.exists() else None}
    tag = "-quick" if quick else ""
    # A figure's summary names the run that wrote it: one from another run
    # (this run's figures skipped, or failed before writing it) is shown as
    # that run's, and says so.
    for fig in ("figure12", "figure14"):
        report[fig] = csv_rows(out / f"{fig}{tag}-summary.csv")
        report[f"{fig}_run"] = report[fig][0].get("run") if report[fig] else None
    return report


def kafka_ray_lines(kr: dict[str, Any]) -> list[str]:
    """The Kafka + Ray section: levels, CPU by service, hops."""
    lines = ["## Kafka + Ray", "", f"**L-rating {kr['l_rating']}** (target {kr['target']}; "
              "latency until a read-committed consumer sees the output, bound 5 s)", "",
              "| xways | window | visible p50 s | p99 s | max s | produced max s | exact | holds |",
              "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {lv['xways']} | {lv['window']} | {lv['visible_p50_s']} | "
              f"{lv['visible_p99_s']} | {lv['visible_max_s']} | {lv['topic_max_s']} | "
              f"{lv['outputs']:,} of {lv['expected']:,} | {lv['held']} |" for lv in kr["levels"]]
    costs = [lv for lv in kr["levels"] if lv["us_per_report"]]
    if costs:
        lines += ["", "CPU per window report, by service (µs), and the broker's CPU:", "",
                  "| xways | actors | " + " | ".join(SERVICES) + " | broker CPU-s |",
                  "|---|---|" + "---|" * (len(SERVICES) + 1)]
        lines += [f"| {lv['xways']} | {lv['actors']} | "
                  + " | ".join(str(lv["us_per_report"].get(s, "")) for s in SERVICES)
                  + f" | {'' if lv['broker_cpu_s'] is None else lv['broker_cpu_s']} |"
                  for lv in costs]
    if kr["hops_ms"]:
        # the hop file holds the levels of the last kafka_ray run only
        level = max(kr["hops_ms"], key=int)
        lines += ["", f"Per hop (ms, produced time), level {level} (the last run's highest):", "",
                  "| hop | p50 | p99 | max |", "|---|---|---|---|"]
        top = kr["hops_ms"][level]
        lines += [f"| {h} | {v['p50']} | {v['p99']} | {v['max']} |" for h, v in top.items()]
    lines.append("")
    return lines


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# Linear Road report: {report['label']}", ""]
    if report["quick"]:
        lines += ["**Quick run** (small sizes: a check that it all works, not the figures).", ""]
    lines += ["Exit codes: " + ", ".join(f"{k} {v}" for k, v in report["exit_codes"].items()), ""]
    emb = report.get("embedded")
    if emb:
        lines += ["## Embedded pipeline (one core)", "",
                  f"- {emb['reports_per_cpu_s']:,.0f} reports per CPU-second in the window "
                  f"{emb['window']} after {emb['history_s']} s of history (target "
                  f"{emb['target']:,}); plain loop {emb['plain_loop_reports_per_cpu_s'] or 0:,.0f} "
                  f"in the same window; ratio {emb['ratio_to_plain']} "
                  f"({emb['ratio_to_plain_whole_input']} on the whole input); outputs exact: "
                  f"{emb['exact']}", ""]
    kr = report.get("kafka_ray")
    if kr:
        lines += kafka_ray_lines(kr)
    for fig, ratio in (("figure12", "ci_over_ca"), ("figure14", "non_shared_over_shared")):
        rows = report.get(fig) or []
        if rows:
            lines += [f"## {fig.replace('figure', 'Figure ')} ({ratio})", ""]
            run = report.get(f"{fig}_run")
            if run != report["label"]:
                code = report["exit_codes"].get("figures", "skipped")
                lines += [f"Not from this run (figures exit {code}): from "
                          + (f"the run '{run}'." if run else "an earlier, unnamed run."), ""]
            lines += ["| point | ratio | agree |", "|---|---|---|"]
            lines += [f"| {r['figure']} {r['label']} | {r[ratio]} | {r['agree']} |" for r in rows]
            lines.append("")
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="LR data file (default: $CAESAR_LR_DATA)")
    ap.add_argument("--quick", action="store_true", help="small sizes: ~15 min in all")
    ap.add_argument("--xways", type=int, nargs="+", default=[4, 5],
                    help="Kafka + Ray levels to try, in order, until one does not hold "
                         "(a level that holds is the rating: fewer expressways are less load)")
    ap.add_argument("--actors", nargs="+", default=["1", "matcher=2"],
                    help="Kafka + Ray actors: per service, then SERVICE=N (kafka_ray's --actors)")
    ap.add_argument("--skip", nargs="*", choices=PARTS, default=[])
    ap.add_argument("--render", action="store_true",
                    help="run nothing: write report.md/.json again from the last run's rows")
    ap.add_argument("--out", type=Path, default=RESULTS)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    name = "report-quick" if args.quick else "report"
    label = time.strftime("report %Y-%m-%d %H:%M")
    status: dict[str, int] = {}
    if args.render:  # the last run again, from its rows: its label and exit codes
        last = json.loads((args.out / f"{name}.json").read_text())
        label, status = last["label"], last["exit_codes"]
    for part, extra in commands(args, label).items():
        if part in args.skip or args.render:
            continue
        cmd = [sys.executable, "-m", f"bench.linear_road.{part}", *extra]
        print(f"== {part}: {' '.join(cmd[1:])}", flush=True)
        started = time.monotonic()
        status[part] = subprocess.call(cmd)
        print(f"== {part}: exit {status[part]} after {time.monotonic() - started:.0f} s",
              flush=True)
    report = summarize(label, args.quick, status, args.out)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(report, indent=1) + "\n")
    (args.out / f"{name}.md").write_text(markdown(report) + "\n")
    print(markdown(report))
    print(f"\n{args.out / name}.md, .json")
    failed = any(status.values()) or not report.get("embedded", {}).get("exact", True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
