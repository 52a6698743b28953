# The Python-visible interface of pane_table.pyx, for type checkers.
from collections.abc import Callable
from typing import Any

import numpy as np

from caesar.services.matcher.key_table import KeyTable

class PaneTable(KeyTable):
    def __init__(self, kw: int, w: int) -> None: ...
    def resolve(self, keys: np.ndarray, ts: np.ndarray, slide: int, size: int,
                allocate: Callable[[list[tuple[int, ...]]], list[list[int]]]) -> np.ndarray: ...
    def accumulate(self, entries: np.ndarray, values: list[tuple[np.ndarray, np.ndarray] | None],
                   count: np.ndarray, itotal: np.ndarray, ilow: np.ndarray, ihigh: np.ndarray,
                   big: dict[tuple[int, int], int], distinct: dict[int, list[Any]],
                   distinct_aggs: tuple[bool, ...]) -> None: ...
