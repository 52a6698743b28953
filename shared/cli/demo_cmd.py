"""`caesar demo`: the Linear Road main job on the embedded default.

Local broker + local Ray (LocalRuntime), the CAESAR services for the Linear Road
model (Ray actors on Kafka), the Spark producer (generator, accelerated), the
Spark streaming alert consumer (Parquet + latency summary), then the Spark SQL
validator's comparison. SKELETON by helper E: the Spark steps are the tested
jobs in jobs/linear_road/; the service wiring (step 3) is the coordinator's to
finish and verify.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Annotated

import typer

from shared.errors import CaesarError

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "examples" / "linear_road" / "model.caesar"


def register(app: typer.Typer) -> None:
    @app.command()
    def demo(
        xways: Annotated[int, typer.Option(help="expressways")] = 1,
        duration: Annotated[int, typer.Option(help="simulated seconds")] = 600,
        cars: Annotated[int, typer.Option(help="car trips per expressway and direction")] = 300,
        seed: Annotated[int, typer.Option()] = 3,
        speed: Annotated[float, typer.Option(help="replay speed (x real time, 0 = max)")] = 10.0,
        out: Annotated[Path, typer.Option(help="Parquet output directory")] = Path(
            "caesar-demo-out"),
        fanout: Annotated[bool, typer.Option(help="per-segment partitions (SPEC.md)")] = True,
        idle_stop: Annotated[float, typer.Option(help="seconds without alerts = done")] = 30.0,
    ) -> None:
        """Run Linear Road end to end and print the validation (zero differences expected)."""
        from jobs.linear_road.consume_alerts import AlertConsumer
        from jobs.linear_road.generator import GeneratorConfig, generate
        from jobs.linear_road.produce import print_progress, produce
        from jobs.linear_road.validate import reports_from_generator, validate
        from jobs.spark_session import JARS_DIR, spark_session
        from shared.language import compile_model
        from shared.runtime.local import LocalRuntime
        from shared.settings import load_settings

        # 1. Spark's Kafka connector (once, cached).
        if not any(JARS_DIR.glob("spark-sql-kafka*.jar")):
            subprocess.run(["bash", str(ROOT / "scripts" / "fetch_spark_jars.sh")], check=True)
        # 2. Local broker + Ray.
        settings = load_settings()
        runtime = LocalRuntime(settings.runtime)
        runtime.up(settings)
        bootstrap = runtime.bootstrap
        settings = load_settings(**{"kafka": {**settings.kafka.model_dump(),
                                               "bootstrap_servers": bootstrap}})
        # 3. The CAESAR services for the model (coordinator: verify this wiring).
        from services.ray_runtime.deployment import Deployment

        plan = compile_model(MODEL)
        deployment = Deployment(plan, settings)
        deployment.create_topics()
        deployment.start()
        config = GeneratorConfig(xways=xways, duration_s=duration, cars_per_direction=cars,
                                 seed=seed)
        spark = spark_session("caesar-demo", kafka=True)
        consumer = AlertConsumer(spark, bootstrap, out, fresh=True)
        try:
            # 4. Input, paced; 5. wait until the alerts stop coming.
            started = time.monotonic()
            produce(spark, generate(config), bootstrap, speed=speed, progress=print_progress,
                    fanout=fanout)
            consumer.wait_idle(idle_stop, max_s=duration + 600)
            typer.echo(f"pipeline done in {time.monotonic() - started:.0f} s")
        finally:
            consumer.stop()
            deployment.stop()
        typer.echo(consumer.summary().render())
        # 6. Validation against plain Spark SQL over the same input.
        result = validate(spark, reports_from_generator(spark, config), out)
        typer.echo(result.summary())
        if not result.ok:
            raise CaesarError("validation found differences (see above)")
