"""Errors of the local runtime (re-exported from shared.errors for one root)."""

from __future__ import annotations

from shared.errors import RuntimeEnvironmentError

__all__ = ["RuntimeEnvironmentError"]
