"""The probe over real loopback HTTP: what answers, which models, and a message that says what to do."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import aiohttp
import aiohttp.resolver
import pytest
from aiohttp import web

from tests.providers.conftest import Serve
from tether.errors import ConfigInvalid
from tether.providers.probe import endpoints, probe

OLLAMA_TAGS = {
    "models": [
        {"name": "llama3.2:latest", "model": "llama3.2:latest", "size": 2019393189},
        {"name": "qwen2.5:7b", "model": "qwen2.5:7b", "size": 4683087332},
    ]
}
OLLAMA_MODELS = {
    "object": "list",
    "data": [
        {"id": "llama3.2:latest", "object": "model", "owned_by": "library"},
        {"id": "qwen2.5:7b", "object": "model", "owned_by": "library"},
    ],
}


def json_routes(routes: dict[str, Any]) -> web.Application:
    """An app answering GET on each path with its JSON; every other path is a 404."""
    app = web.Application()
    for path, payload in routes.items():

        async def handler(request: web.Request, payload: Any = payload) -> web.Response:
            return web.json_response(payload)

        app.router.add_get(path, handler)
    return app


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port that is bound but not listening, so connecting to it is refused (and no one else gets it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


# --- what answers -----------------------------------------------------------------------------------------------


async def test_an_openai_compatible_server_is_ok_with_its_models_and_base_url(serve: Serve) -> None:
    models = {"object": "list", "data": [{"id": "Qwen/Qwen2.5-7B-Instruct", "object": "model"}]}
    root = await serve(json_routes({"/v1/models": models}))

    result = await probe(root)

    assert result.ok
    assert result.kinds == ("openai-compatible",)
    assert result.models == ("Qwen/Qwen2.5-7B-Instruct",)
    assert result.url == root
    assert result.base_url == root + "/v1"
    assert "Agent('openai-compatible:Qwen/Qwen2.5-7B-Instruct', base_url=" in result.message


async def test_ollama_is_recognised_by_both_apis_and_its_models_are_listed_once(serve: Serve) -> None:
    root = await serve(json_routes({"/api/tags": OLLAMA_TAGS, "/v1/models": OLLAMA_MODELS}))

    result = await probe(root)

    assert result.ok
    assert result.kinds == ("openai-compatible", "ollama")
    assert result.models == ("llama3.2:latest", "qwen2.5:7b")
    assert result.message.startswith(f"Ollama answers at {root} with 2 models.")
    assert "Agent('ollama:llama3.2:latest', base_url=" in result.message


async def test_a_base_url_ending_in_v1_still_finds_ollamas_api_at_the_root(serve: Serve) -> None:
    root = await serve(json_routes({"/api/tags": OLLAMA_TAGS, "/v1/models": OLLAMA_MODELS}))

    result = await probe(root + "/v1/")

    assert result.kinds == ("openai-compatible", "ollama")
    assert result.base_url == root + "/v1"


async def test_an_ollama_without_the_openai_api_is_not_ok_and_is_told_to_upgrade(serve: Serve) -> None:
    root = await serve(json_routes({"/api/tags": OLLAMA_TAGS}))

    result = await probe(root)

    assert not result.ok
    assert result.kinds == ("ollama",)
    assert result.models == ("llama3.2:latest", "qwen2.5:7b")
    assert "Upgrade Ollama" in result.message


async def test_a_server_without_models_is_ok_and_says_how_to_get_one(serve: Serve) -> None:
    root = await serve(json_routes({"/api/tags": {"models": []}, "/v1/models": {"object": "list", "data": []}}))

    result = await probe(root)

    assert result.ok
    assert result.models == ()
    assert "no model yet" in result.message
    assert "ollama pull" in result.message


# --- what goes wrong --------------------------------------------------------------------------------------------


async def test_nothing_listening_is_not_ok_and_says_how_to_start_a_server(closed_port: int) -> None:
    result = await probe(f"127.0.0.1:{closed_port}", timeout=5)

    assert not result.ok
    assert result.kinds == ()
    assert result.message.startswith(f"Nothing is listening at http://127.0.0.1:{closed_port} (connection refused).")
    for command in ("ollama serve", "vllm serve MODEL", "llama-server -m MODEL.gguf"):
        assert command in result.message


async def test_a_host_that_does_not_resolve_is_named_in_the_message(monkeypatch: pytest.MonkeyPatch) -> None:
    if aiohttp.resolver.DefaultResolver is not aiohttp.resolver.ThreadedResolver:
        pytest.skip("aiohttp resolves with aiodns here; the test fakes the loop's getaddrinfo")
    asked: list[str] = []

    async def no_such_host(host: str, *args: Any, **kwargs: Any) -> Any:
        asked.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", no_such_host)

    result = await probe("http://model-box.invalid:11434")

    assert asked, "the probe did not look the host up"
    assert not result.ok
    assert result.message.startswith("Cannot find the host 'model-box.invalid' (DNS lookup failed")


async def test_a_server_that_never_answers_times_out_with_a_message() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the client gives up and closes the connection
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        result = await probe(f"http://127.0.0.1:{port}", timeout=0.2)

    assert not result.ok
    assert result.message.startswith(f"http://127.0.0.1:{port} did not answer within 0.2 s.")


async def test_a_401_says_an_api_key_is_needed_and_a_given_key_is_sent_as_bearer_token(serve: Serve) -> None:
    @web.middleware
    async def require_key(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.headers.get("Authorization") != "Bearer sk-local-123":
            return web.json_response({"error": {"message": "Invalid API key"}}, status=401)
        response: web.StreamResponse = await handler(request)
        return response

    app = json_routes({"/v1/models": {"object": "list", "data": [{"id": "m"}]}})
    app.middlewares.append(require_key)
    root = await serve(app)

    refused = await probe(root, api_key="sk-wrong-456")
    accepted = await probe(root, api_key="sk-local-123")

    assert not refused.ok
    assert "HTTP 401: the server needs an API key" in refused.message
    assert "Invalid API key" in refused.message
    assert "sk-wrong-456" not in repr(refused)
    assert accepted.ok
    assert accepted.models == ("m",)


async def test_a_server_answering_html_is_not_taken_for_a_model_server(serve: Serve) -> None:
    async def page(request: web.Request) -> web.Response:
        return web.Response(text="<html><body>Welcome to nginx!</body></html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    root = await serve(app)

    result = await probe(root)

    assert not result.ok
    assert result.kinds == ()
    assert "answered, but not with a list of models (text/html: '<html><body>Welcome" in result.message


async def test_a_server_without_a_models_endpoint_says_where_to_look(serve: Serve) -> None:
    root = await serve(web.Application())

    result = await probe(root)

    assert not result.ok
    assert "not as an OpenAI-compatible server" in result.message
    assert "HTTP 404" in result.message


async def test_a_failing_server_is_reported_with_what_it_said(serve: Serve) -> None:
    async def loading(request: web.Request) -> web.Response:
        return web.json_response({"error": "model is still loading"}, status=503)

    app = web.Application()
    app.router.add_get("/v1/models", loading)
    root = await serve(app)

    result = await probe(root)

    assert not result.ok
    assert "HTTP 503: the server is up but failing (it said: model is still loading)" in result.message


# --- URLs -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "url", "root", "base_url"),
    [
        ("localhost:8000", "http://localhost:8000", "http://localhost:8000", "http://localhost:8000/v1"),
        (" 127.0.0.1:8080/ ", "http://127.0.0.1:8080", "http://127.0.0.1:8080", "http://127.0.0.1:8080/v1"),
        ("http://localhost:11434", "http://localhost:11434", "http://localhost:11434", "http://localhost:11434/v1"),
        ("http://localhost:11434/v1/", "http://localhost:11434/v1", "http://localhost:11434", "http://localhost:11434/v1"),
        ("http://h:1/v1/models", "http://h:1/v1", "http://h:1", "http://h:1/v1"),
        ("HTTPS://api.example.com/api/paas/v4", "https://api.example.com/api/paas/v4", "https://api.example.com/api/paas",
         "https://api.example.com/api/paas/v4"),
        ("[::1]:8000", "http://[::1]:8000", "http://[::1]:8000", "http://[::1]:8000/v1"),
        ("http://gpu-box/llm", "http://gpu-box/llm", "http://gpu-box/llm", "http://gpu-box/llm/v1"),
    ],
)  # fmt: skip
def test_urls_are_accepted_with_or_without_scheme_and_v1(given: str, url: str, root: str, base_url: str) -> None:
    where = endpoints(given)
    assert (where.url, where.root, where.base_url) == (url, root, base_url)


@pytest.mark.parametrize("given", ["", "http://", "ftp://host:21", "localhost:port", "localhost:99999", "localhost:0"])
def test_a_string_that_is_not_a_server_url_is_a_config_error(given: str) -> None:
    with pytest.raises(ConfigInvalid, match="is not an HTTP URL of a server"):
        endpoints(given)


def test_importing_the_probe_loads_no_aiohttp() -> None:
    code = "import sys, tether.providers.probe; print('aiohttp' in sys.modules)"
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert completed.stdout.strip() == "False"
