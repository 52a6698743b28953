# The Python-visible interface of alert_rows.pyx, for type checkers.
from typing import Any, TypeVar

_T = TypeVar("_T")

def alert_rows(cls: type[_T], identity: str, event_type: str, topic: str,
               names: tuple[str, ...], columns: list[list[Any]], orders: list[int],
               starts: list[int], ends: list[int], homes: list[int], texts: dict[int, str],
               ingest: dict[int, int]) -> list[tuple[int, _T]]: ...
