"""Spark Structured Streaming alert consumer for Linear Road: the generic
consumer (caesar/jobs/consume.py) on the Linear Road model. Its two outputs
have SCHEMAs of their own, so the tables `TollNotification/` and
`AccidentAlert/` hold their fields (vid, time, ..., ingest_ms) plus where each
record came from (kafka_topic, kafka_partition, kafka_offset, kafka_ms,
batch_id); records that do not decode go to `_undecodable/` with the reason.
A summary gives counts per type and latency p50/p99/max.

Latency of an alert = the time its micro-batch finished writing to Parquet minus
`ingest_ms`, the Kafka timestamp of the position report that triggered it (the
pipeline copies it into the alert).

    python -m caesar.examples.linear_road.consume_alerts --bootstrap 127.0.0.1:9092 --out /tmp/lr-alerts \\
        --idle-stop 20 --max-seconds 600
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from caesar.examples.linear_road.avro import ACCIDENT_ALERT, TOLL_CHARGE, TOLL_NOTIFICATION
from caesar.jobs.consume import BATCH_TIMES, ConsumeSummary, OutputConsumer, TypeSummary

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_TOPICS = {TOLL_NOTIFICATION: "lr-tolls", ACCIDENT_ALERT: "lr-accident-alerts"}
# Every output of model.caesar (the demo reads and validates all three).
MODEL_TOPICS = {**DEFAULT_TOPICS, TOLL_CHARGE: "lr-toll-charges"}

__all__ = ["BATCH_TIMES", "DEFAULT_TOPICS", "MODEL_TOPICS", "AlertConsumer", "ConsumeSummary", "TypeSummary"]


class AlertConsumer(OutputConsumer):
    """A running streaming query writing the Linear Road output topics to `out_dir`."""

    def __init__(self, spark: SparkSession, bootstrap: str, out_dir: str | Path,
                 topics: dict[str, str] | None = None, trigger_s: float = 1.0,
                 fresh: bool = False, writer: str = "arrow",
                 kafka_options: dict[str, str] | None = None) -> None:
        from caesar.examples import model_path
        from caesar.jobs.job_model import JobModel
        from caesar.settings import load_settings

        settings = load_settings()
        settings = settings.model_copy(update={"kafka": settings.kafka.model_copy(
            update={"bootstrap_servers": bootstrap})})
        names = topics or DEFAULT_TOPICS
        super().__init__(spark, JobModel.load(model_path("linear_road")), settings,
                         str(out_dir), writer=writer, kafka_options=kafka_options,
                         trigger_s=trigger_s, fresh=fresh, topics=list(names.values()))
        self.read_types = {schema.rsplit(".", 1)[-1] for schema in names}


def main(argv: list[str] | None = None) -> int:
    from caesar.jobs.kafka_options import add_kafka_option_argument, spark_kafka_options
    from caesar.jobs.spark_session import spark_session

    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--out", required=True, help="Parquet output directory")
    parser.add_argument("--toll-topic", default=DEFAULT_TOPICS[TOLL_NOTIFICATION])
    parser.add_argument("--alert-topic", default=DEFAULT_TOPICS[ACCIDENT_ALERT])
    parser.add_argument("--idle-stop", type=float, default=20.0,
                        help="stop after this many seconds without new alerts")
    parser.add_argument("--max-seconds", type=float, default=3600.0)
    parser.add_argument("--fresh", action="store_true", help="delete --out first")
    parser.add_argument("--trigger", type=float, default=1.0, help="micro-batch interval (s)")
    parser.add_argument("--writer", choices=("arrow", "spark"), default="arrow",
                        help="Parquet writer: one file per micro-batch from the driver "
                             "(arrow, ~20 ms) or a Spark write per batch (spark, ~1-2 s)")
    add_kafka_option_argument(parser)
    args = parser.parse_args(argv)

    spark = spark_session("caesar-lr-consume-alerts", kafka=True)
    consumer = AlertConsumer(spark, args.bootstrap, args.out,
                             {TOLL_NOTIFICATION: args.toll_topic,
                              ACCIDENT_ALERT: args.alert_topic}, trigger_s=args.trigger,
                             fresh=args.fresh, writer=args.writer,
                             kafka_options=spark_kafka_options(args.kafka_option))
    print(f"[consume] reading {args.toll_topic}, {args.alert_topic} -> {args.out}", flush=True)
    try:
        consumer.wait_idle(args.idle_stop, args.max_seconds)
    finally:
        consumer.stop()
    print(consumer.summary().render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
