# The Python-visible interface of clean_columns.pyx, for type checkers.
from typing import Any

import numpy as np

def strict_columns(values: list[Any], schema: dict[str, str]
                   ) -> tuple[dict[str, list[Any]], dict[str, np.ndarray]] | None: ...
