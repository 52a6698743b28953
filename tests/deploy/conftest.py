"""Fixtures of the deployment tests (chart, CRD schemas, images)."""

from __future__ import annotations

from pathlib import Path

import pytest
from deploy_support import helm_path


@pytest.fixture(scope="session")
def helm() -> Path:
    # Missing helm is a broken setup, not a reason to skip: the tests fail, saying how to fix it.
    return helm_path()
