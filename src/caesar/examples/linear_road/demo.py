"""`caesar demo`: the Linear Road main job on the embedded default.

Local broker + local Ray (LocalRuntime), the CAESAR services for the Linear Road
model (Ray actors on Kafka), the Spark producer (generator, accelerated), the
Spark streaming alert consumer (Parquet + latency summary), then the Spark SQL
validator's comparison. The example registers the command through the
`caesar.commands` entry point (pyproject.toml), so the CLI knows no example.
"""

from __future__ import annotations

import os
import shutil
import time
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from caesar.errors import CaesarError

if TYPE_CHECKING:
    from caesar.settings import Settings

MODEL = Path(str(files("caesar.examples.linear_road") / "model.caesar"))


def register(app: typer.Typer) -> None:
    @app.command()
    def demo(
        xways: Annotated[int, typer.Option(help="expressways")] = 1,
        duration: Annotated[int, typer.Option(help="simulated seconds (the standard run: 10800)")
                            ] = 1080,
        segments: Annotated[str, typer.Option(
            help="keep the reports of segments LO:HI only (a slice of the standard load; "
                 "'all' = the whole road)")] = "82:90",
        scale: Annotated[float, typer.Option(help="load relative to the standard one")] = 1.0,
        seed: Annotated[int, typer.Option()] = 5,
        speed: Annotated[float, typer.Option(help="replay speed (x real time, 0 = max)")] = 10.0,
        out: Annotated[Path, typer.Option(help="Parquet output directory")] = Path(
            "caesar-demo-out"),
        fanout: Annotated[bool, typer.Option(help="per-segment partitions (SPEC.md)")] = True,
        idle_stop: Annotated[float, typer.Option(help="seconds without alerts = done")] = 30.0,
        broker_port: Annotated[int, typer.Option(help="port of the demo's own broker")] = 29092,
        ray_port: Annotated[int, typer.Option(help="port of the demo's own Ray head")] = 26379,  # outside Ray's worker port range 10002-19999
        keep_running: Annotated[bool, typer.Option(
            help="leave the demo's broker and Ray running afterwards")] = False,
        hops: Annotated[bool, typer.Option(
            help="print the latency per hop, read back from the topics")] = True,
    ) -> None:
        """Run Linear Road end to end and print the validation (zero differences expected)."""
        # The demo's head runs with token auth (src/caesar/runtime/ray_local.py), and so
        # must this driver, whatever a parent left in the environment. Ray reads it on
        # import, so before the import.
        os.environ["RAY_AUTH_MODE"] = "token"
        import ray

        from caesar.examples.linear_road.consume_alerts import MODEL_TOPICS, AlertConsumer
        from caesar.examples.linear_road.generator import GeneratorConfig, generate
        from caesar.examples.linear_road.produce import produce, produce_progress
        from caesar.examples.linear_road.records import position_reports
        from caesar.examples.linear_road.validate import MODEL as DEMO_TYPES
        from caesar.examples.linear_road.validate import inputs_from_generator, validate
        from caesar.jobs.spark_session import JARS_DIR, ensure_spark_jars, spark_session
        from caesar.language import compile_model
        from caesar.runtime.local import LocalRuntime
        from caesar.services.ray_runtime.deployment import Deployment
        from caesar.settings import CACHE_DIR, load_settings

        step = _Steps()
        plan = compile_model(MODEL)  # fail fast on a bad model, before starting anything
        # 1. Spark's Kafka connector (once, cached).
        if not any(JARS_DIR.glob("spark-sql-kafka*.jar")):
            step("fetching Spark's Kafka connector")
            ensure_spark_jars()
        # 2. A broker and a Ray head of the demo's own, in their own directory and
        # on their own ports: every run starts from empty topics, so offsets,
        # checkpoints and watermarks of an earlier run cannot leak into this one,
        # and a `caesar up` the user keeps running is left alone.
        base = load_settings()
        runtime_settings = base.runtime.model_copy(update={
            "runtime_dir": CACHE_DIR / "demo", "broker_port": broker_port,
            "controller_port": broker_port + 1, "ray_port": ray_port})
        runtime = LocalRuntime(runtime_settings)
        step("starting a fresh local Kafka broker and Ray head")
        runtime.down(progress=lambda *_: None)
        shutil.rmtree(runtime.dir, ignore_errors=True)
        runtime.up(base)
        bootstrap = runtime.bootstrap
        # The output topics carry few records: one partition each halves the
        # tasks of every Spark micro-batch (one per topic partition).
        settings = base.model_copy(update={
            "kafka": base.kafka.model_copy(update={"bootstrap_servers": bootstrap}),
            "topics": base.topics.model_copy(update={"partitions_by_topic": {
                **dict.fromkeys(MODEL_TOPICS.values(), 1),
                **base.topics.partitions_by_topic}})})
        deployment = None
        spark = None
        consumer = None
        try:
            # 3. The CAESAR services as Ray actors on the demo's Ray head.
            step(f"deploying the CAESAR services for the Linear Road model ({MODEL})")
            ray.init(address=runtime.ray().address, namespace=settings.ray.namespace,
                     include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
            # The producer ends every slice of simulated time with an input
            # watermark per partition: the scheduler releases the slice at once,
            # and the last one when the input ends (no wall-clock rule).
            deployment = Deployment(plan, settings)
            deployment.start()
            deployment.stats()  # every actor is up (raises if one died), before any input
            config = GeneratorConfig(xways=xways, duration_s=duration, seed=seed, scale=scale,
                                     segments=_segments(segments))
            step("starting Spark (local mode): alert consumer")
            # Spark pools its Kafka producers for 10 minutes by default: the
            # input's producer would outlive the run and log a warning a
            # second once the broker stops; close it once idle instead
            spark = spark_session("caesar-demo", kafka=True, conf={
                "spark.kafka.producer.cache.timeout": "5s",
                "spark.kafka.producer.cache.evictorThreadRunInterval": "2s"})
            consumer = AlertConsumer(spark, bootstrap, out, MODEL_TOPICS, trigger_s=0.5, fresh=True)
            # 4. Input, paced; 5. wait until the alerts stop coming.
            step(f"producing Linear Road reports (standard load x{scale}): {xways} "
                 f"expressway(s), {duration} s simulated, segments {segments}, "
                 f"speed {speed or 'max'}")
            started = time.monotonic()
            with produce_progress(duration) as progress:
                produce(spark, position_reports(generate(config)), bootstrap, speed=speed,
                        progress=progress, fanout=fanout)
            step(f"waiting for the alerts (done after {idle_stop:.0f} s without new ones)")
            consumer.wait_idle(idle_stop, max_s=duration + 600)
            typer.echo(f"pipeline done in {time.monotonic() - started:.0f} s")
            consumer.stop()
            typer.echo(consumer.summary().render())
            if hops:
                typer.echo(_hop_breakdown(settings, out))
            # 6. Validation against plain Spark SQL over the same input.
            step("validating against plain Spark SQL over the same input")
            result = validate(spark, inputs_from_generator(spark, config), out, DEMO_TYPES)
            typer.echo(result.summary())
        finally:
            if consumer is not None:
                consumer.stop()
            if deployment is not None:
                deployment.stop()
            if ray.is_initialized():
                ray.shutdown()
            if spark is not None:
                spark.stop()
            if not keep_running:
                runtime.down(progress=lambda *_: None)
        if not result.ok:
            raise CaesarError("validation found differences (see above)")


def _segments(text: str) -> tuple[int, int] | None:
    if text.strip().lower() == "all":
        return None
    try:
        lo, hi = (int(v) for v in text.split(":"))
    except ValueError:
        raise typer.BadParameter(f"--segments must be LO:HI or 'all', not {text!r}") from None
    return lo, hi


def _hop_breakdown(settings: Settings, out: Path) -> str:
    """Where the latency went: input wait, each service, Spark (src/caesar/examples/linear_road/hops.py)."""
    from caesar.bus.kafka import KafkaBus
    from caesar.codecs import make_codec
    from caesar.examples.linear_road.avro import repository
    from caesar.examples.linear_road.hops import breakdown
    from caesar.examples.linear_road.produce import DEFAULT_TOPIC

    bus = KafkaBus(settings.kafka)
    try:
        return breakdown(bus, make_codec(settings, repository()), settings.topics, DEFAULT_TOPIC,
                         out).render()
    finally:
        bus.close()


class _Steps:
    """Numbered progress lines for a long run."""

    def __init__(self) -> None:
        self.n = 0
        self.t0 = time.monotonic()

    def __call__(self, text: str) -> None:
        self.n += 1
        typer.secho(f"[demo {self.n} | {time.monotonic() - self.t0:5.0f} s] {text}", bold=True)
