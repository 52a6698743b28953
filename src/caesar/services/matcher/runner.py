"""Binds MatcherProcessor to the bus: routed partition j in, alerts (derived
events) to the alerts topic keyed by the stream partition key, matcher
progress to the progress topic."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import replace
from itertools import chain
from operator import itemgetter
from typing import Any, cast

import numpy as np

from caesar.bus.records import OutRecord, Record, TopicPartition
from caesar.codecs import Codec, SingleObjectCodec
from caesar.codecs.flat import FlatCodec, flat_fields
from caesar.events.batch import StringPool
from caesar.plans.execution import ExecutionPlan
from caesar.plans.pattern import PatternPlan
from caesar.services.common.columnar import routed_from
from caesar.services.common.config import ServiceConfig
from caesar.services.common.latency import LatencyHistogram
from caesar.services.common.messages import Alert, DeadLetter, PlanSwitch, Progress, RoutedBatch
from caesar.services.common.replay import SeqFilter, decode_fresh
from caesar.services.common.switching import PartitionPlans, segments
from caesar.services.common.wire import (
    DEAD,
    DERIVED,
    PROGRESS,
    ROUTED_BATCH,
    alert_record,
    dead_record,
    output_record,
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
        self._by_plan: dict[int, tuple[dict[str, tuple[str, list[str]]], dict[str, FlatCodec]]] \
            = {}
        self.flat: dict[str, FlatCodec] = {}  # of the plan being encoded
        # Input Kafka timestamp -> alert encoded: the pipeline's end-to-end latency.
        self.latency = LatencyHistogram()

    def _schemas(self, plan: ExecutionPlan
                 ) -> tuple[dict[str, tuple[str, list[str]]], dict[str, FlatCodec]]:
        """The plan's output schemas: event type -> (schema name, fields), and
        the types whose schema is a flat integer record (encoded in bulk)."""
        found = self._by_plan.get(id(plan))
        if found is None:
            repo = self.codec.repository
            schemas = {etype: (name, repo.get(name).field_names())
                       for etype, name in register_model_schemas(repo, plan).items()}
            flat: dict[str, FlatCodec] = {}
            if isinstance(self.codec, SingleObjectCodec):
                for etype, (name, _) in schemas.items():
                    if flat_fields(repo.get(name)) is not None:
                        flat[etype] = FlatCodec(repo.get(name))
            found = self._by_plan[id(plan)] = (schemas, flat)
        return found

    def encode(self, alerts: list[Alert], plan: ExecutionPlan | None = None) -> list[OutRecord]:
        schemas, self.flat = self._schemas(plan or self.cfg.plan)
        out: list[OutRecord] = []
        now = time.time() * 1000
        self.latency.observe_many(np.array([now - a.ingest_ms for a in alerts if a.ingest_ms],
                                            dtype=np.float64))
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
                own = schemas.get(etype)
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
        if flat is None or not group:
            return None
        names = [n for n in flat.names if n != "ingest_ms"]
        cols: dict[str, np.ndarray] = {}
        if names:  # one row per alert, transposed and type-checked in C
            get = itemgetter(*names)
            try:
                rows = [get(a.fields) for a in group]
            except KeyError:  # a field left out: the exact path (null where allowed)
                return None
            if len(names) == 1:
                rows = [(v,) for v in rows]
            if set(map(type, chain.from_iterable(rows))) != {int}:
                return None  # None, bool, float: exact path
            table = np.array(rows)
            cols = {name: table[:, i] for i, name in enumerate(names)}
        if "ingest_ms" in flat.names:
            cols["ingest_ms"] = np.array([a.ingest_ms for a in group])
        for name, kind in zip(flat.names, flat.types, strict=True):
            col = cols[name]
            if col.dtype != np.int64:  # beyond 64 bits
                return None
            if kind == "int" and ((col < -(2**31)) | (col >= 2**31)).any():
                return None
        return flat.encode(cols)

    def _dead(self, a: Alert, detail: str) -> OutRecord:
        letter = DeadLetter("schema", f"{a.event_type} does not fit the schema of topic "
                            f"{a.topic}: {detail}", a.topic or "", -1, -1,
                            self.codec.encode(DERIVED, alert_record(a)))
        return OutRecord(self.cfg.topics.dead_letters,
                         self.codec.encode(DEAD, dead_record(letter, "matcher")), None)


def dead_records(cfg: ServiceConfig, letters: list[DeadLetter], service: str
                 ) -> list[OutRecord]:
    """Dead letters (failed user-defined function calls) for the dead-letter topic."""
    return [OutRecord(cfg.topics.dead_letters, cfg.codec.encode(DEAD, dead_record(d, service)),
                      None) for d in letters]


def decode_routed(codec: Codec, records: Sequence[Record], seen: SeqFilter,
                  strings: Callable[[int], StringPool]
                  ) -> dict[int, list[RoutedBatch | Progress | PlanSwitch]]:
    """The fresh inputs of a routed topic per Kafka partition j, in order
    (replayed batches dropped by `seen`; strings interned in `strings(j)`)."""
    return decode_fresh(codec, records, seen, ROUTED_BATCH, lambda v: v["batch"]["seq"],
                        lambda j, v: routed_from(v, strings(j))[0])


def matcher_plan(plan: ExecutionPlan) -> ExecutionPlan:
    """The plan the matcher runs: the `_acep_*` stages of a model with tables
    stay internal (the acep service runs them and publishes what the rules
    derive), so their matches do not leave as alerts."""
    if plan.acep is None:
        return plan
    internal = plan.acep.input_types()
    return replace(plan, matcher_stages=tuple(
        replace(s, output_topic=None) if isinstance(s.plan, PatternPlan) and s.plan.output
        is not None and s.plan.output.event_type in internal else s
        for s in plan.matcher_stages))


class MatcherHandler:
    # Outputs and state are a function of the input records in offset order
    # (one input per partition), not of the batches: the loop may checkpoint
    # every interval and replay the rest (loop.py; test_checkpoint_replay.py).
    replayable = True

    def __init__(self, cfg: ServiceConfig) -> None:
        self.cfg = cfg
        self.codec = cfg.codec
        factory = cfg.engine_factory or default_engine_factory
        self.plans = PartitionPlans(cfg, lambda plan: MatcherProcessor(plan, factory),
                                    view=matcher_plan)
        self.procs = self.plans.procs
        self.seen = SeqFilter()  # per Kafka partition: routed batches
        self.outputs = OutputEncoder(cfg)

    def inputs(self) -> list[TopicPartition]:
        return [tp for j in self.cfg.partitions for tp in self.partition_inputs(j)]

    def partition_inputs(self, j: int) -> list[TopicPartition]:
        return [TopicPartition(self.cfg.routed_topic, j)]

    def handle(self, records: Sequence[Record]) -> dict[int, list[OutRecord]]:
        outputs: dict[int, list[OutRecord]] = {}
        for j, items in self._decode(records).items():
            out = outputs[j] = []
            for chunk, switch in segments(items):
                if chunk:
                    result = self.procs[j].process(cast(list[RoutedBatch | Progress], chunk))
                    out += self.outputs.encode(result.alerts, self.plans.plan(j))
                    out += dead_records(self.cfg, result.dead_letters, "matcher")
                    if result.progress is not None:
                        out.append(OutRecord(self.cfg.topics.progress, self.codec.encode(
                            PROGRESS, progress_record(result.progress, self.cfg.actor_id, j)),
                            b"__progress__", partition=j))
                if switch is not None:
                    self.plans.switch(j, switch.plan)
        return outputs

    def _decode(self, records: Sequence[Record]
                ) -> dict[int, list[RoutedBatch | Progress | PlanSwitch]]:
        return decode_routed(self.codec, records, self.seen,
                             lambda j: self.procs[j].graph.strings)

    def plan_versions(self) -> dict[int, str]:
        return dict(self.plans.versions)

    def snapshot_partition(self, j: int) -> Any:
        return {"plan": self.plans.versions[j], "proc": self.procs[j].snapshot(),
                "seen": self.seen.last.get(j, -1)}

    def restore_partition(self, j: int, state: Any) -> None:
        self.plans.restore(j, state.get("plan"), state["proc"])
        if isinstance(state["seen"], int):
            self.seen.last[j] = state["seen"]

    def event_time(self) -> int:
        return max((p.watermark for p in self.procs.values()), default=0)
