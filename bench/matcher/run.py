"""Matcher benchmark on the SASE workload (SIGMOD 2006, section 5).

Prints a table and writes bench/matcher/results/{results.json,matcher.png}:
1. headline: SEQ(E1,E2,E3) WHERE [attr1] WITHIN 10000, V1 = 10,000 --
   events/s of the Cython engine and of the reference matcher, side by side
   in the same run (the reference on a prefix of the same stream; both
   engines' results are compared on that prefix);
2. a sweep over Table 2 parameters (V1, W, L, negations), Cython vs reference;
3. events/s with 1, 100 and 10,000 registered queries (Table 2 generator);
4. prefix sharing: 10,000 registered queries with one common prefix that
   differ only in the last component's constant, events/s with prefix
   sharing and with it disabled (`share_prefixes=False`), same stream.

Usage: .venv/bin/python -m bench.matcher.run [--events N] [--quick] [--only-sharing]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

from bench.matcher.workload import batches, random_queries, seq_query, shared_prefix_queries
from caesar.services.matcher.engine import CythonEngine
from caesar.services.matcher.reference import ReferenceEngine

RESULTS = Path(__file__).parent / "results"


def throughput(engine, stream, warmup: int = 1) -> tuple[float, int]:
    """Events/s over `stream` (a list of batches), after `warmup` batches
    (the first batch builds the dispatch indexes)."""
    matches = 0
    for b in stream[:warmup]:
        matches += len(engine.process(b))
        matches += len(engine.advance(_max_ts(b)))
    n = sum(len(b) for b in stream[warmup:])
    t0 = time.perf_counter()
    for b in stream[warmup:]:
        matches += len(engine.process(b))
        matches += len(engine.advance(_max_ts(b)))
    dt = time.perf_counter() - t0
    return n / dt, matches


def _max_ts(batch) -> int:
    return int(max(c.ts.max() for c in batch.by_type.values()))


def _keys(out):
    return Counter((d.plan_id, d.event_seqs) for d in out)


def compare(plans, n_cython: int, n_ref: int, domains, batch_size: int = 10_000):
    stream = list(batches(n_cython, domains=domains, batch_size=batch_size))
    cy_rate, cy_matches = throughput(CythonEngine(plans), stream)
    ref_stream = list(batches(n_ref, domains=domains, batch_size=min(batch_size, n_ref // 4)))
    ref_rate, _ = throughput(ReferenceEngine(plans), ref_stream)
    # same answers on the reference's prefix
    cy, ref = CythonEngine(plans), ReferenceEngine(plans)
    out_cy, out_ref = [], []
    for b in ref_stream:
        out_cy += cy.process(b) + cy.advance(_max_ts(b))
        out_ref += ref.process(b) + ref.advance(_max_ts(b))
    out_cy += cy.advance(10**12)
    out_ref += ref.advance(10**12)
    return {"cython_eps": cy_rate, "reference_eps": ref_rate, "ratio": cy_rate / ref_rate,
            "cython_matches": cy_matches, "prefix_matches": len(out_ref),
            "agree": _keys(out_cy) == _keys(out_ref)}


def prefix_sharing(count: int = 10_000, events: int = 8_000) -> dict:
    """SEQ(E1, E2, E3) WHERE [attr1] AND E3.attr2 = i WITHIN 10000, for
    i < count (V1 = 1,000, V2 = 10,000): the same stream through an engine that shares the E1, E2
    stacks (one scan and one stack per key) and through one that keeps
    them per query."""
    plans = shared_prefix_queries(count)
    domains = (1_000, 10_000, 100, 100, 10)  # V1 = 1,000: some keys complete
    stream = list(batches(events, domains=domains, batch_size=2_000))
    row: dict = {"queries": count, "events": events}
    outs = {}
    for name, share in (("shared", True), ("unshared", False)):
        t0 = time.perf_counter()
        engine = CythonEngine(plans, share_prefixes=share)
        row[f"{name}_setup_s"] = time.perf_counter() - t0
        rate, matches = throughput(engine, stream)
        row[f"{name}_eps"] = rate
        row[f"{name}_matches"] = matches
        outs[name] = len(engine.shared_prefixes())
    row["followers"] = outs["shared"]
    row["speedup"] = row["shared_eps"] / row["unshared_eps"]
    row["agree"] = row["shared_matches"] == row["unshared_matches"]
    print(f"\nprefix sharing: {count:,} queries SEQ(E1,E2,E3) WHERE [attr1] AND E3.attr2 = i "
          f"({events:,} events, {row['followers']:,} plans follow a shared prefix)")
    print(f"  shared    {row['shared_eps']:>14,.0f} events/s  ({row['shared_matches']} matches)")
    print(f"  unshared  {row['unshared_eps']:>14,.0f} events/s  ({row['unshared_matches']} "
          f"matches)")
    print(f"  speedup   {row['speedup']:>14,.1f} x   same match count: {row['agree']}")
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--quick", action="store_true", help="smaller runs (smoke test)")
    ap.add_argument("--only-sharing", action="store_true",
                    help="run only the prefix-sharing row; update results.json in place")
    args = ap.parse_args()
    n = 200_000 if args.quick else args.events
    n_ref = 10_000 if args.quick else 30_000
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.only_sharing:
        path = RESULTS / "results.json"
        results = json.loads(path.read_text()) if path.exists() else {}
        results["prefix_sharing"] = prefix_sharing()
        path.write_text(json.dumps(results, indent=2))
        print(f"\nwrote {path}")
        return
    results: dict = {}

    # 1. headline
    head = compare([seq_query("q", [1, 2, 3], within=10_000)], n, n_ref,
                   domains=(10_000, 1_000, 100, 100, 10))
    results["headline"] = head
    print("SEQ(E1,E2,E3) WHERE [attr1] WITHIN 10000, V1=10000")
    print(f"  cython    {head['cython_eps']:>14,.0f} events/s  ({n:,} events, "
          f"{head['cython_matches']} matches)")
    print(f"  reference {head['reference_eps']:>14,.0f} events/s  ({n_ref:,} events)")
    print(f"  ratio     {head['ratio']:>14,.0f} x   results agree on the prefix: {head['agree']}")

    # 2. Table 2 sweep
    sweep = []
    cases = [
        ("V1=100", dict(v1=100)), ("V1=1000", dict(v1=1000)), ("V1=10000", dict(v1=10_000)),
        ("W=50K", dict(w=50_000)), ("W=100K", dict(w=100_000)),
        ("L=2", dict(types=[1, 2])), ("L=4", dict(types=[1, 2, 3, 4])),
        ("L=6", dict(types=[1, 2, 3, 4, 5, 6])),
        ("1 neg", dict(types=[1, 2, 3, 4], neg=(2,))),
        ("2 neg", dict(types=[1, 2, 3, 4, 5], neg=(1, 3))),
    ]
    n_sweep = n // 4
    print(f"\n{'case':<10}{'cython ev/s':>16}{'reference ev/s':>16}{'ratio':>10}{'agree':>7}")
    for name, kw in cases:
        plans = [seq_query("q", kw.get("types", [1, 2, 3]), within=kw.get("w", 10_000),
                           negated=kw.get("neg", ()))]
        r = compare(plans, n_sweep, max(n_ref // 3, 4_000),
                    domains=(kw.get("v1", 10_000), 1_000, 100, 100, 10))
        r["case"] = name
        sweep.append(r)
        print(f"{name:<10}{r['cython_eps']:>16,.0f}{r['reference_eps']:>16,.0f}"
              f"{r['ratio']:>10,.0f}{str(r['agree']):>7}")
    results["sweep"] = sweep

    # 3. many registered queries
    multi = []
    print(f"\n{'queries':>8}{'setup s':>10}{'cython ev/s':>16}{'matches':>10}")
    for count in (1, 100, 10_000):
        t0 = time.perf_counter()
        plans = random_queries(count)
        engine = CythonEngine(plans)
        setup = time.perf_counter() - t0
        events = n // 4 if count < 10_000 else n // 10
        stream = list(batches(events))
        rate, matches = throughput(engine, stream)
        multi.append({"queries": count, "setup_s": setup, "cython_eps": rate,
                      "matches": matches})
        print(f"{count:>8}{setup:>10.1f}{rate:>16,.0f}{matches:>10}")
    results["multi"] = multi
    results["prefix_sharing"] = prefix_sharing()

    (RESULTS / "results.json").write_text(json.dumps(results, indent=2))
    _plot(results, RESULTS / "matcher.png")
    print(f"\nwrote {RESULTS / 'results.json'} and {RESULTS / 'matcher.png'}")


def _plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.5))
    names = ["headline"] + [r["case"] for r in results["sweep"]]
    rows = [results["headline"]] + results["sweep"]
    xs = range(len(names))
    ax1.bar([x - 0.2 for x in xs], [r["cython_eps"] for r in rows], 0.4, label="Cython")
    ax1.bar([x + 0.2 for x in xs], [r["reference_eps"] for r in rows], 0.4, label="reference")
    ax1.set_yscale("log")
    ax1.set_xticks(list(xs), names, rotation=45, ha="right")
    ax1.set_ylabel("events/s")
    ax1.set_title("SASE workload: Cython vs reference (same run)")
    ax1.legend()
    multi = results["multi"]
    ax2.plot([m["queries"] for m in multi], [m["cython_eps"] for m in multi], "o-")
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    ax2.set_xlabel("registered queries")
    ax2.set_ylabel("events/s")
    ax2.set_title("Many queries (Table 2 generator)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
