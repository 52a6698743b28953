"""`caesar up | down | status | topics`: the local runtime and topic setup."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from caesar.settings import Settings, load_settings

if TYPE_CHECKING:
    from caesar.runtime.local import LocalRuntime

console = Console()

ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", "-c", help="settings file (.yaml/.toml); default $CAESAR_CONFIG")]
RuntimeDirOpt = Annotated[Path | None, typer.Option(
    "--runtime-dir", help="where PIDs, logs and broker data live (default ~/.cache/caesar/run)")]


def _settings(config: Path | None, runtime_dir: Path | None, **runtime: Any) -> Settings:
    settings = load_settings(config)
    update = {k: v for k, v in runtime.items() if v is not None}
    if runtime_dir is not None:
        update["runtime_dir"] = runtime_dir
    if update:
        settings = settings.model_copy(
            update={"runtime": settings.runtime.model_copy(update=update)})
    return settings


def _runtime(settings: Settings) -> LocalRuntime:
    from caesar.runtime.local import LocalRuntime

    return LocalRuntime(settings.runtime)


def bootstrap_for(settings: Settings) -> str:
    """Explicitly configured bootstrap servers, else the local broker `caesar up` started."""
    if "bootstrap_servers" in settings.kafka.model_fields_set:
        return settings.kafka.bootstrap_servers
    runtime = _runtime(settings)
    if runtime.broker().running():
        return runtime.bootstrap
    return settings.kafka.bootstrap_servers


def up(
    config: ConfigOpt = None,
    runtime_dir: RuntimeDirOpt = None,
    port: Annotated[int | None, typer.Option(help="Kafka broker port")] = None,
    controller_port: Annotated[int | None, typer.Option(help="KRaft controller port")] = None,
    ray_port: Annotated[int | None, typer.Option(help="Ray GCS port")] = None,
    ray: Annotated[bool, typer.Option("--ray/--no-ray", help="also start a local Ray head")] = True,
    topics: Annotated[bool, typer.Option("--topics/--no-topics",
                                         help="create the settings' internal topics")] = True,
) -> None:
    """Start a local Kafka broker (KRaft) and a local Ray head."""
    settings = _settings(config, runtime_dir, broker_port=port, controller_port=controller_port,
                         ray_port=ray_port, ray=ray)
    runtime = _runtime(settings)
    with console.status("starting the local runtime", spinner="dots") as spinner:
        def progress(msg: str) -> None:
            console.print(f"[cyan]•[/cyan] {msg}")
            spinner.update(f"{msg} ...")

        report = runtime.up(settings, create_topics=topics, progress=progress)
    times = ", ".join(f"{k} {v:.1f}s" for k, v in report.seconds.items())
    console.print(f"[green]up[/green] ({times})")
    if report.created_topics:
        console.print(f"created topics: {', '.join(sorted(report.created_topics))}")
    _print_status(runtime)
    hint = f"CAESAR_KAFKA__BOOTSTRAP_SERVERS={runtime.bootstrap}"
    if settings.runtime.ray:
        hint += f" RAY_ADDRESS={runtime.ray().address}"
    console.print(f"clients: export {hint}", soft_wrap=True)


def down(config: ConfigOpt = None, runtime_dir: RuntimeDirOpt = None) -> None:
    """Stop the local broker and Ray started by `caesar up` (by PID)."""
    runtime = _runtime(_settings(config, runtime_dir))
    stopped = runtime.down(progress=lambda msg: console.print(f"[cyan]•[/cyan] {msg}"))
    if not stopped:
        console.print("nothing was running")


def status(config: ConfigOpt = None, runtime_dir: RuntimeDirOpt = None) -> None:
    """Show whether the local broker and Ray are running."""
    runtime = _runtime(_settings(config, runtime_dir))
    _print_status(runtime)
    if not any(c.running for c in runtime.status()):
        raise typer.Exit(1)


def _print_status(runtime: Any) -> None:
    table = Table(title=f"CAESAR local runtime ({runtime.dir})")
    for col in ("component", "state", "pid", "address", "log"):
        table.add_column(col)
    for c in runtime.status():
        state = "[green]running[/green]" if c.running else "[red]stopped[/red]"
        if c.detail:
            state += f" ({c.detail})"
        table.add_row(c.name, state, str(c.pid or "-"), c.address, str(c.log))
    console.print(table)


def topics(
    config: ConfigOpt = None,
    runtime_dir: RuntimeDirOpt = None,
    create: Annotated[bool, typer.Option("--create", help="create missing topics")] = False,
    event_type: Annotated[list[str] | None, typer.Option(
        "--event-type", "-e", help="also an input topic for this event type (repeatable)")] = None,
    store: Annotated[list[str] | None, typer.Option(
        "--store", help="also a compacted changelog for this state store (repeatable)")] = None,
    bootstrap: Annotated[str | None, typer.Option(help="bootstrap servers (overrides settings)")] = None,
) -> None:
    """List the deployment's topics (partitions, cleanup policy); --create makes missing ones."""
    from caesar.bus.kafka import KafkaBus
    from caesar.bus.topics import topic_specs

    settings = _settings(config, runtime_dir)
    servers = bootstrap or bootstrap_for(settings)
    bus = KafkaBus(settings.kafka.model_copy(update={"bootstrap_servers": servers}),
                   admin_timeout_s=15)
    try:
        specs = topic_specs(settings.topics, event_types=event_type or (), stores=store or ())
        created = set(bus.create_topics(specs)) if create else set()
        existing = bus.list_topics()
        table = Table(title=f"topics on {servers}")
        for col in ("topic", "partitions", "wanted", "cleanup", "state"):
            table.add_column(col)
        wanted = {s.name: s for s in specs}
        for name in sorted(set(existing) | set(wanted)):
            spec = wanted.get(name)
            have = existing.get(name)
            if have is None:
                state = "[yellow]missing[/yellow]"
            elif name in created:
                state = "[green]created[/green]"
            elif spec is not None and have != spec.partitions:
                state = "[red]partition count differs[/red]"
            else:
                state = "ok" if spec is not None else "other"
            cleanup = bus.topic_config(name).get("cleanup.policy", "?") if have is not None else (
                "compact" if spec is not None and spec.compacted else "delete")
            table.add_row(name, str(have if have is not None else "-"),
                          str(spec.partitions) if spec else "-", cleanup, state)
        console.print(table)
    finally:
        bus.close()


def register(app: typer.Typer) -> None:
    app.command()(up)
    app.command()(down)
    app.command()(status)
    app.command()(topics)
