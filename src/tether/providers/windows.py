"""The context windows of known models, in tokens: what ``ModelInfo.context_window`` says unless told otherwise.

The contract, before the code:

* **Looked up by provider and model name**: ``context_window_for("anthropic", "claude-sonnet-4-5-20250929")``.
  A name is matched whole first, then with one snapshot suffix after another taken off its end (a date,
  a four-digit version, ``-001``, ``-latest``, ``-preview``, ``-exp``), so a dated or versioned snapshot has its
  family's window (``gpt-4o-2024-08-06``, ``claude-3-5-sonnet-latest``, ``gemini-2.5-flash-preview-05-20``),
  while a snapshot whose window differs from its family's is listed by its own name (``gpt-4-1106-preview``,
  ``gpt-3.5-turbo-0613``). A fine-tuned OpenAI model (``ft:gpt-4o-mini-2024-07-18:org::id``) has its base's.
* **Unknown is ``None``, never a neighbour's guess**: a name the table does not hold (a newer model, or a
  variant with its own limits such as an image or audio model) has no window, and compaction then needs one
  given (``Compaction(context_window=...)`` or a provider's ``context_window=``).
* **Servers decide their own**: for Ollama, vLLM, llama.cpp and any other OpenAI-compatible server the window
  is the server's setting, so the answer is always ``None``; so it is for providers this table does not name.
* **The documented figure**: the model's whole window as its maker states it (input and output together for
  OpenAI and Anthropic, the input limit for Gemini). Where the maker gives a rounded figure ("128K", "200K") it
  is read in thousands, the smaller reading, so that a request estimated to fit does fit.
* Names that are aliases of a moving target (DeepSeek's ``deepseek-chat`` and ``deepseek-reasoner``) have the
  window of the model they name in this table's time; those windows have only grown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from tether.errors import ConfigInvalid

__all__ = ["WINDOWS", "checked_window", "context_window_for"]

_K = 1_000
_OPENAI: dict[str, int] = {
    # GPT-3.5 and GPT-4, legacy: the snapshots that differ from their family are named.
    "gpt-3.5-turbo": 16_385,
    "gpt-3.5-turbo-16k": 16_385,
    "gpt-3.5-turbo-0613": 4_096,
    "gpt-3.5-turbo-0301": 4_096,
    "gpt-3.5-turbo-instruct": 4_096,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-4-turbo": 128 * _K,
    "gpt-4-1106-preview": 128 * _K,
    "gpt-4-0125-preview": 128 * _K,
    "gpt-4-vision-preview": 128 * _K,
    "gpt-4-1106-vision-preview": 128 * _K,
    # GPT-4o and GPT-4.1
    "gpt-4o": 128 * _K,
    "gpt-4o-mini": 128 * _K,
    "chatgpt-4o": 128 * _K,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    # GPT-5: the reasoning models have 400K, the chat variants 128K.
    "gpt-5": 400 * _K,
    "gpt-5-mini": 400 * _K,
    "gpt-5-nano": 400 * _K,
    "gpt-5-pro": 400 * _K,
    "gpt-5-codex": 400 * _K,
    "gpt-5.1": 400 * _K,
    "gpt-5.1-codex": 400 * _K,
    "gpt-5.1-codex-mini": 400 * _K,
    "gpt-5.2": 400 * _K,
    "gpt-5-chat": 128 * _K,
    "gpt-5.1-chat": 128 * _K,
    "gpt-5.2-chat": 128 * _K,
    # o-series
    "o1": 200 * _K,
    "o1-pro": 200 * _K,
    "o1-mini": 128 * _K,
    "o1-preview": 128 * _K,
    "o3": 200 * _K,
    "o3-pro": 200 * _K,
    "o3-mini": 200 * _K,
    "o4-mini": 200 * _K,
}
_ANTHROPIC: dict[str, int] = {
    "claude-instant-1": 100 * _K,
    "claude-instant-1.2": 100 * _K,
    "claude-2.0": 100 * _K,
    "claude-2.1": 200 * _K,
    **dict.fromkeys(
        (
            "claude-3-haiku",
            "claude-3-sonnet",
            "claude-3-opus",
            "claude-3-5-haiku",
            "claude-3-5-sonnet",
            "claude-3-7-sonnet",
            "claude-sonnet-4",
            "claude-sonnet-4-0",
            "claude-opus-4",
            "claude-opus-4-0",
            "claude-opus-4-1",
            "claude-sonnet-4-5",
            "claude-haiku-4-5",
            "claude-opus-4-5",
        ),
        200 * _K,
    ),
    # The 4.6 models have a 1M window without any beta header.
    "claude-sonnet-4-6": 1_000 * _K,
    "claude-opus-4-6": 1_000 * _K,
}
_GEMINI: dict[str, int] = {
    "gemini-1.5-pro": 2_097_152,
    **dict.fromkeys(
        (
            "gemini-1.5-flash",
            "gemini-1.5-flash-8b",
            "gemini-2.0-flash",
            "gemini-2.0-flash-lite",
            "gemini-2.5-pro",
            "gemini-2.5-flash",
            "gemini-2.5-flash-lite",
            "gemini-3-pro",
            "gemini-3-flash",
        ),
        1_048_576,
    ),
}
_DEEPSEEK: dict[str, int] = {"deepseek-chat": 128 * _K, "deepseek-reasoner": 128 * _K}
_ZAI: dict[str, int] = {
    **dict.fromkeys(("glm-4.5", "glm-4.5-air", "glm-4.5-x", "glm-4.5-airx", "glm-4.5-flash"), 128 * _K),
    "glm-4.5v": 64 * _K,
    "glm-4.6": 200 * _K,
    "glm-4.6v": 128 * _K,
    "glm-4.7": 200 * _K,
    "glm-4-32b-0414-128k": 128 * _K,
}
_MINIMAX: dict[str, int] = dict.fromkeys(("minimax-m2", "minimax-m2.1", "minimax-m2.1-lightning"), 204_800)

WINDOWS: Mapping[str, Mapping[str, int]] = {
    "openai": _OPENAI,
    "openai-responses": _OPENAI,
    "anthropic": _ANTHROPIC,
    "gemini": _GEMINI,
    "deepseek": _DEEPSEEK,
    "zai": _ZAI,
    "minimax": _MINIMAX,
}
"""Provider name -> lower-case model name (without snapshot suffix) -> window in tokens."""

_SNAPSHOT = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|\d{2}-\d{4}|\d{4}|\d{2}-\d{2}|\d{3}|latest|preview|exp)$")
"""One snapshot suffix at the end of a name: ``-2024-08-06``, ``-20250929``, ``-09-2025``, ``-0613``,
``-05-20``, ``-001``, ``-latest``, ``-preview``, ``-exp``."""


def context_window_for(provider: str, model: str) -> int | None:
    """The context window of ``model`` served by ``provider`` (a provider name, as in ``ModelInfo``), or
    ``None`` when it is not known or is the server's setting (see the module docstring)."""
    table = WINDOWS.get(provider)
    if table is None:
        return None
    name = model.strip().lower().removeprefix("models/")
    if name.startswith("ft:"):
        name = name[3:].partition(":")[0]
    while name:
        window = table.get(name)
        if window is not None:
            return window
        shorter = _SNAPSHOT.sub("", name, count=1)
        if shorter == name:
            return None
        name = shorter
    return None


def checked_window(value: object, who: str) -> int | None:
    """``value`` as a provider's ``context_window=`` (a positive whole number, or ``None``); ``ConfigInvalid``
    naming ``who`` otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigInvalid(f"{who}: context_window must be a positive whole number of tokens or None, not {value!r}")
    return value
