"""The `caesar` command. Each command group lives in its own module and
registers itself on `app`; this module only wires them and turns CaesarError
into a clean message and exit code (no traceback reaches the user)."""

from __future__ import annotations

import importlib
import sys

import typer
from rich.console import Console
from rich.markup import escape

from shared.errors import CaesarError

app = typer.Typer(
    name="caesar",
    help="CAESAR: context-aware complex event processing on Kafka and Ray.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True)


@app.command()
def version() -> None:
    """Print the CAESAR version."""
    from importlib.metadata import version as dist_version

    typer.echo(dist_version("caesar-cep"))

# Modules that define commands with `@app.command()` on the app passed to `register`.
COMMAND_MODULES = (
    "shared.cli.explain_cmd",  # explain
    "shared.cli.runtime_cmd",  # up, down, status, topics
    "shared.cli.run_cmd",  # run, deploy
    "shared.cli.demo_cmd",  # demo (the Linear Road main job)
)


def _register_all() -> None:
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # not written yet; anything else is a real error
                continue
            raise
        module.register(app)


@app.callback()
def _root() -> None:
    """CAESAR: context-aware complex event processing on Kafka and Ray."""


def main() -> None:
    _register_all()
    try:
        app()  # standalone: typer/click print usage errors and exit themselves
    except CaesarError as exc:
        # The message is user text (e.g. a model line with `[attr]`), not markup.
        err.print(f"[bold red]error:[/bold red] {escape(str(exc))}", highlight=False)
        sys.exit(2)


if __name__ == "__main__":
    main()
