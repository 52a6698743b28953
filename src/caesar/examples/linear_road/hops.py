"""Where the latency of a Linear Road run on Kafka + Ray goes, per hop: the
generic breakdown (caesar/jobs/hops.py) fed with Linear Road's input topic and
output topics, read back after the run (nothing in the services is changed
for it). The hops: input wait, scheduler, deriver, router, matcher, to topic
(total), and with the alert consumer's Parquet output, spark and to table
(total). See caesar/jobs/hops.py for how each is timed.

    python -m caesar.examples.linear_road.hops --bootstrap 127.0.0.1:29092 [--parquet out/linear-road]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from caesar.jobs.hops import HOPS, HopTable, Output, input_arrivals, read_topic
from caesar.jobs.hops import breakdown as generic_breakdown

if TYPE_CHECKING:
    from caesar.bus.protocol import Bus
    from caesar.codecs import Codec
    from caesar.settings import TopicSettings

__all__ = ["HOPS", "OUTPUT_TOPICS", "HopTable", "breakdown", "read_topic"]

OUTPUT_TOPICS = {"lr-tolls": "TollNotification", "lr-accident-alerts": "AccidentAlert"}


def breakdown(bus: Bus, codec: Codec, topics: TopicSettings, input_topic: str,
              parquet: Path | None = None) -> HopTable:
    from caesar.examples.linear_road.avro import POSITION_REPORT
    from caesar.examples.linear_road.partitioning import MS_PER_S

    outputs = []
    for topic in OUTPUT_TOPICS:
        for r in read_topic(bus, topic):
            assert r.value is not None and r.key is not None  # outputs are keyed records
            _, value = codec.decode(r.value)
            # Outputs carry their second, transactions the ms event time (SPEC 1):
            # an output is timed by its second's last transaction on its partition.
            outputs.append(Output(r.key.decode(), value["time"] * MS_PER_S, value["ingest_ms"],
                                  r.timestamp_ms, span_ms=MS_PER_S))
    spark_ms, table_ms = _parquet_latencies(parquet) if parquet is not None else ([], [])
    arrivals = input_arrivals(bus, codec, [input_topic], {POSITION_REPORT: "ts"})
    return generic_breakdown(bus, codec, arrivals, topics, outputs, spark_ms, table_ms)


def _parquet_latencies(out: Path) -> tuple[list[int], list[int]]:
    """(written - output Kafka ts, written - ingest) of every row the consumer wrote."""
    import pyarrow.parquet as pq

    from caesar.jobs.consume import BATCH_TIMES

    path = out / BATCH_TIMES
    if not path.exists():
        return [], []
    batch_ms = {int(k): v for k, v in json.loads(path.read_text()).items()}
    spark_ms: list[int] = []
    table_ms: list[int] = []
    for etype in OUTPUT_TOPICS.values():
        d = out / etype  # the consumer writes one folder per output type
        if not d.is_dir():
            continue
        table = pq.read_table(str(d), columns=["kafka_ms", "ingest_ms", "batch_id"]).to_pydict()
        for kafka_ms, ingest, b in zip(table["kafka_ms"], table["ingest_ms"], table["batch_id"],
                                       strict=True):
            if b in batch_ms:
                spark_ms.append(batch_ms[b] - kafka_ms)
                table_ms.append(batch_ms[b] - ingest)
    return spark_ms, table_ms


def main(argv: list[str] | None = None) -> None:
    from caesar.bus.kafka import KafkaBus
    from caesar.codecs import make_codec
    from caesar.examples.linear_road.avro import repository
    from caesar.settings import KafkaSettings, load_settings

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--input-topic", default="lr-position-reports")
    ap.add_argument("--parquet", type=Path, help="the alert consumer's output directory")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    settings = load_settings()
    bus = KafkaBus(KafkaSettings(bootstrap_servers=args.bootstrap))
    try:
        table = breakdown(bus, make_codec(settings, repository()), settings.topics,
                          args.input_topic, args.parquet)
    finally:
        bus.close()
    print(json.dumps(table.as_json()) if args.json else table.render())


if __name__ == "__main__":
    main()
