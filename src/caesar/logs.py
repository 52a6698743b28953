"""One place that configures logging for the CLI, the services and the jobs.

Level: `--log-level` or CAESAR_LOG_LEVEL (default INFO). Format: text for a
terminal, or one JSON object per line (`--log-json` / CAESAR_LOG_FORMAT=json)
for Kubernetes log collectors. Ray actors get the driver's choice as options
and call `configure` in their own process.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import UTC, datetime
from typing import Literal, TextIO

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LogFormat = Literal["text", "json"]
_RECORD_FIELDS = set(vars(logging.makeLogRecord({})))


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, extras."""

    def format(self, record: logging.LogRecord) -> str:
        out = {"time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
               "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        out.update({k: v for k, v in vars(record).items()
                    if k not in _RECORD_FIELDS and not k.startswith("_")})
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def settings_from_env() -> tuple[str, LogFormat]:
    level = os.environ.get("CAESAR_LOG_LEVEL", "INFO").upper()
    fmt: LogFormat = "json" if os.environ.get("CAESAR_LOG_FORMAT", "").lower() == "json" \
        else "text"
    return level, fmt


class _CaesarHandler(logging.StreamHandler[TextIO]):
    """The handler `configure` installs (found again to be replaced)."""


def configure(level: str | None = None, fmt: LogFormat | None = None) -> None:
    """Route the `caesar` loggers to stderr at `level` in `fmt` (defaults from
    the environment). Idempotent: a second call replaces the handler."""
    env_level, env_fmt = settings_from_env()
    level = (level or env_level).upper()
    if level not in LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(LEVELS)}")
    handler = _CaesarHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if (fmt or env_fmt) == "json" else
                         logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("caesar")
    for old in [h for h in root.handlers if isinstance(h, _CaesarHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    root.propagate = False
