"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from tests.json_model import Model, models_served
from tests.postgres import PgSchema, fresh_schema

# A shell starts a background job (`cmd &`, `nohup`) with SIGINT ignored, and Python then installs no
# KeyboardInterrupt handler; the processes the tests spawn inherit that too. The Ctrl-C tests need Ctrl-C to
# arrive, however the suite was launched.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
async def serve_model() -> AsyncIterator[Callable[[Model], Any]]:
    """Start ``tests.json_model.Model``s on 127.0.0.1; give back each one's root URL; stop them after the test."""
    async for start in models_served():
        yield start


@pytest.fixture
def postgres(request: pytest.FixtureRequest) -> Iterator[PgSchema]:
    """A fresh schema on the test PostgreSQL server (skips, or fails under ``CI=true``, without one)."""
    yield from fresh_schema(request.config)


# A model server running on the developer's machine (Ollama on 11434, ...) is never picked up by a test that
# runs with no model configured: discovery is off for this process and, through the helpers that start the
# command, for the processes the tests start. A test of discovery names its servers itself.
os.environ["TETHER_LOCAL_SERVERS"] = "off"


@pytest.fixture(scope="session", autouse=True)
def _own_cache_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """What tether caches on disk (the embedded model's prompt snapshots) goes to a folder of this session's,
    not to the user's cache; the processes the tests start inherit it."""
    before = os.environ.get("TETHER_CACHE_DIR")
    os.environ["TETHER_CACHE_DIR"] = str(tmp_path_factory.mktemp("tether-cache"))
    yield
    if before is None:
        os.environ.pop("TETHER_CACHE_DIR", None)
    else:
        os.environ["TETHER_CACHE_DIR"] = before


@pytest.fixture(autouse=True)
def _no_resolved_secret_outlives_its_test() -> Iterator[None]:
    """A key a test resolved from a reference (``file:``, ``cmd:``...) joins the process's masked set for good
    (``tether.secret_refs``, by design): after each test the set is put back as it was, and the cache emptied, so
    the next test's maskers see only their own keys."""
    from tether import secret_refs

    with secret_refs._lock:
        before = set(secret_refs._resolved)
    yield
    secret_refs.forget()
    with secret_refs._lock:
        secret_refs._resolved.intersection_update(before)
