"""`caesar tables MODEL`: the shared tables (ACEP) of a running deployment,
read from its acep actor over Ray (the newest checkpointed version, or the
one at `--as-of`), printed like `caesar run --tables`."""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from caesar.errors import ConfigError, RuntimeEnvironmentError
from caesar.settings import Settings

if TYPE_CHECKING:
    from caesar.services.ray_runtime.deployment import TablesAt

out = Console()
err = Console(stderr=True)


class TablesFormat(StrEnum):
    table = "table"
    json = "json"


def ray_address_for(settings_file: Path | None, settings: Settings, explicit: str | None,
                    runtime_dir: Path | None) -> str:
    """Where the deployment's Ray runs: --ray-address, else the settings',
    else $RAY_ADDRESS, else the head `caesar up` started. Never a new local
    Ray: a fresh one holds no deployment."""
    from caesar.cli.runtime_cmd import _runtime, _settings

    if explicit:
        return explicit
    if settings.ray.address:
        return settings.ray.address
    if os.environ.get("RAY_ADDRESS"):
        return os.environ["RAY_ADDRESS"]
    local = _runtime(_settings(settings_file, runtime_dir)).ray()
    if local.running():
        return local.config.address
    raise RuntimeEnvironmentError(
        "no Ray cluster to ask: pass --ray-address (or set ray.address, RAY_ADDRESS), or "
        "start one with `caesar up` and the deployment with `caesar deploy MODEL`")


def register(app: typer.Typer) -> None:
    @app.command()
    def tables(
        model: Annotated[Path, typer.Argument(help="model file (.caesar) the deployment runs")],
        table: Annotated[list[str] | None, typer.Option(
            "--table", "-t", help="only this table (repeatable; default: all)")] = None,
        fmt: Annotated[TablesFormat, typer.Option(
            "--format", help="table: one table per shared table | json: one JSON line "
                             "per row, {\"table\": ..., \"row\": {...}}")] = TablesFormat.table,
        as_of: Annotated[int | None, typer.Option(
            "--as-of", help="event time: the rows after the s-transactions up to it (the "
                            "acep actor keeps the last 1024 timestamps' versions); default: "
                            "the newest checkpointed version")] = None,
        settings_file: Annotated[Path | None, typer.Option(
            "--config", "-c", "--settings",
            help="settings file (.yaml/.toml); default $CAESAR_CONFIG")] = None,
        ray_address: Annotated[str | None, typer.Option(
            "--ray-address", help="Ray cluster (default: settings, RAY_ADDRESS, or the "
                                  "head `caesar up` started)")] = None,
        prefix: Annotated[str, typer.Option(
            help="the deployment's name (`caesar deploy --prefix`)")] = "caesar",
        runtime_dir: Annotated[Path | None, typer.Option(
            "--runtime-dir", help="the `caesar up` runtime to look for Ray in")] = None,
    ) -> None:
        """Show the shared tables (TABLE) of MODEL on its running deployment."""
        from caesar.cli.run_cmd import load_plan
        from caesar.cli.tables_view import columns_of, print_tables
        from caesar.settings import load_settings

        plan = load_plan(model, (), settings_file)
        if plan.acep is None or not plan.acep.tables:
            raise ConfigError(f"model {model} declares no TABLE: it has no shared tables "
                              "to show")
        columns = columns_of(plan.acep)
        wanted = list(dict.fromkeys(table or columns))
        unknown = [t for t in wanted if t not in columns]
        if unknown:
            raise ConfigError(f"model {model} has no table {', '.join(map(repr, unknown))}; "
                              f"its tables: {', '.join(columns)}")
        settings = load_settings(settings_file)
        shown = _fetch(settings, ray_address_for(settings_file, settings, ray_address, runtime_dir),
                       prefix, as_of)
        missing = [t for t in wanted if t not in shown.tables]
        if missing:
            raise ConfigError(f"deployment {prefix!r} holds no table {', '.join(missing)} "
                              f"(it holds {', '.join(shown.tables) or 'none'}): it runs "
                              f"another model than {model}")
        at = "its initial rows" if shown.ts is None else f"as of event time {shown.ts}"
        err.print(f"deployment {prefix!r} (Ray namespace {settings.ray.namespace!r}): "
                  f"{at}", highlight=False)
        print_tables(out, {t: shown.tables[t] for t in wanted}, columns,
                     as_json=fmt is TablesFormat.json)


def _fetch(settings: Settings, address: str, prefix: str, as_of: int | None) -> TablesAt:
    from caesar.runtime.ray_local import use_token_auth

    use_token_auth()
    import ray

    from caesar.services.ray_runtime.deployment import Deployment

    if not ray.is_initialized():
        try:
            ray.init(address=address, namespace=settings.ray.namespace, include_dashboard=False,
                     log_to_driver=False, configure_logging=False)
        except Exception as exc:  # ConnectionError and Ray's own errors
            raise RuntimeEnvironmentError(f"cannot reach Ray at {address}: {exc}") from exc
    return Deployment.attach(settings, prefix).tables_at(as_of)

