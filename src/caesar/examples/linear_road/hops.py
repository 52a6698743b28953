"""Where the latency of a Kafka + Ray run goes: a per-hop breakdown read back
from the topics after the run (nothing in the services is changed for it).

Every record on a topic carries its Kafka timestamp (CreateTime = when the
service that wrote it produced it), so for each Linear Road output the path

    report enters Kafka (ingest_ms)
      -> [input wait]  the first report with a later time arrives in the same
                       Kafka partition (the scheduler's watermark can pass t)
      -> [scheduler]   the transaction (stream partition, t) is produced
      -> [deriver]     deriver progress covering t on context-changes
      -> [router]      the routed transaction (stream partition, t) is produced
      -> [matcher]     the output is produced on its topic
      -> [spark]       the micro-batch holding it is written to Parquet

is timed hop by hop. "input wait" is the part the scheduler cannot release
before the next second's input is there (an idle flush may release it first:
then it is cut at the transaction's time). Per-hop percentiles do not add up
to the end-to-end ones (different outputs are slowest in different hops).

    python -m caesar.examples.linear_road.hops --bootstrap 127.0.0.1:29092 [--parquet out/linear-road]
"""

from __future__ import annotations

import argparse
import bisect
import json
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from caesar.bus.protocol import Bus
from caesar.bus.records import Record, TopicPartition

if TYPE_CHECKING:
    from caesar.codecs import Codec
    from caesar.settings import TopicSettings

HOPS = ("input wait", "scheduler", "deriver", "router", "matcher", "to topic (total)",
        "spark", "to Parquet (total)")
OUTPUT_TOPICS = {"lr-tolls": "TollNotification", "lr-accident-alerts": "AccidentAlert"}


def read_topic(bus: Bus, topic: str, timeout_s: float = 60.0) -> list[Record]:
    """Every record of `topic` (all partitions, from the start to the end offsets now)."""
    import time
    import uuid

    parts = bus.list_topics().get(topic)
    if not parts:
        return []
    tps = [TopicPartition(topic, p) for p in range(parts)]
    ends = bus.end_offsets(tps)
    want = {tp: end for tp, end in ends.items() if end > 0}
    if not want:
        return []
    consumer = bus.consumer(f"hops-{uuid.uuid4().hex[:8]}")
    consumer.assign(list(want), dict.fromkeys(want, 0))
    out: list[Record] = []
    seen: dict[TopicPartition, int] = {}
    deadline = time.monotonic() + timeout_s
    try:
        while any(seen.get(tp, 0) < end for tp, end in want.items()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic}: still short of the end offsets")
            for r in consumer.poll(10_000, 0.5):
                tp = TopicPartition(r.topic, r.partition)
                if r.offset < want[tp]:
                    out.append(r)
                seen[tp] = max(seen.get(tp, 0), r.offset + 1)
    finally:
        consumer.close()
    return out


@dataclass
class HopTable:
    rows: dict[str, list[float]]  # hop -> latencies in ms, one per output
    outputs: int
    idle_released: int  # outputs whose transaction an idle flush released

    def percentiles(self) -> dict[str, tuple[float, float, float, float]]:
        return {h: _stats(v) for h, v in self.rows.items() if v}

    def render(self) -> str:
        lines = [f"latency per hop, ms ({self.outputs} outputs; {self.idle_released} released "
                 "by an idle flush)",
                 f"  {'hop':<20}{'mean':>9}{'p50':>9}{'p99':>9}{'max':>9}"]
        for hop, (mean, p50, p99, mx) in self.percentiles().items():
            lines.append(f"  {hop:<20}{mean:>9,.0f}{p50:>9,.0f}{p99:>9,.0f}{mx:>9,.0f}")
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {"outputs": self.outputs, "idle_released": self.idle_released,
                "hops_ms": {h: dict(zip(("mean", "p50", "p99", "max"), s, strict=True))
                            for h, s in self.percentiles().items()}}


def _stats(values: Sequence[float]) -> tuple[float, float, float, float]:
    v = sorted(values)

    def q(p: float) -> float:
        return v[min(len(v) - 1, int(round(p * (len(v) - 1))))]

    return sum(v) / len(v), q(0.5), q(0.99), v[-1]


def _rising(recs: list[tuple[int, int, int]]) -> tuple[list[int], list[int]]:
    """(offset, value, Kafka ts) records -> in offset order, each record whose
    value exceeds every earlier one: (values, their Kafka timestamps)."""
    values: list[int] = []
    stamps: list[int] = []
    for _, value, ts in sorted(recs):
        if not values or value > values[-1]:
            values.append(value)
            stamps.append(ts)
    return values, stamps


def breakdown(bus: Bus, codec: Codec, topics: TopicSettings, input_topic: str,
              parquet: Path | None = None) -> HopTable:
    timeline = _Timeline.read(bus, codec, topics, input_topic)
    written = _parquet_times(parquet) if parquet is not None else {}
    rows: dict[str, list[float]] = {h: [] for h in HOPS}
    outputs = idle = 0
    for topic, etype in OUTPUT_TOPICS.items():
        for r in read_topic(bus, topic):
            assert r.value is not None and r.key is not None  # outputs are keyed records
            _, value = codec.decode(r.value)
            hops = timeline.hops(r.key.decode(), value["time"], value["ingest_ms"],
                                 r.timestamp_ms)
            if hops is None:
                continue
            outputs += 1
            idle += hops.pop("idle released")
            for hop, ms in hops.items():
                rows[hop].append(ms)
            w = written.get((etype, value["vid"], value["time"]))
            if w is not None:
                rows["spark"].append(w - r.timestamp_ms)
                rows["to Parquet (total)"].append(w - value["ingest_ms"])
    return HopTable(rows, outputs, idle)


@dataclass
class _Timeline:
    """When each step of the path happened, read back from the topics."""

    # Kafka partition -> for each time t (rising), when the first report with
    # a later time arrived: input is time-ordered per partition.
    later: dict[int, tuple[list[int], list[int]]]
    txn_at: dict[tuple[str, int], tuple[int, int]]  # (key, t) -> (Kafka partition, ts)
    deriver_progress: dict[int, tuple[list[int], list[int]]]  # watermarks, Kafka ts
    routed_at: dict[tuple[str, int], int]  # (key, t) -> Kafka ts of the routed transaction

    @staticmethod
    def read(bus: Bus, codec: Codec, topics: TopicSettings, input_topic: str) -> _Timeline:
        from caesar.services.common.wire import PROGRESS, ROUTED, TXN

        per_part: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
        for r, value in _decoded(bus, codec, input_topic, None):
            per_part[r.partition].append((r.offset, value["time"], r.timestamp_ms))
        txn_at: dict[tuple[str, int], tuple[int, int]] = {}
        for r, value in _decoded(bus, codec, topics.transactions, TXN):
            txn_at.setdefault((value["partition_key"], value["ts"]), (r.partition, r.timestamp_ms))
        raw: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
        for r, value in _decoded(bus, codec, topics.context_changes, PROGRESS):
            raw[r.partition].append((r.offset, value["ts"] + 1, r.timestamp_ms))
        routed_at: dict[tuple[str, int], int] = {}
        for r, value in _decoded(bus, codec, topics.transactions + ".routed", ROUTED):
            if value["active"]:
                routed_at.setdefault((value["txn"]["partition_key"], value["txn"]["ts"]),
                                     r.timestamp_ms)
        return _Timeline({j: _rising(recs) for j, recs in per_part.items()}, txn_at,
                         {j: _rising(recs) for j, recs in raw.items()}, routed_at)

    def hops(self, key: str, t: int, ingest: int, produced: int) -> dict[str, int] | None:
        """Milliseconds per hop of one output (key, time) produced at `produced`
        (plus "idle released": 1 if an idle flush released its transaction);
        None if its transaction or routing is not on the topics."""
        found = self.txn_at.get((key, t))
        routed = self.routed_at.get((key, t))
        if found is None or routed is None:
            return None
        j, txn_ts = found
        times, stamps = self.later.get(j, ([], []))
        i = bisect.bisect_right(times, t)
        next_input = stamps[i] if i < len(stamps) else None
        idle = next_input is None or next_input > txn_ts
        ready = txn_ts if next_input is None or idle else max(ingest, next_input)
        wms, dstamps = self.deriver_progress.get(j, ([], []))
        k = bisect.bisect_left(wms, t)
        derived = dstamps[k] if k < len(dstamps) else routed
        return {"input wait": ready - ingest, "scheduler": txn_ts - ready,
                "deriver": max(0, derived - txn_ts), "router": routed - max(txn_ts, derived),
                "matcher": produced - routed, "to topic (total)": produced - ingest,
                "idle released": int(idle)}


def _decoded(bus: Bus, codec: Codec, topic: str, schema: str | None
             ) -> Iterator[tuple[Record, dict[str, Any]]]:
    """The records of `topic` with their decoded values (of `schema` only, if given)."""
    for r in read_topic(bus, topic):
        if r.value is None:
            continue
        name, value = codec.decode(r.value)
        if schema is None or name == schema:
            yield r, value


def _parquet_times(out: Path) -> dict[tuple[str, int, int], int]:
    """(output type, vid, time) -> when its micro-batch was written (ms)."""
    import pyarrow.parquet as pq

    from caesar.examples.linear_road.consume_alerts import BATCH_TIMES

    path = out / BATCH_TIMES
    if not path.exists():
        return {}
    batch_ms = {int(k): v for k, v in json.loads(path.read_text()).items()}
    found: dict[tuple[str, int, int], int] = {}
    for etype in OUTPUT_TOPICS.values():
        d = out / etype  # the consumer writes one folder per output type
        if not d.is_dir():
            continue
        table = pq.read_table(str(d), columns=["vid", "time", "batch_id"]).to_pydict()
        for vid, t, b in zip(table["vid"], table["time"], table["batch_id"], strict=True):
            if b in batch_ms:
                found.setdefault((etype, vid, t), batch_ms[b])
    return found


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
        table = breakdown(bus, make_codec(settings, repository()), settings.topics, args.input_topic,
                          args.parquet)
    finally:
        bus.close()
    print(json.dumps(table.as_json()) if args.json else table.render())


if __name__ == "__main__":
    main()
