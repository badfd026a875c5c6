"""One watcher's events written to its client as a server-sent event stream, and the client's going noticed.

:class:`EventStream` is an ASGI response. While it writes, a task listens for the client's disconnect (an
``http.disconnect`` message, or a write that fails); then, or when the run's queue dropped it for being too slow,
the stream leaves the run (``ServerRun.leave``: the disconnect rule). Events waiting in the queue are written
together, one write for what has come. Encoding is the protocol's (:class:`Encoder`): the JSON events of
``/api/runs``, AG-UI's, or the Vercel AI SDK's parts.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any, Protocol

from tether.events import RunEvent
from tether.serve.runs import END, ServerRun, Watcher

__all__ = ["OWN_HEADERS", "Encoder", "EventStream", "sse"]

OWN_HEADERS = frozenset({"content-type", "cache-control", "x-accel-buffering"})
"""The headers every stream sets itself."""

Scope = dict[str, Any]
Message = dict[str, Any]


class Encoder(Protocol):
    """A protocol's side of a stream: each event's bytes (``b""`` for none), and the last bytes after the run's
    last event."""

    def event(self, event: RunEvent) -> bytes: ...

    def end(self) -> bytes: ...


class EventStream:
    """The ASGI response that streams ``watcher``'s events of ``run``, encoded by ``encoder``."""

    __slots__ = ("_encoder", "_headers", "_run", "_watcher")

    def __init__(self, run: ServerRun, watcher: Watcher, encoder: Encoder, headers: Mapping[str, str]) -> None:
        self._run = run
        self._watcher = watcher
        self._encoder = encoder
        self._headers = headers

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        watcher = self._watcher
        writer = asyncio.current_task()
        watcher.writer = writer
        listener = asyncio.get_running_loop().create_task(_disconnected(receive, writer))
        try:
            headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]
            headers += [(k.lower().encode(), v.encode()) for k, v in self._headers.items()]
            headers.append((b"x-accel-buffering", b"no"))
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await self._write(send)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except (asyncio.CancelledError, OSError):  # the client went, or was dropped for being slow
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                if not listener.done() and not watcher.dropped:
                    raise  # the server itself is stopping
                task.uncancel()
        finally:
            listener.cancel()
            watcher.writer = None
            self._run.leave(watcher)

    async def _write(self, send: Any) -> None:
        queue = self._watcher.queue
        encoder = self._encoder
        while True:
            item = await queue.get()
            chunks = []
            while True:
                if item is END:
                    chunks.append(encoder.end())
                    await send({"type": "http.response.body", "body": b"".join(chunks), "more_body": True})
                    return
                chunks.append(encoder.event(item))  # type: ignore[arg-type]  # not END: an event
                try:
                    item = queue.get_nowait()
                except asyncio.QueueEmpty:
                    break
            body = b"".join(chunks)
            if body:
                await send({"type": "http.response.body", "body": body, "more_body": True})


async def _disconnected(receive: Any, writer: asyncio.Task[Any] | None) -> None:
    """Wait for the client to go, then stop the writer."""
    with contextlib.suppress(Exception):
        while True:
            message: Message = await receive()
            if message.get("type") == "http.disconnect":
                break
    if writer is not None and not writer.done():
        writer.cancel()


def sse(event: str | None, data: bytes) -> bytes:
    """One server-sent event: its name (when given) and its data on one line."""
    head = b"event: " + event.encode() + b"\n" if event else b""
    return head + b"data: " + data + b"\n\n"
