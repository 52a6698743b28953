"""Optimizer benchmark (CAESAR paper, Figure 11(a)).

Time to produce the context-aware plan versus an exhaustive
context-independent multi-query search over groupings of the same queries'
operators, for plans of 4 to 24 operators.

- Workload: a model with the context network clear (default) -> c1, c1
  INITIATEs c2 (so c1 and c2 overlap), c1 -> c3; n/4 processing queries of 4
  operators each (CW, PR, FI, P) spread over the contexts, every other one a
  copy of an earlier query in an overlapping context (so sharing pays).
  The operators counted are those of the processing queries; the deriving
  queries are the same fixed infrastructure for both searches.
- Context-independent (CI) exhaustive search: every set partition of the n
  operators (Bell number B(n) of them, enumerated as restricted growth
  strings) is a candidate grouping; each is costed (a group of identical
  operators costs one operator, a group mixing different operators is
  invalid) and the cheapest kept. When B(n) exceeds EXACT_LIMIT the search
  is not run: its time is extrapolated as B(n) x the time per candidate
  measured at the largest n that ran (marked "extrapolated").
- Context-aware (CA): the real compiler (`compile_phases`: parse, checks,
  phases 1-2, every optimizer rule incl. Listing 1 grouping) plus the same
  exhaustive search run separately inside each grouped context window, whose
  operators are only those of the queries active in it (section 5.3: B(n/m)).

Run: .venv/bin/python -m bench.optimizer.run   (prints the table, writes
bench/optimizer/results/optimizer.csv and optimizer.png).
"""

from __future__ import annotations

import csv
import math
import time
from pathlib import Path

from caesar.language import compile_phases
from caesar.language.algebra import AGG, CW, CX, FI, PR, P, Stream, walk

RESULTS = Path(__file__).parent / "results"
SIZES = (4, 8, 12, 16, 20, 24)
EXACT_LIMIT = 5_000_000  # largest B(n) searched for real
COST = {"P": 10.0, "AGG": 8.0, "FI": 2.0, "PR": 1.0, "CW": 0.1}
CONTEXTS = ("c1", "c2", "c3")


def bell(n: int) -> int:
    row = [1]
    for _ in range(n):
        nxt = [row[-1]]
        for x in row:
            nxt.append(nxt[-1] + x)
        row = nxt
    return row[0]


def workload(n_ops: int) -> str:
    queries = n_ops // 4
    lines = ["MODEL bench", "TIME UNIT SECONDS",
             'EVENT R(ts INT, vid INT, seg INT, spd INT) FROM TOPIC "r"',
             'EVENT Alarm(ts INT, level INT) FROM TOPIC "a"',
             "DEFAULT CONTEXT clear { SWITCH CONTEXT c1 PATTERN Alarm a WHERE a.level = 1 }",
             "CONTEXT c1 { INITIATE CONTEXT c2 PATTERN Alarm a WHERE a.level = 2",
             "             SWITCH CONTEXT c3 PATTERN Alarm a WHERE a.level = 3 }",
             "CONTEXT c2 { TERMINATE CONTEXT c2 PATTERN Alarm a WHERE a.level = 4 }",
             "CONTEXT c3 { SWITCH CONTEXT clear PATTERN Alarm a WHERE a.level = 5 }"]
    for i in range(queries):
        base = i - 1 if i % 2 == 1 else i  # every other query copies the previous one
        ctx = CONTEXTS[i % 2] if base != i else CONTEXTS[(i // 2) % 3]
        lines.append(f"DERIVE Out{base}(r.vid, r.seg) PATTERN R r WHERE r.spd < {10 + base} "
                     f"AND r.vid > r.seg CONTEXT {ctx}")
    return "\n".join(lines) + "\n"


def operators(plan, qids: set[str] | None = None) -> list[tuple[object, float]]:
    """(signature, cost) of every operator of the processing queries."""
    ops = []
    for qid, root in plan.roots:
        if isinstance(root, CX) or (qids is not None and qid not in qids):
            continue
        for node in walk(root):
            if isinstance(node, Stream):
                continue
            kind = {P: "P", AGG: "AGG", FI: "FI", PR: "PR", CW: "CW"}[type(node)]
            # CI search ignores contexts: a CW's signature is its child only.
            sig = ("CW", node.child) if isinstance(node, CW) else node
            ops.append((sig, COST[kind]))
    return ops


def exhaustive(ops: list[tuple[object, float]]) -> tuple[float, int]:
    """Cheapest grouping over all set partitions; returns (cost, candidates)."""
    n = len(ops)
    if n == 0:
        return 0.0, 1
    sigs = [s for s, _ in ops]
    costs = [c for _, c in ops]
    ids = {}
    sig_ids = [ids.setdefault(s, len(ids)) for s in sigs]
    best = math.inf
    count = 0
    a = [0] * n  # restricted growth string: a[i] = block of operator i
    m = [0] * n  # m[i] = max(a[:i+1])
    while True:
        count += 1
        block_sig: dict[int, int] = {}
        total = 0.0
        valid = True
        for i in range(n):
            b = a[i]
            s = block_sig.get(b)
            if s is None:
                block_sig[b] = sig_ids[i]
                total += costs[i]
            elif s != sig_ids[i]:
                valid = False
                break
        if valid and total < best:
            best = total
        # next restricted growth string
        i = n - 1
        while i > 0 and a[i] > m[i - 1]:
            i -= 1
        if i == 0:
            return best, count
        a[i] += 1
        m[i] = max(m[i - 1], a[i])
        for j in range(i + 1, n):
            a[j] = 0
            m[j] = m[i]


def context_aware(text: str) -> tuple[float, int, int]:
    start = time.perf_counter()
    compiled = compile_phases(text)
    plan = compiled.optimized
    candidates = 0
    largest = 0
    for group in plan.groups:
        ops = operators(plan, set(group.queries))
        largest = max(largest, len(ops))
        _, c = exhaustive(ops)
        candidates += c
    return time.perf_counter() - start, candidates, largest


def main() -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    rows = []
    per_candidate = None
    for n in SIZES:
        text = workload(n)
        compiled = compile_phases(text)
        ops = operators(compiled.unoptimized)
        size = len(ops)
        b = bell(size)
        if b <= EXACT_LIMIT:
            t0 = time.perf_counter()
            _, count = exhaustive(ops)
            ci = time.perf_counter() - t0
            assert count == b
            per_candidate = ci / b
            how = "measured"
        else:
            assert per_candidate is not None
            ci = per_candidate * b
            how = "extrapolated"
        runs = [context_aware(text) for _ in range(3)]
        ca = min(r[0] for r in runs)
        rows.append({"operators": size, "bell": b, "ci_seconds": ci, "ci": how,
                     "ca_seconds": ca, "ca_candidates": runs[0][1],
                     "ca_largest_group_ops": runs[0][2], "ratio": ci / ca})
    with (RESULTS / "optimizer.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"{'ops':>4} {'B(n)':>22} {'CI exhaustive s':>16} {'':>12} {'CA s':>8} "
          f"{'CA cands':>9} {'ratio CI/CA':>14}")
    for r in rows:
        print(f"{r['operators']:>4} {r['bell']:>22} {r['ci_seconds']:>16.4g} {r['ci']:>12} "
              f"{r['ca_seconds']:>8.4f} {r['ca_candidates']:>9} {r['ratio']:>14.4g}")
    plot(rows)


def plot(rows) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [r["operators"] for r in rows]
    meas = [(r["operators"], r["ci_seconds"]) for r in rows if r["ci"] == "measured"]
    extra = [(r["operators"], r["ci_seconds"]) for r in rows if r["ci"] != "measured"]
    ax.plot(*zip(*meas, strict=True), "o-", color="tab:red", label="CI exhaustive (measured)")
    if extra:
        ax.plot(*zip(*([meas[-1]] + extra), strict=True), "o--", color="tab:red", alpha=0.5,
                label="CI exhaustive (extrapolated: B(n) x time/candidate)")
    ax.plot(xs, [r["ca_seconds"] for r in rows], "s-", color="tab:blue",
            label="CA (CAESAR compiler + per-group search)")
    ax.set_yscale("log")
    ax.set_xlabel("operators in the query plan")
    ax.set_ylabel("optimization time (s)")
    last = rows[-1]
    ax.set_title(f"Optimizer search time; CI/CA at {last['operators']} ops = {last['ratio']:.3g}x")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(RESULTS / "optimizer.png", dpi=120)


if __name__ == "__main__":
    main()
