"""``tether models``: the models whose prices tether knows, and every provider prefix with its key variables."""

from __future__ import annotations

from collections.abc import Mapping

from tether.cli.choose import choose_model
from tether.providers.keys import key_variables
from tether.providers.registry import PROFILES, prefixes
from tether.usage import PRICES, Price

_FAMILIES = (("gpt-", "openai"), ("claude-", "anthropic"), ("gemini-", "gemini"))

_NOTES = {
    "local": "embedded SmolLM2 or any GGUF file, no key",
    "scripted": "a deterministic model for tests (scripted:echo)",
    "openai-responses": "OpenAI's Responses API",
    "openai-compatible": "any OpenAI-compatible server: set [providers.openai-compatible] base_url",
}


def provider_of(model: str) -> str:
    return next((prefix for start, prefix in _FAMILIES if model.startswith(start)), "?")


def _dollars(value: float) -> str:
    """``$0.15``, ``$5.00``, ``$0.075``: cents always shown, finer fractions when the price has them."""
    return f"${value:.2f}" if round(value, 2) == value else f"${value:g}"


def price_text(price: Price) -> str:
    """``$0.15 in, $0.6 out, $0.075 cached in`` (US dollars per million tokens)."""
    text = f"{_dollars(price.input)} in, {_dollars(price.output)} out"
    if price.cache_read is not None:
        text += f", {_dollars(price.cache_read)} cached in"
    return text


def catalog(env: Mapping[str, str]) -> str:
    """The text of ``tether models``: priced models, then providers with their variables (marked when set)."""
    names = sorted(PRICES, key=lambda name: (provider_of(name), name))
    models = [f"{provider_of(name)}:{name}" for name in names]
    width = max(len(model) for model in models)
    lines = ["Models with known prices (US$ per million tokens):"]
    lines += [f"  {model.ljust(width)}  {price_text(PRICES[name])}" for model, name in zip(models, names, strict=True)]
    lines += ["", "Providers (use as PROVIDER:MODEL; keys are read from these variables):"]
    all_prefixes = sorted(prefixes())
    width = max(len(prefix) for prefix in all_prefixes) + 1
    for prefix in all_prefixes:
        variables = key_variables(prefix)
        shown = " or ".join(f"{name} (set)" if env.get(name) else name for name in variables)
        profile = PROFILES.get(prefix)
        where = profile.base_url if profile is not None and profile.base_url else ""
        details = [item for item in (shown, where, _NOTES.get(prefix, "")) if item]
        lines.append(f"  {(prefix + ':').ljust(width)}  {' · '.join(details)}".rstrip())
    choice = choose_model(None, env)
    default = choice.model or "none (configure one: tether config set runtime.model PROVIDER:MODEL)"
    lines += ["", f"Without runtime.model configured, tether uses: {default}"]
    return "\n".join(lines)
