"""Binds SchedulerProcessor to the bus: input topic partition j -> one
processor -> transactions (+ progress) on partition j of the transactions
topic, dead letters to the dead-letter topic. Input topics must be keyed by
the stream partition key (all events of one stream partition arrive through
one partition index), as the DESIGN's data flow requires.

An input record with the header `caesar.watermark` (decimal event time, no
value) is an input watermark for its partition; `caesar.error` (set by
producers that could not encode a value) gives the reason of a record that
does not decode."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from caesar.bus.records import OutRecord, Record, TopicPartition
from caesar.codecs import CodecError
from caesar.plans.execution import ExecutionPlan
from caesar.services.common.config import ServiceConfig
from caesar.services.common.messages import InputRecord, PlanSwitch, Progress, Transaction
from caesar.services.common.replay import owned
from caesar.services.common.switching import PartitionPlans
from caesar.services.common.wire import (
    DEAD,
    INGEST,
    PROGRESS,
    SWITCH,
    SWITCH_KEY,
    TXN,
    dead_record,
    progress_record,
    register_input_schemas,
    register_model_schemas,
    switch_record,
    txn_record,
)
from caesar.services.scheduler.processor import SchedulerOutput, SchedulerProcessor

WATERMARK_HEADER = "caesar.watermark"
ERROR_HEADER = "caesar.error"


def watermark_record(topic: str, partition: int, ts: int) -> OutRecord:
    """An input watermark: no event with ts < `ts` follows on this partition."""
    return OutRecord(topic, None, None, ((WATERMARK_HEADER, str(ts).encode()),),
                     partition=partition)


class SchedulerHandler:
    def __init__(self, cfg: ServiceConfig) -> None:
        self.cfg = cfg
        self.codec = cfg.codec
        self.plans = PartitionPlans(cfg, self._processor)
        self.procs = self.plans.procs
        self._types: dict[str, tuple[dict[str, str], set[str]]] = {}
        self.seq: dict[int, int] = defaultdict(int)
        self.owner: dict[int, int] = {}  # stream partition -> Kafka partition
        self.max_ts = -(2**62)

    def inputs(self) -> list[TopicPartition]:
        return [tp for j in self.cfg.partitions for tp in self.partition_inputs(j)]

    def partition_inputs(self, j: int) -> list[TopicPartition]:
        return [TopicPartition(t, j) for t in self.cfg.input_topics()]

    def _processor(self, plan: ExecutionPlan) -> SchedulerProcessor:
        return SchedulerProcessor(plan, self.cfg.allowance, max_ahead=self.cfg.max_ahead,
                                  ahead_confirm=self.cfg.ahead_confirm)

    def _type_names(self, j: int) -> tuple[dict[str, str], set[str]]:
        """Partition j's plan: Avro schema name -> event type, and the type names."""
        version = self.plans.versions[j]
        found = self._types.get(version)
        if found is None:
            plan = self.plans.plan(j)
            names = register_input_schemas(self.codec.repository, plan)
            by_schema = {v: k for k, v in names.items()}
            for name, schema in register_model_schemas(self.codec.repository, plan).items():
                by_schema.setdefault(schema, name)
            found = self._types[version] = (by_schema, {t.name for t in plan.event_types})
        return found

    def decode(self, rec: Record) -> InputRecord:
        raw = rec.value or b""
        base = dict(key=rec.key, headers=rec.headers, timestamp_ms=rec.timestamp_ms)
        # (registers the input schemas of the partition's plan with the codec)
        type_by_schema, short_names = self._type_names(rec.partition)
        mark = rec.header(WATERMARK_HEADER)
        if mark is not None and rec.value is None:
            try:
                return InputRecord(rec.topic, rec.partition, rec.offset, None,
                                   watermark=int(mark), **base)  # type: ignore[arg-type]
            except ValueError:
                return InputRecord(rec.topic, rec.partition, rec.offset, None, raw,
                                   f"bad {WATERMARK_HEADER} header {mark[:40]!r}", **base)  # type: ignore[arg-type]
        if rec.value is None:
            return InputRecord(rec.topic, rec.partition, rec.offset, None, raw, "empty record",
                               **base)  # type: ignore[arg-type]
        try:
            schema, value = self.codec.decode(rec.value)
        except Exception as exc:  # CodecError, or fastavro's plain errors on truncated data
            error = str(exc) if isinstance(exc, CodecError) else f"{type(exc).__name__}: {exc}"
            why = rec.header(ERROR_HEADER)
            if why is not None:
                error = why.decode(errors="replace")
            return InputRecord(rec.topic, rec.partition, rec.offset, None, raw, error, **base)  # type: ignore[arg-type]
        name = type_by_schema.get(schema) or schema.rsplit(".", 1)[-1]
        if "type" not in value:
            # The schema names the event type (a schema of no declared type: unknown).
            value["type"] = name if name in short_names else schema
        value[INGEST] = rec.timestamp_ms
        return InputRecord(rec.topic, rec.partition, rec.offset, value, raw, **base)  # type: ignore[arg-type]

    def handle(self, records: Sequence[Record]) -> dict[int, list[OutRecord]]:
        by_partition: dict[int, list[InputRecord]] = defaultdict(list)
        for r in records:
            by_partition[r.partition].append(self.decode(r))
        return {j: self._encode(j, self.procs[j].process(recs))
                for j, recs in by_partition.items()}

    def control(self) -> dict[int, list[OutRecord]]:
        """A requested model upgrade starts here, at a transaction boundary:
        each partition switches plans and says so downstream (PlanSwitch)."""
        want = self.plans.book.requested
        out: dict[int, list[OutRecord]] = {}
        if want is None:
            return out
        for j in self.cfg.partitions:
            previous = self.plans.versions[j]
            if previous == want:
                continue
            self.plans.switch(j, want)
            marker = PlanSwitch(want, previous, self.procs[j].watermark)
            out[j] = [OutRecord(self.cfg.topics.transactions, self.codec.encode(
                SWITCH, switch_record(marker, self.cfg.actor_id, j)), SWITCH_KEY, partition=j)]
        return out

    def plan_versions(self) -> dict[int, str]:
        return dict(self.plans.versions)
    def _encode(self, j: int, result: SchedulerOutput) -> list[OutRecord]:
        topic = self.cfg.topics.transactions
        out: list[OutRecord] = []
        for item in result.transactions:
            if isinstance(item, Transaction):
                self.seq[item.partition] += 1
                self.owner[item.partition] = j
                self.max_ts = max(self.max_ts, item.ts)
                out.append(OutRecord(topic, self.codec.encode(
                    TXN, txn_record(item, self.seq[item.partition])), item.key.encode(),
                    partition=j))
            elif isinstance(item, Progress):
                out.append(OutRecord(topic, self.codec.encode(
                    PROGRESS, progress_record(item, self.cfg.actor_id, j)), b"__progress__",
                    partition=j))
        out.extend(OutRecord(self.cfg.topics.dead_letters,
                             self.codec.encode(DEAD, dead_record(d, "scheduler")), d.key)
                   for d in result.dead_letters)
        return out

    def snapshot_partition(self, j: int) -> Any:
        return {"plan": self.plans.versions[j], "proc": self.procs[j].snapshot(),
                "seq": [[p, n] for p, n in owned(self.seq, self.owner, j).items()],
                "max_ts": self.max_ts}

    def restore_partition(self, j: int, state: Any) -> None:
        self.plans.restore(j, state.get("plan"), state["proc"])
        for p, n in state["seq"]:
            self.seq[int(p)] = int(n)
            self.owner[int(p)] = j
        self.max_ts = max(self.max_ts, int(state["max_ts"]))

    def event_time(self) -> int:
        return self.max_ts
