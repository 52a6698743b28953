"""Writing example events to a file the Spark jobs (and `caesar run`) read:
JSON lines, CSV or Parquet, by the path's suffix. Each event is a dict with a
`type` key naming its event type (the jobs' default type column)."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


def write_events(events: Iterable[Mapping[str, Any]], path: str | Path) -> int:
    """Write `events` to `path` (.jsonl/.json, .csv or .parquet); returns the count."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = [dict(e) for e in events]
    suffix = out.suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        with out.open("w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows)
    elif suffix == ".csv":
        columns = list(dict.fromkeys(k for r in rows for k in r))
        with out.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, columns)
            writer.writeheader()
            writer.writerows(rows)
    elif suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        columns = list(dict.fromkeys(k for r in rows for k in r))
        pq.write_table(pa.table({c: [r.get(c) for r in rows] for c in columns}), out)
    else:
        raise ValueError(f"{out}: use a .jsonl, .csv or .parquet file")
    return len(rows)
