"""Where the latency of a Kafka + Ray run goes, per hop, read back from the
topics after the run (nothing in the services is changed for it), for any
model.

Every record carries its Kafka timestamp (CreateTime: when the service that
wrote it produced it), so for each output the path

    input enters Kafka (ingest_ms, carried into the output)
      -> [input wait]  every input topic's partition has an event later than t
                       (the scheduler's watermark is the minimum over them)
      -> [scheduler]   the transaction (stream partition, t) is produced
      -> [deriver]     deriver progress covering t on context-changes
      -> [router]      the routed transaction (stream partition, t) is produced
      -> [matcher]     the output is produced (the alerts topic)
      -> [spark]       the consumer's micro-batch holding it is written

is timed hop by hop, t being the output's end time. Outputs not produced by a
transaction at their end time (window results released by progress) have no
row. "input wait" is cut at the transaction's time when an idle flush released
it (no later input came). Per-hop percentiles do not add up to the end-to-end
ones: different outputs are slowest in different hops.
"""

from __future__ import annotations

import bisect
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from caesar.bus.records import Record, TopicPartition

if TYPE_CHECKING:
    from caesar.bus.protocol import Bus
    from caesar.codecs import Codec
    from caesar.jobs.consume import OutputConsumer
    from caesar.jobs.job_model import JobModel
    from caesar.settings import Settings, TopicSettings

HOPS = ("input wait", "scheduler", "deriver", "router", "matcher", "to topic (total)",
        "spark", "to table (total)")


def read_topic(bus: Bus, topic: str, timeout_s: float = 60.0) -> list[Record]:
    """Every record of `topic` (all partitions, from the start to the end
    offsets now); TimeoutError after `timeout_s` without a record (a big
    topic takes as long as it takes: 12M outputs of a 30-minute run)."""
    parts = bus.list_topics().get(topic)
    if not parts:
        return []
    tps = [TopicPartition(topic, p) for p in range(parts)]
    want = {tp: end for tp, end in bus.end_offsets(tps).items() if end > 0}
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
            batch = consumer.poll(10_000, 0.5)
            if batch:
                deadline = time.monotonic() + timeout_s
            for r in batch:
                tp = TopicPartition(r.topic, r.partition)
                if r.offset < want[tp]:
                    out.append(r)
                seen[tp] = max(seen.get(tp, 0), r.offset + 1)
            # Transactional topics end with commit markers no poll returns: the
            # consumer's position moves past them.
            for tp, pos in consumer.position(list(want)).items():
                if pos is not None:
                    seen[tp] = max(seen.get(tp, 0), pos)
    finally:
        consumer.close()
    return out


@dataclass
class HopTable:
    rows: dict[str, list[float]]  # hop -> latencies in ms, one per output
    outputs: int
    idle_released: int  # outputs whose transaction an idle flush released
    # outputs left out, by why: no stream partition of their key has
    # transactions, none in their time span, their transaction was not routed
    untimed: dict[str, int] = field(default_factory=dict)

    def percentiles(self) -> dict[str, tuple[float, float, float, float]]:
        return {h: _stats(v) for h, v in self.rows.items() if v}

    def render(self) -> str:
        left = "".join(f"; {n} {why}" for why, n in self.untimed.items() if n)
        lines = [f"latency per hop, ms ({self.outputs} outputs; {self.idle_released} released "
                 f"by an idle flush{left})",
                 f"  {'hop':<20}{'mean':>9}{'p50':>9}{'p99':>9}{'max':>9}"]
        for hop, (mean, p50, p99, mx) in self.percentiles().items():
            lines.append(f"  {hop:<20}{mean:>9,.0f}{p50:>9,.0f}{p99:>9,.0f}{mx:>9,.0f}")
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {"outputs": self.outputs, "idle_released": self.idle_released,
                "untimed": dict(self.untimed),
                "hops_ms": {h: dict(zip(("mean", "p50", "p99", "max"), s, strict=True))
                            for h, s in self.percentiles().items()}}


def _stats(values: Sequence[float]) -> tuple[float, float, float, float]:
    v = sorted(values)

    def q(p: float) -> float:
        return v[min(len(v) - 1, int(round(p * (len(v) - 1))))]

    return sum(v) / len(v), q(0.5), q(0.99), v[-1]


def rising(recs: list[tuple[int, int, int]]) -> tuple[list[int], list[int]]:
    """(offset, value, Kafka ts) records -> in offset order, each record whose
    value exceeds every earlier one: (values, their Kafka timestamps)."""
    values: list[int] = []
    stamps: list[int] = []
    for _, value, ts in sorted(recs):
        if not values or value > values[-1]:
            values.append(value)
            stamps.append(ts)
    return values, stamps


def first_after(series: tuple[list[int], list[int]], t: int) -> int | None:
    """Kafka ts of the first record whose value is above t, if any."""
    values, stamps = series
    i = bisect.bisect_right(values, t)
    return stamps[i] if i < len(stamps) else None


@dataclass
class Output:
    """One output as the hops see it: its partition key (a stream partition's,
    or a context partition's within it: the stream key and more "|"-parts),
    end time, ingest and produce times (ms). An output that carries its end
    time only to `span_ms` (Linear Road's second) is timed by the last
    transaction of its partition in [ts, ts + span_ms)."""

    key: str
    ts: int
    ingest_ms: int
    produced_ms: int
    span_ms: int = 1


class _ByKey:
    """(key, ts) -> value, looked up by the stream key within an output's key
    and the last ts in a range."""

    def __init__(self, found: dict[tuple[str, int], Any]) -> None:
        self.ts: dict[str, list[int]] = defaultdict(list)
        self.values: dict[str, list[Any]] = defaultdict(list)
        for (key, ts), value in sorted(found.items(), key=lambda kv: kv[0]):
            self.ts[key].append(ts)
            self.values[key].append(value)

    def stream_key(self, key: str) -> str | None:
        """`key` or its longest "|"-prefix that has transactions."""
        parts = key.split("|")
        for n in range(len(parts), 0, -1):
            k = "|".join(parts[:n])
            if k in self.ts:
                return k
        return None

    def last(self, key: str, lo: int, hi: int) -> tuple[int, Any] | None:
        """(ts, value) of the last entry of `key` with lo <= ts < hi."""
        stamps = self.ts.get(key)
        if not stamps:
            return None
        i = bisect.bisect_left(stamps, hi) - 1
        if i < 0 or stamps[i] < lo:
            return None
        return stamps[i], self.values[key][i]


def decoded(bus: Bus, codec: Codec, topic: str) -> Iterator[tuple[Record, str, dict[str, Any]]]:
    """The records of `topic` with their schema and value (tombstones skipped)."""
    for r in read_topic(bus, topic):
        if r.value is not None:
            schema, value = codec.decode(r.value)
            yield r, schema, value


def input_arrivals(bus: Bus, codec: Codec, topics: Sequence[str], ts_fields: dict[str, str]
                   ) -> dict[int, list[tuple[list[int], list[int]]]]:
    """Kafka partition j -> per input topic, the rising event times and their
    arrival. `ts_fields`: Avro schema full name -> its event-time field."""
    per: dict[tuple[str, int], list[tuple[int, int, int]]] = defaultdict(list)
    for topic in topics:
        for r in read_topic(bus, topic):
            if r.value is None:  # a tombstone: no event
                continue
            try:
                schema, value = codec.decode(r.value)
            except Exception:  # a dead letter in the making: not an arrival of an event
                continue
            field = ts_fields.get(schema)
            if field is not None:
                per[(topic, r.partition)].append((r.offset, value[field], r.timestamp_ms))
    out: dict[int, list[tuple[list[int], list[int]]]] = defaultdict(list)
    for (_, j), recs in per.items():
        out[j].append(rising(recs))
    return out


def model_arrivals(bus: Bus, codec: Codec, model: JobModel
                   ) -> dict[int, list[tuple[list[int], list[int]]]]:
    """input_arrivals of every input topic of `model`."""
    ts_field = {t.name: t.ts_field for t in model.input_types}
    fields = {schema: ts_field[etype]
              for etype, schema in model.input_schema_names(codec.repository).items()}
    return input_arrivals(bus, codec, model.input_topics(), fields)


def batched_transactions(bus: Bus, codec: Codec, topic: str, batch_schema: str
                         ) -> dict[tuple[str, int], Record]:
    """(partition key, ts) -> the first record of `topic` whose batch (of
    `batch_schema`) holds that transaction."""
    from caesar.services.common.columnar import transactions_in

    found: dict[tuple[str, int], Record] = {}
    for r, schema, value in decoded(bus, codec, topic):
        if schema == batch_schema:
            for key, ts in transactions_in(value):
                found.setdefault((key, ts), r)
    return found


def breakdown(bus: Bus, codec: Codec, arrivals: dict[int, list[tuple[list[int], list[int]]]],
              topics: TopicSettings, outputs: Sequence[Output], spark_ms: Sequence[int] = (),
              table_ms: Sequence[int] = ()) -> HopTable:
    """The hop table of `outputs` (arrivals: input_arrivals of the input topics;
    topics: the settings' topic names); `spark_ms` / `table_ms`: the consumer's
    own (written - output Kafka ts, written - ingest) per row, when it ran."""
    from caesar.services.common.wire import PROGRESS, ROUTED_BATCH, TXN_BATCH

    txn_at = _ByKey({k: (r.partition, r.timestamp_ms)  # (key, t) -> (Kafka partition, ts)
                     for k, r in batched_transactions(bus, codec, topics.transactions,
                                                      TXN_BATCH).items()})
    raw: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for r, schema, value in decoded(bus, codec, topics.context_changes):
        if schema == PROGRESS:
            raw[r.partition].append((r.offset, value["ts"] + 1, r.timestamp_ms))
    deriver_progress = {j: rising(recs) for j, recs in raw.items()}
    routed_at = {k: r.timestamp_ms for k, r in
                 batched_transactions(bus, codec, topics.transactions + ".routed",
                                      ROUTED_BATCH).items()}
    rows: dict[str, list[float]] = {h: [] for h in HOPS}
    count = idle = 0
    untimed = dict.fromkeys(("without a stream partition", "without a transaction",
                             "not routed"), 0)
    for o in outputs:
        key = txn_at.stream_key(o.key)
        if key is None:
            untimed["without a stream partition"] += 1
            continue
        found = txn_at.last(key, o.ts, o.ts + o.span_ms)
        if found is None:
            untimed["without a transaction"] += 1
            continue
        t, (j, txn_ts) = found
        routed = routed_at.get((key, t))
        if routed is None:
            untimed["not routed"] += 1
            continue
        count += 1
        later = [first_after(series, t) for series in arrivals.get(j, [])]
        if not later or None in later or max(v for v in later if v is not None) > txn_ts:
            idle += 1
            ready = txn_ts
        else:
            ready = max([o.ingest_ms, *(v for v in later if v is not None)])
        derived = first_after(deriver_progress.get(j, ([], [])), t - 1) or routed
        rows["input wait"].append(ready - o.ingest_ms)
        rows["scheduler"].append(txn_ts - ready)
        rows["deriver"].append(max(0, derived - txn_ts))
        rows["router"].append(routed - max(txn_ts, derived))
        rows["matcher"].append(o.produced_ms - routed)
        rows["to topic (total)"].append(o.produced_ms - o.ingest_ms)
    rows["spark"] = [float(v) for v in spark_ms]
    rows["to table (total)"] = [float(v) for v in table_ms]
    return HopTable(rows, count, idle, untimed)


def alerts_topic_outputs(bus: Bus, codec: Codec, topic: str) -> list[Output]:
    """Every output on the generic alerts topic (caesar.DerivedEvent records)."""
    from caesar.services.common.wire import DERIVED

    out = []
    for r, schema, value in decoded(bus, codec, topic):
        if schema == DERIVED:
            out.append(Output(value["partition_key"], value["end_ts"], value["ingest_ms"],
                              r.timestamp_ms))
    return out


def hop_table(model: JobModel, settings: Settings, bootstrap: str | None,
              consumer: OutputConsumer | None = None) -> HopTable:
    """The hop table of a finished run of `model` on the settings' topics."""
    from caesar.bus.kafka import KafkaBus

    kafka = settings.kafka.model_copy(
        update={"bootstrap_servers": bootstrap or settings.kafka.bootstrap_servers})
    bus = KafkaBus(kafka)
    try:
        codec = model.codec(settings)
        outputs = alerts_topic_outputs(bus, codec, settings.topics.alerts)
        spark_ms: list[int] = []
        table_ms: list[int] = []
        if consumer is not None:
            spark_ms = [v for lat in consumer.spark_latencies.values() for v in lat]
            table_ms = [v for lat in consumer.latencies.values() for v in lat]
        return breakdown(bus, codec, model_arrivals(bus, codec, model), settings.topics,
                         outputs, spark_ms, table_ms)
    finally:
        bus.close()
