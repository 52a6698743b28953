"""How `--from` is read: the format from the name or the files, tables by name."""

from __future__ import annotations

import pytest

from caesar.errors import ConfigError
from caesar.jobs.sources import resolve_format


def test_formats_follow_the_names(tmp_path):
    (tmp_path / "a.csv").write_text("ts\n1\n")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "part-0.parquet").write_bytes(b"")
    (tmp_path / "dir" / "_SUCCESS").write_text("")
    assert resolve_format(str(tmp_path / "a.csv")) == ("csv", str(tmp_path / "a.csv"))
    assert resolve_format(str(tmp_path / "dir"))[0] == "parquet"
    assert resolve_format("s3a://bucket/events/*.json")[0] == "json"
    assert resolve_format("table:db.events") == ("table", "db.events")
    assert resolve_format("events") == ("table", "events")
    assert resolve_format(str(tmp_path / "a.csv"), "json")[0] == "json"


def test_unclear_sources_are_errors(tmp_path):
    (tmp_path / "mixed").mkdir()
    (tmp_path / "mixed" / "a.csv").write_text("")
    (tmp_path / "mixed" / "b.json").write_text("")
    with pytest.raises(ConfigError, match="csv and json"):
        resolve_format(str(tmp_path / "mixed"))
    with pytest.raises(ConfigError, match="does not exist"):
        resolve_format(str(tmp_path / "nope.csv"))
    with pytest.raises(ConfigError, match="unknown --format"):
        resolve_format("x", "avro")
