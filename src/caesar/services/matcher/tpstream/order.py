"""Adaptive join order (TPStream section 5.4.1).

The matcher joins the situation buffers in an evaluation order per trigger
situation, chosen by the cost model of section 5.4 (eq. 2-4): the sum of the
estimated intermediate results, |R_i| = |R_i-1| * |B_i| * s_i. The initial
order uses Table 3's selectivities and equal buffer sizes (compile.py).
While the query runs, the runner counts, for each constrained pair (x, j),
how many situations of j were available when it was joined with x bound
(buffer sizes) and how many passed the constraint (selectivity). Both are
smoothed with exponential moving averages; when one moves by more than
`threshold` (relative) from the values the current orders were computed
with, the orders are recomputed. The matcher keeps no intermediate results,
so switching orders between two batches costs nothing (section 5.4.1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from caesar.services.matcher.tpstream.compile import CompiledPlan, best_order, default_selectivity

ALPHA = 0.3  # weight of the newest batch (the paper updates per matcher call: 0.01)
THRESHOLD = 0.2  # relative change that triggers re-planning (the paper's t)
MIN_PROBES = 32  # joins a batch must have seen before its statistics count


class AdaptiveOrder:
    def __init__(self, cp: CompiledPlan, runner: Any) -> None:
        self.cp = cp
        self.runner = runner
        n = cp.n
        self.sizes = np.ones(n)
        self.sel = np.array(default_selectivity(cp))
        self.basis = (self.sizes.copy(), self.sel.copy())
        self._last = self._counters()
        self.replans = 0

    def _counters(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r = self.runner
        return r.probes_a.copy(), r.seen_a.copy(), r.passed_a.copy()

    def update(self) -> bool:
        """Fold the latest counters into the statistics; re-plan on drift."""
        probes, seen, passed = self._counters()
        dp, ds, dq = probes - self._last[0], seen - self._last[1], passed - self._last[2]
        if dp.sum() < MIN_PROBES:
            return False
        self._last = (probes, seen, passed)
        n = self.cp.n
        for j in range(n):
            col = dp[:, j]
            if col.sum():
                size = ds[:, j].sum() / col.sum()
                self.sizes[j] = ALPHA * size + (1 - ALPHA) * self.sizes[j]
        for x in range(n):
            for j in range(n):
                if ds[x, j]:
                    s = dq[x, j] / ds[x, j]
                    self.sel[x, j] = ALPHA * s + (1 - ALPHA) * self.sel[x, j]
        sizes0, sel0 = self.basis
        drift = max(np.max(np.abs(self.sizes - sizes0) / np.maximum(sizes0, 1e-9)),
                    np.max(np.abs(self.sel - sel0) / np.maximum(sel0, 1e-9)))
        if drift <= THRESHOLD:
            return False
        self.basis = (self.sizes.copy(), self.sel.copy())
        for k in range(n):
            order = best_order(self.cp, k, list(self.sizes), self.sel.tolist())
            if order != self.runner.get_order(k):
                self.runner.set_order(k, order)
        self.replans += 1
        return True
