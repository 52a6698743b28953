# The Python-visible interface of clean_columns.pyx, for type checkers.
from typing import Any

import numpy as np

def strict_columns(values: list[Any], schema: dict[str, str]
                   ) -> tuple[dict[str, list[Any]], dict[str, np.ndarray]] | None: ...
def record_values(records: list[Any], type_field: str, ingest_key: str
                  ) -> tuple[list[Any], bool, np.ndarray, bool, np.ndarray] | None: ...
