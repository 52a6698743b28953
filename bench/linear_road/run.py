"""Linear Road benchmark: context-aware (CA) versus context-independent (CI)
execution of the same workload, and the L-rating.

    python -m bench.linear_road.run [--quick] [--out DIR]

Both modes run in this one process on the same generated reports (embedded
pipeline: scheduler -> deriver -> router -> matcher, direct wiring; the Kafka +
Ray deployment is not driven here). CI is `compile_model(..., context_aware=
False)`: every query runs all the time, its context an output filter.

Part 1 (paper Figure 12(a)): query workloads = the Linear Road model plus R
replicated context queries per critical context (bench/linear_road/workload.py:
"f" single-event filters, "s" the paper's NewTravelingCar sequences), 1
expressway; CPU time, maximal latency at real-time pace, ratios CI / CA. Both
modes must derive the same tolls and alerts (checked every run).
Part 2 (paper Figures 11(b), 12(b)): expressways 1..N; maximal latency per
mode at several replay accelerations; the L-rating at each = the largest
number of expressways whose maximal latency stays under 5 s.

Latencies come from a trace-driven virtual clock (bench/linear_road/replay.py):
batch processing times are measured, arrivals are paced at `acceleration`
times real time. "cpu" latencies use each batch's CPU time (a dedicated core);
"wall" ones its elapsed time on this machine, shared with other jobs.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

from bench.linear_road.replay import ReplayResult, Workload, make_workload, replay
from bench.linear_road.workload import model_text
from caesar.examples.linear_road.generator import GeneratorConfig
from caesar.language import compile_model

RESULTS = Path(__file__).parent / "results"
BOUND_S = 5.0
MODES = ("CA", "CI")


MODEL_OUTPUTS = ("TollNotification", "AccidentAlert")


def plans(replicas: int, kind: str):
    text = model_text(replicas, kind)
    name = f"linear_road+{kind}{replicas}.caesar"
    return {"CA": compile_model(text, name), "CI": compile_model(text, name, context_aware=False)}


def run_pair(workload: Workload, replicas: int, kind: str = "filter"
             ) -> dict[str, ReplayResult]:
    """Both modes on one workload; they must derive the same tolls and alerts
    (and, for single-event replicas, the same everything)."""
    out = {}
    for mode, plan in plans(replicas, kind).items():
        out[mode] = replay(plan, workload, keep_keys=True)
    ca, ci = out["CA"].output_keys, out["CI"].output_keys
    if kind == "sequence":
        ca = {k: n for k, n in ca.items() if k[0] in MODEL_OUTPUTS}
        ci = {k: n for k, n in ci.items() if k[0] in MODEL_OUTPUTS}
    if ca != ci:
        raise SystemExit(f"CA and CI derived different outputs ({kind} x{replicas}): "
                         f"{out['CA'].output_counts} vs {out['CI'].output_counts}")
    return out


def ratio(a: float, b: float) -> float:
    return a / b if b > 0 else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.quick:
        wl_cfg = dict(duration_s=120, scale=0.012)
        workloads, xways_list = [("filter", 0), ("filter", 4), ("sequence", 2)], [1, 2]
        lr_cfg = dict(duration_s=120, scale=0.012)
    else:
        # 600 s: congestion builds in the second half (the win depends on how
        # much of the stream the critical contexts cover, paper Fig. 12(c)).
        wl_cfg = dict(duration_s=600, scale=0.1)
        workloads = [("filter", 0), ("filter", 16), ("sequence", 4), ("sequence", 8),
                     ("sequence", 16), ("sequence", 32)]
        xways_list = [1, 2, 4, 8]
        lr_cfg = dict(duration_s=300, scale=0.1)
    accelerations = [1.0, 50.0, 100.0, 200.0, 400.0]
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    rows: list[dict] = []

    print("Part 1: query workloads, 1 expressway "
          f"({wl_cfg['duration_s']} s simulated, scale {wl_cfg['scale']} of the standard load)")
    wl = make_workload(GeneratorConfig(xways=1, seed=args.seed, **wl_cfg))
    for kind, r in workloads:
        res = run_pair(wl, r, kind)
        name = f"LR+{r}{kind[0]}" if r else "LR"
        rows.extend(row("workload", name, 1, mode, res[mode], res) for mode in MODES)
        print_rows(rows[-2:])

    print(f"\nPart 2: expressways ({lr_cfg['duration_s']} s simulated, "
          f"scale {lr_cfg['scale']} per xway), LR model, accelerations "
          f"{accelerations}")
    sweep: dict[int, dict[str, ReplayResult]] = {}
    for x in xways_list:
        w = make_workload(GeneratorConfig(xways=x, seed=args.seed, **lr_cfg))
        sweep[x] = run_pair(w, 0)
        rows.extend(row("xways", "LR", x, mode, sweep[x][mode], sweep[x]) for mode in MODES)
        print_rows(rows[-2:])

    lrows = l_ratings(sweep, accelerations)
    print("\nL-rating (largest expressways with max latency < 5 s; '>=' = bound held up to "
          "the largest size measured):")
    print(f"{'acceleration':>12} {'clock':>5} {'CA':>5} {'CI':>5}")
    for lr in lrows:
        print(f"{lr['acceleration']:>12g} {lr['clock']:>5} {lr['CA']:>5} {lr['CI']:>5}")

    write_csv(args.out / "linear_road.csv", rows)
    write_csv(args.out / "l_rating.csv", lrows)
    plot(args.out, rows, sweep, accelerations)
    print(f"\nwrote {args.out}/linear_road.csv, l_rating.csv, *.png "
          f"({time.time() - started:.0f} s; 2-core machine shared with other jobs)")


def row(kind: str, workload: str, xways: int, mode: str, res: ReplayResult,
        pair: dict[str, ReplayResult]) -> dict:
    ca, ci = pair["CA"], pair["CI"]
    return {
        "part": kind, "workload": workload, "xways": xways, "mode": mode,
        "events": res.events, "outputs": res.outputs, "skipped_stage_inputs": res.skipped_events,
        "congestion_pct": round(100 * ca.coverage.get("congestion", 0), 1),
        "accident_pct": round(100 * ca.coverage.get("accident", 0), 1),
        "cpu_s": round(res.cpu_s, 3), "wall_s": round(res.wall_s, 3),
        "max_latency_cpu_s": round(res.max_latency(1.0, "cpu"), 4),
        "max_latency_wall_s": round(res.max_latency(1.0, "wall"), 4),
        "cpu_ratio_ci_ca": round(ratio(ci.cpu_s, ca.cpu_s), 3),
        "latency_ratio_ci_ca": round(ratio(ci.max_latency(1.0, "cpu"),
                                           ca.max_latency(1.0, "cpu")), 3),
    }


def print_rows(rows: list[dict]) -> None:
    if not getattr(print_rows, "header", False):
        print(f"{'workload':>9} {'xways':>5} {'mode':>4} {'events':>8} {'CPU s':>7} "
              f"{'max lat cpu':>11} {'max lat wall':>12} {'CPU CI/CA':>9} {'lat CI/CA':>9} "
              f"{'cong%':>5} {'acc%':>5}")
        print_rows.header = True  # type: ignore[attr-defined]
    for r in rows:
        print(f"{r['workload']:>9} {r['xways']:>5} {r['mode']:>4} {r['events']:>8} "
              f"{r['cpu_s']:>7.2f} {r['max_latency_cpu_s']:>11.3f} "
              f"{r['max_latency_wall_s']:>12.3f} {r['cpu_ratio_ci_ca']:>9.2f} "
              f"{r['latency_ratio_ci_ca']:>9.2f} {r['congestion_pct']:>5.1f} {r['accident_pct']:>5.1f}")


def l_ratings(sweep: dict[int, dict[str, ReplayResult]], accelerations: list[float]
              ) -> list[dict]:
    out = []
    largest = max(sweep)
    for acc in accelerations:
        for clock in ("cpu", "wall"):
            entry: dict = {"acceleration": acc, "clock": clock}
            for mode in MODES:
                ok = [x for x in sorted(sweep) if sweep[x][mode].max_latency(acc, clock) < BOUND_S]
                # L = the run of sizes from 1 that all held the bound.
                best = 0
                for x in sorted(sweep):
                    if x not in ok:
                        break
                    best = x
                entry[mode] = f">={best}" if best == largest else str(best)
                entry[f"{mode}_max_latency_by_xways"] = " ".join(
                    f"{x}:{sweep[x][mode].max_latency(acc, clock):.2f}" for x in sorted(sweep))
            out.append(entry)
    return out


def write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def plot(out: Path, rows: list[dict], sweep: dict[int, dict[str, ReplayResult]],
         accelerations: list[float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wl = [r for r in rows if r["part"] == "workload"]
    names = list(dict.fromkeys(r["workload"] for r in wl))
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for i, mode in enumerate(MODES):
        vals = [next(r for r in wl if r["workload"] == n and r["mode"] == mode) for n in names]
        xs = [j + (i - 0.5) * 0.38 for j in range(len(names))]
        axes[0].bar(xs, [v["cpu_s"] for v in vals], 0.38, label=mode)
        axes[1].bar(xs, [v["max_latency_cpu_s"] for v in vals], 0.38, label=mode)
    ratios = [next(r for r in wl if r["workload"] == n and r["mode"] == "CA") for n in names]
    axes[2].bar(range(len(names)), [r["cpu_ratio_ci_ca"] for r in ratios], 0.5, color="gray")
    for ax, title in zip(axes, ("CPU time (s)", "max latency, real-time pace (s)",
                                "win ratio CI/CA (CPU)"), strict=True):
        ax.set_xticks(range(len(names)), names)
        ax.set_xlabel("workload: LR model + N replicas per critical context (f/s)")
        ax.set_title(title)
    axes[0].legend()
    fig.suptitle("Linear Road, 1 expressway: context-aware vs context-independent (like Fig. 12)")
    fig.tight_layout()
    fig.savefig(out / "workload.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = sorted(sweep)
    for n, acc in enumerate(accelerations):
        for mode, style in zip(MODES, ("-o", "--s"), strict=True):
            ax.plot(xs, [sweep[x][mode].max_latency(acc, "cpu") for x in xs], style,
                    color=f"C{n}", label=f"{mode} x{acc:g}")
    ax.axhline(BOUND_S, color="red", lw=1, label="5 s bound")
    ax.set_xlabel("expressways (L)")
    ax.set_ylabel("max latency (s), cpu clock")
    ax.set_yscale("log")
    ax.set_title("Max latency vs expressways, x = replay acceleration (like Fig. 11(b))")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "l_rating.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
