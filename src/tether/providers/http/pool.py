"""The pooled connections of the wire providers: one ``aiohttp.ClientSession`` per event loop and origin.

Every provider and run on a loop shares its session for an origin (scheme, host, port), with a pool sized for
thousands of concurrent runs. Sessions live as long as their loop: ``asyncio.run()`` (and any runner that
shuts down async generators) closes them; a host managing its own loop calls :func:`close_sessions` before
closing it.
"""

from __future__ import annotations

import asyncio
import urllib.parse
import weakref
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import aiohttp

MAX_CONNECTIONS = 4096
"""Connections per origin and loop: enough for thousands of concurrent runs without queueing."""
_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, aiohttp.ClientSession]] = (
    weakref.WeakKeyDictionary()
)
_closers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncGenerator[None, None]] = weakref.WeakKeyDictionary()


def origin_of(url: str) -> str:
    """``scheme://host:port`` of a URL: what one pooled session serves."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


async def session_for(base_url: str) -> aiohttp.ClientSession:
    """The running loop's session for ``base_url``'s origin, created on first use."""
    import aiohttp

    loop = asyncio.get_running_loop()
    sessions = _sessions.get(loop)
    if sessions is None:
        sessions = _sessions[loop] = {}
        # An async generator that closes the sessions when it is closed: the loop's runner closes every live
        # async generator at shutdown (loop.shutdown_asyncgens), so the sessions end with their loop.
        closer = _close_on_shutdown(sessions)
        await closer.__anext__()
        _closers[loop] = closer
    origin = origin_of(base_url)
    session = sessions.get(origin)
    if session is None or session.closed:
        connector = aiohttp.TCPConnector(limit=MAX_CONNECTIONS, limit_per_host=MAX_CONNECTIONS)
        session = aiohttp.ClientSession(connector=connector, raise_for_status=False)
        sessions[origin] = session
    return session


async def _close_on_shutdown(sessions: dict[str, aiohttp.ClientSession]) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await _close_all(sessions)


async def _close_all(sessions: dict[str, aiohttp.ClientSession]) -> None:
    for session in list(sessions.values()):
        await session.close()
    sessions.clear()


async def close_sessions() -> None:
    """Close the running loop's sessions (new requests open new ones)."""
    sessions = _sessions.get(asyncio.get_running_loop())
    if sessions:
        await _close_all(sessions)
