"""The one error root of CAESAR; every package raises a subclass of CaesarError.

The CLI catches CaesarError and prints its message; anything else is a bug.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SourcePosition:
    """Where something is in a model file (1-based line and column)."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


class CaesarError(Exception):
    """Root of every error CAESAR raises on purpose."""


class ModelError(CaesarError):
    """A model (syntax or semantics) is wrong; carries its position in the source."""

    def __init__(self, message: str, position: SourcePosition | None = None,
                 source_line: str | None = None) -> None:
        self.message = message
        self.position = position
        self.source_line = source_line
        super().__init__(self.render())

    def render(self) -> str:
        if self.position is None:
            return self.message
        text = f"{self.position}: {self.message}"
        if self.source_line is not None:
            caret = " " * (self.position.column - 1) + "^"
            text += f"\n  {self.source_line}\n  {caret}"
        return text


class PlanError(CaesarError):
    """A plan cannot be executed as given (engine-side validation)."""


class ConfigError(CaesarError):
    """Settings or deployment configuration is wrong."""


class RuntimeEnvironmentError(CaesarError):
    """The local runtime (broker, Ray, Spark) cannot be started or reached."""
