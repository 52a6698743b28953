"""`caesar explain MODEL`: the plan before and after optimization."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from caesar.errors import ModelError, SourcePosition


class ExplainFormat(StrEnum):
    text = "text"
    dot = "dot"


def register(app: typer.Typer) -> None:
    @app.command()
    def explain(
        model: Annotated[Path, typer.Argument(help="the .caesar model file")],
        format: Annotated[ExplainFormat, typer.Option("--format", "-f",
                                                      help="text tree or Graphviz dot")]
        = ExplainFormat.text,
        output: Annotated[Path | None, typer.Option("--output", "-o",
                                                    help="write here instead of stdout")] = None,
    ) -> None:
        """Print the query set and the plan before and after optimization."""
        from caesar.language import compile_phases
        from caesar.language.explain import explain_dot, explain_text

        try:
            text = model.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ModelError(f"cannot read model file: {exc}",
                             SourcePosition(str(model), 1, 1)) from None
        compiled = compile_phases(text, str(model))
        try:
            rendered = explain_dot(compiled) if format == ExplainFormat.dot \
                else explain_text(compiled)
        except RecursionError:
            raise ModelError("the plan nests too deeply to print",
                             SourcePosition(str(model), 1, 1)) from None
        if output is None:
            typer.echo(rendered, nl=False)
        else:
            output.write_text(rendered, encoding="utf-8")
            typer.echo(f"wrote {output}")
