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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from caesar.bus.records import Record, TopicPartition

HOPS = ("input wait", "scheduler", "deriver", "router", "matcher", "to topic (total)",
        "spark", "to Parquet (total)")
OUTPUT_TOPICS = {"lr-tolls": "TollNotification", "lr-accident-alerts": "AccidentAlert"}


def read_topic(bus: Any, topic: str, timeout_s: float = 60.0) -> list[Record]:
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


def breakdown(bus: Any, codec: Any, topics: Any, input_topic: str,
              parquet: Path | None = None) -> HopTable:
    from caesar.services.common.columnar import transactions_in
    from caesar.services.common.wire import PROGRESS, ROUTED_BATCH, TXN_BATCH

    # Input: per Kafka partition, (time, Kafka ts) in offset order -> for each
    # time t, when the first report with a later time arrived.
    later: dict[int, tuple[list[int], list[int]]] = {}
    per_part: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for r in read_topic(bus, input_topic):
        _, value = codec.decode(r.value)
        per_part[r.partition].append((r.offset, value["time"], r.timestamp_ms))
    for j, recs in per_part.items():
        # Arrival of the first record with time > t: input is time-ordered per
        # partition, so the first such record in offset order.
        later[j] = _rising(recs)

    txn_at: dict[tuple[str, int], tuple[int, int]] = {}  # (key, t) -> (Kafka partition, ts)
    sched_progress: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for r in read_topic(bus, topics.transactions):
        schema, value = codec.decode(r.value)
        if schema == TXN_BATCH:
            for key, ts in transactions_in(value):
                txn_at.setdefault((key, ts), (r.partition, r.timestamp_ms))
        elif schema == PROGRESS:
            sched_progress[r.partition].append((value["ts"] + 1, r.timestamp_ms))
    deriver_progress: dict[int, tuple[list[int], list[int]]] = {}
    raw: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for r in read_topic(bus, topics.context_changes):
        schema, value = codec.decode(r.value)
        if schema == PROGRESS:
            raw[r.partition].append((r.offset, value["ts"] + 1, r.timestamp_ms))
    for j, recs in raw.items():
        deriver_progress[j] = _rising(recs)
    routed_at: dict[tuple[str, int], int] = {}
    for r in read_topic(bus, topics.transactions + ".routed"):
        schema, value = codec.decode(r.value)
        if schema == ROUTED_BATCH:
            for key, ts in transactions_in(value):
                routed_at.setdefault((key, ts), r.timestamp_ms)

    written = _parquet_times(parquet) if parquet is not None else {}
    rows: dict[str, list[float]] = {h: [] for h in HOPS}
    outputs = idle = 0
    for topic, etype in OUTPUT_TOPICS.items():
        for r in read_topic(bus, topic):
            _, value = codec.decode(r.value)
            key, t, ingest = r.key.decode(), value["time"], value["ingest_ms"]
            found = txn_at.get((key, t))
            routed = routed_at.get((key, t))
            if found is None or routed is None:
                continue
            outputs += 1
            j, txn_ts = found
            times, stamps = later.get(j, ([], []))
            i = bisect.bisect_right(times, t)
            next_input = stamps[i] if i < len(stamps) else None
            if next_input is None or next_input > txn_ts:
                idle += 1
                ready = txn_ts
            else:
                ready = max(ingest, next_input)
            wms, dstamps = deriver_progress.get(j, ([], []))
            k = bisect.bisect_left(wms, t)
            derived = dstamps[k] if k < len(dstamps) else routed
            rows["input wait"].append(ready - ingest)
            rows["scheduler"].append(txn_ts - ready)
            rows["deriver"].append(max(0, derived - txn_ts))
            rows["router"].append(routed - max(txn_ts, derived))
            rows["matcher"].append(r.timestamp_ms - routed)
            rows["to topic (total)"].append(r.timestamp_ms - ingest)
            w = written.get((etype, value["vid"], t))
            if w is not None:
                rows["spark"].append(w - r.timestamp_ms)
                rows["to Parquet (total)"].append(w - ingest)
    return HopTable(rows, outputs, idle)


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
