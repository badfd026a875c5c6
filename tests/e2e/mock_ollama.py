"""A mock Ollama: :class:`~tests.e2e.mock_llm.MockLLM`'s scripted chat completions, plus Ollama's own API.

It serves ``GET /api/tags`` (the models), ``POST /api/show`` (a model's ``capabilities``), ``GET /v1/models``
and ``POST /v1/chat/completions`` (the script), on 127.0.0.1 at the port asked for: Ollama's own, 11434, for
the test that shows a first run finds it. A port already taken is a failure that says so, not a skip.
"""

from __future__ import annotations

import errno
from collections.abc import Mapping, Sequence
from typing import Any

from aiohttp import web

from tests.e2e.mock_llm import MockLLM, Responder, Step

OLLAMA_PORT = 11434


class MockOllama(MockLLM):
    """The server (see the module docstring); ``models`` maps each model's name to its capabilities, or to
    ``None`` for an older Ollama that does not report them."""

    def __init__(
        self,
        script: list[Step | Responder],
        models: Mapping[str, Sequence[str] | None],
        *,
        port: int = 0,
    ) -> None:
        super().__init__(script)
        self.models = dict(models)
        self.asked_port = port
        self.shown: list[str] = []
        """The models ``/api/show`` was asked about, in order."""

    def __enter__(self) -> MockOllama:
        super().__enter__()
        return self

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _start(self) -> None:
        import asyncio

        self._release = asyncio.Event()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_get("/v1/models", self._openai_models)
        app.router.add_get("/api/tags", self._tags)
        app.router.add_post("/api/show", self._show)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.asked_port)
        try:
            await site.start()
        except OSError as error:
            await self._runner.cleanup()
            if error.errno == errno.EADDRINUSE:
                raise AssertionError(
                    f"port {self.asked_port} on 127.0.0.1 is taken (a real Ollama running?): this test needs it "
                    "free to show that a first run finds a model server on its usual port"
                ) from error
            raise
        self.port = self._runner.addresses[0][1]

    async def _tags(self, request: web.Request) -> web.Response:
        return web.json_response({"models": [{"name": name, "model": name, "size": 1} for name in self.models]})

    async def _openai_models(self, request: web.Request) -> web.Response:
        data = [{"id": name, "object": "model", "owned_by": "library"} for name in self.models]
        return web.json_response({"object": "list", "data": data})

    async def _show(self, request: web.Request) -> web.Response:
        body: dict[str, Any] = await request.json()
        name = body.get("model") or body.get("name")
        self.shown.append(str(name))
        if name not in self.models:
            return web.json_response({"error": f"model '{name}' not found"}, status=404)
        capabilities = self.models[name]
        shown: dict[str, Any] = {"modelfile": "", "details": {"family": "llama"}}
        if capabilities is not None:
            shown["capabilities"] = list(capabilities)
        return web.json_response(shown)
