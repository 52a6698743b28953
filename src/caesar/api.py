"""The Python API: compile a model, run it in this process, deploy it.

    import caesar

    model = caesar.compile("model.caesar")        # or the model text
    with model.session() as session:
        out = session.push([{"type": "Report", "ts": 1, "car": 7, "speed": 120}])
        out.alerts, out.context_changes, out.dead_letters
        session.contexts({"car": 7})               # contexts holding for car 7

A session runs the same processors as the services (scheduler, deriver,
router, matcher) in this process: what it returns is what the Kafka + Ray
deployment writes to its topics for the same input. docs/python.md has the
whole API with examples.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Unpack

from caesar.errors import CaesarError
from caesar.language import Compilation, compile_phases
from caesar.language.independent import context_independent
from caesar.plans.execution import ExecutionPlan
from caesar.services.common.messages import (
    Alert,
    ContextChange,
    DeadLetter,
    InputRecord,
    partition_id,
    partition_key,
)

if TYPE_CHECKING:
    from caesar.services.common.config import EngineFactory, RunnerOptions
    from caesar.services.common.plans import UpgradePlan
    from caesar.services.embedded.pipeline import EmbeddedPipeline
    from caesar.services.ray_runtime.deployment import Deployment
    from caesar.settings import Settings

Engine = Literal["cython", "reference"]
Event = Mapping[str, Any]  # {"type": <event type>, <attribute>: <value>, ...}
AlertCallback = Callable[[Alert], None]


@dataclass
class Output:
    """What one call of a session produced, in event-time order."""

    alerts: list[Alert] = field(default_factory=list)
    context_changes: list[ContextChange] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.alerts or self.context_changes or self.dead_letters)


class Model:
    """A compiled model: its plan, explain output, sessions and deployments."""

    def __init__(self, compilation: Compilation, *, context_aware: bool = True) -> None:
        self.compilation = compilation
        plan = compilation.execution
        self.plan: ExecutionPlan = plan if context_aware else context_independent(plan)

    @property
    def name(self) -> str:
        return self.plan.model

    @property
    def event_types(self) -> dict[str, dict[str, str]]:
        """Event type -> attribute -> type ("int", "float", "string", "bool")."""
        return {t.name: dict(t.fields) for t in self.plan.event_types}

    @property
    def contexts(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.plan.contexts)

    def explain(self, format: Literal["text", "dot"] = "text") -> str:
        """The plan before and after optimization (`caesar explain`)."""
        from caesar.language.explain import explain_dot, explain_text

        if format == "dot":
            return explain_dot(self.compilation)
        if format == "text":
            return explain_text(self.compilation)
        raise CaesarError(f"unknown explain format {format!r} (text or dot)")

    def session(self, *, allowance: int = 0, engine: Engine = "cython", batch_size: int = 2000,
                on_alert: AlertCallback | None = None, scheduler: str = "lwm") -> Session:
        """Run the model in this process. `allowance`: how far behind the
        newest event time an event may arrive and still count (else it is a
        dead letter, reason "late"). `scheduler`: the stream-transaction
        scheduler of a model with shared tables ("lwm", "s2pl" or "sei")."""
        return Session(self, allowance=allowance, engine=engine, batch_size=batch_size,
                       on_alert=on_alert, scheduler=scheduler)

    def deploy(self, settings: Settings | None = None, **options: Any) -> Deployment:
        """Start the model's services as Ray actors on Kafka (see `caesar.deploy`)."""
        return deploy(self, settings, **options)


def compile(source: str | Path, *, context_aware: bool = True,  # noqa: A001
            functions: Mapping[str, Callable[..., Any] | str] | None = None) -> Model:
    """Compile a model from its text or a `.caesar` file. A bad model raises
    `caesar.ModelError` carrying `position` (file, line, column).

    `functions`: user-defined scalar functions the model may call by name,
    each a callable (its signature from annotations) or an import path
    `"package.module:function"`; with those registered by `@caesar.function`.
    """
    from caesar.plans.functions import resolve

    return Model(compile_phases(source, functions=resolve(functions)),
                 context_aware=context_aware)


class Session:
    """The model running in this process on events you push."""

    def __init__(self, model: Model, *, allowance: int = 0, engine: Engine = "cython",
                 batch_size: int = 2000, on_alert: AlertCallback | None = None,
                 scheduler: str = "lwm") -> None:
        from caesar.services.embedded.pipeline import EmbeddedPipeline

        if batch_size < 1:
            raise CaesarError(f"batch_size must be at least 1, not {batch_size}")
        self.model = model
        self.batch_size = batch_size
        self._pipeline: EmbeddedPipeline = EmbeddedPipeline(
            model.plan, allowance=allowance, engine_factory=_engine_factory(engine),
            batch_size=batch_size, acep_scheduler=scheduler)
        self._callbacks: list[AlertCallback] = [on_alert] if on_alert is not None else []
        self._offset = 0
        self._finished = False

    # ---- input
    def push(self, events: Iterable[Event]) -> Output:
        """Hand events to the scheduler. Events of a timestamp are released once
        event time has moved past it (plus the allowance): an output appears
        when a later event, `advance` or `finish` says its time is complete."""
        self._check_open()
        records = []
        for event in events:
            records.append(InputRecord("python", 0, self._offset, dict(event)))
            self._offset += 1
        return self._collect(lambda: self._pipeline.feed(records))

    def advance(self, watermark: int) -> Output:
        """Promise that no event with a timestamp below `watermark` follows:
        everything before it is processed now (a later event below it is late)."""
        self._check_open()
        return self._collect(lambda: self._pipeline.advance(watermark))

    def finish(self) -> Output:
        """End of input: process everything still held back."""
        if self._finished:
            return Output()
        out = self._collect(self._pipeline.finish)
        self._finished = True
        return out

    def run(self, events: Iterable[Event]) -> Iterator[Alert]:
        """Every alert of `events` (pushed in batches), then of the end of input."""
        it = iter(events)
        while chunk := list(islice(it, self.batch_size)):
            yield from self.push(chunk).alerts
        yield from self.finish().alerts

    # ---- what holds
    def contexts(self, partition: str | Event) -> tuple[str, ...]:
        """The contexts holding for a stream partition after the events
        processed so far: give its key text ("7" or "4|0|12") or an event."""
        key = partition if isinstance(partition, str) else \
            partition_key(partition, self.model.plan.partition_by)
        return self._pipeline.contexts(partition_id(key))

    def tables(self) -> dict[str, list[dict[str, Any]]]:
        """The shared tables' rows (ACEP) after the events processed so far,
        each table's rows in key order."""
        acep = self._pipeline.acep
        if acep is None:
            return {}
        return {name: [dict(row) for _, row in sorted(rows.items())]
                for name, rows in acep.tables().items()}

    def on_alert(self, callback: AlertCallback) -> None:
        """Call `callback` with every alert as it is produced."""
        self._callbacks.append(callback)

    # ---- plumbing
    def _collect(self, step: Callable[[], object]) -> Output:
        """What one step produced, handed over and no longer held by the
        pipeline: a session streaming for days keeps none of its outputs."""
        step()
        taken = self._pipeline.result.take()
        out = Output(taken.alerts, taken.context_changes, taken.dead_letters)
        for alert in out.alerts:
            for callback in self._callbacks:
                callback(alert)
        return out

    def _check_open(self) -> None:
        if self._finished:
            raise CaesarError("this session has finished; start a new one with model.session()")

    def __enter__(self) -> Session:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.finish()


def deploy(model: Model, settings: Settings | None = None,
           **options: Unpack[RunnerOptions]) -> Deployment:
    """Start the model's services as Ray actors reading and writing Kafka
    (`caesar deploy` from Python). Connects to Ray at `settings.ray.address`
    (or starts a local one) unless `ray.init` was called; returns the running
    deployment: `stats()`, `tables()`, `stop()`. Options: `allowance`,
    `group_prefix`."""
    from caesar.runtime.ray_local import use_token_auth

    use_token_auth()
    import ray

    from caesar.services.ray_runtime.deployment import Deployment
    from caesar.settings import load_settings

    settings = settings or load_settings()
    if not ray.is_initialized():
        ray.init(address=settings.ray.address, namespace=settings.ray.namespace,
                 include_dashboard=False, log_to_driver=False)
    deployment = Deployment(model.plan, settings, options=options)
    deployment.start()
    return deployment


def update(model: Model, settings: Settings | None = None, *,
           prefix: str = "caesar") -> UpgradePlan:
    """Swap the model of the running deployment `prefix` for `model` without
    stopping its input (`caesar deploy --update`): queries keep their state by
    identity (@name, else their text), removed ones drop it, new ones start
    empty; UpgradeError names a query whose state cannot carry over. Returns
    what happened to the queries. (`deployment.update(model.plan)` does the
    same on a Deployment this process started.)"""
    return attach(settings, prefix=prefix).update(model.plan)


def attach(settings: Settings | None = None, *, prefix: str = "caesar") -> Deployment:
    """The deployment running as `prefix` (`caesar deploy --prefix`) in the
    settings' Ray namespace, started by another process: `stats()`,
    `tables()`, `update(plan)`. Connects like `deploy` unless `ray.init` was
    called; RuntimeEnvironmentError when no such deployment runs."""
    from caesar.runtime.ray_local import use_token_auth

    use_token_auth()
    import ray

    from caesar.services.ray_runtime.deployment import Deployment
    from caesar.settings import load_settings

    settings = settings or load_settings()
    if not ray.is_initialized():
        ray.init(address=settings.ray.address, namespace=settings.ray.namespace,
                 include_dashboard=False, log_to_driver=False)
    return Deployment.attach(settings, prefix)


def _engine_factory(engine: Engine) -> EngineFactory:
    if engine == "cython":
        from caesar.services.matcher.engine import CythonEngine

        return CythonEngine
    if engine == "reference":
        from caesar.services.matcher.reference import ReferenceEngine

        return ReferenceEngine
    raise CaesarError(f"unknown engine {engine!r} (cython or reference)")
