"""The test PostgreSQL server: a fresh schema or a fresh database for each test that needs one.

The server is ``TETHER_TEST_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``). Tests that
need it skip, with the reason printed once, when it cannot be reached; under ``CI=true`` they fail instead,
since CI runs them and a skip there would hide a PostgreSQL store, or durable runs, that no longer work.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache

import pytest

URL = os.environ.get("TETHER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")

_announced: list[str] = []


@dataclass(frozen=True)
class PgSchema:
    """A schema no other test uses, on the test server; dropped (with everything in it) after the test."""

    url: str
    schema: str


@cache
def problem() -> str | None:
    """Why the test server cannot be used, or ``None``."""
    try:
        import psycopg
    except ImportError as error:
        return f"psycopg is not installed ({error}); install tether[postgres]"
    try:
        with psycopg.connect(URL, connect_timeout=3) as connection:
            connection.execute("SELECT 1")
    except psycopg.Error as error:
        return f"no PostgreSQL server at {URL}: {str(error).strip()}"
    return None


def require_postgres(config: pytest.Config, what: str = "the PostgreSQL store") -> None:
    """Skip (fail under ``CI=true``) when the test server cannot be reached, printing why once; ``what`` the
    tests would have tested, for the failure's message."""
    reason = problem()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must test {what}, but {reason}", pytrace=False)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None and not _announced:
        _announced.append(reason)
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\nskipping the PostgreSQL tests: {reason}", yellow=True)
    pytest.skip(reason)


def fresh_schema(config: pytest.Config) -> Iterator[PgSchema]:
    """A new schema name (the store creates the schema on first use); the schema is dropped afterwards."""
    require_postgres(config)
    import psycopg

    name = f"test_{secrets.token_hex(8)}"
    yield PgSchema(URL, name)
    with psycopg.connect(URL, autocommit=True) as connection:
        connection.execute("SET lock_timeout = '30s'")  # a connection left in a transaction fails the test
        connection.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@contextmanager
def fresh_database(config: pytest.Config, prefix: str, what: str) -> Iterator[str]:
    """The URL of a database made on the test server for one test and dropped (forcibly) after it; skips as
    :func:`require_postgres` says."""
    require_postgres(config, what)
    import psycopg

    name = f"{prefix}_{secrets.token_hex(6)}"
    with psycopg.connect(URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_sql(query: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Run one statement on the test server in its own transaction; the rows it returns, if any."""
    import psycopg

    with psycopg.connect(URL, autocommit=True) as connection:
        cursor = connection.execute(query, params)
        return cursor.fetchall() if cursor.description is not None else []
