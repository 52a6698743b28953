"""Bar figures the Linear Road benchmarks share: one bar per result row
(labelled by its label and commit), plain or stacked by part, saved as PNG."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def subplots(n: int, width: float, **kw: Any) -> tuple[Any, list[Any]]:
    """A figure of n axes side by side (headless: the Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, n, figsize=(width, 4.5), squeeze=False, **kw)
    return fig, list(axes[0])


def row_labels(rows: Sequence[Mapping[str, Any]], *keys: str) -> list[str]:
    """Tick labels: the rows' `keys` (default label and commit), one per line."""
    return ["\n".join(str(r[k]) for k in keys or ("label", "commit")) for r in rows]


def bars(ax: Any, labels: Sequence[str], values: Sequence[float], *, ylabel: str, title: str,
         color: str | Sequence[str] = "C0", rotation: int = 0) -> None:
    ax.bar(range(len(labels)), [float(v) for v in values], color=color)
    _finish(ax, labels, ylabel, title, rotation)


def grouped(ax: Any, labels: Sequence[str], groups: Mapping[str, Sequence[float]], *,
            ylabel: str, title: str, rotation: int = 0) -> None:
    """One group per label, a bar per entry of `groups` side by side (with a
    legend; draw any reference line before, so it joins the legend)."""
    width = 0.8 / max(1, len(groups))
    xs = np.arange(len(labels))
    for i, (name, vals) in enumerate(groups.items()):
        offset = (i - (len(groups) - 1) / 2) * width
        ax.bar(xs + offset, [float(v) for v in vals], width, label=name, color=f"C{i}")
    ax.legend(fontsize=8)
    _finish(ax, labels, ylabel, title, rotation)


def stacked(ax: Any, labels: Sequence[str], parts: Mapping[str, Sequence[float]], *,
            ylabel: str, title: str, colors: Sequence[str] | None = None,
            rotation: int = 0) -> None:
    """One bar per label, its parts stacked in `parts`' order (with a legend)."""
    bottom = np.zeros(len(labels))
    for i, (name, vals) in enumerate(parts.items()):
        v = np.asarray([float(x) for x in vals])
        ax.bar(range(len(labels)), v, bottom=bottom, label=name,
               color=colors[i] if colors else f"C{i}")
        bottom += v
    ax.legend(fontsize=8)
    _finish(ax, labels, ylabel, title, rotation)


def _finish(ax: Any, labels: Sequence[str], ylabel: str, title: str, rotation: int) -> None:
    ax.set_xticks(range(len(labels)), labels, fontsize=7, rotation=rotation,
                  ha="right" if rotation else "center")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)


def save(fig: Any, out: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
