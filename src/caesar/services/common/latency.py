"""A fixed-bucket latency histogram: cheap to update on the hot path (one
bisect per batch), plain data to ship in stats calls, and exactly what a
Prometheus histogram needs (cumulative bucket counts, sum, count)."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

import numpy as np

# Upper bounds in milliseconds; the last bucket (+Inf) is implicit.
BOUNDS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000)
_BOUNDS = np.array(BOUNDS_MS, dtype=np.float64)


@dataclass
class LatencyHistogram:
    counts: list[int] = field(default_factory=lambda: [0] * (len(BOUNDS_MS) + 1))
    total_ms: float = 0.0
    count: int = 0
    max_ms: float = 0.0

    def observe(self, ms: float) -> None:
        ms = max(0.0, ms)
        self.counts[bisect_left(BOUNDS_MS, ms)] += 1
        self.total_ms += ms
        self.count += 1
        self.max_ms = max(self.max_ms, ms)

    def observe_many(self, ms: np.ndarray) -> None:
        """observe() of each value, at once (a batch of alerts)."""
        if not len(ms):
            return
        ms = np.maximum(np.asarray(ms, dtype=np.float64), 0.0)
        per = np.bincount(np.searchsorted(_BOUNDS, ms, side="left"), minlength=len(self.counts))
        self.counts = [c + int(k) for c, k in zip(self.counts, per.tolist(), strict=True)]
        self.total_ms += float(ms.sum())
        self.count += len(ms)
        self.max_ms = max(self.max_ms, float(ms.max()))

    def as_dict(self) -> dict[str, object]:
        return {"bounds_ms": list(BOUNDS_MS), "counts": list(self.counts),
                "sum_ms": self.total_ms, "count": self.count, "max_ms": self.max_ms}
