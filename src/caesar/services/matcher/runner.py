"""Binds MatcherProcessor to the bus: routed partition j in, alerts (derived
events) to the alerts topic keyed by the stream partition key, matcher
progress to the progress topic."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from caesar.bus.records import OutRecord, Record, TopicPartition
from caesar.codecs import SingleObjectCodec
from caesar.codecs.flat import FlatCodec, flat_fields
from caesar.services.common.columnar import routed_from
from caesar.services.common.config import ServiceConfig
from caesar.services.common.latency import LatencyHistogram
from caesar.services.common.messages import Alert, DeadLetter, Progress, RoutedBatch
from caesar.services.common.replay import SeqFilter
from caesar.services.common.wire import (
    DEAD,
    DERIVED,
    PROGRESS,
    ROUTED_BATCH,
    alert_record,
    dead_record,
    output_record,
    progress_from,
    progress_record,
    register_model_schemas,
)
from caesar.services.matcher.processor import MatcherProcessor
from caesar.services.matcher.stage_graph import default_engine_factory


class OutputEncoder:
    """Alerts -> records: every alert as a DerivedEvent on the alerts topic, and
    alerts of stages with an output topic also there, in their event type's
    own schema when the model names one (what the apps downstream read)."""

    def __init__(self, cfg: ServiceConfig) -> None:
        self.cfg, self.codec = cfg, cfg.codec
        repo = self.codec.repository
        self.schemas: dict[str, tuple[str, list[str]]] = {
            etype: (name, repo.get(name).field_names())
            for etype, name in register_model_schemas(repo, cfg.plan).items()}
        # Output types whose schema is a flat integer record: encoded in bulk.
        self.flat: dict[str, FlatCodec] = {}
        if isinstance(self.codec, SingleObjectCodec):
            for etype, (name, _) in self.schemas.items():
                if flat_fields(repo.get(name)) is not None:
                    self.flat[etype] = FlatCodec(repo.get(name))
        # Input Kafka timestamp -> alert encoded: the pipeline's end-to-end latency.
        self.latency = LatencyHistogram()

    def encode(self, alerts: list[Alert]) -> list[OutRecord]:
        out: list[OutRecord] = []
        now = time.time() * 1000
        for a in alerts:
            if a.ingest_ms:
                self.latency.observe(now - a.ingest_ms)
        if self.cfg.topics.alerts_copy:
            out.extend(OutRecord(self.cfg.topics.alerts, self.codec.encode(
                DERIVED, alert_record(a)), a.key.encode()) for a in alerts)
        by_type: dict[str, list[Alert]] = defaultdict(list)
        for a in alerts:
            if a.topic:
                by_type[a.event_type].append(a)
        for etype, group in by_type.items():
            values = self._bulk(etype, group)
            if values is not None:
                out.extend(OutRecord(a.topic or "", v, a.key.encode())
                           for a, v in zip(group, values, strict=True))
                continue
            for a in group:
                own = self.schemas.get(etype)
                try:
                    value = self.codec.encode(own[0], output_record(a, own[1])) if own \
                        else self.codec.encode(DERIVED, alert_record(a))
                except Exception as exc:  # the alert breaks its declared schema
                    out.append(self._dead(a, f"{type(exc).__name__}: {exc}"))
                    continue
                out.append(OutRecord(a.topic or "", value, a.key.encode()))
        return out

    def _bulk(self, etype: str, group: list[Alert]) -> list[bytes] | None:
        """The alerts in their type's flat integer schema, encoded at once
        (None: not such a schema, or a value that needs the per-record path)."""
        flat = self.flat.get(etype)
        if flat is None:
            return None
        cols: dict[str, np.ndarray] = {}
        for name, kind in zip(flat.names, flat.types, strict=True):
            values = [a.ingest_ms if name == "ingest_ms" else a.fields.get(name) for a in group]
            if not all(type(v) is int for v in values):  # None, bool, float: exact path
                return None
            col = np.array(values)
            if col.dtype != np.int64:
                return None
            if kind == "int" and ((col < -(2**31)) | (col >= 2**31)).any():
                return None
            cols[name] = col
        return flat.encode(cols)

    def _dead(self, a: Alert, detail: str) -> OutRecord:
        letter = DeadLetter("schema", f"{a.event_type} does not fit the schema of topic "
                            f"{a.topic}: {detail}", a.topic or "", -1, -1,
                            self.codec.encode(DERIVED, alert_record(a)))
        return OutRecord(self.cfg.topics.dead_letters,
                         self.codec.encode(DEAD, dead_record(letter, "matcher")), None)


class MatcherHandler:
    def __init__(self, cfg: ServiceConfig) -> None:
        self.cfg = cfg
        self.codec = cfg.codec
        factory = cfg.engine_factory or default_engine_factory
        self.procs = {j: MatcherProcessor(cfg.plan, factory) for j in cfg.partitions}
        self.seen = SeqFilter()  # per Kafka partition: routed batches
        self.outputs = OutputEncoder(cfg)

    def inputs(self) -> list[TopicPartition]:
        return [tp for j in self.cfg.partitions for tp in self.partition_inputs(j)]

    def partition_inputs(self, j: int) -> list[TopicPartition]:
        return [TopicPartition(self.cfg.routed_topic, j)]

    def handle(self, records: Sequence[Record]) -> list[OutRecord]:
        by_partition: dict[int, list[RoutedBatch | Progress]] = defaultdict(list)
        for r in records:
            if r.value is None:  # a tombstone: the services never write one here
                continue
            schema, value = self.codec.decode(r.value)
            if schema == ROUTED_BATCH:
                if self.seen.fresh(r.partition, value["batch"]["seq"]):
                    batch, _ = routed_from(value, self.procs[r.partition].graph.strings)
                    by_partition[r.partition].append(batch)
            elif schema == PROGRESS:
                by_partition[r.partition].append(progress_from(value))
        out: list[OutRecord] = []
        for j, items in by_partition.items():
            result = self.procs[j].process(items)
            out += self.outputs.encode(result.alerts)
            if result.progress is not None:
                out.append(OutRecord(self.cfg.topics.progress, self.codec.encode(
                    PROGRESS, progress_record(result.progress, self.cfg.actor_id, j)),
                    b"__progress__", partition=j))
        return out

    def idle(self, idle_s: float) -> list[OutRecord]:
        return []

    def snapshot_partition(self, j: int) -> Any:
        return {"proc": self.procs[j].snapshot(), "seen": self.seen.last.get(j, -1)}

    def restore_partition(self, j: int, state: Any) -> None:
        self.procs[j].restore(state["proc"])
        if isinstance(state["seen"], int):
            self.seen.last[j] = state["seen"]

    def event_time(self) -> int:
        return max((p.watermark for p in self.procs.values()), default=0)
