"""Fixtures of the provider tests: apps served over real loopback HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web

Serve = Callable[[web.Application], Awaitable[str]]
"""Start an app on 127.0.0.1 and give back its root URL."""


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """Start apps on 127.0.0.1 (a free port each); give back their root URL; stop them after the test."""
    runners: list[web.AppRunner] = []

    async def start(app: web.Application) -> str:
        runner = web.AppRunner(app)
        await runner.setup()
        runners.append(runner)
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return f"http://127.0.0.1:{runner.addresses[0][1]}"

    yield start
    for runner in runners:
        await runner.cleanup()
