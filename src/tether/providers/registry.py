"""Model strings (``provider:model``) to providers, and the compatibility profiles of OpenAI-style servers.

Each prefix names the module that builds its provider, imported only when a model string uses it, so that
``import tether`` loads no provider code. A server that speaks OpenAI Chat Completions differs from OpenAI in
a few facts (where it is, how it authenticates, what it calls the output limit, where it puts reasoning);
a :class:`Profile` records those facts as data, and one provider serves them all.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from tether.errors import ConfigInvalid
from tether.keys import key_variables
from tether.providers.base import Provider


@dataclass(frozen=True, slots=True)
class Profile:
    """What an OpenAI-compatible server needs that OpenAI's own API does not say."""

    name: str
    """The model-string prefix, also the provider name in ``ModelInfo``."""
    base_url: str | None
    """``None``: the caller must give ``base_url``."""
    requires_key: bool = False
    """Refuse to start without a key (hosted APIs); local servers take one only if given."""
    max_tokens_field: str = "max_tokens"
    reasoning_fields: tuple[str, ...] = ("reasoning_content", "reasoning")
    """Message and delta fields that carry the model's reasoning."""
    stream_options: bool = True
    """Accepts ``stream_options: {"include_usage": true}`` (usage at the end of a stream)."""
    supports_tools: bool = True
    parallel_tool_calls: bool = True
    """Accepts the ``parallel_tool_calls`` field."""
    json_schema: bool = False
    """Can constrain an answer to a JSON Schema (``response_format: json_schema``), for JSON action mode."""
    prompt_cache_key: bool = False
    """Takes ``prompt_cache_key`` (``memo.prompt_cache_key``), by which OpenAI routes requests to its prompt cache."""
    tool_choices: frozenset[str] = frozenset({"auto", "none", "required", "function"})
    """The ``tool_choice`` values the server honours: ``"auto"``, ``"none"``, ``"required"``, and
    ``"function"`` for a named tool (``{"type": "function", "function": {"name": ...}}``). What a server
    cannot be told is not sent as if it could (``openai_chat.tool_offer``)."""
    reasoning_in_completion: bool = True
    """``usage.completion_tokens`` counts the reasoning tokens too, as OpenAI's does; ``False`` for a server that
    reports them only in ``completion_tokens_details.reasoning_tokens`` (xAI): they are added to the output."""

    @property
    def key_variables(self) -> tuple[str, ...]:
        """The environment variables holding the API key, in order (``tether.keys``)."""
        return key_variables(self.name)


PROFILES: dict[str, Profile] = {
    "openai": Profile(
        "openai",
        "https://api.openai.com/v1",
        requires_key=True,
        max_tokens_field="max_completion_tokens",
        json_schema=True,
        prompt_cache_key=True,
    ),
    # Ollama's Chat Completions endpoint has no tool_choice field (it is ignored): the model always decides.
    "ollama": Profile("ollama", "http://localhost:11434/v1", json_schema=True, tool_choices=frozenset({"auto"})),
    "vllm": Profile("vllm", "http://localhost:8000/v1", json_schema=True),
    # llama-server reads tool_choice as a string (auto, none, required); a named tool is ignored (auto).
    "llamacpp": Profile(
        "llamacpp",
        "http://localhost:8080/v1",
        json_schema=True,
        tool_choices=frozenset({"auto", "none", "required"}),
    ),
    "deepseek": Profile("deepseek", "https://api.deepseek.com/v1", requires_key=True),
    # Z.AI's GLM API documents tool_choice "auto" only.
    "zai": Profile("zai", "https://api.z.ai/api/paas/v4", requires_key=True, tool_choices=frozenset({"auto"})),
    "minimax": Profile(
        "minimax",
        "https://api.minimax.io/v1",
        requires_key=True,
        # MiniMax's API reference deprecates max_tokens for max_completion_tokens; tokens_to_generate was the
        # field of its retired ChatCompletion Pro API.
        max_tokens_field="max_completion_tokens",
        stream_options=False,
        parallel_tool_calls=False,
        tool_choices=frozenset({"auto", "none"}),  # MiniMax documents tool_choice as "none" or "auto"
    ),
    # Mistral documents tool_choice auto, none, any, required and a named function, and structured outputs
    # (response_format json_schema); a stream ends with its usage without stream_options, which it does not list.
    "mistral": Profile(
        "mistral", "https://api.mistral.ai/v1", requires_key=True, json_schema=True, stream_options=False
    ),
    # Groq: OpenAI's tool_choice values; JSON Schema outputs only on some models, so JSON mode for the rest.
    "groq": Profile("groq", "https://api.groq.com/openai/v1", requires_key=True),
    # xAI: completion_tokens leave out the reasoning tokens (completion_tokens_details.reasoning_tokens).
    "xai": Profile("xai", "https://api.x.ai/v1", requires_key=True, json_schema=True, reasoning_in_completion=False),
    # OpenRouter forwards OpenAI's fields to the model's provider; its own app headers (HTTP-Referer,
    # X-OpenRouter-Title) are optional: headers= or [providers.openrouter] headers.
    "openrouter": Profile("openrouter", "https://openrouter.ai/api/v1", requires_key=True, json_schema=True),
    "together": Profile("together", "https://api.together.xyz/v1", requires_key=True, json_schema=True),
    "fireworks": Profile("fireworks", "https://api.fireworks.ai/inference/v1", requires_key=True, json_schema=True),
    # Azure OpenAI: the URL and the credential header are the provider's own (``tether.providers.azure``).
    "azure": Profile("azure", None, requires_key=True, max_tokens_field="max_completion_tokens", json_schema=True),
    "openai-compatible": Profile("openai-compatible", None),
}

_BUILDERS: dict[str, str] = {
    "scripted": "tether.providers.scripted:from_model_name",
    "anthropic": "tether.providers.anthropic:from_model_name",
    "gemini": "tether.providers.gemini:from_model_name",
    "openai-responses": "tether.providers.openai_responses:from_model_name",
    "local": "tether.providers.local:from_model_name",
    **dict.fromkeys(PROFILES, "tether.providers.openai_chat:from_model_name"),
    "azure": "tether.providers.azure:from_model_name",
    "bedrock": "tether.providers.bedrock:from_model_name",
    "vertex": "tether.providers.vertex:from_model_name",
}
"""prefix -> ``module:function``; the function takes the prefix, the model name and the options."""


IN_PROCESS = frozenset({"scripted", "local"})
"""Prefixes whose model runs in this process: no HTTP, so no retries and no ``retry`` option."""


def over_http(prefix: str) -> bool:
    """The provider behind ``prefix`` speaks HTTP (and takes ``retry=RetryPolicy(...)``)."""
    return prefix in _BUILDERS and prefix not in IN_PROCESS


def prefixes() -> frozenset[str]:
    """Every provider prefix a model string can start with."""
    return frozenset(_BUILDERS)


def resolve(model: str | Provider, **options: Any) -> Provider:
    """The provider for a model string (``options`` such as ``base_url`` and ``api_key`` go to its builder),
    or the provider itself."""
    if not isinstance(model, str):
        if not isinstance(model, Provider):
            raise ConfigInvalid(f"a model is a 'provider:model' string or a Provider, not {type(model).__name__}")
        if given := {k: v for k, v in options.items() if v is not None}:
            raise ConfigInvalid(f"{', '.join(given)} only apply to a model string, not to a Provider instance")
        return model
    prefix, colon, name = model.partition(":")
    if not colon or not prefix or not name:
        raise ConfigInvalid(f"model {model!r} is not of the form 'provider:model' (for example 'openai:gpt-4o-mini')")
    target = _BUILDERS.get(prefix)
    if target is None:
        known = ", ".join(f"{p}:" for p in sorted(_BUILDERS))
        raise ConfigInvalid(f"unknown provider {prefix!r} in {model!r}; available: {known}")
    if prefix != "anthropic" and options.pop("prompt_cache", None) is not None:  # the others take no such option
        raise ConfigInvalid(f"prompt_cache applies to 'anthropic:' models, not to {model!r}")
    module_name, function_name = target.split(":")
    build = getattr(importlib.import_module(module_name), function_name)
    provider: Provider = build(prefix, name, **options)
    return provider
