"""Is a model server up, and what does it serve? A health check and model discovery for local endpoints.

Local servers (Ollama, vLLM, llama.cpp, LM Studio, ...) are where a first run usually stumbles: the server is
not running, listens on another port, wants a key, or the URL lacks ``/v1``. :func:`probe` asks the server
for its models both ways they are offered, at the same time:

* ``GET {base}/models``, the OpenAI-compatible API that tether speaks (``base`` ends in ``/v1``);
* ``GET {root}/api/tags``, Ollama's own API (Ollama serves both).

and turns whatever happens into a :class:`ProbeResult`: which kinds of API answered, the models found, the
base URL to give tether, the latency and a message saying what to do next. A probe never raises for a server
that cannot be reached or answers wrongly (``ok`` is false and the message says why); only a string that is
not an HTTP URL at all is refused, with ``ConfigInvalid``. Redirects are not followed (a key meant for one
server must not reach another): a redirect is reported, naming the origin it points to.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from tether.errors import ConfigInvalid

if TYPE_CHECKING:
    import aiohttp

    from tether.providers.http.client import Secret

OPENAI = "openai-compatible"
OLLAMA = "ollama"
MAX_BODY = 4 * 1024 * 1024
"""Bytes of an answer read at most: a models list is far smaller; anything bigger is not one."""

_START_HINT = (
    "Is the server running? For Ollama: `ollama serve`; for vLLM: `vllm serve MODEL`; "
    "for llama.cpp: `llama-server -m MODEL.gguf`."
)
_VERSION_SUFFIX = re.compile(r"/v\d+$")
_MODELS_SUFFIX = re.compile(r"(/v\d+)/models$")


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """What a probe found; ``message`` says it in a sentence or two, with the next step when something is wrong."""

    ok: bool
    """An OpenAI-compatible API answered with a list of models: tether can use the server at ``base_url``."""
    url: str
    """The URL probed, normalised (``http://`` added when no scheme was given, no trailing slash)."""
    base_url: str
    """The base URL to give tether (``base_url=``), ending in ``/v1``."""
    kinds: tuple[str, ...]
    """The APIs that answered with a models list: ``openai-compatible``, ``ollama``, both, or none."""
    models: tuple[str, ...]
    """The model ids the server offers, in its order, without duplicates."""
    latency_ms: float
    """The round trip of the answer reported, or the time until the failure reported."""
    message: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (tuples become lists)."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Endpoints:
    """Where a server's APIs are, derived from the URL a user typed."""

    url: str
    """The normalised URL."""
    root: str
    """The server without the API version (``http://localhost:11434``): Ollama's API lives here."""
    base_url: str
    """The OpenAI-compatible base URL (``http://localhost:11434/v1``)."""

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""


def endpoints(url: str) -> Endpoints:
    """The endpoints for ``host:port``, ``http://host:port`` or a base URL such as ``http://host:port/v1``.

    Raises ``ConfigInvalid`` for a string that is not an HTTP(S) URL with a host and a valid port.
    """
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    try:
        valid = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a port that is not a number or out of range
        valid = False
    if not valid:
        raise ConfigInvalid(f"{url!r} is not an HTTP URL of a server (for example http://localhost:11434)")
    path = _MODELS_SUFFIX.sub(r"\1", parts.path.rstrip("/"))
    normalised = f"{parts.scheme}://{parts.netloc}{path}"
    if _VERSION_SUFFIX.search(path):
        return Endpoints(normalised, _VERSION_SUFFIX.sub("", normalised), normalised)
    return Endpoints(normalised, normalised, normalised + "/v1")


async def probe(url: str, *, timeout: float = 5.0, api_key: str | None = None) -> ProbeResult:
    """Ask the server at ``url`` for its models, as an OpenAI-compatible server and as Ollama.

    ``timeout`` bounds each request (connecting included), in seconds; ``api_key`` is sent as a bearer token.
    """
    from tether.providers.http.client import Secret
    from tether.providers.http.pool import session_for

    where = endpoints(url)
    key = Secret(api_key) if api_key else None
    session = await session_for(where.root)
    openai, ollama = await asyncio.gather(
        _fetch(session, where.base_url + "/models", _openai_models, where=where, key=key, timeout=timeout),
        _fetch(session, where.root + "/api/tags", _ollama_models, where=where, key=key, timeout=timeout),
    )
    return _result(where, openai, ollama)


# --- one request ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Answer:
    """One request's outcome: the models, or what went wrong."""

    elapsed_ms: float
    models: tuple[str, ...] | None = None
    problem: str = ""


async def _fetch(
    session: aiohttp.ClientSession,
    url: str,
    parse: Callable[[Any], tuple[str, ...] | None],
    *,
    where: Endpoints,
    key: Secret | None,
    timeout: float,
) -> _Answer:
    """GET ``url`` and read a models list from it with ``parse``."""
    import aiohttp

    headers = {"Authorization": "Bearer " + key.reveal()} if key else None
    started = time.perf_counter()
    try:
        async with session.get(
            url, headers=headers, allow_redirects=False, timeout=aiohttp.ClientTimeout(total=timeout)
        ) as response:
            body = await _read_capped(response)
            status, content_type = response.status, response.content_type
            location = response.headers.get("Location")
    except Exception as exc:  # noqa: BLE001 - every failure becomes a message, none escapes
        return _Answer(_since(started), problem=_connection_problem(exc, where, timeout))
    elapsed = _since(started)
    if 300 <= status < 400:
        return _Answer(elapsed, problem=_redirect_problem(url, status, location))
    if status >= 400:
        return _Answer(elapsed, problem=_http_problem(url, status, body, where))
    models = parse(_json(body))
    if models is None:
        return _Answer(elapsed, problem=_not_models(url, content_type, body))
    return _Answer(elapsed, models)


async def _read_capped(response: aiohttp.ClientResponse) -> bytes:
    body = bytearray()
    async for chunk in response.content.iter_chunked(64 * 1024):
        body += chunk
        if len(body) > MAX_BODY:
            break
    return bytes(body)


def _since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


def _openai_models(data: Any) -> tuple[str, ...] | None:
    """``{"object": "list", "data": [{"id": ...}, ...]}``."""
    items = data.get("data") if isinstance(data, dict) else None
    return _ids(items, "id") if isinstance(items, list) else None


def _ollama_models(data: Any) -> tuple[str, ...] | None:
    """``{"models": [{"name": ..., "model": ...}, ...]}``."""
    items = data.get("models") if isinstance(data, dict) else None
    return _ids(items, "name", "model") if isinstance(items, list) else None


def _ids(items: list[Any], *keys: str) -> tuple[str, ...]:
    """The first string among ``keys`` of each item; items without one are skipped."""
    objects = (item for item in items if isinstance(item, dict))
    names = (next((item[k] for k in keys if isinstance(item.get(k), str)), "") for item in objects)
    return tuple(dict.fromkeys(name for name in names if name))


# --- what went wrong, for people ------------------------------------------------------------------------------


def _connection_problem(error: Exception, where: Endpoints, timeout: float) -> str:
    if isinstance(error, TimeoutError):
        return (
            f"{where.root} did not answer within {timeout:g} s. The server may still be starting or loading a "
            "model, or a firewall drops the connection; try a longer timeout."
        )
    os_error = getattr(error, "os_error", None)  # aiohttp.ClientConnectorError and its DNS subclass
    if isinstance(os_error, socket.gaierror):
        return (
            f"Cannot find the host {where.host!r} (DNS lookup failed: {os_error.strerror}). "
            f"Check the host name in {where.url}."
        )
    if isinstance(os_error, ConnectionRefusedError):
        return f"Nothing is listening at {where.root} (connection refused). {_START_HINT} {_default_ports()}"
    return f"Cannot reach {where.root}: {type(error).__name__}: {error}"


def _default_ports() -> str:
    from tether.providers.registry import PROFILES

    names = {"ollama": "Ollama", "vllm": "vLLM", "llamacpp": "llama.cpp"}
    ports = [f"{label} {urlsplit(PROFILES[name].base_url or '').port}" for name, label in names.items()]
    return f"Default ports: {', '.join(ports)}."


def _http_problem(url: str, status: int, body: bytes, where: Endpoints) -> str:
    from tether.providers.http.errors import provider_message

    said, _ = provider_message(body.decode(errors="replace"))
    if status in (401, 403):
        return (
            f"GET {url} answered HTTP {status}: the server needs an API key, or refused the one given "
            f"(it said: {said}). Pass the key (api_key=, or --api-key on the command line)."
        )
    if status == 404:
        return (
            f"Something answers at {where.root}, but not as an OpenAI-compatible server: GET {url} "
            "answered HTTP 404. Check the port and the path (the base URL usually ends in /v1)."
        )
    if status >= 500:
        return (
            f"GET {url} answered HTTP {status}: the server is up but failing (it said: {said}). "
            "It may still be loading the model; its log says more."
        )
    return f"GET {url} answered HTTP {status} (the server said: {said})."


def _redirect_problem(url: str, status: int, location: str | None) -> str:
    from tether.providers.http.pool import origin_of

    target = origin_of(urljoin(url, location)) if location else "nowhere (no Location)"
    return (
        f"GET {url} answered HTTP {status}, a redirect to {target}; redirects are not followed, since requests "
        "carry the API key. Give the address the server answers at itself."
    )


def _not_models(url: str, content_type: str, body: bytes) -> str:
    start = " ".join(body[:80].decode(errors="replace").split())
    return (
        f"GET {url} answered, but not with a list of models ({content_type or 'no content type'}: {start!r}). "
        "Is this the model server's port? The base URL of an OpenAI-compatible server usually ends in /v1."
    )


# --- the verdict ----------------------------------------------------------------------------------------------


def _result(where: Endpoints, openai: _Answer, ollama: _Answer) -> ProbeResult:
    kinds = tuple(kind for kind, answer in ((OPENAI, openai), (OLLAMA, ollama)) if answer.models is not None)
    models = tuple(dict.fromkeys((*(openai.models or ()), *(ollama.models or ()))))
    reported = ollama if openai.models is None and ollama.models is not None else openai
    return ProbeResult(
        ok=openai.models is not None,
        url=where.url,
        base_url=where.base_url,
        kinds=kinds,
        models=models,
        latency_ms=reported.elapsed_ms,
        message=_message(where, openai, ollama, models),
    )


def _message(where: Endpoints, openai: _Answer, ollama: _Answer, models: tuple[str, ...]) -> str:
    if openai.models is None and ollama.models is None:
        return openai.problem
    if openai.models is None:
        return (
            f"Ollama answers at {where.root}, but its OpenAI-compatible API, which tether needs, does not: "
            f"{openai.problem} Upgrade Ollama (0.1.24 or later serves /v1)."
        )
    server = "Ollama" if ollama.models is not None else "An OpenAI-compatible server"
    if not models:
        return (
            f"{server} answers at {where.root} but offers no model yet. Ollama: `ollama pull MODEL`; "
            "vLLM and llama.cpp serve the model they were started with."
        )
    count = f"{len(models)} model{'s' if len(models) != 1 else ''}"
    return f"{server} answers at {where.root} with {count}. Use it as {_usage(where, ollama, models[0])}."


def _usage(where: Endpoints, ollama: _Answer, model: str) -> str:
    """The ``Agent(...)`` call for ``model`` on this server: a profile's prefix, and its base URL if not the default."""
    from tether.providers.registry import PROFILES

    local = ("ollama",) if ollama.models is not None else ("vllm", "llamacpp")
    prefix = next((name for name in local if PROFILES[name].base_url == where.base_url), None)
    if prefix is None:
        prefix = "ollama" if ollama.models is not None else "openai-compatible"
        return f"Agent({prefix + ':' + model!r}, base_url={where.base_url!r})"
    return f"Agent({prefix + ':' + model!r})"
