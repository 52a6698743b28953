"""The `caesar` command. Each command group lives in its own module and
registers itself on `app`; this module only wires them and turns CaesarError
into a clean message and exit code (no traceback reaches the user)."""

from __future__ import annotations

import importlib
import sys
from importlib.metadata import entry_points

import typer
from rich.console import Console
from rich.markup import escape

from caesar.errors import CaesarError

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
    "caesar.cli.explain_cmd",  # explain
    "caesar.cli.runtime_cmd",  # up, down, status, topics
    "caesar.cli.run_cmd",  # run, deploy
    "caesar.cli.spark_cmd",  # spark produce | consume | replay
)
# More commands come from installed packages (the examples' demos among them):
# each entry point of this group names a `register(app)` function.
COMMAND_ENTRY_POINTS = "caesar.commands"


def _register_all() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(app)
    for entry in entry_points(group=COMMAND_ENTRY_POINTS):
        entry.load()(app)


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
