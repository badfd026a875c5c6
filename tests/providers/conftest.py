"""Fixtures of the provider tests: apps served over real loopback HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web

SHUTDOWN_SECONDS = 1.0
"""How long a cleanup waits for a handler still running (one that holds its answer back, or stalls, until the
client gives up; aiohttp does not cancel it when the client leaves): not aiohttp's default minute."""

Serve = Callable[[web.Application], Awaitable[str]]
"""Start an app on 127.0.0.1 and give back its root URL."""


async def started(app: web.Application) -> tuple[web.AppRunner, str]:
    """``app`` served on 127.0.0.1 (a free port): its runner, to clean up after, and its root URL."""
    runner = web.AppRunner(app, shutdown_timeout=SHUTDOWN_SECONDS)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """Start apps on 127.0.0.1 (a free port each); give back their root URL; stop them after the test."""
    runners: list[web.AppRunner] = []

    async def start(app: web.Application) -> str:
        runner, url = await started(app)
        runners.append(runner)
        return url

    yield start
    for runner in runners:
        await runner.cleanup()
