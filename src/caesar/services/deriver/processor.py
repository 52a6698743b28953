"""The deriver: runs the context deriving queries per stream partition and
keeps each partition's context bit vector (section 6.2 of the CAESAR paper).

Input: transactions and scheduler progress, in order, from one bus partition.
Output: context changes (every change of a partition's vector, stamped with
the time from which it holds for later transactions: windows are half-open
(ti, tt], so a change at ts affects transactions at t > ts) and deriver
progress D: every change with ts < D has been emitted. The router routes a
transaction at t once D >= t. D moves to t when a transaction at t arrives
(all earlier ones are derived) and to W on scheduler progress W.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from caesar.errors import PlanError
from caesar.plans.execution import ExecutionPlan, TransitionStage
from caesar.plans.serialize import stage_identity
from caesar.services.common.config import EngineFactory
from caesar.services.common.messages import (
    Alert,
    ContextChange,
    DeadLetter,
    Progress,
    Transaction,
    TxnBatch,
    coalesce_transactions,
)
from caesar.services.matcher.stage_graph import (
    Output,
    Record,
    StageGraph,
    StageOutput,
    default_engine_factory,
    is_public,
)
from caesar.services.router.contexts import ContextResolver, StageActivation

NEVER = -(2**62)
InstanceKey = tuple[Any, ...]  # the KEYED BY values naming one instance of a keyed context


@dataclass
class DeriverOutput:
    changes: list[ContextChange] = field(default_factory=list)
    alerts: list[Alert] = field(default_factory=list)
    progress: Progress | None = None
    dead_letters: list[DeadLetter] = field(default_factory=list)  # failed function calls
    # Results the matcher takes from the deriver (ExecutionPlan.imports), at
    # their own ts and partition; they precede `progress` on the way out.
    imports: TxnBatch | None = None


class DeriverProcessor:
    def __init__(self, plan: ExecutionPlan,
                 engine_factory: EngineFactory = default_engine_factory) -> None:
        self.plan = plan
        self.resolver = ContextResolver(plan)
        stages = list(plan.deriver_stages) + [t.stage for t in plan.transitions]
        schemas = {t.name: dict(t.fields) for t in plan.event_types}
        emit = [t.stage.plan.plan_id for t in plan.transitions]
        emit += [s.plan.plan_id for s in plan.deriver_stages if s.output_topic is not None]
        self.exports = plan.exports
        emit += sorted(self.exports)
        self._exported: list[Transaction] = []  # this call's exported results
        self.activation = StageActivation(self.resolver, stages)
        self.graph = StageGraph(
            stages, schemas, engine_factory, emit=emit, context_key=plan.context_key,
            stream_attrs=len(plan.partition_by), everywhere=self.activation.everywhere(),
            active_of=_active_of(weakref.ref(self)))
        self.schemas = schemas
        self.transitions = {t.stage.plan.plan_id: t for t in plan.transitions}
        for t in plan.transitions:
            if t.context not in self.resolver.bits:
                raise PlanError(f"transition {t.stage.plan.plan_id} names unknown context "
                                f"{t.context!r}")
        self.raw: dict[int, int] = {}  # partition -> bits of non-default contexts
        # Keyed contexts: partition -> context -> keys of its open instances.
        self.keyed = {c.name for c in plan.contexts if c.keyed}
        self.instances: dict[int, dict[str, set[InstanceKey]]] = {}
        self.keys: dict[int, str] = {}
        self.done_before = NEVER  # D: all changes with ts < D emitted
        # Several timestamps per step where the stages allow it (StageGraph.step);
        # False: one step per timestamp (the reference the tests compare with).
        self.waves = self.graph.waves

    def vector(self, partition: int) -> int:
        return self.resolver.effective(self.raw.get(partition, 0))

    def process(self, items: Sequence[TxnBatch | Transaction | Progress]) -> DeriverOutput:
        out = DeriverOutput()
        self._exported = []
        for item in coalesce_transactions(items, self.schemas, self.graph.strings):
            if isinstance(item, TxnBatch):
                self.keys.update(item.keys)
                if self.waves:
                    for first, last, stamps, txns in item.waves():
                        self._step(first, txns, out, stamps, last)
                else:
                    for ts, at_ts in item.by_ts():
                        self._step(ts, at_ts, out)
            elif isinstance(item, Progress):
                if item.watermark > self.done_before:
                    self._apply(self.graph.advance(item.watermark), out)
                    self.done_before = item.watermark
                    out.progress = Progress(self.done_before, "deriver")
            else:
                raise TypeError(f"deriver cannot process {type(item).__name__}")
        out.dead_letters = self.graph.take_dead_letters()
        if self._exported:
            out.imports = TxnBatch.of(self._exported, self.schemas, self.graph.strings)
        return out

    def _step(self, ts: int, txns: TxnBatch, out: DeriverOutput,
              stamps: Mapping[int, int] | None = None, last: int | None = None) -> None:
        # A transaction at ts means every one before ts is in: windows ending
        # at or before ts are final, and their results (stamped end - 1 or end,
        # see AggregatePlan.emit_ts) may change the contexts that hold at ts.
        self._apply(self.graph.advance(ts), out)
        # D = ts, not ts + 1: more transactions at ts (other stream partitions)
        # may still come in the next batch, and a window ending at ts + 1 is
        # final only once they are in (at the next ts or scheduler progress).
        self.done_before = max(self.done_before, ts)
        active = {p: self.activation.active(self.vector(p)) for p in txns.partitions().tolist()}
        # A wave (ts..last, one transaction per partition): a change fired by
        # a partition's transaction holds from its next one, which is in a
        # later wave, so every transaction here sees the vector before it.
        self._apply(self.graph.step(ts, txns, active, stamps, last), out)
        if last is not None:
            self.done_before = max(self.done_before, last)
        out.progress = Progress(self.done_before, "deriver")

    def _apply(self, outputs: list[Output], out: DeriverOutput) -> None:
        floor = self.done_before
        fired: list[tuple[int, StageOutput]] = []
        for o in outputs:
            assert isinstance(o, StageOutput)  # the deriver's graph makes records only
            pid = o.stage.plan.plan_id
            if pid in self.transitions:
                fired.append((max(o.record["_ts"], floor), o))
                continue
            if pid in self.exports:
                rec = o.record
                self._exported.append(Transaction(rec["_p"], rec["_key"], rec["_ts"], (
                    {k: v for k, v in rec.items() if k == "type" or is_public(k)},)))
            if o.stage.output_topic is not None:
                rec = o.record
                out.alerts.append(Alert(
                    plan_id=stage_identity(o.stage), event_type=rec["type"], partition=rec["_p"],
                    key=rec["_key"],
                    start_ts=o.start_ts, end_ts=o.end_ts, topic=o.stage.output_topic,
                    fields={k: v for k, v in rec.items() if k != "type" and not k.startswith("_")}))
        fired.sort(key=lambda f: f[0])  # stable: transition order within one ts
        for ts, o in fired:
            t = self.transitions[o.stage.plan.plan_id]
            part = o.record["_p"]
            before = self.raw.get(part, 0)
            if not self._holds(t, self.resolver.effective(before)):
                # An earlier transition at this ts already ended the contexts
                # this query runs in: it no longer derives anything, except
                # that a second switch into the same keyed context opens its
                # instance (two accidents detected in one second).
                if t.action != "TERMINATE" and t.context in self.keyed and \
                        before & (1 << self.resolver.bits[t.context]):
                    self._open_instance(part, t, o.record)
                continue
            after = self._transition(t, o.record, part, before)
            if after == before:
                continue
            self.raw[part] = after
            vector = self.resolver.effective(after)
            key: str = self.keys[part] if part in self.keys else o.record["_key"]
            out.changes.append(ContextChange(part, key, ts, vector, self.resolver.names(vector)))

    def _transition(self, t: TransitionStage, record: Record, part: int, before: int) -> int:
        """The raw vector after transition `t` fired for `part`; keeps the open
        instances of keyed contexts (a keyed context holds while any is open)."""
        bit = 1 << self.resolver.bits[t.context]
        key = _instance_key(t, record)
        open_ = self.instances.setdefault(part, {})
        if t.action == "INITIATE":
            after = before | bit
        elif t.action == "TERMINATE":
            after = self._terminated(t, key, open_, before)
        else:
            switched = self._switched(t, key, open_, before)
            if switched is None:
                return before
            after = switched
        after &= ~self.resolver.default_mask
        if t.action != "TERMINATE" and t.context in self.keyed:
            self._open_instance(part, t, record)
        for name in self.keyed:  # an ended keyed context forgets its instances
            if not after & (1 << self.resolver.bits[name]):
                open_.pop(name, None)
        return after

    def _terminated(self, t: TransitionStage, key: InstanceKey,
                    open_: dict[str, set[InstanceKey]], before: int) -> int:
        """TERMINATE: the context ends, unless other instances of a keyed one hold."""
        if t.context in self.keyed:
            left = open_.get(t.context, set())
            left.discard(key)
            if left:  # other instances still hold the context
                return before
        return before & ~(1 << self.resolver.bits[t.context])

    def _switched(self, t: TransitionStage, key: InstanceKey,
                  open_: dict[str, set[InstanceKey]], before: int) -> int | None:
        """SWITCH: end the contexts this query ran in, start the new one. None:
        it closed one instance of a keyed context that others still hold, so
        the switch waits for the last one."""
        ended_names = [n for n in t.stage.contexts if n != t.context]
        for name in ended_names:
            if name in self.keyed:
                open_.get(name, set()).discard(key)
        if any(open_.get(n) for n in ended_names if n in self.keyed):
            return None
        ended = 0
        for name in t.stage.contexts:
            ended |= self.resolver.mask(name)
        return (before & ~ended) | (1 << self.resolver.bits[t.context])

    def _open_instance(self, part: int, t: TransitionStage, record: Record) -> None:
        self.instances.setdefault(part, {}).setdefault(t.context, set()).add(
            _instance_key(t, record))

    def _holds(self, t: TransitionStage, vector: int) -> bool:
        return any(vector & m == m for m in self.resolver.stage_masks(t.stage))

    # state for the store
    def snapshot(self) -> dict[str, Any]:
        """Plain data (services/store/state_format.py): contexts by name (so a
        new model version with other contexts or bit positions reads them
        right), queries by identity."""
        return {"raw": [[p, self.resolver.names(bits)] for p, bits in self.raw.items()],
                "keys": [[p, k] for p, k in self.keys.items()], "done_before": self.done_before,
                "instances": [[p, [[c, sorted([list(k) for k in keys], key=repr)]
                                   for c, keys in cs.items()]]
                              for p, cs in self.instances.items()],
                "graph": self.graph.snapshot(self.keys)}

    def restore(self, state: Mapping[str, Any]) -> None:
        self.raw = {int(p): self.resolver.vector(names) & ~self.resolver.default_mask
                    for p, names in state["raw"]}
        self.keys = {int(p): k for p, k in state["keys"]}
        self.done_before = int(state["done_before"])
        self.instances = {int(p): {c: {tuple(k) for k in keys} for c, keys in cs
                                   if c in self.keyed}
                          for p, cs in state["instances"]}
        self.graph.restore(state["graph"])


def _instance_key(t: TransitionStage, record: Record) -> InstanceKey:
    """The keyed-context instance a transition names (its KEYED BY values)."""
    return tuple(record.get(f) for f in t.key_fields)


def _active_of(deriver: weakref.ref[DeriverProcessor]) -> Callable[[int], frozenset[str]]:
    """The graph's `active_of` for a deriver, holding it weakly: a closure
    over the deriver itself would make a cycle (deriver -> graph -> closure),
    which a process that freezes survivors (collector.tune_collector) keeps
    with all its state until a sweep."""
    def active(partition: int) -> frozenset[str]:
        d = deriver()
        assert d is not None, "the deriver's graph outlived it"
        return d.activation.active(d.vector(partition))
    return active
