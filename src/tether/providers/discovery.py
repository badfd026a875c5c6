"""Is a local model server running here? Which of its models can call tools?

With no model configured and no provider key set, a local server the user already runs (Ollama, LM Studio,
llama.cpp's server, vLLM) is a far better default than the embedded 135M demo model. :func:`discover` looks
at their usual ports on 127.0.0.1 and returns the first server (in :data:`DEFAULT_SERVERS`' order) that
serves a model able to call tools, or ``None``.

* **Fast when nothing runs.** A TCP connection is tried first, on every port at once: on a machine without a
  server it is refused at once, and nothing more (not even aiohttp) is loaded. A port that accepts is asked
  for its models with :func:`tether.providers.probe.probe` (``tether probe``'s logic). The whole discovery is
  bounded by :data:`DISCOVERY_TIMEOUT`; a server slower than that is passed over.
* **Tool-capable.** Ollama says what a model can do (``POST /api/show``: ``"capabilities"`` holds
  ``"tools"``). Other servers do not, and neither does an Ollama too old to report capabilities: for them the
  model's name decides (:func:`known_tool_family`: the families trained for tool calling, such as Qwen 2.5 and
  3, Llama 3.1 and later, Mistral, Hermes). Embedding models are never picked.
* **Off switch.** ``TETHER_LOCAL_SERVERS`` replaces the list: comma-separated URLs to look at
  (``http://127.0.0.1:11434,http://gpu-box:8000``), or ``off`` (also ``0``, ``none``, ``false``) for no
  discovery at all; empty, the usual ports. A server on another port is labelled by what answers: Ollama
  when its own API does, else by the usual port of LM Studio, llama.cpp or vLLM, else "an OpenAI-compatible
  server". The test suite sets it, so that a server running on the developer's machine is never
  picked up by a test.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

SERVERS_VARIABLE = "TETHER_LOCAL_SERVERS"
OFF = frozenset({"off", "0", "none", "false", "no"})
DEFAULT_SERVERS: Sequence[str] = (
    "http://127.0.0.1:11434",  # Ollama
    "http://127.0.0.1:1234",  # LM Studio
    "http://127.0.0.1:8080",  # llama.cpp's llama-server
    "http://127.0.0.1:8000",  # vLLM
)
DISCOVERY_TIMEOUT = 1.5
"""Seconds the whole discovery may take, however many servers answer (a connection refused takes none)."""
CONNECT_TIMEOUT = 0.3
"""Seconds a TCP connection to a port may take: a local port that neither accepts nor refuses is filtered."""
MAX_SHOWN = 8
"""Ollama models asked about their capabilities, at most (concurrently)."""

_LABELS = {1234: ("LM Studio", "openai-compatible"), 8080: ("llama.cpp", "llamacpp"), 8000: ("vLLM", "vllm")}

TOOL_FAMILIES: Sequence[str] = (
    "qwen2.5", "qwen3", "qwq", "llama3.1", "llama3.2", "llama3.3", "llama4", "mistral", "mixtral", "ministral",
    "magistral", "devstral", "codestral", "hermes", "functionary", "command-r", "commandr", "firefunction",
    "granite3", "granite4", "phi4-mini", "phi-4-mini", "gpt-oss", "glm-4", "glm4", "nemotron", "cogito",
    "watt-tool", "xlam", "toolace", "smollm3",
)  # fmt: skip
"""Model families trained to call tools, matched in a model's name (lower case, ``-``, ``_`` and spaces
removed on both sides): the rule for servers that do not report a model's capabilities."""


@dataclass(frozen=True, slots=True)
class FoundServer:
    """A running server and the tool-capable model picked on it."""

    server: str
    """What it is, for people: ``Ollama``, ``LM Studio``, ``llama.cpp``, ``vLLM``, ``an OpenAI-compatible server``."""
    root: str
    """Its address (``http://127.0.0.1:11434``)."""
    base_url: str
    """The OpenAI-compatible base URL tether is given (``http://127.0.0.1:11434/v1``)."""
    prefix: str
    """The provider prefix of the model string: ``ollama``, ``llamacpp``, ``vllm`` or ``openai-compatible``."""
    name: str
    """The model's id on the server."""

    @property
    def model(self) -> str:
        return f"{self.prefix}:{self.name}"

    def notice(self) -> str:
        return (
            f"tether: no model configured; using {self.name} on {self.server} at {self.root} (found running; "
            f"{SERVERS_VARIABLE}=off turns this off)"
        )


def servers_to_try(env: Mapping[str, str]) -> tuple[str, ...]:
    """The servers :func:`discover` looks at: ``TETHER_LOCAL_SERVERS`` if set (in ``env``, else in the
    process's environment: a caller passing a made-up ``env`` cannot turn an "off" set for the process back
    on), else the usual ports."""
    given = env.get(SERVERS_VARIABLE, os.environ.get(SERVERS_VARIABLE))
    if given is None or not given.strip():
        return tuple(DEFAULT_SERVERS)
    if given.strip().lower() in OFF:
        return ()
    return tuple(url.strip().rstrip("/") for url in given.split(",") if url.strip())


def known_tool_family(name: str) -> bool:
    """Whether a model's name is of a family trained to call tools (:data:`TOOL_FAMILIES`); never an embedder."""
    flat = _flat(name)
    return "embed" not in flat and any(_flat(family) in flat for family in TOOL_FAMILIES)


def _flat(text: str) -> str:
    return re.sub(r"[-_\s]", "", text.lower())


def discover(env: Mapping[str, str]) -> FoundServer | None:
    """The first server of :func:`servers_to_try` serving a tool-capable model, or ``None``; never raises,
    takes at most about :data:`DISCOVERY_TIMEOUT` seconds. Safe to call with an event loop running in this
    thread (the discovery then runs on a thread of its own)."""
    urls = servers_to_try(env)
    if not urls:
        return None
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(discover_async(urls))
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, discover_async(urls)).result()


async def discover_async(urls: Sequence[str], timeout: float = DISCOVERY_TIMEOUT) -> FoundServer | None:
    """:func:`discover` in a running loop: every server at once, the first of ``urls``' order that has a
    tool-capable model wins."""
    tasks = [asyncio.ensure_future(_look(url)) for url in urls]
    done, pending = await asyncio.wait(tasks, timeout=timeout)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    for task in tasks:  # in the order given: Ollama before LM Studio before ...
        if task in done and not task.cancelled() and task.exception() is None and (found := task.result()):
            return found
    return None


async def _look(url: str) -> FoundServer | None:
    from tether.errors import ConfigInvalid
    from tether.providers.probe import OLLAMA, endpoints

    try:
        where = endpoints(url)
    except ConfigInvalid:
        return None
    parts = urlsplit(where.root)
    if not await _accepts(parts.hostname or "127.0.0.1", parts.port or (443 if parts.scheme == "https" else 80)):
        return None
    from tether.providers.probe import probe

    found = await probe(url, timeout=DISCOVERY_TIMEOUT)
    if not found.ok or not found.models:
        return None
    if OLLAMA in found.kinds:
        name = await _ollama_tool_model(where.root, found.models)
        return FoundServer("Ollama", where.root, where.base_url, "ollama", name) if name else None
    server, prefix = _LABELS.get(parts.port or 0, ("an OpenAI-compatible server", "openai-compatible"))
    name = next((model for model in found.models if known_tool_family(model)), None)
    return FoundServer(server, where.root, where.base_url, prefix, name) if name else None


async def _accepts(host: str, port: int) -> bool:
    """Whether something accepts a TCP connection at ``host:port`` (refused: at once, ``False``)."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_TIMEOUT)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


async def _ollama_tool_model(root: str, models: Sequence[str]) -> str | None:
    """The first of ``models`` Ollama says can call tools; by name for an Ollama that does not say."""
    shown = await asyncio.gather(*(_capabilities(root, name) for name in models[:MAX_SHOWN]))
    for name, capabilities in zip(models, shown, strict=False):
        if capabilities is not None and "tools" in capabilities:
            return name
        if capabilities is None and known_tool_family(name):
            return name
    return None


async def _capabilities(root: str, name: str) -> tuple[str, ...] | None:
    """``POST /api/show``'s ``capabilities`` for ``name`` (``None``: not reported, or the request failed)."""
    import aiohttp

    from tether.providers.http.pool import session_for

    session = await session_for(root)
    try:
        async with session.post(
            root + "/api/show",
            json={"model": name},
            allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=DISCOVERY_TIMEOUT),
        ) as response:
            if response.status != 200:
                return None
            data: Any = await response.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None
    capabilities = data.get("capabilities") if isinstance(data, dict) else None
    if not isinstance(capabilities, list):
        return None
    return tuple(item for item in capabilities if isinstance(item, str))
