"""Example models shipped with CAESAR as package data, so an installed CAESAR
can run them: `model_path("linear_road")` is the Linear Road model."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

NAMES = ("linear_road", "hospital_hygiene", "aggressive_driving")


def model_path(name: str) -> Path:
    """The model file of example `name` (one of NAMES)."""
    if name not in NAMES:
        raise KeyError(f"no example named {name!r} (examples: {', '.join(NAMES)})")
    return Path(str(files(__name__) / name / "model.caesar"))
