"""The topics a deployment needs, with partitions and cleanup policy from the settings."""

from __future__ import annotations

from collections.abc import Iterable

from caesar.bus.records import TopicSpec
from caesar.settings import TopicSettings

COMPACTED = {"cleanup.policy": "compact"}
# Context changes: a restarted router re-reads them from its checkpoint's
# offsets, so compaction must not drop a change it may still need.
CONTEXT_CHANGES = {**COMPACTED, "min.compaction.lag.ms": str(24 * 3600 * 1000)}
# Changelogs and checkpoints: one record per key is all a restore needs; roll
# segments often and clean eagerly, so the topic stays near one checkpoint
# per partition however long the service runs.
STATE = {**COMPACTED, "segment.bytes": str(16 * 1024 * 1024), "segment.ms": "60000",
         "min.cleanable.dirty.ratio": "0.1", "delete.retention.ms": "60000",
         "min.compaction.lag.ms": "0"}


def topic_specs(topics: TopicSettings, event_types: Iterable[str] = (),
                stores: Iterable[str] = ()) -> list[TopicSpec]:
    """Input topics per event type, the internal topics, outputs, and one
    compacted changelog per state store."""

    def spec(name: str, config: dict[str, str] | None = None) -> TopicSpec:
        config = dict(config or {})
        compacted = "compact" in config.get("cleanup.policy", "")
        if not compacted and topics.retention_ms is not None:
            config["retention.ms"] = str(topics.retention_ms)
        return TopicSpec(name, topics.partitions_by_topic.get(name, topics.partitions),
                         topics.replication_factor, config)

    inputs = dict.fromkeys(list(topics.inputs) + list(event_types))
    specs = [spec(topics.input_topic(t)) for t in inputs]
    specs += [
        spec(topics.transactions),
        spec(topics.context_changes, CONTEXT_CHANGES),
        spec(topics.progress),
        spec(topics.derived),
        spec(topics.alerts),
        spec(topics.dead_letters),
        spec(topics.checkpoints, STATE),
        TopicSpec(topics.plans, 1, topics.replication_factor, dict(COMPACTED)),
    ]
    specs += [spec(topics.changelog_topic(s), STATE) for s in dict.fromkeys(stores)]
    seen: set[str] = set()
    unique = []
    for s in specs:
        if s.name not in seen:
            seen.add(s.name)
            unique.append(s)
    return unique
