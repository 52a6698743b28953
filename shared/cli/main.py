"""The `caesar` command. Each command group lives in its own module and
registers itself on `app`; this module only wires them and turns CaesarError
into a clean message and exit code (no traceback reaches the user)."""

from __future__ import annotations

import importlib
import sys

import typer
from rich.console import Console

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


def main() -> None:
    _register_all()
    try:
        app(standalone_mode=False)
    except CaesarError as exc:
        err.print(f"[bold red]error:[/bold red] {exc}")
        sys.exit(2)
    except (typer.Exit, SystemExit) as exc:
        code = getattr(exc, "exit_code", None)
        if code is None:
            code = getattr(exc, "code", 0)
        sys.exit(code or 0)
    except typer.Abort:
        err.print("aborted")
        sys.exit(130)
    except Exception as exc:  # click usage errors come through here too
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        raise


if __name__ == "__main__":
    main()
