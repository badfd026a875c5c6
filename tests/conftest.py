"""Fixtures shared by every test folder."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from tests.postgres import PgSchema, fresh_schema

# A shell starts a background job (`cmd &`, `nohup`) with SIGINT ignored, and Python then installs no
# KeyboardInterrupt handler; the processes the tests spawn inherit that too. The Ctrl-C tests need Ctrl-C to
# arrive, however the suite was launched.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def postgres(request: pytest.FixtureRequest) -> Iterator[PgSchema]:
    """A fresh schema on the test PostgreSQL server (skips, or fails under ``CI=true``, without one)."""
    yield from fresh_schema(request.config)
