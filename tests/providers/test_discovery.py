"""Local model servers found running: over real loopback HTTP, against a mock Ollama and a plain
OpenAI-compatible server, and a closed port."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from aiohttp import web

from tests.e2e.mock_ollama import MockOllama
from tests.providers.conftest import Serve
from tether.providers.default_model import choose_model
from tether.providers.discovery import (
    DEFAULT_SERVERS,
    FoundServer,
    discover,
    discover_async,
    known_tool_family,
    servers_to_try,
)


@pytest.fixture
def ollama() -> Iterator[MockOllama]:
    models = {
        "nomic-embed-text:latest": ["embedding"],
        "gemma:2b": ["completion"],
        "llama3.2:latest": ["completion", "tools"],
        "qwen3:8b": ["completion", "tools"],
    }
    with MockOllama([], models) as server:
        yield server


def closed_port() -> int:
    """A port nothing listens on: bound for a moment, then released."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_the_usual_ports_unless_the_variable_names_others_or_turns_discovery_off() -> None:
    assert servers_to_try({"TETHER_LOCAL_SERVERS": ""}) == tuple(DEFAULT_SERVERS)
    assert DEFAULT_SERVERS[0] == "http://127.0.0.1:11434", "Ollama first"
    for off in ("off", "0", "none", "FALSE"):
        assert servers_to_try({"TETHER_LOCAL_SERVERS": off}) == ()
    given = {"TETHER_LOCAL_SERVERS": "http://127.0.0.1:9/ , http://gpu-box:8000"}
    assert servers_to_try(given) == ("http://127.0.0.1:9", "http://gpu-box:8000")


def test_the_process_environment_keeps_discovery_off_for_a_made_up_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_LOCAL_SERVERS", "off")
    assert servers_to_try({"HOME": "/nowhere"}) == ()
    monkeypatch.delenv("TETHER_LOCAL_SERVERS")
    assert servers_to_try({"HOME": "/nowhere"}) == tuple(DEFAULT_SERVERS)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("llama3.2:latest", True),
        ("meta-llama/Llama-3.1-8B-Instruct", True),
        ("Qwen2.5-7B-Instruct-GGUF", True),
        ("qwen3:0.6b", True),
        ("mistral-nemo", True),
        ("hermes3:8b", True),
        ("gpt-oss:20b", True),
        ("llama2:7b", False),
        ("gemma:2b", False),
        ("phi3:mini", False),
        ("nomic-embed-text", False),
        ("qwen3-embedding:0.6b", False),
    ],
)
def test_a_name_says_whether_a_model_calls_tools_when_the_server_does_not(name: str, expected: bool) -> None:
    assert known_tool_family(name) is expected


async def test_ollama_is_asked_which_model_calls_tools_and_the_first_that_does_is_picked(
    ollama: MockOllama,
) -> None:
    found = await discover_async([ollama.root])
    assert found == FoundServer("Ollama", ollama.root, ollama.root + "/v1", "ollama", "llama3.2:latest")
    assert found.model == "ollama:llama3.2:latest"
    assert "nomic-embed-text:latest" in ollama.shown, "capabilities were asked, not guessed"
    assert found.notice() == (
        f"tether: no model configured; using llama3.2:latest on Ollama at {ollama.root} (found running; "
        "TETHER_LOCAL_SERVERS=off turns this off)"
    )


async def test_an_ollama_without_a_tool_model_is_passed_over() -> None:
    with MockOllama([], {"gemma:2b": ["completion"], "nomic-embed-text": ["embedding"]}) as server:
        assert await discover_async([server.root]) is None


async def test_an_ollama_that_does_not_report_capabilities_is_judged_by_the_names() -> None:
    with MockOllama([], {"gemma:2b": None, "qwen2.5:7b": None}) as server:
        found = await discover_async([server.root])
    assert found is not None
    assert found.name == "qwen2.5:7b"


async def test_an_openai_compatible_server_is_judged_by_the_names_it_serves(serve: Serve) -> None:
    async def models(request: web.Request) -> web.Response:
        data = [{"id": "bge-small-en"}, {"id": "Qwen/Qwen2.5-1.5B-Instruct"}]
        return web.json_response({"object": "list", "data": data})

    app = web.Application()
    app.router.add_get("/v1/models", models)
    root = await serve(app)
    found = await discover_async([root])
    assert found == FoundServer(
        "an OpenAI-compatible server", root, root + "/v1", "openai-compatible", "Qwen/Qwen2.5-1.5B-Instruct"
    )


async def test_the_first_server_in_the_order_given_wins(ollama: MockOllama, serve: Serve) -> None:
    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "mistral-7b-instruct"}]})

    app = web.Application()
    app.router.add_get("/v1/models", models)
    other = await serve(app)
    unreachable = f"http://127.0.0.1:{closed_port()}"
    first = await discover_async([unreachable, ollama.root, other])
    assert first is not None
    assert first.server == "Ollama"
    second = await discover_async([unreachable, other, ollama.root])
    assert second is not None
    assert second.name == "mistral-7b-instruct"


async def test_a_server_that_never_answers_is_passed_over_within_the_bound() -> None:
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        assert await discover_async([url], timeout=0.5) is None


def test_with_nothing_listening_discovery_finds_nothing_and_loads_no_http_client() -> None:
    code = (
        "import sys\n"
        "from tether.providers.discovery import discover\n"
        f"assert discover({{'TETHER_LOCAL_SERVERS': 'http://127.0.0.1:{closed_port()},http://localhost:{closed_port()}'}})"
        " is None\n"
        "assert 'aiohttp' not in sys.modules, 'a refused connection needs no HTTP client'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def test_discovery_works_from_inside_a_running_event_loop(ollama: MockOllama) -> None:
    import asyncio

    async def inside() -> FoundServer | None:
        return discover({"TETHER_LOCAL_SERVERS": ollama.root})

    found = asyncio.run(inside())
    assert found is not None
    assert found.name == "llama3.2:latest"


def test_with_no_key_a_server_found_running_comes_before_the_embedded_model(ollama: MockOllama) -> None:
    choice = choose_model(None, {"TETHER_LOCAL_SERVERS": ollama.root}, lambda: True)
    assert choice.model == "ollama:llama3.2:latest"
    assert choice.base_url == ollama.root + "/v1"
    assert not choice.read_only
    assert choice.notice is not None
    assert f"using llama3.2:latest on Ollama at {ollama.root} (found running" in choice.notice
    keyed = choose_model(None, {"TETHER_LOCAL_SERVERS": ollama.root, "OPENAI_API_KEY": "sk-x"}, lambda: True)
    assert keyed.model == "openai:gpt-4o-mini", "a key the user set comes first"
    off = choose_model(None, {"TETHER_LOCAL_SERVERS": "off"}, lambda: True)
    assert off.model == "local:smollm2"
