"""Token usage and what it costs.

Data only: :class:`Usage` adds up, :class:`Price` (with its :class:`Tier` s) and :func:`cost_of` turn one
request's tokens into dollars. Which price a model has is ``tether.pricing``'s business; limits on either
live in the loop's guard.
"""

from __future__ import annotations

import msgspec

from tether.errors import ConfigInvalid


class Usage(msgspec.Struct, frozen=True, gc=False):
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
    cache_write_1h_tokens: int = 0
    """Part of ``cache_write_tokens`` written with a 1-hour TTL (Anthropic's ``ttl: "1h"``), priced apart: at
    ``Price.cache_write_1h``, else twice the input price (the 5-minute writes are ``cache_write``, 1.25x)."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.requests + other.requests,
            self.cache_write_1h_tokens + other.cache_write_1h_tokens,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens


NO_USAGE = Usage()
"""Nothing used: one shared instance (a usage is immutable), so that the calls, turns and runs that start from
zero do not each make one."""


class Tier(msgspec.Struct, frozen=True, gc=False):
    """The prices of a request whose prompt is longer than ``above_input_tokens`` (US dollars per million
    tokens): a long-context surcharge, applied to every token of that request."""

    above_input_tokens: int
    """Applies when a request's prompt (input tokens, cache reads and cache writes together) is longer."""
    input: float
    output: float
    cache_read: float | None = None
    """Defaults to this tier's input price."""
    cache_write: float | None = None
    """Defaults to this tier's input price."""
    cache_write_1h: float | None = None
    """A 1-hour cache write; defaults to twice this tier's input price."""


class Price(msgspec.Struct, frozen=True, gc=False):
    """US dollars per million tokens, with optional tiers by prompt size.

    ``Price(input=1.25, output=10.0, tiers=(Tier(above_input_tokens=200_000, input=2.5, output=15.0),))``
    charges a request with a 250k-token prompt at $2.50/$15 for all its tokens, and one with a 1k-token prompt
    at $1.25/$10.
    """

    input: float
    output: float
    cache_read: float | None = None
    """Defaults to the input price when the provider has no cache discount."""
    cache_write: float | None = None
    """Defaults to the input price when the provider charges nothing extra for cache writes. A 5-minute write,
    for a provider that has two (Anthropic: 1.25x the input price)."""
    tiers: tuple[Tier, ...] = ()
    """Prices for long prompts, by increasing ``above_input_tokens``; the last one a request exceeds wins."""
    cache_write_1h: float | None = None
    """A 1-hour cache write (``Usage.cache_write_1h_tokens``); defaults to twice the input price, Anthropic's."""

    def __post_init__(self) -> None:
        bounds = [tier.above_input_tokens for tier in self.tiers]
        if any(bound < 0 for bound in bounds) or bounds != sorted(set(bounds)):
            raise ConfigInvalid(f"price tiers need distinct, increasing, non-negative thresholds, not {bounds}")

    def rates(self, prompt_tokens: int) -> Price | Tier:
        """The prices that apply to a request with a prompt of ``prompt_tokens`` tokens."""
        chosen: Price | Tier = self
        for tier in self.tiers:
            if prompt_tokens > tier.above_input_tokens:
                chosen = tier
        return chosen


class Cost(msgspec.Struct, frozen=True, gc=False):
    """What a usage cost, in US dollars (costs add with ``+``)."""

    input_usd: float
    output_usd: float

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.input_usd + other.input_usd, self.output_usd + other.output_usd)

    @property
    def total_usd(self) -> float:
        return self.input_usd + self.output_usd


NO_COST = Cost(0.0, 0.0)
"""Nothing spent: where a run's cost starts."""


def cost_of(usage: Usage, price: Price) -> Cost:
    """The dollar cost of one request's ``usage`` at ``price``: its prompt size picks the tier.

    Priced per request, because a tier applies to a request, not to a run: two 150k-token prompts cost the
    base rate each, though together they pass 200k.
    """
    rates = price.rates(usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens)
    cache_read = rates.input if rates.cache_read is None else rates.cache_read
    cache_write = rates.input if rates.cache_write is None else rates.cache_write
    written = usage.cache_write_tokens * cache_write
    if hour := min(usage.cache_write_1h_tokens, usage.cache_write_tokens):
        hour_write = 2 * rates.input if rates.cache_write_1h is None else rates.cache_write_1h
        written += hour * (hour_write - cache_write)
    input_usd = (usage.input_tokens * rates.input + usage.cache_read_tokens * cache_read + written) / 1_000_000
    return Cost(input_usd=input_usd, output_usd=usage.output_tokens * rates.output / 1_000_000)
