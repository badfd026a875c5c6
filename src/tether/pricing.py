"""Which price a model has, and where that price came from.

Lookup order, first found wins:

1. the price the user gave (``Agent(price=...)``; the agent does not look further);
2. ``genai-prices``, when installed (``pip install 'tether[prices]'``): a maintained table with long-context
   tiers and price history, imported only when a price is first looked up;
3. the built-in table below, :data:`PRICES`.

A model neither knows has no price: its cost is ``None``, never a guess. Either source gives a
:class:`~tether.usage.Price`, so one function (:func:`~tether.usage.cost_of`) prices every request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from tether.usage import Price, Tier

if TYPE_CHECKING:
    from genai_prices.types import ModelPrice

Source = Literal["genai-prices", "built-in"]

_ANTHROPIC_LONG_CONTEXT = (
    Tier(above_input_tokens=200_000, input=6.00, output=22.50, cache_read=0.60, cache_write=7.50),
)
"""Claude Sonnet 4 and 4.5 with the 1M-token context window: all of a request's tokens at these rates once its
prompt passes 200k tokens."""

PRICES: dict[str, Price] = {
    # OpenAI list prices, standard tier (platform.openai.com/docs/pricing).
    "gpt-4o": Price(input=2.50, output=10.00, cache_read=1.25),
    "gpt-4o-mini": Price(input=0.15, output=0.60, cache_read=0.075),
    "gpt-4.1": Price(input=2.00, output=8.00, cache_read=0.50),
    "gpt-4.1-mini": Price(input=0.40, output=1.60, cache_read=0.10),
    "gpt-5": Price(input=1.25, output=10.00, cache_read=0.125),
    "gpt-5-mini": Price(input=0.25, output=2.00, cache_read=0.025),
    # Anthropic list prices (platform.claude.com/docs/en/about-claude/pricing); cache writes at the 5-minute rate.
    "claude-opus-4-5": Price(input=5.00, output=25.00, cache_read=0.50, cache_write=6.25),
    "claude-opus-4-1": Price(input=15.00, output=75.00, cache_read=1.50, cache_write=18.75),
    "claude-sonnet-4-5": Price(
        input=3.00, output=15.00, cache_read=0.30, cache_write=3.75, tiers=_ANTHROPIC_LONG_CONTEXT
    ),
    "claude-sonnet-4": Price(
        input=3.00, output=15.00, cache_read=0.30, cache_write=3.75, tiers=_ANTHROPIC_LONG_CONTEXT
    ),
    "claude-haiku-4-5": Price(input=1.00, output=5.00, cache_read=0.10, cache_write=1.25),
    # Google list prices (ai.google.dev/gemini-api/docs/pricing); context-cache storage is not priced.
    "gemini-2.5-pro": Price(
        input=1.25,
        output=10.00,
        cache_read=0.125,
        tiers=(Tier(above_input_tokens=200_000, input=2.50, output=15.00, cache_read=0.25),),
    ),
    "gemini-2.5-flash": Price(input=0.30, output=2.50, cache_read=0.03),
}
"""List prices by model id, as published in November 2026. Prices change: pass ``price=`` to ``Agent``, install
``genai-prices``, or edit this dict for a model that is missing or has moved."""


@dataclass(frozen=True, slots=True)
class Listed:
    """A model's price and the table it came from (``tether models`` shows both)."""

    price: Price
    source: Source


def price_for(model: str) -> Price | None:
    """The price of a model id (``gpt-4o-mini``) or model string (``openai:gpt-4o-mini``), if known."""
    listed = find_price(model)
    return None if listed is None else listed.price


def find_price(model: str) -> Listed | None:
    """The price of ``model`` from ``genai-prices`` when installed and it knows the model, else from
    :data:`PRICES`; ``None`` when neither knows it. Not cached, so that an edit to :data:`PRICES` counts at
    once (genai-prices caches its own lookups)."""
    if (price := genai_price(model)) is not None:
        return Listed(price, "genai-prices")
    if (price := builtin_price(model)) is not None:
        return Listed(price, "built-in")
    return None


def builtin_price(model: str) -> Price | None:
    """The price of ``model`` in :data:`PRICES`. Dated snapshots (``claude-sonnet-4-5-20250929``,
    ``gpt-4o-2024-08-06``) take their family's price."""
    prefix, colon, name = model.partition(":")
    if not colon:
        name = model
    elif prefix == "bedrock":  # anthropic.claude-sonnet-4-20250514-v1:0 -> claude-sonnet-4-20250514
        name = bedrock_names(name)[1].partition(".")[2].partition(":")[0].removesuffix("-v1")
    if name in PRICES:
        return PRICES[name]
    family = _DATED_SNAPSHOT.match(name)
    return None if family is None else PRICES.get(family.group(1))


_DATED_SNAPSHOT = re.compile(r"^(.+?)-(\d{8}|\d{4}-\d{2}-\d{2})$")
"""``family-20250929`` or ``family-2024-08-06``: a dated snapshot, priced like its family."""

_GENAI_PROVIDERS = {
    "openai": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "gemini": "google",
    "vertex": "google",  # genai-prices has no Vertex AI list of its own: its google one covers it
    "deepseek": "deepseek",
    "zai": "zai",
    "minimax": "minimax",
    "mistral": "mistral",
    "groq": "groq",
    "xai": "x-ai",
    "openrouter": "openrouter",
    "together": "together",
    "fireworks": "fireworks",
    "bedrock": "aws",
}
"""tether's provider prefix -> genai-prices' provider id. Self-hosted prefixes (ollama, vllm, llamacpp, local,
openai-compatible) and scripted models are absent: their models are not billed by a list price. So is
``azure``: a model string names a deployment, whose name need not be its model's. A ``bedrock`` model id is
looked up as it is, then without its cross-region prefix (``us.``, ``eu.``, ``global.``, ...), then under the
``global.`` profile (``bedrock_names``)."""

_REGION_PREFIXES = ("us.", "eu.", "apac.", "global.", "jp.", "au.", "ca.", "us-gov.")


def bedrock_names(name: str) -> list[str]:
    """The names a Bedrock model id is priced under, in order: as given, without its cross-region prefix, and
    as the ``global.`` profile (genai-prices lists some models only so)."""
    bare = next((name[len(prefix) :] for prefix in _REGION_PREFIXES if name.startswith(prefix)), name)
    return list(dict.fromkeys((name, bare, "global." + bare)))


def genai_price(model: str) -> Price | None:
    """Today's price of ``model`` in ``genai-prices``, when it is installed and knows the model (a bare model
    id is matched against every provider it lists)."""
    prefix, colon, name = model.partition(":")
    provider = _GENAI_PROVIDERS.get(prefix) if colon else None
    if colon and provider is None:
        return None
    try:
        from genai_prices import data_snapshot
    except ImportError:
        return None
    snapshot = data_snapshot.get_snapshot()
    for each in bedrock_names(name) if prefix == "bedrock" else [name if colon else model]:
        try:
            _, info = snapshot.find_provider_model(each, None, provider, None)
        except LookupError:
            continue
        return price_from_genai(info.get_prices(datetime.now(tz=UTC)))
    return None


_GENAI_KEYS = (
    ("input", "input_mtok"),
    ("output", "output_mtok"),
    ("cache_read", "cache_read_mtok"),
    ("cache_write", "cache_write_mtok"),
)
"""Our price field -> genai-prices' price key, for the token counts a :class:`~tether.usage.Usage` holds."""


def price_from_genai(model_price: ModelPrice) -> Price | None:
    """A ``genai-prices`` model price as a :class:`Price`: its token prices, their tiers merged into one list
    (genai-prices tiers each price separately; a request crosses all of them at the same prompt size).
    ``None`` without an input and an output price, or with a fee per request (which a Price cannot hold)."""
    from genai_prices.types import TieredPrices

    if getattr(model_price, "requests_kcount", None) is not None:
        return None

    steps: dict[str, list[tuple[int, float]]] = {}
    for field, key in _GENAI_KEYS:
        value = getattr(model_price, key)
        if isinstance(value, TieredPrices):
            steps[field] = [(-1, float(value.base)), *((tier.start, float(tier.price)) for tier in value.tiers)]
        elif value is not None:
            steps[field] = [(-1, float(value))]
    if "input" not in steps or "output" not in steps:
        return None

    def rate(field: str, above: int) -> float | None:
        """The price of ``field`` for a prompt longer than ``above`` tokens (-1: any prompt)."""
        prices = [price for start, price in steps.get(field, ()) if above >= start]
        return prices[-1] if prices else None

    starts = sorted({start for prices in steps.values() for start, _ in prices[1:]})
    tiers = tuple(
        Tier(
            start,
            rate("input", start) or 0.0,
            rate("output", start) or 0.0,
            rate("cache_read", start),
            rate("cache_write", start),
        )
        for start in starts
    )
    return Price(
        rate("input", -1) or 0.0, rate("output", -1) or 0.0, rate("cache_read", -1), rate("cache_write", -1), tiers
    )
