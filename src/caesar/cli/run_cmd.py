"""`caesar run MODEL --input FILE` (embedded mode) and `caesar deploy MODEL`
(the services as Ray actors against Kafka)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from caesar.errors import CaesarError
from caesar.plans.execution import ExecutionPlan
from caesar.services.common.config import RunnerOptions

if TYPE_CHECKING:
    from caesar.services.common.config import EngineFactory
    from caesar.services.common.messages import Alert
    from caesar.services.embedded.pipeline import EmbeddedPipeline

MAX_DEAD_SHOWN = 20


class InputFormat(StrEnum):
    auto = "auto"
    jsonl = "jsonl"
    csv = "csv"


class EngineChoice(StrEnum):
    cython = "cython"
    reference = "reference"


class BusChoice(StrEnum):
    direct = "direct"
    memory = "memory"


class SchedulerChoice(StrEnum):
    lwm = "lwm"
    s2pl = "s2pl"
    sei = "sei"
out = Console()
err = Console(stderr=True)


def load_plan(model: Path, functions: Sequence[str] = (),
              settings_file: Path | None = None) -> ExecutionPlan:
    """Compile MODEL with the user-defined functions of the settings
    (`functions:`) and of `--function NAME=package.module:function`."""
    from caesar.language import compile_model
    from caesar.plans.functions import resolve
    from caesar.settings import load_settings

    if not model.exists():
        raise CaesarError(f"model file {model} does not exist")
    paths = dict(load_settings(settings_file).functions)
    for item in functions:
        name, sep, target = item.partition("=")
        if not sep or not name.strip() or not target.strip():
            raise CaesarError(f"--function {item!r}: expected NAME=package.module:function")
        paths[name.strip()] = target.strip()
    return compile_model(model, functions=resolve(paths))


FunctionOption = Annotated[list[str] | None, typer.Option(
    "--function", help="a user-defined function the model calls: "
    "NAME=package.module:function (repeatable; also settings `functions`)")]


def _run_on_memory_bus(plan: ExecutionPlan, events: Any, allowance: int, engine: EngineChoice,
                       as_json: bool) -> None:
    """`caesar run --bus memory`: the service runners over the in-memory bus."""
    from caesar.services.embedded.bus_pipeline import run_on_memory_bus

    started = time.perf_counter()
    alerts, dead = run_on_memory_bus(plan, events, allowance=allowance,
                                     engine_factory=_engine(engine))
    _printer(as_json)(sorted(alerts, key=lambda a: (a.end_ts, a.key, a.event_type)))
    for d in dead[:MAX_DEAD_SHOWN]:
        err.print(f"dead letter ({d['reason']}) offset {d['offset']}: {d['detail']}",
                  markup=False, highlight=False)
    err.print(f"{len(alerts)} alerts, {len(dead)} dead letters in "
              f"{time.perf_counter() - started:.2f}s (in-memory bus)")


def register(app: typer.Typer) -> None:
    @app.command()
    def run(
        model: Annotated[Path, typer.Argument(help="model file (.caesar)")],
        input: Annotated[Path, typer.Option("--input", "-i", help="events: JSON lines or CSV")],
        fmt: Annotated[InputFormat, typer.Option(
            "--format", help="input format (auto: by the file's suffix)")] = InputFormat.auto,
        allowance: Annotated[int, typer.Option(help="out-of-orderness allowed in event time")] = 0,
        as_json: Annotated[bool, typer.Option("--json", help="print alerts as JSON lines")] = False,
        engine: Annotated[EngineChoice, typer.Option(
            help="the Cython engine, or the pure-Python reference (its test oracle)")]
        = EngineChoice.cython,
        function: FunctionOption = None,
        batch_size: Annotated[int, typer.Option(help="input records per batch")] = 5000,
        bus: Annotated[BusChoice, typer.Option(
            help="direct: processors handed batches directly | memory: the service "
                 "runners (Avro, commit protocol) over the in-memory bus")] = BusChoice.direct,
        scheduler: Annotated[SchedulerChoice, typer.Option(
            help="stream-transaction scheduler of a model with shared tables (ACEP)")]
        = SchedulerChoice.lwm,
        tables: Annotated[bool, typer.Option(
            "--tables", help="print the shared tables' rows at the end")] = False,
    ) -> None:
        """Run MODEL on the events in FILE in one process (embedded mode) and print the alerts."""
        from caesar.services.common.collector import tune_collector
        from caesar.services.common.messages import InputRecord
        from caesar.services.embedded.inputs import read_events
        from caesar.services.embedded.pipeline import EmbeddedPipeline

        plan = load_plan(model, function or ())
        tune_collector()
        if bus == "memory":
            _run_on_memory_bus(plan, read_events(input, plan, fmt), allowance, engine, as_json)
            return
        pipe = EmbeddedPipeline(plan, allowance=allowance, engine_factory=_engine(engine),
                                batch_size=batch_size, acep_scheduler=scheduler.value)
        started = time.perf_counter()
        batch: list[InputRecord] = []
        count = 0
        printer = _printer(as_json)
        for offset, (value, error, raw) in enumerate(read_events(input, plan, fmt)):
            batch.append(InputRecord(str(input), 0, offset, value, raw, error))
            count += 1
            if len(batch) >= batch_size:
                printer(pipe.feed(batch))
                pipe.result.alerts.clear()  # printed: a long file holds none of them
                batch = []
        if batch:
            printer(pipe.feed(batch))
        printer(pipe.finish())
        pipe.result.alerts.clear()
        _report(pipe, count, time.perf_counter() - started, tables)


    @app.command()
    def deploy(
        model: Annotated[Path, typer.Argument(help="model file (.caesar)")],
        settings_file: Annotated[Path | None, typer.Option(
            "--config", "-c", "--settings",
            help="settings file (.yaml/.toml); default $CAESAR_CONFIG")] = None,
        ray_address: Annotated[str | None, typer.Option(
            "--ray-address", help="Ray cluster (default: local or RAY_ADDRESS)")] = None,
        run_for: Annotated[float, typer.Option(
            help="seconds to run, 0 = until interrupted")] = 0.0,
        allowance: Annotated[int, typer.Option(help="out-of-orderness allowed in event time")] = 0,
        max_ahead: Annotated[int | None, typer.Option(
            help="event-time ticks an event may be ahead of its partition before it is "
                 "held as suspect (default: one day of event time; 0 = no limit)")] = None,
        update: Annotated[bool, typer.Option(
            "--update", help="swap the model of the running deployment for MODEL without "
                             "stopping it (queries keep their state by identity)")] = False,
        prefix: Annotated[str, typer.Option(
            help="the deployment's name (its actors' and consumer groups' prefix)")] = "caesar",
        observe_port: Annotated[int, typer.Option(
            help="port of the metrics (/metrics), probes (/healthz, /ready) and live "
                 "context view (/); 0 = none")] = 9464,
        observe_host: Annotated[str, typer.Option(
            help="address to serve them on (0.0.0.0 inside a pod)")] = "127.0.0.1",
        function: FunctionOption = None,
    ) -> None:
        """Start the CAESAR services for MODEL as Ray actors reading and writing Kafka,
        or (--update) swap the model of the running ones."""
        from caesar.services.ray_runtime.deployment import deploy_model, update_model

        plan = load_plan(model, function or (), settings_file)
        if update:
            update_model(plan, settings_file=settings_file, ray_address=ray_address,
                         prefix=prefix, console=err)
            return
        options: RunnerOptions = {"allowance": allowance, "max_ahead": max_ahead,
                                  "group_prefix": prefix}
        deploy_model(plan, model_text=model.read_text(), settings_file=settings_file,
                     ray_address=ray_address, run_for=run_for, console=err, options=options,
                     observe_host=observe_host, observe_port=observe_port)


def _engine(choice: EngineChoice) -> EngineFactory:
    if choice is EngineChoice.reference:
        from caesar.services.matcher.reference import ReferenceEngine

        return ReferenceEngine
    from caesar.services.matcher.engine import CythonEngine

    return CythonEngine


def _printer(as_json: bool) -> Callable[[Sequence[Alert]], None]:
    def show(alerts: Sequence[Alert]) -> None:
        if not alerts:
            return
        if as_json:
            for a in alerts:
                out.print_json(json.dumps({"type": a.event_type, "plan": a.plan_id,
                                           "partition": a.key, "start_ts": a.start_ts,
                                           "ts": a.end_ts, "fields": dict(a.fields)},
                                          default=str), indent=None)
            return
        table = Table("ts", "alert", "partition", "fields", box=None, show_header=False)
        for a in alerts:
            table.add_row(str(a.end_ts), a.event_type, a.key,
                          " ".join(f"{k}={v}" for k, v in a.fields.items()))
        out.print(table)
    return show


def _report(pipe: EmbeddedPipeline, count: int, elapsed: float, tables: bool) -> None:
    res = pipe.result
    for dl in res.dead_letters[:MAX_DEAD_SHOWN]:
        err.print(f"[yellow]dead letter[/yellow] ({dl.reason}) record {dl.offset}: "
                  f"{dl.detail}", markup=True, highlight=False)
    if len(res.dead_letters) > MAX_DEAD_SHOWN:
        reasons = Counter(d.reason for d in res.dead_letters)
        err.print(f"... {len(res.dead_letters) - MAX_DEAD_SHOWN} more dead letters "
                  f"(all: {dict(reasons)})")
    err.print(f"{count} events, {res.alerts_out} alerts, {len(res.context_changes)} "
              f"context changes, {len(res.dead_letters)} dead letters in {elapsed:.2f}s")
    if tables and pipe.acep is not None:
        from caesar.cli.tables_view import columns_of, print_tables, rows_in_key_order

        print_tables(out, rows_in_key_order(pipe.acep.tables()), columns_of(pipe.acep.plan))
