"""Listing 1 end to end on Kafka + Ray, in one command:

    python -m caesar.examples.aggressive_driving.kafka_ray

Starts a private local Kafka broker (KRaft) and Ray head on free ports in a
temporary directory, deploys the model's services as Ray actors, produces the
example's car sensor readings (Avro, keyed by car), reads the alerts back from
Kafka, prints them and checks them against embedded mode (`caesar run`) on
the same data; stops everything at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from caesar.examples.aggressive_driving.generate import DATA

MODEL = Path(__file__).with_name("model.caesar")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=MODEL)
    ap.add_argument("--input", type=Path, default=DATA)
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for alerts")
    args = ap.parse_args(argv)
    # Ray reads it on import: this driver and the private head run without token auth.
    os.environ["RAY_AUTH_MODE"] = "disabled"
    import ray

    from caesar.codecs import make_codec
    from caesar.language import compile_model
    from caesar.runtime.local import LocalRuntime
    from caesar.runtime.processes import free_port
    from caesar.services.common.config import ServiceConfig
    from caesar.services.embedded.bus_pipeline import produce_inputs, read_alerts
    from caesar.services.embedded.pipeline import EmbeddedPipeline
    from caesar.services.ray_runtime.deployment import Deployment
    from caesar.settings import KafkaSettings, LocalRuntimeSettings, Settings, TopicSettings

    plan = compile_model(args.model)
    events = [{"type": "CarSensor", **json.loads(line)}
              for line in args.input.read_text().splitlines() if line.strip()]
    expected = EmbeddedPipeline(plan).run_values(events).alerts
    with tempfile.TemporaryDirectory(prefix="caesar-ad-") as tmp:
        port = free_port()
        runtime = LocalRuntime(LocalRuntimeSettings(
            runtime_dir=Path(tmp), broker_port=port, controller_port=free_port(),
            ray_port=free_port()))
        print(f"starting a local Kafka broker and Ray head in {tmp}", flush=True)
        runtime.up(create_topics=False, progress=lambda *_: None)
        deployment = None
        try:
            topics = TopicSettings(partitions=2)
            settings = Settings(kafka=KafkaSettings(bootstrap_servers=runtime.bootstrap),
                                topics=topics)
            ray.init(address=runtime.ray().address, include_dashboard=False,
                     log_to_driver=False, ignore_reinit_error=True)
            deployment = Deployment(plan, settings, options={"idle_flush_s": 1.0})
            deployment.start()
            deployment.stats()  # every actor answers before the input starts
            cfg = ServiceConfig(plan, topics, make_codec(settings), (0, 1), "example")
            from caesar.bus.kafka import KafkaBus

            bus = KafkaBus(settings.kafka)
            try:
                n = produce_inputs(bus, cfg, events)
                print(f"produced {n} readings to {cfg.input_topics()[0]}", flush=True)
                want = {a.identity() for a in expected}
                deadline = time.monotonic() + args.timeout
                got = read_alerts(bus, cfg)
                while {a.identity() for a in got} < want and time.monotonic() < deadline:
                    time.sleep(0.5)
                    got = read_alerts(bus, cfg)
            finally:
                bus.close()
        finally:
            if deployment is not None:
                deployment.stop()
            if ray.is_initialized():
                ray.shutdown()
            runtime.down(progress=lambda *_: None)
    for a in sorted(got, key=lambda a: (a.end_ts, a.key)):
        f = a.fields
        print(f"t={a.end_ts} car {f['id']} avg_speed={f['avg_speed']:.1f} "
              f"A=[{f['A_ts']},{f['A_te']}) B=[{f['B_ts']},{f['B_te']}) "
              f"C=[{f['C_ts']},{'open' if f['C_te'] is None else f['C_te']})")
    same = sorted(a.identity() for a in got) == sorted(a.identity() for a in expected)
    print(f"{len(got)} alerts from Kafka + Ray; embedded mode: {len(expected)}; "
          f"{'identical' if same else 'DIFFERENT'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
