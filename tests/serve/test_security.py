"""Who may use a served agent and how much one request may take, over real sockets: the bind refused without a
token (the real command), tokens, sessions and runs owned by the token that made them, the body limit read from
the head, the concurrency limit, CORS off unless asked."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from starlette.requests import Request

from tether import Agent
from tether.errors import ConfigInvalid
from tether.providers import ScriptedProvider
from tether.providers.scripted import hang, reply
from tether.serve import check_bind, create_app
from tether.sessions import MemorySessionStore

from .served import json_events, read_until, run_events, served

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "s3cret-token-for-tests"


def agent(*steps: Any) -> Agent[Any, Any]:
    return Agent(ScriptedProvider(list(steps) or [reply("hello")] * 10), store=MemorySessionStore())


def command_env(home: Path) -> dict[str, str]:
    """The command's environment: this tree's code, and its files (sessions) under ``home``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HOME": str(home)}
    env.update({name: str(home / name.lower()) for name in ("XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")})
    env.pop("TETHER_SERVE_TOKEN", None)
    return env


def tether_command(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = command_env(home)
    return subprocess.run(
        [sys.executable, "-m", "tether", "serve", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_command_refuses_to_serve_beyond_this_machine_without_a_token(tmp_path: Path) -> None:
    done = tether_command(tmp_path, "--agent", "tests.serve.agents:agent", "--host", "0.0.0.0", "--port", "0")
    assert done.returncode == 1
    assert "refusing to serve on 0.0.0.0 without a token" in done.stderr
    assert "listening" not in done.stderr


def test_the_command_serves_on_loopback_and_stops_on_sigint_with_exit_0(tmp_path: Path) -> None:
    env = command_env(tmp_path)
    command = [sys.executable, "-m", "tether", "serve", "--agent", "tests.serve.agents:agent", "--port", "0"]
    with subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True) as process:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert "listening on http://127.0.0.1:" in line
        base = line.split("listening on ", 1)[1].split()[0].rstrip("/")

        async def ask() -> list[dict[str, Any]]:
            async with aiohttp.ClientSession() as http:
                return await run_events(http, base, {"prompt": "add 2 and 3"})

        events = asyncio.run(ask())
        process.send_signal(2)
        assert process.wait(timeout=60) == 0
    assert events[-1]["result"]["text"] == "5"


def test_check_bind_takes_loopback_without_a_token_and_another_host_with_one() -> None:
    check_bind("127.0.0.1", token=None)
    check_bind("::1", token=None)
    check_bind("localhost", token=None)
    check_bind("0.0.0.0", token=TOKEN)
    with pytest.raises(ConfigInvalid, match="without a token"):
        check_bind("192.0.2.1", token=None)


def test_a_token_too_short_to_guess_hard_is_refused() -> None:
    with pytest.raises(ConfigInvalid, match="at least 8"):
        create_app(agent(), token="short")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_request_bytes": 0}, "max_request_bytes"),
        ({"max_concurrent_runs": -1}, "max_concurrent_runs"),
        ({"stream_buffer": 0}, "stream_buffer"),
        ({"on_disconnect": "ignore"}, "on_disconnect"),
        ({"models": {"x": "not an agent"}}, "serves a tether Agent"),
    ],
)
def test_bad_server_settings_are_refused_with_config_invalid(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigInvalid, match=message):
        create_app(agent(), **options)


@pytest.mark.parametrize("header", [None, "Bearer wrong-token-123", f"Basic {TOKEN}", "Bearer"])
async def test_a_missing_or_wrong_token_is_401_and_runs_nothing(header: str | None) -> None:
    served_agent = agent()
    headers = {"authorization": header} if header is not None else {}
    async with served(served_agent.to_asgi(token=TOKEN)) as server, aiohttp.ClientSession() as http:
        for method, path in (("GET", "/api/info"), ("POST", "/api/runs"), ("GET", "/api/sessions")):
            async with http.request(method, server.base + path, json={"prompt": "x"}, headers=headers) as response:
                assert response.status == 401
                assert response.headers["www-authenticate"] == "Bearer"
                assert (await response.json())["error"]["code"] == "unauthorized"
    assert served_agent.provider.requests == []  # type: ignore[attr-defined]


async def test_the_right_token_runs_and_the_page_needs_none() -> None:
    headers = {"authorization": f"Bearer {TOKEN}"}
    async with served(agent().to_asgi(token=TOKEN)) as server, aiohttp.ClientSession() as http:
        events = await run_events(http, server.base, {"prompt": "hi"}, headers)
        async with http.get(server.base + "/") as page:
            assert page.status == 200
    assert events[-1]["result"]["text"] == "hello"


def by_token(request: Request) -> str | None:
    """Two users, each with a token of their own."""
    return {"Bearer token-of-ann-1": "ann", "Bearer token-of-bob-1": "bob"}.get(
        request.headers.get("authorization", "")
    )


async def test_another_users_session_and_run_are_404_and_not_listed() -> None:
    ann = {"authorization": "Bearer token-of-ann-1"}
    bob = {"authorization": "Bearer token-of-bob-1"}
    async with served(agent().to_asgi(authenticate=by_token)) as server, aiohttp.ClientSession() as http:
        started = (await run_events(http, server.base, {"prompt": "mine"}, ann))[0]
        session_id, run_id = started["session_id"], started["run_id"]
        for method, path in (
            ("GET", f"/api/sessions/{session_id}"),
            ("DELETE", f"/api/sessions/{session_id}"),
            ("GET", f"/api/runs/{run_id}"),
            ("POST", f"/api/runs/{run_id}/cancel"),
        ):
            async with http.request(method, server.base + path, headers=bob) as response:
                assert response.status == 404, path
        async with http.post(
            server.base + "/api/runs", json={"prompt": "x", "session_id": session_id}, headers=bob
        ) as r:
            assert r.status == 404
        async with http.get(server.base + "/api/sessions", headers=bob) as response:
            assert (await response.json())["sessions"] == []
        async with http.get(server.base + "/api/runs", headers=bob) as response:
            assert (await response.json())["runs"] == []
        async with http.get(f"{server.base}/api/sessions/{session_id}", headers=ann) as response:
            assert response.status == 200


async def test_a_100_mb_request_is_refused_413_from_its_head_without_being_read() -> None:
    async with served(agent().to_asgi()) as server:
        host, port = server.base.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        size = 100 * 1024 * 1024
        writer.write(
            f"POST /api/runs HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {size}\r\n\r\n".encode()
            + b'{"prompt": "' + b"x" * 65536
        )  # fmt: skip
        await writer.drain()
        status_line = await reader.readline()  # answered while 100 MB minus 64 KB were never sent
        head = await reader.readuntil(b"\r\n\r\n")
        writer.close()
    assert status_line.split()[1] == b"413"
    assert b"application/json" in head


async def test_a_chunked_body_past_the_limit_is_refused_413() -> None:
    async def body() -> Any:
        for _ in range(64):
            yield b"x" * 1024

    app = agent().to_asgi(max_request_bytes=10_000)
    async with (
        served(app) as server,
        aiohttp.ClientSession() as http,
        http.post(server.base + "/api/runs", data=body()) as response,
    ):
        assert response.status == 413
        assert (await response.json())["error"]["code"] == "request_too_large"


async def test_a_run_past_the_concurrency_limit_is_429_until_a_place_is_free() -> None:
    served_agent = agent(hang("working"), reply("second"))
    async with served(served_agent.to_asgi(max_concurrent_runs=1)) as server, aiohttp.ClientSession() as http:
        async with http.post(server.base + "/api/runs", json={"prompt": "long"}) as first:
            started = await read_until(first, "text_delta")
            async with http.post(server.base + "/api/runs", json={"prompt": "more"}) as refused:
                assert refused.status == 429
                assert (await refused.json())["error"]["code"] == "too_many_runs"
            async with http.post(f"{server.base}/api/runs/{started[0]['run_id']}/cancel"):
                pass
            await first.read()
        await server.run(started[0]["run_id"]).ended()
        events = await run_events(http, server.base, {"prompt": "again"})
    assert events[-1]["result"]["text"] == "second"


async def test_cors_is_off_by_default_and_on_for_the_origins_given() -> None:
    origin = {"origin": "https://app.example", "access-control-request-method": "POST"}
    async with (
        served(agent().to_asgi()) as server,
        aiohttp.ClientSession() as http,
        http.options(server.base + "/api/runs", headers=origin) as response,
    ):
        assert "access-control-allow-origin" not in response.headers
    app = agent().to_asgi(cors_origins=["https://app.example"])
    async with served(app) as server, aiohttp.ClientSession() as http:
        async with http.options(server.base + "/api/runs", headers=origin) as response:
            assert response.headers["access-control-allow-origin"] == "https://app.example"
        async with http.options(server.base + "/api/runs", headers={**origin, "origin": "https://evil.example"}) as r:
            assert "access-control-allow-origin" not in r.headers


async def test_a_known_secret_never_reaches_a_client_even_split_across_deltas() -> None:
    key = "sk-live-0123456789abcdef"
    steps = [reply(f"the key is {key}, keep it", chunk_size=5)] * 3
    served_agent = Agent(ScriptedProvider(steps), store=MemorySessionStore(), secrets=[key])
    chat = {"id": "c1", "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "key?"}]}]}
    agui = {"threadId": "t", "runId": "r", "state": {}, "tools": [], "context": [],
            "forwardedProps": {}, "messages": [{"id": "m1", "role": "user", "content": "key?"}]}  # fmt: skip
    async with served(served_agent.to_asgi()) as server, aiohttp.ClientSession() as http:
        bodies: list[str] = []
        for path, asked in (("/api/runs", {"prompt": "key?"}), ("/api/chat", chat), ("/agui", agui)):
            async with http.post(server.base + path, json=asked) as response:
                bodies.append(await response.text())
        session_id = json_events(bodies[0])[0]["session_id"]
        async with http.get(f"{server.base}/api/sessions/{session_id}") as response:
            bodies.append(await response.text())
        async with http.get(f"{server.base}/api/runs") as response:
            run_id = (await response.json())["runs"][-1]["run_id"]
        async with http.get(f"{server.base}/api/runs/{run_id}") as response:
            bodies.append(await response.text())
    answer = "".join(e["text"] for e in json_events(bodies[0]) if e["kind"] == "text_delta")
    assert answer.startswith("the key is ")
    assert answer.endswith(", keep it")
    for body in bodies:
        assert key not in body
        assert "0123456789abcdef" not in body


def test_the_command_serves_a_durable_agent_whose_runs_are_durable_runs(tmp_path: Path) -> None:
    env = command_env(tmp_path)
    command = [sys.executable, "-m", "tether", "serve", "--agent", "tests.serve.durable_agents:durable",
               "--port", "0", "--db", str(tmp_path / "runs.db")]  # fmt: skip
    with subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True) as process:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert "listening on http://127.0.0.1:" in line, line + process.stderr.read()
        base = line.split("listening on ", 1)[1].split()[0].rstrip("/")

        async def ask() -> tuple[list[dict[str, Any]], dict[str, Any]]:
            async with aiohttp.ClientSession() as http:
                events = await run_events(http, base, {"prompt": "go"})
                async with http.get(base + "/api/runs") as response:
                    return events, await response.json()

        events, listed = asyncio.run(ask())
        process.send_signal(2)
        assert process.wait(timeout=60) == 0
    assert events[-1]["result"]["text"] == "durably done"
    assert events[0]["run_id"] in [run["run_id"] for run in listed["durable_runs"]]


async def test_an_open_server_reached_on_an_address_beyond_this_machine_refuses_with_403() -> None:
    from tether.serve.security import Access, ApiError

    def request(host: str) -> Request:
        return Request({"type": "http", "method": "GET", "path": "/api/info", "headers": [], "server": (host, 80)})

    assert (await Access(None, None).caller(request("127.0.0.1"))).local
    with pytest.raises(ApiError) as refused:
        await Access(None, None).caller(request("203.0.113.7"))
    assert refused.value.status == 403


def test_the_command_serves_the_configured_agent_with_its_tools(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text('[runtime]\nmodel = "scripted:echo"\n')
    command = [sys.executable, "-m", "tether", "serve", "--port", "0"]
    with subprocess.Popen(command, cwd=tmp_path, env=command_env(tmp_path), stderr=subprocess.PIPE, text=True) as p:
        assert p.stderr is not None
        line = p.stderr.readline()
        assert "listening on http://127.0.0.1:" in line, line + p.stderr.read()
        base = line.split("listening on ", 1)[1].split()[0].rstrip("/")

        async def ask() -> tuple[list[dict[str, Any]], dict[str, Any]]:
            async with aiohttp.ClientSession() as http:
                events = await run_events(http, base, {"prompt": "echo me"})
                async with http.get(base + "/api/info") as response:
                    return events, await response.json()

        events, info = asyncio.run(ask())
        p.send_signal(2)
        assert p.wait(timeout=60) == 0
    assert events[-1]["result"]["text"] == "echo me"
    assert info["model"] == "scripted:echo"
    assert {"read", "bash"} <= {t["name"] for t in info["tools"]}
