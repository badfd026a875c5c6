"""ResponseCache: a provider call answered from a SQLite file or PostgreSQL when the same request was answered before.

For development loops, tests and evaluations, where the same prompt is sent again and again: an opt-in cache
(``Agent(cache=ResponseCache(path))``, ``tether run --cache``) that the loop puts around each provider call
(``loop/call.py``). Nothing of it runs when it is off.

* **The key** is a SHA-256 of the whole normalised request: the model (``provider:model``), the server it is
  served from (host and port, when the provider says), the messages with every part and its provider data, the
  system prompt, the tools with their schemas, the tool choice, parallel tool calls, every setting (``extra``
  included), the JSON Schema and the output format; encoded as JSON with every object's keys sorted, so that
  the same request always gives the same key. What is not the model's input is left out: the timeout, the
  deadline, the retry and exchange hooks.
* **What is kept** is the provider's own event sequence for the call, as it streamed (a retry's ``ProviderRetry``, a
  ``RateLimitWait`` and a fallback's ``FallbackTaken`` left out: they belong to that attempt), stored only once its
  ``StreamEnd`` came with a finish other than ``error`` and the answer holds something (text, thinking or a tool
  call). A call that failed, was cancelled or was cut short by its consumer stores nothing.
* **A hit** replays those events: the same text, thinking and tool-call events, in the same order, so a host
  sees what a live answer shows. Two of them say it was a replay: the first, a ``StreamStart`` with
  ``cached=True`` (the recorded one's model and response id kept), and the last, the ``StreamEnd``, whose usage
  is zero: a hit spends no tokens, costs nothing and is no request (``Usage.requests`` does not count it); the
  call's ``TurnRecord.cached`` is ``True``.
* **Only deterministic requests** are cached: a temperature of 0 (``ModelSettings.temperature``, or a
  ``temperature`` key of ``ModelSettings.extra``, which is what the body then sends). A request that leaves the
  temperature to the provider (most default to 1) or sets another one goes live and is not stored, unless
  ``any_temperature=True`` says that one sampled answer per request is what is wanted.
* **TTL**: an entry older than ``ttl`` seconds is a miss, and the live answer replaces it. ``None``: no expiry.

The file is one table in WAL mode; every read and write is a single statement in its own transaction, made on
a worker thread, so any number of runs and processes may share one file (a writer waits up to ``timeout``
seconds for another's lock). It is created with mode 0600: it holds prompts and answers.

A ``postgresql://`` URL in place of the file keeps the answers in a table of that database instead
(``response_cache_pg.py``, ``tether[postgres]``), for a cache that several machines share: the same keys, the
same rows, the same TTL and the same replays. The one switch is the URL: ``ResponseCache(url)``,
``[cache] path = "postgresql://..."`` and ``--cache-path postgresql://...`` alike.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

import msgspec

from tether._sqlite import switch_to_wal
from tether.errors import ConfigInvalid, StoreUnavailable
from tether.events import (
    FallbackTaken,
    LlmEvent,
    ProviderRetry,
    RateLimitWait,
    StreamEnd,
    StreamStart,
    TextDelta,
    ThinkingDelta,
    ToolCallStart,
)
from tether.providers.base import Provider, Request, ServedProvider
from tether.usage import NO_USAGE

__all__ = ["POSTGRES_SCHEMES", "ResponseCache", "request_key"]

KEY_VERSION = 1
"""Part of every key: a change of what a key covers (or of how events are stored) starts a fresh cache."""
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS responses ("
    "key TEXT PRIMARY KEY, model TEXT NOT NULL, created REAL NOT NULL, events BLOB NOT NULL)"
)
_EVENTS = msgspec.json.Decoder(list[LlmEvent])
_ENCODE = msgspec.json.Encoder(order="sorted")
_NOT_KEPT = frozenset({ProviderRetry, RateLimitWait, FallbackTaken})
"""Events of the attempt, not of the answer: a retry's, a rate limit's wait, a fallback's move."""
_CONTENT = (TextDelta, ThinkingDelta, ToolCallStart)
"""Events that make an answer hold something: an answer with none is not stored (the loop rejects it)."""


def request_key(provider: Provider, request: Request) -> str:
    """The cache key of ``request`` to ``provider``: a SHA-256 (hex) of the whole normalised request (see the
    module docstring for what it covers)."""
    server = provider.server if isinstance(provider, ServedProvider) else (None, None)
    normalised: dict[str, Any] = {
        "version": KEY_VERSION,
        "model": provider.info.model_string,
        "server": list(server),
        "messages": request.messages,
        "system": request.system,
        "tools": request.tools,
        "tool_choice": request.tool_choice,
        "parallel_tool_calls": request.parallel_tool_calls,
        "settings": request.settings,
        "json_schema": request.json_schema,
        "output": request.output,
    }
    return hashlib.sha256(_ENCODE.encode(normalised)).hexdigest()


POSTGRES_SCHEMES = ("postgresql://", "postgres://")
"""A ``path`` that starts with one of these is a PostgreSQL URL (``response_cache_pg.py``), not a file."""


class ResponseCache:
    """Provider answers kept in a SQLite file, or a PostgreSQL table, and replayed for an identical request (see
    the module docstring).

    ``ResponseCache("answers.db")`` caches requests sent at temperature 0, with no expiry; ``ttl=3600`` makes
    an entry a miss an hour after it was stored; ``any_temperature=True`` caches every request, whatever its
    temperature. ``ResponseCache("postgresql://host/db")`` keeps them in the table ``table`` of that database
    (``tether[postgres]``), shared by every machine that reaches it. Give it to ``Agent(cache=...)``; one cache
    may serve any number of agents and processes.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        ttl: float | None = None,
        any_temperature: bool = False,
        timeout: float = 30.0,
        table: str = "tether_responses",
    ) -> None:
        """``path``: the SQLite file, or a ``postgresql://`` URL; ``timeout``: seconds a write waits for another's
        lock (and, for PostgreSQL, to connect); ``table``: the PostgreSQL table (lowercase letters, digits and
        ``_``; created on first use)."""
        if ttl is not None and not ttl > 0:
            raise ConfigInvalid(f"ResponseCache ttl must be a positive number of seconds or None, not {ttl!r}")
        if not timeout > 0:
            raise ConfigInvalid(f"ResponseCache timeout must be a positive number of seconds, not {timeout!r}")
        self.ttl = ttl
        self.any_temperature = any_temperature
        self.timeout = timeout
        self._store: _Store
        if isinstance(path, str) and path.startswith(POSTGRES_SCHEMES):
            from tether.providers.response_cache_pg import PostgresResponses

            self.path: Path | None = None
            self._store = PostgresResponses(path, table=table, timeout=timeout)
        else:
            self.path = Path(path)
            self._store = _SqliteResponses(self.path, timeout)

    def __repr__(self) -> str:
        return f"ResponseCache({self._store.where!r}, ttl={self.ttl!r}, any_temperature={self.any_temperature!r})"

    def cacheable(self, request: Request) -> bool:
        """Whether ``request`` may be answered from, and stored in, this cache: its temperature is 0, or any
        temperature is allowed."""
        if self.any_temperature:
            return True
        settings = request.settings
        temperature = settings.extra.get("temperature", settings.temperature)
        return temperature == 0 and type(temperature) is not bool

    def stream(self, provider: Provider, request: Request) -> AsyncIterator[LlmEvent]:
        """``provider.stream(request)``, or its recorded answer replayed: what the loop calls in place of the
        provider when a run has a cache."""
        if not self.cacheable(request):
            return provider.stream(request)
        return self._through(provider, request)

    async def _through(self, provider: Provider, request: Request) -> AsyncIterator[LlmEvent]:
        """A hit replayed, or the live answer passed on as it comes and stored once it is complete."""
        key = request_key(provider, request)
        recorded = await asyncio.to_thread(self._get, key)
        if recorded is not None:
            for event in replayed(recorded):
                yield event
            return
        kept: list[LlmEvent] = []
        live = provider.stream(request)
        try:
            async for event in live:
                if type(event) is StreamEnd:
                    kept.append(event)
                    if event.finish_reason != "error" and any(type(seen) in _CONTENT for seen in kept):
                        await asyncio.to_thread(self._put, key, provider.info.model_string, kept)
                elif type(event) not in _NOT_KEPT:
                    kept.append(event)
                yield event
        finally:
            aclose = getattr(live, "aclose", None)
            if aclose is not None:
                await aclose()

    def entries(self) -> int:
        """How many answers the cache holds (expired ones included, until replaced or cleared)."""
        return self._store.count()

    def clear(self) -> None:
        """Forget every answer."""
        self._store.clear()

    def close(self) -> None:
        """Close this thread's connection (each thread that used the cache has its own; the others close when
        their thread ends)."""
        self._store.close()

    def _get(self, key: str) -> list[LlmEvent] | None:
        row = self._store.get(key)
        if row is None or (self.ttl is not None and time.time() - row[0] > self.ttl):
            return None
        try:
            return _EVENTS.decode(row[1])
        except msgspec.DecodeError:
            return None  # written by a version that stored events differently: a miss, replaced by the answer

    def _put(self, key: str, model: str, events: list[LlmEvent]) -> None:
        self._store.put(key, model, time.time(), msgspec.json.encode(events))


class _Store(Protocol):
    """Where the answers are kept: one row per key, its model, when it was stored and its events' JSON. Each
    method is one statement in its own transaction, on the calling thread's connection; a failure is
    ``StoreUnavailable``."""

    where: str
    """What the cache's ``repr`` names: the file, or the table (never a URL, which may hold a password)."""

    def get(self, key: str) -> tuple[float, bytes] | None: ...
    def put(self, key: str, model: str, created: float, events: bytes) -> None: ...
    def count(self) -> int: ...
    def clear(self) -> None: ...
    def close(self) -> None: ...


class _SqliteResponses:
    """The answers in a SQLite file (see the module docstring)."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.where = str(path)
        self.timeout = timeout
        self._local = threading.local()
        self._prepare = threading.Lock()
        self._prepared = False

    def get(self, key: str) -> tuple[float, bytes] | None:
        row = self._run(lambda db: db.execute("SELECT created, events FROM responses WHERE key = ?", (key,)).fetchone())
        return None if row is None else (row[0], row[1])

    def put(self, key: str, model: str, created: float, events: bytes) -> None:
        self._run(
            lambda db: db.execute(
                "INSERT OR REPLACE INTO responses (key, model, created, events) VALUES (?, ?, ?, ?)",
                (key, model, created, events),
            )
        )

    def count(self) -> int:
        return int(self._run(lambda db: db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]))

    def clear(self) -> None:
        self._run(lambda db: db.execute("DELETE FROM responses"))

    def close(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            self._local.connection = None
            connection.close()

    def _run(self, operation: Any) -> Any:
        """``operation(connection)`` on this thread's connection; a file that cannot be used -> StoreUnavailable."""
        try:
            return operation(self._connection())
        except sqlite3.Error as error:
            self.close()
            raise StoreUnavailable(f"the response cache {str(self.path)!r} cannot be used: {error}") from error

    def _connection(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            if self.path.parent != Path():
                self.path.parent.mkdir(parents=True, exist_ok=True)
            new = not self.path.exists()
            connection = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
            if new:
                os.chmod(self.path, 0o600)
            with self._prepare:  # one thread at a time: switching to WAL beside another connection of this
                if not self._prepared:  # process's fails at once ("database is locked"), never waits
                    switch_to_wal(connection, self.timeout)
                    connection.execute(_SCHEMA)
                    self._prepared = True
            self._local.connection = connection
        return connection


def replayed(recorded: list[LlmEvent]) -> list[LlmEvent]:
    """The events of a hit: the recorded ones, opened by a ``StreamStart`` marked ``cached`` and closed by a
    ``StreamEnd`` of zero usage."""
    events: list[LlmEvent] = []
    start = StreamStart(cached=True)
    for event in recorded:
        if type(event) is StreamStart:
            start = msgspec.structs.replace(event, cached=True)
        elif type(event) is StreamEnd:
            events.append(msgspec.structs.replace(event, usage=NO_USAGE))
        else:
            events.append(event)
    return [start, *events]
