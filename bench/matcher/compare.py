"""The Cython engine of this checkout against a baseline revision's, side by side.

The baseline's matcher sources (engine .pyx/.pxd, compile.py, reference.py,
expr_eval.py at `--baseline`, default `main`) are copied out of git into a
private package, `_caesar_matcher_baseline`, with their imports rewritten to
point at it, and compiled with the same flags as setup.py. Both engines then
run the same SASE workloads (bench/matcher/workload.py) in one process,
interleaved round by round (baseline, current, current, baseline, ...) so that
noise from the shared machine hits both alike; each workload reports the
median events per CPU second of each side and the ratio current / baseline. Both sides'
match counts are compared: a difference is printed and recorded.

Usage: .venv/bin/python -m bench.matcher.compare [--baseline REV] [--current REV]
       [--rounds N] [--scale F] [--tag NAME]
(--current REV: build that revision too, instead of using this checkout's engine.)
Writes bench/matcher/results/compare_<tag>.csv and .png.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import os
import re
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.matcher.workload import batches, random_queries, seq_query, shared_prefix_queries

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).parent / "results"
PKG = "_caesar_matcher_baseline"
MATCHER = "src/caesar/services/matcher"
# Python modules the baseline engine needs from its own revision (the plan
# compiler and the reference it validates plans with).
PY_MODULES = ("compile.py", "reference.py", "expr_eval.py")


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout


def build_baseline(rev: str, workdir: Path, name: str = PKG) -> Any:
    """Compile the matcher engine of `rev` into `workdir` as package `name`;
    return its engine module."""
    pkg = workdir / name
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    files = [line.split("\t", 1)[1] for line in
             _git("ls-tree", rev, f"{MATCHER}/").splitlines() if "\t" in line]
    names = [Path(f).name for f in files]
    cython = [n for n in names if n.endswith((".pyx", ".pxd"))]
    for fname in cython + [n for n in PY_MODULES if n in names]:
        text = _git("show", f"{rev}:{MATCHER}/{fname}")
        text = re.sub(r"\bcaesar\.services\.matcher\b", name, text)
        (pkg / fname).write_text(text)
    import numpy
    from Cython.Build import cythonize
    from setuptools import Extension
    from setuptools.dist import Distribution

    # paths relative to workdir (the cwd while cythonizing): Cython finds a
    # module's own .pxd by its package path
    exts = [Extension(f"{name}.{Path(n).stem}", [f"{name}/{n}"],
                      include_dirs=[numpy.get_include()],
                      define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
                      extra_compile_args=["-O3"])
            for n in cython if n.endswith(".pyx")]
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        modules = cythonize(exts, language_level="3", quiet=True, include_path=[str(workdir)],
                            compiler_directives={"boundscheck": False, "wraparound": False,
                                                 "cdivision": True,
                                                 "initializedcheck": False})
        dist = Distribution({"ext_modules": modules})
        cmd = dist.get_command_obj("build_ext")
        cmd.inplace = True
        cmd.ensure_finalized()
        cmd.run()
    finally:
        os.chdir(cwd)
    if str(workdir) not in sys.path:
        sys.path.insert(0, str(workdir))
    if "engine.pyx" not in names:
        raise SystemExit(f"{rev} has no {MATCHER}/engine.pyx")
    return importlib.import_module(f"{name}.engine")


def _max_ts(batch) -> int:
    return int(max(c.ts.max() for c in batch.by_type.values()))


def run_once(factory, stream) -> tuple[float, int]:
    """Events per CPU second over `stream` after one warm-up batch (it builds
    the indexes). CPU time of this process, not wall time: the machine is
    shared, and a busy neighbour stretches wall time without changing the
    work done (the engine is single-threaded)."""
    engine = factory()
    matches = 0
    for b in stream[:1]:
        matches += len(engine.process(b)) + len(engine.advance(_max_ts(b)))
    n = sum(len(b) for b in stream[1:])
    t0 = time.process_time()
    for b in stream[1:]:
        matches += len(engine.process(b))
        matches += len(engine.advance(_max_ts(b)))
    dt = time.process_time() - t0
    return n / dt, matches


def workloads(scale: float) -> list[tuple[str, Any, list, dict]]:
    """(name, plans, stream, engine kwargs) per workload."""
    def n(x: int) -> int:
        return max(20_000, int(x * scale))

    dom = (10_000, 1_000, 100, 100, 10)
    out: list[tuple[str, Any, list, dict]] = []
    out.append(("headline V1=10000", [seq_query("q", [1, 2, 3], within=10_000)],
                list(batches(n(2_000_000), domains=dom)), {}))
    out.append(("V1=100", [seq_query("q", [1, 2, 3], within=10_000)],
                list(batches(n(100_000), domains=(100,) + dom[1:])), {}))
    out.append(("W=100K", [seq_query("q", [1, 2, 3], within=100_000)],
                list(batches(n(1_000_000), domains=dom)), {}))
    out.append(("L=6", [seq_query("q", [1, 2, 3, 4, 5, 6], within=10_000)],
                list(batches(n(1_000_000), domains=dom)), {}))
    out.append(("2 neg", [seq_query("q", [1, 2, 3, 4, 5], within=10_000, negated=(1, 3))],
                list(batches(n(1_000_000), domains=dom)), {}))
    out.append(("100 queries", random_queries(100), list(batches(n(100_000))), {}))
    out.append(("1000 shared prefix", shared_prefix_queries(1_000),
                list(batches(n(400_000), domains=(1_000, 10_000, 100, 100, 10),
                             batch_size=2_000)), {}))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", default="main")
    ap.add_argument("--current", default=None, help="a revision instead of this checkout")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--tag", default=None)
    args = ap.parse_args()
    from caesar.services.matcher.engine import CythonEngine as Current

    rev = _git("rev-parse", "--short", args.baseline).strip()
    head = _git("rev-parse", "--short", args.current or "HEAD").strip()
    dirty = args.current is None and bool(_git("status", "--porcelain", "--", "src").strip())
    with tempfile.TemporaryDirectory(prefix="caesar-baseline-") as tmp:
        t0 = time.perf_counter()
        base_mod = build_baseline(args.baseline, Path(tmp))
        if args.current is not None:
            Current = build_baseline(args.current, Path(tmp), PKG + "_current").CythonEngine
        print(f"baseline {args.baseline} ({rev}) built in {time.perf_counter() - t0:.0f} s; "
              f"current HEAD {head}{' + uncommitted changes' if dirty else ''}; "
              f"{sysconfig.get_platform()}, {os.cpu_count()} cores")
        Baseline = base_mod.CythonEngine
        rows = []
        print(f"\n{'workload':<22}{'baseline ev/s':>16}{'current ev/s':>16}{'ratio':>8}"
              f"{'matches':>10}")
        for name, plans, stream, kw in workloads(args.scale):
            rates: dict[str, list[float]] = {"baseline": [], "current": []}
            counts: dict[str, set[int]] = {"baseline": set(), "current": set()}
            for r in range(args.rounds):
                order = [("baseline", Baseline), ("current", Current)]
                if r % 2:
                    order.reverse()
                for side, cls in order:
                    rate, matches = run_once(lambda cls=cls, plans=plans, kw=kw: cls(plans, **kw),
                                             stream)
                    rates[side].append(rate)
                    counts[side].add(matches)
            b, c = statistics.median(rates["baseline"]), statistics.median(rates["current"])
            agree = counts["baseline"] == counts["current"] and len(counts["current"]) == 1
            rows.append({"workload": name, "events": sum(len(x) for x in stream[1:]),
                         "baseline_eps": round(b), "current_eps": round(c),
                         "ratio": round(c / b, 3),
                         "baseline_min": round(min(rates["baseline"])),
                         "baseline_max": round(max(rates["baseline"])),
                         "current_min": round(min(rates["current"])),
                         "current_max": round(max(rates["current"])),
                         "matches": next(iter(counts["current"])), "same_matches": agree})
            print(f"{name:<22}{b:>16,.0f}{c:>16,.0f}{c / b:>8.3f}"
                  f"{rows[-1]['matches']:>10}{'' if agree else '  MATCH COUNTS DIFFER'}")
    tag = args.tag or f"{rev}_vs_{head}"
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"compare_{tag}.csv"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    _plot(rows, RESULTS / f"compare_{tag}.png", f"baseline {args.baseline} ({rev}) vs {head}")
    print(f"\nwrote {path} and its .png ({args.rounds} interleaved rounds, medians)")


def _plot(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.5))
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r["baseline_eps"] for r in rows], 0.4, label="baseline")
    ax.bar([x + 0.2 for x in xs], [r["current_eps"] for r in rows], 0.4, label="current")
    for x, r in zip(xs, rows, strict=True):
        ax.text(x, max(r["baseline_eps"], r["current_eps"]) * 1.05, f"{r['ratio']:.2f}x",
                ha="center", fontsize=8)
    ax.set_yscale("log")
    ax.set_xticks(list(xs), [r["workload"] for r in rows], rotation=30, ha="right")
    ax.set_ylabel("events per CPU second (median of interleaved rounds)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
