"""The workflow databases the durable tests run on: a SQLite file, and a fresh PostgreSQL database per test
(``tests/postgres.py``: skipped with the reason printed where no server answers, failed under ``CI=true``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.postgres import fresh_database

WHAT = "durable runs on PostgreSQL"


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A workflow database no other test uses: a SQLite file, or a fresh PostgreSQL database (dropped after)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.sqlite'}"
        return
    with fresh_database(request.config, "tether_durable", WHAT) as url:
        yield url


@pytest.fixture
def postgres_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh PostgreSQL database (dropped after), for the tests that need many machines' database."""
    with fresh_database(request.config, "tether_durable", WHAT) as url:
        yield url
