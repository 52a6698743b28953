"""Reading back the CSV files the benchmarks write."""

from __future__ import annotations

from typing import Any


def cell(text: str) -> Any:
    """A CSV cell back as what the run wrote: int, float, None (empty) or text."""
    if text == "":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
