"""Usage adds up; prices turn tokens into dollars; price lookup by model id, model string and dated snapshot."""

from __future__ import annotations

import pytest

from tether.usage import PRICES, Price, Usage, cost_of, price_for


def test_usages_add_field_by_field() -> None:
    a = Usage(
        input_tokens=1, output_tokens=2, cache_read_tokens=3, cache_write_tokens=4, reasoning_tokens=5, requests=1
    )
    b = Usage(
        input_tokens=10, output_tokens=20, cache_read_tokens=30, cache_write_tokens=40, reasoning_tokens=50, requests=2
    )
    assert a + b == Usage(
        input_tokens=11, output_tokens=22, cache_read_tokens=33, cache_write_tokens=44, reasoning_tokens=55, requests=3
    )


def test_empty_usage_is_the_identity_of_addition() -> None:
    usage = Usage(input_tokens=7, output_tokens=3, requests=1)
    assert usage + Usage() == usage
    assert Usage() + usage == usage


def test_total_tokens_counts_input_output_and_cache_but_not_reasoning_twice() -> None:
    usage = Usage(input_tokens=100, output_tokens=50, cache_read_tokens=20, cache_write_tokens=5, reasoning_tokens=30)
    assert usage.total_tokens == 175


def test_cost_uses_the_cache_prices_when_given() -> None:
    price = Price(input=2.0, output=10.0, cache_read=0.5, cache_write=3.0)
    usage = Usage(
        input_tokens=1_000_000, output_tokens=500_000, cache_read_tokens=2_000_000, cache_write_tokens=1_000_000
    )
    cost = cost_of(usage, price)
    assert cost.input_usd == pytest.approx(2.0 + 1.0 + 3.0)
    assert cost.output_usd == pytest.approx(5.0)
    assert cost.total_usd == pytest.approx(11.0)


def test_cost_bills_cache_tokens_at_the_input_price_without_cache_prices() -> None:
    price = Price(input=2.0, output=10.0)
    usage = Usage(input_tokens=1_000_000, cache_read_tokens=1_000_000, cache_write_tokens=1_000_000)
    cost = cost_of(usage, price)
    assert cost.input_usd == pytest.approx(6.0)
    assert cost.output_usd == 0.0


def test_cost_of_no_tokens_is_zero() -> None:
    assert cost_of(Usage(requests=3), Price(input=5.0, output=25.0)).total_usd == 0.0


# --- price_for ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("gpt-4o-mini", "gpt-4o-mini"),
        ("claude-haiku-4-5", "claude-haiku-4-5"),
        ("openai:gpt-4o-mini", "gpt-4o-mini"),
        ("anthropic:claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("openai:gpt-4o-2024-08-06", "gpt-4o"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
    ],
)
def test_price_for_finds_ids_model_strings_and_dated_snapshots(model: str, family: str) -> None:
    assert price_for(model) == PRICES[family]


@pytest.mark.parametrize(
    ("snapshot", "family", "shorter_family"),
    [
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini", "gpt-4o"),
        ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini", "gpt-4.1"),
        ("gpt-5-mini-2025-08-07", "gpt-5-mini", "gpt-5"),
    ],
)
def test_the_longest_family_name_wins_for_a_dated_snapshot(snapshot: str, family: str, shorter_family: str) -> None:
    assert PRICES[family] != PRICES[shorter_family]
    assert price_for(snapshot) == PRICES[family]


@pytest.mark.parametrize(
    "model",
    ["llama3", "ollama:llama3:8b", "gpt-4o-audio-preview", "gpt-4o-mini-tts", "my-gpt-4o", "gpt-4", ""],
)
def test_price_for_an_unknown_model_is_none_not_a_guess(model: str) -> None:
    assert price_for(model) is None


def test_price_for_a_newer_version_of_a_family_is_none_not_the_older_versions_price() -> None:
    # '-6' is a version, not a date: Claude Sonnet 4.6 is not a snapshot of Claude Sonnet 4.
    assert price_for("claude-sonnet-4-6") is None
