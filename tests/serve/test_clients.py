"""The protocols read by their official clients: the AI SDK's (``ai``: ``DefaultChatTransport``, the chunks'
own schema, ``readUIMessageStream``) and AG-UI's (``@ag-ui/client``: ``HttpAgent``, whose ``verifyEvents`` throws
on any break of the protocol's order), in Node, against the translators served over real HTTP on 127.0.0.1.

Each client then sends back the conversation it built, with one more user message, and the server reads it: what
a client keeps of a run (its tool parts, a sub-agent's messages) is a history tether can run.

The clients are npm packages (``tests/serve/clients/package.json``), installed with ``npm ci`` by the first test
that needs them; without Node and npm these tests are skipped (in CI they fail).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tether import Agent
from tether.events import RunEvent
from tether.serve import agui, vercel

from .runs import (
    cancelled_events,
    failing_agent,
    handoff_agent,
    limited_agent,
    nested_team_agent,
    retried_agent,
    team_agent,
    text_agent,
    typed_agent,
)

CLIENTS = Path(__file__).parent / "clients"
NODE = shutil.which("node")
pytestmark = pytest.mark.usefixtures("clients_installed")


@pytest.fixture(scope="module")
def clients_installed() -> None:
    """The clients of ``package-lock.json``, installed with ``npm ci`` unless they are there already (as the npm
    MCP servers are, tests/mcp/conftest.py). Without node and npm the tests skip; in CI they fail instead."""
    if NODE is None or shutil.which("npm") is None:
        if os.environ.get("CI"):
            pytest.fail("the official JS clients need node and npm, and CI must run them")
        pytest.skip("the official JS clients need node and npm")
    modules = CLIENTS / "node_modules"
    if not ((modules / "ai").is_dir() and (modules / "@ag-ui").is_dir()):
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=CLIENTS, check=True, timeout=600)


SCENARIOS: dict[str, Callable[[], Agent[Any, Any]]] = {
    "typed": typed_agent,
    "text": text_agent,
    "failing": failing_agent,
    "team": team_agent,
    "nested": nested_team_agent,
    "limited": limited_agent,
    "retried": retried_agent,
    "handoff": handoff_agent,
}


async def scenario(name: str, prompt: Any, history: Any, instructions: str | None) -> AsyncIterator[RunEvent]:
    if name == "cancelled":
        for event in await cancelled_events():
            yield event
        return
    async for event in SCENARIOS[name]().stream(prompt, history=history, instructions=instructions):
        yield event


class Server:
    """The translators behind aiohttp, each request's reading kept (the roles of its history)."""

    def __init__(self) -> None:
        self.read: list[tuple[str, list[str], Any]] = []
        """Each request as read, in order: the scenario asked for, its history's roles, its prompt."""
        self.app = web.Application()
        self.app.router.add_post("/agui/{name}", self.agui)
        self.app.router.add_post("/chat/{name}", self.chat)

    async def agui(self, request: web.Request) -> web.StreamResponse:
        asked = agui.run_input(await request.read())
        self.read.append((request.match_info["name"], [m.role for m in asked.history], asked.prompt))
        response = web.StreamResponse(headers={"content-type": agui.CONTENT_TYPE})
        await response.prepare(request)
        translator = agui.Translator.for_run(asked)
        async for event in scenario(request.match_info["name"], asked.prompt, asked.history, asked.instructions):
            for emitted in translator.events(event):
                await response.write(agui.encode(emitted).encode())
        await response.write_eof()
        return response

    async def chat(self, request: web.Request) -> web.StreamResponse:
        chat = vercel.chat_input(await request.read())
        self.read.append((request.match_info["name"], [m.role for m in chat.history], chat.prompt))
        response = web.StreamResponse(headers=vercel.HEADERS)
        await response.prepare(request)
        translator = vercel.Translator(chat.continues)
        async for event in scenario(request.match_info["name"], chat.prompt, chat.history, chat.instructions):
            for part in translator.events(event):
                await response.write(vercel.encode_part(part).encode())
        await response.write(vercel.DONE.encode())
        await response.write_eof()
        return response


async def run_client(script: str, names: list[str]) -> tuple[dict[str, dict[str, Any]], Server]:
    server = Server()
    runner = web.AppRunner(server.app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        assert NODE is not None
        node = await asyncio.create_subprocess_exec(
            NODE, str(CLIENTS / script), f"http://127.0.0.1:{port}", *names,
            cwd=CLIENTS, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await node.communicate()
        assert node.returncode == 0, err.decode()
    finally:
        await runner.cleanup()
    lines = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
    return {line["name"]: line for line in lines}, server


def read_after(server: Server, name: str) -> list[str]:
    """The history's roles of the request that sent ``name``'s conversation back (the one right after it)."""
    index = next(i for i, (asked, _, _) in enumerate(server.read) if asked == name)
    asked, roles, prompt = server.read[index + 1]
    assert (asked, prompt) == ("text", ["Thanks"])
    return roles


async def test_the_ai_sdk_client_reads_every_kind_of_run_and_its_conversation_is_read_back() -> None:
    seen, server = await run_client("chat.mjs", [*SCENARIOS, "cancelled"])
    assert [name for name, line in seen.items() if "thrown" in line] == []
    typed = seen["typed"]
    kinds = [(p["type"], p.get("state")) for p in typed["parts"]]
    assert kinds == [
        ("step-start", None),
        ("reasoning", "done"),
        ("text", "done"),
        ("tool-lookup", "output-available"),
        ("tool-refund", "output-error"),
        ("step-start", None),
        ("data-output", None),
        ("tool-final_result", "output-available"),
    ]
    assert typed["metadata"]["stopReason"] == "complete"
    assert seen["failing"]["errors"] == ["Error: [auth_failed] the key was refused"]
    assert seen["cancelled"]["metadata"]["stopReason"] == "cancelled"
    assert seen["limited"]["metadata"]["stopReason"] == "max_turns"
    assert [p["type"] for p in seen["team"]["parts"]] == ["step-start", "tool-ask_helper", "step-start", "text"]
    assert all(line.get("next", [])[-1:] == ["text"] for line in seen.values())
    # the server read the client's own messages: the file, then the typed run's steps
    name, _, first = server.read[0]
    assert name == "typed"
    assert first[0] == "Total of A1?"
    assert first[1].media_type == "image/png"
    assert read_after(server, "typed") == ["user", "assistant", "tool", "assistant", "tool"]  # two steps
    assert read_after(server, "team") == ["user", "assistant", "tool", "assistant"]


async def test_the_ag_ui_client_verifies_every_kind_of_run_and_its_conversation_is_read_back() -> None:
    seen, server = await run_client("agui.mjs", [*SCENARIOS, "cancelled"])
    assert [name for name, line in seen.items() if "thrown" in line] == []
    typed = seen["typed"]
    assert typed["result"] == {"number": "A1", "total": 12.5}
    roles = [(m["role"], m["calls"]) for m in typed["messages"]]
    assert roles[:4] == [("system", []), ("user", []), ("reasoning", []), ("assistant", ["lookup", "refund"])]
    assert seen["failing"]["errors"] == ["auth_failed"]
    assert seen["team"]["result"] == "The helper says 12.5 EUR."
    assert any(m["sub"] for m in seen["nested"]["messages"])  # the client keeps the sub-agents' messages ...
    assert read_after(server, "nested") == ["user", "assistant", "tool", "assistant"]  # ... not the model's history
    assert read_after(server, "typed") == ["user", "assistant", "tool", "assistant", "tool"]
    assert all(line["next"] == "Hello there." for line in seen.values())
