"""Token usage and what it costs.

Data only: :class:`Usage` adds up, :class:`Price` and :func:`cost_of` turn tokens into dollars. Limits on
either live in the loop's guard, not here. A cost is computed only from a known price: an unknown model
gets ``None``, never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tether.quickinit import quick_init


@quick_init
@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens and requests of one provider call, one turn or a whole run (usages add with ``+``)."""

    input_tokens: int = 0
    """Prompt tokens billed at the normal input rate (cache reads and writes excluded)."""
    output_tokens: int = 0
    """Completion tokens, reasoning included."""
    cache_read_tokens: int = 0
    """Prompt tokens served from the provider's cache."""
    cache_write_tokens: int = 0
    """Prompt tokens written to the provider's cache."""
    reasoning_tokens: int = 0
    """Part of ``output_tokens`` spent on reasoning, when the provider says."""
    requests: int = 0
    """Provider calls made."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.requests + other.requests,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens


NO_USAGE = Usage()
"""Nothing used: one shared instance (a usage is immutable), so that the calls, turns and runs that start from
zero do not each make one."""


@quick_init
@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens."""

    input: float
    output: float
    cache_read: float | None = None
    """Defaults to the input price when the provider has no cache discount."""
    cache_write: float | None = None
    """Defaults to the input price when the provider charges nothing extra for cache writes."""


@quick_init
@dataclass(frozen=True, slots=True)
class Cost:
    """What a usage cost, in US dollars."""

    input_usd: float
    output_usd: float

    @property
    def total_usd(self) -> float:
        return self.input_usd + self.output_usd


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
    "claude-sonnet-4-5": Price(input=3.00, output=15.00, cache_read=0.30, cache_write=3.75),
    "claude-sonnet-4": Price(input=3.00, output=15.00, cache_read=0.30, cache_write=3.75),
    "claude-haiku-4-5": Price(input=1.00, output=5.00, cache_read=0.10, cache_write=1.25),
    # Google list prices for prompts up to 200k tokens (ai.google.dev/pricing); cached input is billed at the
    # input price here, which can only overstate a cost, never understate it against a budget.
    "gemini-2.5-pro": Price(input=1.25, output=10.00),
    "gemini-2.5-flash": Price(input=0.30, output=2.50),
}
"""List prices by model id, as published in November 2026. Prices change: pass ``price=`` to ``Agent`` (or
edit this dict) for a model that is missing or has moved."""


def price_for(model: str) -> Price | None:
    """The price of a model id (``gpt-4o-mini``) or model string (``openai:gpt-4o-mini``), if known.

    Dated snapshots (``claude-sonnet-4-5-20250929``, ``gpt-4o-2024-08-06``) take their family's price.
    """
    name = model.split(":", 1)[1] if ":" in model else model
    if name in PRICES:
        return PRICES[name]
    family, dated = _DATED_SNAPSHOT.match(name), None
    if family is not None:
        dated = PRICES.get(family.group(1))
    return dated


_DATED_SNAPSHOT = re.compile(r"^(.+?)-(\d{8}|\d{4}-\d{2}-\d{2})$")
"""``family-20250929`` or ``family-2024-08-06``: a dated snapshot, priced like its family."""


def cost_of(usage: Usage, price: Price) -> Cost:
    """The dollar cost of ``usage`` at ``price``."""
    cache_read = price.input if price.cache_read is None else price.cache_read
    cache_write = price.input if price.cache_write is None else price.cache_write
    input_usd = (
        usage.input_tokens * price.input + usage.cache_read_tokens * cache_read + usage.cache_write_tokens * cache_write
    ) / 1_000_000
    return Cost(input_usd=input_usd, output_usd=usage.output_tokens * price.output / 1_000_000)
