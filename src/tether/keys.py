"""Which environment variables hold each provider's API key: the one table every reader of a key uses.

The providers read their key from it, the command line picks a default model and lists the providers from
it, and :mod:`tether.secrets` counts every variable it names as secret. A prefix's variables are tried in
order; the first one that is set and not empty holds the key. A prefix without variables takes no key
(``scripted``, ``local``). This module imports nothing, so anything may import it.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["ALL_KEY_VARIABLES", "KEY_VARIABLES", "find_key", "key_variables", "missing_key", "read_key"]

KEY_VARIABLES: Mapping[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "openai-responses": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "ollama": ("OLLAMA_API_KEY",),
    "vllm": ("VLLM_API_KEY",),
    "llamacpp": ("LLAMA_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "zai": ("ZAI_API_KEY",),
    "minimax": ("MINIMAX_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "together": ("TOGETHER_API_KEY",),
    "fireworks": ("FIREWORKS_API_KEY",),
    "azure": ("AZURE_OPENAI_API_KEY",),
    "bedrock": ("AWS_BEARER_TOKEN_BEDROCK",),
    "vertex": (),  # signs with Application Default Credentials; an express mode key only as api_key=
    "openai-compatible": ("OPENAI_COMPATIBLE_API_KEY",),
}
"""Model-string prefix -> the variables its key is read from, in order of preference."""

ALL_KEY_VARIABLES = frozenset(name for names in KEY_VARIABLES.values() for name in names)
"""Every variable of the table: each holds a secret."""


def key_variables(prefix: str) -> tuple[str, ...]:
    """The variables ``prefix``'s key is read from, in order; ``()`` for a provider that takes no key."""
    return KEY_VARIABLES.get(prefix, ())


def find_key(prefix: str, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """``(variable, key)`` of the first of ``prefix``'s variables set and not empty in ``environ``."""
    return next(((name, environ[name]) for name in key_variables(prefix) if environ.get(name)), None)


def read_key(prefix: str, api_key: str | None = None) -> str | None:
    """The key a provider of ``prefix`` uses: ``api_key`` when given (a reference, ``cmd:pass show openai``,
    resolved by :mod:`tether.secret_refs`), else the process environment's."""
    if api_key:
        from tether.secret_refs import resolve_secret

        return resolve_secret(api_key)
    import os

    found = find_key(prefix, os.environ)
    return None if found is None else found[1]


def missing_key(prefix: str, model: str) -> str:
    """What a provider says when it needs a key and has none, naming the variables it reads."""
    variables = " or ".join(key_variables(prefix))
    return f"'{prefix}:{model}' needs an API key: set {variables}, or pass api_key= to Agent"
