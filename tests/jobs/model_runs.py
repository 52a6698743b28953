"""Helpers for the Spark model-job tests: example models under unique names and
topics, closed example inputs, and outputs in one comparable form."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from caesar.bus.partitioner import partition_for_key
from caesar.examples import model_path
from caesar.jobs.job_model import JobModel
from caesar.services.common.messages import Alert, partition_key

META = {"plan_id", "partition_key", "start_ts", "end_ts", "ingest_ms", "emit_ms",
        "kafka_topic", "kafka_partition", "kafka_offset", "kafka_ms", "batch_id"}


def renamed_model(example: str, tag: str, directory: Path) -> Path:
    """The example's model with its own MODEL name and input topics (so its
    output topics `<model>.<Type>` and input topics are this test's alone)."""
    text = model_path(example).read_text()
    text = re.sub(r"^MODEL (\w+)", lambda m: f"MODEL {m.group(1)}_{tag}", text, flags=re.M)
    text = re.sub(r'FROM TOPIC "([^"]+)"', lambda m: f'FROM TOPIC "{tag}-{m.group(1)}"', text)
    path = directory / f"{example}_{tag}.caesar"
    path.write_text(text)
    return path


def closing_events(model: JobModel, etype: str, key_field: str, at: int, partitions: int,
                   **fields: Any) -> list[dict[str, Any]]:
    """One `etype` event at time `at` for a key in every Kafka partition. A
    deployment only releases event time when later input arrives (or an idle
    flush releases what it holds): these close every window that ended before
    `at`, as the end of a bounded input does in embedded mode."""
    out: list[dict[str, Any]] = []
    covered: set[int] = set()
    key = 10_000
    while len(covered) < partitions:
        event = {"type": etype, model.types[etype].ts_field: at, key_field: key, **fields}
        j = partition_for_key(partition_key(event, model.plan.partition_by).encode(), partitions)
        if j not in covered:
            covered.add(j)
            out.append(event)
        key += 1
    return out


def identities(alerts: Iterable[Alert], model: JobModel) -> list[tuple]:
    """Embedded alerts as identities, with the fields the output type declares:
    what a table (and a deployment's output record) holds. An aggregate's
    result also carries `ts`, its window's last time, which is its end_ts."""
    out = []
    for a in alerts:
        declared = model.types[a.event_type].fields
        extra = {k: v for k, v in a.fields.items() if k not in declared}
        assert extra in ({}, {"ts": a.end_ts}), (a, extra)
        out.append(replace(a, fields={k: v for k, v in a.fields.items() if k in declared}))
    return sorted(a.identity() for a in out)


def table_identities(rows: Iterable[Mapping[str, Any]], etype: str) -> list[tuple]:
    """Rows of an output table (consumer or replay) as Alert identities."""
    return sorted(Alert(r["plan_id"], etype, 0, r["partition_key"], r["start_ts"], r["end_ts"],
                        {k: v for k, v in r.items() if k not in META}).identity() for r in rows)


def before(ids: Iterable[tuple], at: int) -> list[tuple]:
    """Identities of outputs whose end time is before `at` (index 4: end_ts)."""
    return sorted(i for i in ids if i[4] < at)
