"""The `caesar` command. Each command group lives in its own module and
registers itself on `app`; this module only wires them, sets up logging, and
turns CaesarError into a clean message and an exit code (no traceback reaches
the user).

Exit codes: 0 success; 1 a runtime failure (broker, Ray, Spark, a deployment,
a validation that found differences); 2 a usage error (unknown option, bad
value: typer/click's own); 3 the model is wrong (the message names file, line
and column).
"""

from __future__ import annotations

import importlib
import sys
from importlib.metadata import entry_points
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from caesar.errors import CaesarError, ModelError
from caesar.logs import LEVELS

EXIT_RUNTIME = 1
EXIT_USAGE = 2
EXIT_MODEL = 3

app = typer.Typer(
    name="caesar",
    help="CAESAR: context-aware complex event processing on Kafka and Ray.\n\n"
         "Exit codes: 0 ok, 1 runtime failure, 2 usage error, 3 model error.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True)


def _version() -> str:
    from caesar import __version__

    return __version__


def _show_version(value: bool) -> None:
    if value:
        typer.echo(_version())
        raise typer.Exit()


@app.command()
def version() -> None:
    """Print the CAESAR version."""
    typer.echo(_version())


# Modules that define commands with `@app.command()` on the app passed to `register`.
COMMAND_MODULES = (
    "caesar.cli.explain_cmd",  # explain
    "caesar.cli.runtime_cmd",  # up, down, status, topics
    "caesar.cli.run_cmd",  # run, deploy
    "caesar.cli.tables_cmd",  # tables
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


def _level(value: str | None) -> str | None:
    if value is not None and value.upper() not in LEVELS:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(LEVELS)}")
    return value


@app.callback()
def _root(
    version: Annotated[bool, typer.Option(
        "--version", callback=_show_version, is_eager=True,
        help="print the version and exit")] = False,
    log_level: Annotated[str | None, typer.Option(
        "--log-level", envvar="CAESAR_LOG_LEVEL", callback=_level,
        help=f"{', '.join(LEVELS)} (default INFO)")] = None,
    log_json: Annotated[bool, typer.Option(
        "--log-json", help="log one JSON object per line (also CAESAR_LOG_FORMAT=json)")] = False,
) -> None:
    """CAESAR: context-aware complex event processing on Kafka and Ray."""
    from caesar.logs import configure

    configure(log_level, "json" if log_json else None)


def main() -> None:
    _register_all()
    try:
        app()  # standalone: typer/click print usage errors and exit (2) themselves
    except ModelError as exc:
        # The message is user text (e.g. a model line with `[attr]`), not markup;
        # soft_wrap: no line break inside `file:line:col` (logs, editors, grep).
        err.print(f"[bold red]error:[/bold red] {escape(str(exc))}", highlight=False,
                  soft_wrap=True)
        sys.exit(EXIT_MODEL)
    except CaesarError as exc:
        err.print(f"[bold red]error:[/bold red] {escape(str(exc))}", highlight=False,
                  soft_wrap=True)
        sys.exit(EXIT_RUNTIME)


if __name__ == "__main__":
    main()
