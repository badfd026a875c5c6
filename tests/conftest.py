"""Fixtures shared by every test folder."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres import PgSchema, fresh_schema


@pytest.fixture
def postgres(request: pytest.FixtureRequest) -> Iterator[PgSchema]:
    """A fresh schema on the test PostgreSQL server (skips, or fails under ``CI=true``, without one)."""
    yield from fresh_schema(request.config)
