"""The per-hop latency breakdown (src/caesar/examples/linear_road/hops.py) on hand-made topics:
each hop is the difference of the Kafka timestamps of the records that carry
one Linear Road output through the services."""

from __future__ import annotations

from caesar.bus.memory import InMemoryBus
from caesar.bus.records import OutRecord, TopicSpec
from caesar.codecs import make_codec
from caesar.examples.linear_road.avro import POSITION_REPORT, TOLL_NOTIFICATION, encode, repository
from caesar.examples.linear_road.hops import breakdown
from caesar.services.common.columnar import batch_record, routed_record
from caesar.services.common.messages import (
    Progress,
    RoutedBatch,
    RoutedTransaction,
    Transaction,
    TxnBatch,
)
from caesar.services.common.wire import PROGRESS, ROUTED_BATCH, TXN_BATCH, progress_record
from caesar.settings import TopicSettings

KEY = "0|0|3"
SCHEMAS = {"PositionReport": dict.fromkeys(
    ("ts", "time", "vid", "spd", "xway", "lane", "dir", "seg", "pos", "pseg"), "int")}


def report(t: int) -> dict:
    return {"ts": 1000 * t, "time": t, "vid": 1, "spd": 50, "xway": 0, "lane": 1, "dir": 0,
            "seg": 3, "pos": 3 * 5280, "pseg": 3}


def test_hops_are_differences_of_kafka_timestamps() -> None:
    table = hop_table(KEY, 0)
    got = {hop: stats[3] for hop, stats in table.percentiles().items()}
    assert got == {"input wait": 1000, "scheduler": 100, "deriver": 150, "router": 50,
                   "matcher": 300, "to topic (total)": 1600}
    assert table.outputs == 1 and table.idle_released == 0
    assert "router" in table.render()


def test_an_output_of_a_context_partition_is_timed_by_its_stream_partitions_transaction():
    """Outputs are keyed by their context partition (the stream key, then the
    context key's values: "0|0|3|1"), and carry their second while the
    transaction has the report's millisecond (the 417th of second 10)."""
    table = hop_table(KEY + "|1", 417)
    assert table.outputs == 1
    assert table.percentiles()["matcher"][3] == 300
    other = hop_table("0|0|4|1", 417)  # another stream partition's: not timed, and said why
    assert other.outputs == 0 and other.untimed["without a stream partition"] == 1
    assert "1 without a stream partition" in other.render()


def hop_table(output_key: str, ms: int):
    codec, topics = make_codec(None, repository()), TopicSettings()
    bus = InMemoryBus()
    names = ["lr-position-reports", topics.transactions, topics.context_changes,
             topics.transactions + ".routed", "lr-tolls"]
    bus.create_topics(TopicSpec(n, 1) for n in names)
    txn = Transaction(7, KEY, 10_000 + ms,
                      ({"type": "PositionReport", **report(10), "ts": 10_000 + ms},))
    toll = {"vid": 1, "time": 10, "xway": 0, "dir": 0, "seg": 3, "lav": 40, "toll": 0,
            "ingest_ms": 1000}
    records = [
        # the report at 10 enters at 1000, the first report of second 11 at 2000
        ("lr-position-reports", encode(POSITION_REPORT, [report(10)])[0], 1000),
        ("lr-position-reports", encode(POSITION_REPORT, [report(11)])[0], 2000),
        (topics.transactions,
         codec.encode(TXN_BATCH, batch_record(TxnBatch.of([txn], SCHEMAS), 1)), 2100),
        (topics.context_changes,
         codec.encode(PROGRESS, progress_record(Progress(10_000 + ms, "deriver"), "d", 0)), 2250),
        (topics.transactions + ".routed",
         codec.encode(ROUTED_BATCH, routed_record(
             RoutedBatch.of([RoutedTransaction(txn, ("p",))], SCHEMAS), 1)), 2300),
    ]
    bus.producer().produce(OutRecord(t, v, KEY.encode(), partition=0, timestamp_ms=at)
                           for t, v, at in records)
    bus.producer().produce([OutRecord("lr-tolls", encode(TOLL_NOTIFICATION, [toll])[0],
                                      output_key.encode(), partition=0, timestamp_ms=2600)])
    return breakdown(bus, codec, topics, "lr-position-reports")
