"""A loopback HTTP server that replays one recorded VCR cassette, for testing providers over real HTTP.

The contract
------------
* **Cassettes** are the files under ``tests/fixtures/wire/`` (format: that folder's README). A JSON body is
  stored parsed under ``parsed_body`` and served again as ``json.dumps(parsed_body)``; an event stream is
  stored verbatim under ``body.string`` and served byte for byte. Header values are lists.
* **Matching** is by method and path, in order, as pydantic-ai recorded them: the N-th request to a path gets
  the N-th interaction recorded for that method and path. Bodies, queries and hosts are not matched; tests
  assert on what was sent through :attr:`ReplayServer.requests`.
* **Unexpected requests** (a path the cassette does not have, or one request too many) are answered with
  HTTP 599 and a JSON error naming the method and path, so the client fails with that message, and are kept
  in :attr:`ReplayServer.unexpected`; :func:`serve` and the ``replay`` fixture fail the test on them.
* **Responses** carry the recorded status, reason and headers (content-type included) minus the ones that
  describe the recorded transfer rather than the content: ``content-length``, ``transfer-encoding``,
  ``content-encoding``, ``connection`` and ``keep-alive``. Event streams are sent chunked, optionally in
  pieces of ``chunk_size`` bytes; the decoded result must not depend on how the bytes are cut.
* **Every request is recorded**: method, path, query, headers (lower-cased names), the raw body and its
  parsed JSON.
* The server listens on ``127.0.0.1`` on a free port; :attr:`ReplayServer.base_url` is the API's base URL
  on it, with the cassette's path prefix (``/v1``, ``/v1beta/openai``, ``/api/v1`` or none at all).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from aiohttp import web
from multidict import CIMultiDict

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "wire"
"""The recorded traffic, one folder per wire protocol."""
UNEXPECTED_STATUS = 599
"""The status of an answer to a request the cassette has no interaction for."""
DROPPED_HEADERS = frozenset({"content-length", "transfer-encoding", "content-encoding", "connection", "keep-alive"})
"""Recorded response headers that describe the recorded transfer, not the content: never replayed."""
ENDPOINTS = ("/chat/completions", "/responses", "/messages", "/models/")
"""Where an API's path prefix ends, for :meth:`Cassette.base_path`."""

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


# --- cassettes ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Interaction:
    """One recorded request and the response it got."""

    method: str
    uri: str
    request_body: Any
    """The JSON body that was sent (``parsed_body``), or ``None``."""
    status: int
    reason: str
    headers: tuple[tuple[str, str], ...]
    """The response headers to serve, in order, without :data:`DROPPED_HEADERS`."""
    body: bytes
    """The response body as it is served."""

    @property
    def path(self) -> str:
        return urlsplit(self.uri).path

    @property
    def content_type(self) -> str:
        return next((value for name, value in self.headers if name.lower() == "content-type"), "")

    @property
    def is_event_stream(self) -> bool:
        return "text/event-stream" in self.content_type

    def response_json(self) -> Any:
        """The response body parsed as JSON (for an event stream: a ``ValueError``)."""
        return json.loads(self.body)

    def events_data(self) -> list[str]:
        """The ``data:`` payloads of an event-stream body, in order (a plain reading, for test oracles)."""
        text = self.body.decode()
        return [line[5:].removeprefix(" ") for line in text.splitlines() if line.startswith("data:")]


@dataclass(frozen=True, slots=True)
class Cassette:
    """A recorded conversation: the interactions of one test, in order."""

    name: str
    interactions: tuple[Interaction, ...]

    @classmethod
    def load(cls, path: str | Path) -> Cassette:
        """Read a cassette; a relative path is taken under :data:`FIXTURES` (``"openai_chat/test_x.yaml"``)."""
        file = Path(path)
        if not file.is_absolute():
            file = FIXTURES / file
        with file.open(encoding="utf-8") as stream:
            data = yaml.load(stream, Loader=_Loader)
        interactions = tuple(_interaction(item, f"{file.name}#{i}") for i, item in enumerate(data["interactions"]))
        return cls(file.name, interactions)

    @property
    def request_bodies(self) -> list[Any]:
        """The recorded request bodies (parsed JSON), in order."""
        return [interaction.request_body for interaction in self.interactions]

    def base_path(self) -> str:
        """The API's path prefix: the first path up to its endpoint (``/v1/chat/completions`` -> ``/v1``)."""
        path = self.interactions[0].path
        for endpoint in ENDPOINTS:
            at = path.find(endpoint)
            if at >= 0:
                return path[:at]
        return path.rsplit("/", 1)[0]


def _interaction(item: dict[str, Any], where: str) -> Interaction:
    request, response = item["request"], item["response"]
    headers = tuple(
        (name, str(value))
        for name, values in (response.get("headers") or {}).items()
        if name.lower() not in DROPPED_HEADERS
        for value in (values if isinstance(values, list) else [values])
    )
    if "parsed_body" in response:
        body = json.dumps(response["parsed_body"]).encode()
    else:
        raw = (response.get("body") or {}).get("string", "")
        body = raw if isinstance(raw, bytes) else str(raw).encode()
    request_body = request.get("parsed_body")
    if request_body is None and isinstance((request.get("body") or None), str):
        try:
            request_body = json.loads(request["body"])
        except ValueError:
            request_body = None
    status = response.get("status") or {}
    if "code" not in status:
        raise ValueError(f"{where}: the response has no status code")
    return Interaction(
        method=str(request["method"]).upper(),
        uri=str(request["uri"]),
        request_body=request_body,
        status=int(status["code"]),
        reason=str(status.get("message") or ""),
        headers=headers,
        body=body,
    )


def cassette_files(folder: str) -> list[str]:
    """The cassettes of one folder of :data:`FIXTURES`, as ``"folder/name.yaml"``, sorted."""
    return sorted(f"{folder}/{file.name}" for file in (FIXTURES / folder).glob("*.yaml"))


def streamed_cassettes(names: list[str]) -> list[str]:
    """Those of ``names`` with at least one event-stream answer."""
    return [name for name in names if any(i.is_event_stream for i in Cassette.load(name).interactions)]


def whole_cassettes(names: list[str]) -> list[str]:
    """Those of ``names`` whose answers are all whole JSON bodies with status 200."""
    return [
        name
        for name in names
        if all(not i.is_event_stream and i.status == 200 for i in Cassette.load(name).interactions)
    ]


def recorded_request_bodies(cassette: str | Path | Cassette) -> list[Any]:
    """What the recording client sent, request by request (parsed JSON bodies)."""
    loaded = cassette if isinstance(cassette, Cassette) else Cassette.load(cassette)
    return loaded.request_bodies


# --- the server ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReceivedRequest:
    """A request the server received."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    """Lower-cased names; a repeated header keeps its last value."""
    raw: bytes
    body: Any
    """``raw`` parsed as JSON, or ``None`` when it is empty or not JSON."""
    served: int | None
    """The index of the interaction that answered it, ``None`` for an unexpected request."""

    def __str__(self) -> str:
        return f"{self.method} {self.path}{'?' + self.query if self.query else ''}"


@dataclass(slots=True)
class ReplayServer:
    """Serves one cassette on loopback; see the module docstring. Use :func:`serve` to run one."""

    cassette: Cassette
    chunk_size: int | None = None
    """Send event streams in pieces of this many bytes (``None``: in one piece)."""
    requests: list[ReceivedRequest] = field(default_factory=list)
    _queues: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    _runner: web.AppRunner | None = None
    _port: int = 0

    def __post_init__(self) -> None:
        for index, interaction in enumerate(self.cassette.interactions):
            self._queues.setdefault((interaction.method, interaction.path), []).append(index)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self._runner = runner
        self._port = int(runner.addresses[0][1])  # port 0: the system chose a free one

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        assert self._port, "the server is not started"
        return f"http://127.0.0.1:{self._port}"

    @property
    def base_url(self) -> str:
        """The API's base URL on this server, with the cassette's path prefix (``.../v1``)."""
        return self.url + self.cassette.base_path()

    @property
    def bodies(self) -> list[Any]:
        """The parsed JSON bodies received, in order."""
        return [request.body for request in self.requests]

    @property
    def unexpected(self) -> list[ReceivedRequest]:
        return [request for request in self.requests if request.served is None]

    @property
    def unserved(self) -> list[int]:
        """Indexes of the interactions no request has used yet."""
        return sorted(index for queue in self._queues.values() for index in queue)

    def check(self) -> None:
        """Fail (``AssertionError``) if any request had no interaction to answer it."""
        if unexpected := self.unexpected:
            listed = ", ".join(str(request) for request in unexpected)
            raise AssertionError(f"replay of {self.cassette.name}: unexpected requests: {listed}")

    def assert_all_served(self) -> None:
        """Fail unless every recorded interaction was requested, and nothing else."""
        self.check()
        if unserved := self.unserved:
            raise AssertionError(f"replay of {self.cassette.name}: interactions never requested: {unserved}")

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        queue = self._queues.get((request.method, request.path))
        index = queue.pop(0) if queue else None
        headers = {name.lower(): value for name, value in request.headers.items()}
        received = ReceivedRequest(request.method, request.path, request.query_string, headers, raw, body, index)
        self.requests.append(received)
        if index is None:
            return self._unexpected(received)
        interaction = self.cassette.interactions[index]
        reply_headers = CIMultiDict(interaction.headers)
        if not interaction.is_event_stream:
            return web.Response(
                status=interaction.status, reason=interaction.reason, body=interaction.body, headers=reply_headers
            )
        response = web.StreamResponse(status=interaction.status, reason=interaction.reason, headers=reply_headers)
        response.enable_chunked_encoding()
        await response.prepare(request)
        size = self.chunk_size or len(interaction.body) or 1
        for start in range(0, len(interaction.body), size):
            await response.write(interaction.body[start : start + size])
        await response.write_eof()
        return response

    def _unexpected(self, received: ReceivedRequest) -> web.Response:
        recorded = sum(1 for i in self.cassette.interactions if (i.method, i.path) == (received.method, received.path))
        why = f"all {recorded} recorded for this path were used" if recorded else "none is recorded for this path"
        message = f"replay of {self.cassette.name}: unexpected request {received}: {why}"
        return web.json_response(
            {"error": {"message": message, "type": "replay_unexpected_request"}},
            status=UNEXPECTED_STATUS,
            reason="Unexpected Request",
        )


@asynccontextmanager
async def serve(cassette: str | Path | Cassette, *, chunk_size: int | None = None) -> AsyncIterator[ReplayServer]:
    """Run a :class:`ReplayServer` for the block; on a normal exit, fail if it got an unexpected request."""
    loaded = cassette if isinstance(cassette, Cassette) else Cassette.load(cassette)
    server = ReplayServer(loaded, chunk_size=chunk_size)
    await server.start()
    try:
        yield server
    finally:
        await server.close()
    server.check()


class Replayer:
    """What the ``replay`` fixture gives: ``await replay.serve("openai_chat/x.yaml")`` starts a server that
    lives until the test ends, when unexpected requests to any of them fail the test."""

    def __init__(self, stack: AsyncExitStack) -> None:
        self._stack = stack
        self.servers: list[ReplayServer] = []

    async def serve(self, cassette: str | Path | Cassette, *, chunk_size: int | None = None) -> ReplayServer:
        server = await self._stack.enter_async_context(serve(cassette, chunk_size=chunk_size))
        self.servers.append(server)
        return server


@pytest.fixture
async def replay() -> AsyncIterator[Replayer]:
    """Replay servers for one test. A test module opts in with ``replay = tests.wire.replay.replay``."""
    async with AsyncExitStack() as stack:
        yield Replayer(stack)
