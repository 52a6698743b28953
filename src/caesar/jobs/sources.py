"""Where the jobs read events from: Parquet, CSV (with a header line), JSON
(lines) files or directories, or a catalog table, as a batch or a Structured
Streaming source.

`--from` is a path, a glob, or a table: `table:db.name` always means a table,
and a name that is no existing path and has no slash is taken for one. The
format follows from the suffix of the path or of the files in the directory;
`--format` says it when that is ambiguous.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from caesar.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FORMATS = ("auto", "parquet", "csv", "json", "table")
_SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".tsv": "csv",
             ".json": "json", ".jsonl": "json", ".ndjson": "json"}
_REMOTE = ("s3://", "s3a://", "s3n://", "hdfs://", "gs://", "abfs://", "abfss://", "wasb://",
           "wasbs://", "file://", "dbfs:/")


def resolve_format(source: str, fmt: str = "auto") -> tuple[str, str]:
    """(format, path or table name) of `source`."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown --format {fmt!r} (one of {', '.join(FORMATS)})")
    if source.startswith("table:"):
        return "table", source.removeprefix("table:")
    if fmt != "auto":
        return fmt, source
    if source.startswith(_REMOTE) or any(c in source for c in "*?["):
        found = _SUFFIXES.get(Path(source.rstrip("/")).suffix.lower())
        if found is None:
            raise ConfigError(f"{source}: cannot tell the format from the name; pass --format "
                              "parquet, csv or json")
        return found, source
    return _local_format(source), source


def _local_format(source: str) -> str:
    """The format of a local file (by its suffix), directory (by its data
    files) or, for a bare name, a table."""
    path = Path(source)
    if path.is_file():
        found = _SUFFIXES.get(path.suffix.lower())
        if found is None:
            raise ConfigError(f"{source}: unknown file suffix {path.suffix!r}; pass --format "
                              "parquet, csv or json")
        return found
    if path.is_dir():
        kinds = {_SUFFIXES[p.suffix.lower()] for p in path.rglob("*")
                 if p.is_file() and p.suffix.lower() in _SUFFIXES
                 and not p.name.startswith((".", "_"))}
        if len(kinds) != 1:
            raise ConfigError(f"{source}: the directory holds "
                              f"{'no data files' if not kinds else ' and '.join(sorted(kinds))}"
                              "; pass --format parquet, csv or json")
        return kinds.pop()
    if "/" not in source and not path.suffix:
        return "table"
    raise ConfigError(f"{source} does not exist (a path, a glob, or table:NAME for a table)")


def read_source(spark: SparkSession, source: str, fmt: str = "auto", *,
                options: dict[str, str] | None = None, streaming: bool = False) -> DataFrame:
    """The rows of `source`; CSV with a header line, every cell as text (the jobs
    convert each to its field's type and dead-letter what does not convert)."""
    kind, target = resolve_format(source, fmt)
    opts = dict(options or {})
    if kind == "csv":
        opts.setdefault("header", "true")
        if target.endswith(".tsv"):
            opts.setdefault("sep", "\t")
    if kind == "table":
        if streaming:
            return spark.readStream.options(**opts).table(target)
        try:
            return spark.table(target)
        except Exception as exc:  # AnalysisException: TABLE_OR_VIEW_NOT_FOUND
            raise ConfigError(f"cannot read table {target!r}: {str(exc).splitlines()[0]}") from exc
    if not streaming:
        return spark.read.format(kind).options(**opts).load(target)
    if Path(target).is_file():
        raise ConfigError(f"{source}: a streaming source is a directory (or glob) that new "
                          "files land in, not one file")
    # A file stream needs its schema up front: the one of the files already there.
    try:
        schema = spark.read.format(kind).options(**opts).load(target).schema
    except Exception as exc:
        raise ConfigError(f"{source}: a streaming source needs at least one {kind} file to "
                          f"take the schema from ({str(exc).splitlines()[0]})") from exc
    return spark.readStream.format(kind).options(**opts).schema(schema).load(target)
