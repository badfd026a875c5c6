"""What hostile answers cost the client: CPU for one huge SSE line, peak memory for endless bodies and streams.

    .venv/bin/python bench/hostile.py            # every scenario, each in a fresh process
    .venv/bin/python bench/hostile.py line-4k    # one of them

Scenarios:

- ``line-4k``, ``line-64k``: a 20 MB ``data:`` line fed to ``SSEDecoder`` in 4 KB / 64 KB chunks, then its
  line break; prints the CPU seconds (linear parsing keeps this near the cost of copying 20 MB once).
- ``body``, ``stream``, ``line``: a loopback server sends a 100 MB whole body / an endless stream of small
  events / one endless line; the client reads with the default ``ResponseLimits``; prints the error code
  and the growth of peak RSS (``resource.getrusage``) over the process before the request.

The server runs on a thread of the same process and sends one reused buffer, so its own memory is constant.
"""

from __future__ import annotations

import asyncio
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable

from tether.errors import ProviderError
from tether.providers.http import HttpClient, RetryPolicy
from tether.providers.http.sse import SSEDecoder

MB = 1_000_000
PIECE = b"x" * 65536


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def line(chunk: int) -> None:
    decoder = SSEDecoder()
    piece = b"x" * chunk
    started = time.process_time()
    decoder.feed(b"data: ")
    for _ in range(20 * MB // chunk):
        decoder.feed(piece)
    (event,) = decoder.feed(b"\n\n")
    print(f"line-{chunk // 1024}k: 20 MB line in {chunk} B chunks: {time.process_time() - started:.3f} s CPU")
    assert len(event.data) == 20 * MB // chunk * chunk


Answer = Callable[[asyncio.StreamWriter], Awaitable[None]]


async def _send(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(data)
    await writer.drain()


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def _body(writer: asyncio.StreamWriter) -> None:
    await _send(writer, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
    for _ in range(100 * MB // len(PIECE)):
        await _send(writer, _chunk(PIECE))
    await _send(writer, b"0\r\n\r\n")


async def _stream(writer: asyncio.StreamWriter) -> None:
    await _send(writer, b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
    events = _chunk((b'data: {"choices":[],"pad":"' + b"p" * 1000 + b'"}\n\n') * 60)
    while True:
        await _send(writer, events)


async def _line(writer: asyncio.StreamWriter) -> None:
    await _send(writer, b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
    await _send(writer, _chunk(b"data: "))
    while True:
        await _send(writer, _chunk(PIECE))


def _serve(answer: Answer, ready: threading.Event, port: list[int]) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (int(x.split(b":")[1]) for x in head.lower().split(b"\r\n") if x.startswith(b"content-length")), 0
            )
            await reader.readexactly(length)
            await answer(writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port.append(server.sockets[0].getsockname()[1])
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(main())


def http(answer: Answer, streamed: bool, name: str) -> None:
    ready, port = threading.Event(), list[int]()
    threading.Thread(target=_serve, args=(answer, ready, port), daemon=True).start()
    ready.wait()
    client = HttpClient(f"http://127.0.0.1:{port[0]}", provider="hostile", retry=RetryPolicy(max_retries=0))

    async def request() -> str:
        try:
            if streamed:
                async for _ in client.stream_events("/x", {}, timeout=60, deadline=None):
                    pass
            else:
                await client.post_json("/x", {}, timeout=60, deadline=None)
        except ProviderError as error:
            return f"{error.code} ({error.details.get('limit')})"
        return "accepted"

    before = peak_rss_mb()
    started = time.process_time()
    outcome = asyncio.run(request())
    cpu = time.process_time() - started
    print(f"{name}: {outcome}; peak RSS +{peak_rss_mb() - before:.0f} MB; {cpu:.2f} s CPU (client and server)")


SCENARIOS: dict[str, Callable[[], None]] = {
    "line-4k": lambda: line(4096),
    "line-64k": lambda: line(65536),
    "body": lambda: http(_body, False, "100 MB whole body"),
    "stream": lambda: http(_stream, True, "endless stream of 1 KB events"),
    "line": lambda: http(_line, True, "one endless line"),
}

if __name__ == "__main__":
    chosen = sys.argv[1:] or list(SCENARIOS)
    if len(chosen) == 1:
        SCENARIOS[chosen[0]]()
    else:
        for name in chosen:
            subprocess.run([sys.executable, __file__, name], check=True)
