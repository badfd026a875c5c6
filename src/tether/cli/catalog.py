"""``tether models``: the models whose prices tether knows, every provider prefix with its key variables, and the
GGUF models pulled to disk (``tether models pull``), each with the ``local:NAME`` that runs it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from tether.cli.table import aligned
from tether.keys import key_variables
from tether.pricing import PRICES, find_price
from tether.providers.default_model import choose_model
from tether.providers.local.pulled import hub_cache, pulled_models
from tether.providers.registry import PROFILES, prefixes
from tether.secret_refs import describe
from tether.usage import Price, Tier

if TYPE_CHECKING:
    from tether.config.schema import ProviderConfig

_FAMILIES = (("gpt-", "openai"), ("claude-", "anthropic"), ("gemini-", "gemini"))

_NOTES = {
    "local": "embedded SmolLM2 or any GGUF file, no key",
    "scripted": "a deterministic model for tests (scripted:echo)",
    "openai-responses": "OpenAI's Responses API",
    "openai-compatible": "any OpenAI-compatible server: set [providers.openai-compatible] base_url",
    "azure": "azure:DEPLOYMENT at AZURE_OPENAI_ENDPOINT; a key or an Entra ID token (AZURE_OPENAI_AD_TOKEN)",
    "bedrock": "bedrock:MODEL_ID in AWS_REGION; a Bedrock API key, or AWS credentials (pip install tether[bedrock])",
    "vertex": "Gemini on Vertex AI: Application Default Credentials (the vertex extra), GOOGLE_CLOUD_PROJECT, "
    "GOOGLE_CLOUD_LOCATION (global by default)",
}


def provider_of(model: str) -> str:
    return next((prefix for start, prefix in _FAMILIES if model.startswith(start)), "?")


def _dollars(value: float) -> str:
    """``$0.15``, ``$5.00``, ``$0.075``: cents always shown, finer fractions when the price has them."""
    return f"${value:.2f}" if round(value, 2) == value else f"${value:g}"


def _tokens(count: int) -> str:
    """``200k``, ``1M``, ``128,500``: a tier's threshold as people write it."""
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if count >= size and count % size == 0:
            return f"{count // size}{unit}"
    return f"{count:,}"


def _rates_text(rates: Price | Tier) -> str:
    text = f"{_dollars(rates.input)} in, {_dollars(rates.output)} out"
    if rates.cache_read is not None:
        text += f", {_dollars(rates.cache_read)} cached in"
    return text


def price_text(price: Price) -> str:
    """``$0.15 in, $0.60 out, $0.075 cached in`` (US dollars per million tokens), then each tier:
    ``; over 200k: $2.50 in, $15.00 out`` (the rates of a request whose prompt is longer)."""
    tiers = "".join(f"; over {_tokens(tier.above_input_tokens)}: {_rates_text(tier)}" for tier in price.tiers)
    return _rates_text(price) + tiers


def _price_lines() -> list[str]:
    """One line per model of the built-in table: its model string, where its price comes from (genai-prices
    when installed and it knows the model, else built-in), and the price."""
    names = sorted(PRICES, key=lambda name: (provider_of(name), name))
    models = [f"{provider_of(name)}:{name}" for name in names]
    listed = [(model, find_price(model)) for model in models]
    rows = [(model, found.source, price_text(found.price)) for model, found in listed if found is not None]
    return aligned(rows, indent="  ", free_last=True)


def file_size(size: int) -> str:
    """``86.6 MB``, ``1.1 GB``: a file's size in the decimal units the Hugging Face Hub shows."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def _pulled_lines(env: Mapping[str, str]) -> list[str]:
    """The GGUF files in the Hugging Face Hub's cache, each with the model string that runs it."""
    cache = hub_cache(env)
    found = pulled_models(cache)
    if not found:
        return [f"Models on disk: none in {cache} (tether models pull REPO fetches one; docs/local.md names a few)"]
    rows = [(f"local:{model.name}", file_size(model.size), f"{model.repo}/{model.filename}") for model in found]
    return [f"Models on disk (pulled from the Hugging Face Hub, in {cache}):", *aligned(rows, indent="  ")]


def _configured_lines(configured: Mapping[str, ProviderConfig], env: Mapping[str, str]) -> list[str]:
    """One line per ``[providers.NAME]`` of the configuration: the prefix it makes usable, the profile it
    speaks, where it is and the variable its key is read from (marked when set), or its key reference's source."""
    rows: list[tuple[str, str]] = []
    for name in sorted(configured):
        settings = configured[name]
        builtin = name in prefixes()
        profile = "" if builtin else f"profile {settings.profile or 'openai-compatible'}"
        variable = settings.api_key_env
        key = f"{variable} (set)" if variable and env.get(variable) else (variable or "")
        if settings.api_key:  # a reference: where the key will come from, nothing run nor read to show it
            key = f"key from {describe(settings.api_key)}"
        details = [item for item in (profile, settings.base_url or "", key) if item]
        rows.append((name + ":", " · ".join(details) or "built-in settings"))
    return aligned(rows, indent="  ", free_last=True)


def catalog(env: Mapping[str, str], configured: Mapping[str, ProviderConfig] | None = None) -> str:
    """The text of ``tether models``: priced models, then providers with their variables (marked when set),
    then the providers the configuration names (``[providers.NAME]``), usable as ``NAME:MODEL`` too, then the
    models pulled to disk."""
    lines = ["Models with known prices (US$ per million tokens; 'over 200k': a request with a longer prompt):"]
    lines += _price_lines()
    lines += ["", "Providers (use as PROVIDER:MODEL; keys are read from these variables):"]
    rows: list[tuple[str, str]] = []
    for prefix in sorted(prefixes()):
        variables = key_variables(prefix)
        shown = " or ".join(f"{name} (set)" if env.get(name) else name for name in variables)
        profile = PROFILES.get(prefix)
        where = profile.base_url if profile is not None and profile.base_url else ""
        details = [item for item in (shown, where, _NOTES.get(prefix, "")) if item]
        rows.append((prefix + ":", " · ".join(details)))
    lines += aligned(rows, indent="  ", free_last=True)
    if configured:
        lines += ["", "Configured providers ([providers.NAME]; use as NAME:MODEL):"]
        lines += _configured_lines(configured, env)
    choice = choose_model(None, env)
    default = choice.model or "none (configure one: tether config set runtime.model PROVIDER:MODEL)"
    lines += ["", *_pulled_lines(env)]
    lines += ["", f"Without runtime.model configured, tether uses: {default}"]
    return "\n".join(lines)
