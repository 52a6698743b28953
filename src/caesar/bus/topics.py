"""The topics a deployment needs, with partitions and cleanup policy from the settings."""

from __future__ import annotations

from collections.abc import Iterable

from caesar.bus.records import TopicSpec
from caesar.settings import TopicSettings

COMPACTED = {"cleanup.policy": "compact"}


def topic_specs(topics: TopicSettings, event_types: Iterable[str] = (),
                stores: Iterable[str] = ()) -> list[TopicSpec]:
    """Input topics per event type, the internal topics, outputs, and one
    compacted changelog per state store."""

    def spec(name: str, compacted: bool = False) -> TopicSpec:
        config = dict(COMPACTED) if compacted else {}
        if not compacted and topics.retention_ms is not None:
            config["retention.ms"] = str(topics.retention_ms)
        return TopicSpec(name, topics.partitions_by_topic.get(name, topics.partitions),
                         topics.replication_factor, config)

    inputs = dict.fromkeys(list(topics.inputs) + list(event_types))
    specs = [spec(topics.input_topic(t)) for t in inputs]
    specs += [
        spec(topics.transactions),
        spec(topics.context_changes, compacted=True),
        spec(topics.progress),
        spec(topics.derived),
        spec(topics.alerts),
        spec(topics.dead_letters),
        spec(topics.checkpoints, compacted=True),
    ]
    specs += [spec(topics.changelog_topic(s), compacted=True) for s in dict.fromkeys(stores)]
    seen: set[str] = set()
    unique = []
    for s in specs:
        if s.name not in seen:
            seen.add(s.name)
            unique.append(s)
    return unique
