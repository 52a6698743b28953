"""What the Spark jobs need to know about a model: its compiled plan, its input
event types and the topics they come from, its output types and the topics the
matcher writes them to, the Avro schema of each, and its time unit.

Input types are the EVENTs with FROM TOPIC (the scheduler reads exactly those);
output types are the derived types of the stages whose results leave the
services (TO TOPIC, else `<model>.<EventType>`, see language/physical.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from caesar.codecs import Codec, SchemaRepository
from caesar.errors import CaesarError
from caesar.plans.aggregate import AggregatePlan
from caesar.plans.execution import EventTypeDef, ExecutionPlan
from caesar.plans.pattern import PatternPlan
from caesar.plans.temporal import TemporalPlan

if TYPE_CHECKING:
    from caesar.settings import Settings

# Milliseconds per unit of event time (TIME UNIT; SECONDS when the model says none).
UNIT_MS = {"MILLISECONDS": 1, "SECONDS": 1000, "MINUTES": 60_000, "HOURS": 3_600_000,
           "DAYS": 86_400_000}


@dataclass(frozen=True)
class JobModel:
    plan: ExecutionPlan
    unit_ms: int  # ms per event-time unit

    @classmethod
    def load(cls, model: str | Path) -> JobModel:
        from caesar.language import compile_model, parse

        path = Path(model)
        if not path.is_file():
            raise CaesarError(f"model file {path} does not exist")
        plan = compile_model(path)  # a bad model fails here, with line and column
        unit = parse(path.read_text(encoding="utf-8"), str(path)).time_unit or "SECONDS"
        return cls(plan, UNIT_MS[unit])

    def with_input_topics(self, topics: dict[str, str]) -> JobModel:
        """This model with other input topics for some types (type -> topic): for a
        deployment whose settings moved them (tests, several runs on one broker)."""
        from dataclasses import replace

        unknown = set(topics) - {t.name for t in self.input_types}
        if unknown:
            raise CaesarError(f"not input event types of {self.name}: {', '.join(sorted(unknown))}")
        types = tuple(replace(t, topic=topics.get(t.name, t.topic)) for t in self.plan.event_types)
        return replace(self, plan=replace(self.plan, event_types=types))

    @property
    def name(self) -> str:
        return self.plan.model

    @property
    def types(self) -> dict[str, EventTypeDef]:
        return {t.name: t for t in self.plan.event_types}

    @property
    def input_types(self) -> list[EventTypeDef]:
        return [t for t in self.plan.event_types if t.topic is not None]

    def input_topics(self) -> list[str]:
        return list(dict.fromkeys(t.topic for t in self.input_types if t.topic))

    def output_topics(self) -> dict[str, list[str]]:
        """Output topic -> the event types the matcher writes to it."""
        out: dict[str, list[str]] = {}
        for stage in (*self.plan.matcher_stages, *self.plan.deriver_stages):
            if stage.output_topic:
                types = out.setdefault(stage.output_topic, [])
                name = _output_type(stage.plan)
                if name not in types:
                    types.append(name)
            timeout = getattr(stage.plan, "timeout", None)
            if stage.timeout_topic and timeout is not None:  # ON TIMEOUT events
                types = out.setdefault(stage.timeout_topic, [])
                if timeout.event_type not in types:
                    types.append(timeout.event_type)
        return out

    def output_types(self) -> list[str]:
        return list(dict.fromkeys(t for ts in self.output_topics().values() for t in ts))

    def input_schema_names(self, repo: SchemaRepository) -> dict[str, str]:
        """Input type -> the Avro schema its records are written with: the model's
        SCHEMA when it names one, else the generated `caesar.input.<Type>` (as
        the services' own producer does, bus_pipeline.produce_inputs)."""
        from caesar.services.common.wire import register_input_schemas, register_model_schemas

        names = register_input_schemas(repo, self.plan)
        names.update(register_model_schemas(repo, self.plan))
        return {t.name: names[t.name] for t in self.input_types}

    def own_schema_types(self, repo: SchemaRepository) -> dict[str, str]:
        """Avro schema full name -> output type, for the outputs the model gives a SCHEMA."""
        from caesar.services.common.wire import register_model_schemas

        outputs = set(self.output_types())
        return {schema: etype for etype, schema in register_model_schemas(repo, self.plan).items()
                if etype in outputs}

    def codec(self, settings: Settings | None = None) -> Codec:
        """The settings' codec (single-object or Schema Registry) knowing this
        model's input and output schemas."""
        from caesar.codecs import make_codec

        codec = make_codec(settings)
        self.input_schema_names(codec.repository)
        return codec


def _output_type(plan: PatternPlan | AggregatePlan | TemporalPlan) -> str:
    if isinstance(plan, AggregatePlan):
        return plan.output_type
    # A pattern without an output derives events named after the plan (as the engines do).
    return plan.output.event_type if plan.output is not None else plan.plan_id
