"""The workflow databases the durable tests run on: a SQLite file, and a fresh PostgreSQL database per test.

PostgreSQL is at ``TETHER_TEST_POSTGRES`` (default ``postgresql://postgres@127.0.0.1:5432/postgres``). Where
no server answers, its tests skip with the reason printed; under ``CI=true`` they fail instead, since CI runs
a server and a skip there would hide durable runs that no longer work on PostgreSQL.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ADMIN_URL = os.environ.get("TETHER_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
_announced: list[str] = []


def _postgres_problem() -> str | None:
    import psycopg

    try:
        with psycopg.connect(ADMIN_URL, connect_timeout=3):
            return None
    except psycopg.Error as error:
        return f"no PostgreSQL server at {ADMIN_URL}: {error}".strip()


def require_postgres(config: pytest.Config) -> None:
    """Skip (fail under ``CI=true``) when no PostgreSQL server is reachable, printing why once."""
    problem = _postgres_problem()
    if problem is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must test durable runs on PostgreSQL, but {problem}", pytrace=False)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None and not _announced:
        _announced.append(problem)
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\nskipping the PostgreSQL durable tests: {problem}", yellow=True)
    pytest.skip(problem)


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A workflow database no other test uses: a SQLite file, or a fresh PostgreSQL database (dropped after)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.sqlite'}"
        return
    with fresh_postgres(request.config) as url:
        yield url


@pytest.fixture
def postgres_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh PostgreSQL database (dropped after), for the tests that need many machines' database."""
    with fresh_postgres(request.config) as url:
        yield url


@contextmanager
def fresh_postgres(config: pytest.Config) -> Iterator[str]:
    """The URL of a PostgreSQL database made for one test and dropped after it (skips as
    :func:`require_postgres` says)."""
    require_postgres(config)
    import psycopg

    name = f"tether_durable_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
