"""A model API on a loopback port that answers each POST to one path with JSON a function of the request makes,
keeping the request bodies: enough of a provider's API for a conversation whose every request a test checks.
``serve_model`` (a fixture of ``tests/conftest.py``) starts one and gives back its root URL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from aiohttp import web


class Model:
    """A loopback server answering POSTs to one path with what ``answer`` says, keeping the request bodies."""

    def __init__(self, path: str, answer: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self.path = path
        self.answer = answer
        self.bodies: list[dict[str, Any]] = []

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bodies.append(body)
        return web.json_response(self.answer(body))


async def models_served() -> AsyncIterator[Callable[[Model], Any]]:
    """Start models on 127.0.0.1 (a free port each), giving back each one's root URL; stop them at the end."""
    runners: list[web.AppRunner] = []

    async def start(model: Model) -> str:
        app = web.Application()
        app.router.add_post(model.path, model.handle)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        runners.append(runner)
        return f"http://127.0.0.1:{runner.addresses[0][1]}"

    yield start
    for runner in runners:
        await runner.cleanup()
