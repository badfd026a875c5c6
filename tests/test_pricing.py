"""Which price a model has: genai-prices when installed and it knows the model, else the built-in table; the
built-in table's lookup by model id, model string and dated snapshot; genai-prices' prices (tiers included)
turned into a Price that costs a request exactly as genai-prices does."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from tether import pricing
from tether.pricing import PRICES, builtin_price, find_price, genai_price, price_for, price_from_genai
from tether.usage import Price, Tier, Usage, cost_of

pytest.importorskip("genai_prices")
import genai_prices
from genai_prices import types as genai

SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture
def without_genai_prices(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if genai-prices were not installed: importing it fails."""
    monkeypatch.setitem(sys.modules, "genai_prices", None)


# --- the built-in table -------------------------------------------------------------------------------------


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
def test_builtin_price_finds_ids_model_strings_and_dated_snapshots(model: str, family: str) -> None:
    assert builtin_price(model) == PRICES[family]


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
    assert builtin_price(snapshot) == PRICES[family]


@pytest.mark.parametrize(
    "model",
    ["llama3", "ollama:llama3:8b", "gpt-4o-audio-preview", "gpt-4o-mini-tts", "my-gpt-4o", "gpt-4", ""],
)
def test_builtin_price_of_an_unknown_model_is_none_not_a_guess(model: str) -> None:
    assert builtin_price(model) is None


def test_builtin_price_of_a_newer_version_of_a_family_is_none_not_the_older_versions_price() -> None:
    # '-6' is a version, not a date: Claude Sonnet 4.6 is not a snapshot of Claude Sonnet 4.
    assert builtin_price("claude-sonnet-4-6") is None


@pytest.mark.parametrize("model", ["gemini-2.5-pro", "claude-sonnet-4-5", "claude-sonnet-4"])
def test_the_long_context_models_of_the_table_have_a_tier_above_200k(model: str) -> None:
    (tier,) = PRICES[model].tiers
    assert tier.above_input_tokens == 200_000
    assert tier.input == 2 * PRICES[model].input


# --- lookup order -------------------------------------------------------------------------------------------


def test_genai_prices_is_the_source_when_installed_and_it_knows_the_model() -> None:
    listed = find_price("gemini:gemini-2.5-pro")
    assert listed is not None
    assert listed.source == "genai-prices"
    assert listed.price.tiers, "genai-prices' long-context tier comes through"


def test_the_builtin_table_is_the_source_without_genai_prices(without_genai_prices: None) -> None:
    assert genai_price("openai:gpt-4o-mini") is None
    listed = find_price("openai:gpt-4o-mini")
    assert listed is not None
    assert listed.source == "built-in"
    assert listed.price == PRICES["gpt-4o-mini"]


def test_a_model_genai_prices_does_not_know_falls_back_to_the_builtin_table(monkeypatch: pytest.MonkeyPatch) -> None:
    house = Price(input=0.5, output=1.5)
    monkeypatch.setitem(PRICES, "house-model-7", house)
    assert genai_price("openai:house-model-7") is None
    listed = find_price("openai:house-model-7")
    assert listed is not None
    assert (listed.price, listed.source) == (house, "built-in")


@pytest.mark.parametrize("model", ["ollama:llama3:8b", "local:smollm2", "llama3", "scripted:echo"])
def test_a_model_neither_source_knows_has_no_price(model: str) -> None:
    assert genai_price(model) is None
    assert price_for(model) is None


@pytest.mark.parametrize("model", ["vllm:gpt-4o", "scripted:gpt-4o", "nobody:gpt-4o"])
def test_genai_prices_is_not_asked_about_prefixes_it_does_not_bill(model: str) -> None:
    assert genai_price(model) is None
    assert find_price(model) == pricing.Listed(PRICES["gpt-4o"], "built-in")


def test_genai_prices_is_imported_at_the_first_lookup_not_with_tether() -> None:
    code = (
        "import sys, tether, tether.agent, tether.pricing, tether.cli.catalog\n"
        "before = 'genai_prices' in sys.modules\n"
        "tether.pricing.price_for('openai:gpt-4o')\n"
        "print(before, 'genai_prices' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.split() == ["False", "True"]


# --- genai-prices' prices as a Price ------------------------------------------------------------------------


def genai_usage(usage: Usage) -> genai_prices.Usage:
    """``usage`` as genai-prices counts it: its input tokens include the cached ones."""
    prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    return genai_prices.Usage(
        input_tokens=prompt,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
    )


USAGES = [
    Usage(input_tokens=1_000, output_tokens=500),
    Usage(input_tokens=150_000, cache_read_tokens=50_000, cache_write_tokens=0, output_tokens=2_000),
    Usage(input_tokens=150_000, cache_read_tokens=50_000, cache_write_tokens=1, output_tokens=2_000),
    Usage(input_tokens=120_000, cache_read_tokens=90_000, cache_write_tokens=10_000, output_tokens=30_000),
    Usage(input_tokens=900_000, output_tokens=1_000),
]
"""Prompts below, at and above 200k tokens, with and without cache reads and writes."""


@pytest.mark.parametrize(
    ("provider", "model"),
    [("google", "gemini-2.5-pro"), ("anthropic", "claude-sonnet-4-5"), ("openai", "gpt-4o"), ("openai", "gpt-5")],
)
@pytest.mark.parametrize("usage", USAGES)
def test_a_genai_price_costs_a_request_as_genai_prices_does(provider: str, model: str, usage: Usage) -> None:
    prefix = {"google": "gemini"}.get(provider, provider)
    price = genai_price(f"{prefix}:{model}")
    assert price is not None
    expected = genai_prices.calc_price(genai_usage(usage), model, provider_id=provider)
    cost = cost_of(usage, price)
    assert cost.input_usd == pytest.approx(float(expected.input_price), rel=1e-9, abs=1e-12)
    assert cost.output_usd == pytest.approx(float(expected.output_price), rel=1e-9, abs=1e-12)


def tiered(base: str, *tiers: tuple[int, str]) -> genai.TieredPrices:
    return genai.TieredPrices(Decimal(base), [genai.Tier(start, Decimal(price)) for start, price in tiers])


def test_tiers_of_separate_prices_merge_into_one_list_by_prompt_size() -> None:
    model_price = genai.ModelPrice(
        input_mtok=tiered("1", (100, "2")),
        output_mtok=tiered("10", (200, "20")),
        cache_read_mtok=Decimal("0.1"),
    )
    price = price_from_genai(model_price)
    assert price == Price(
        input=1.0,
        output=10.0,
        cache_read=0.1,
        tiers=(Tier(100, input=2.0, output=10.0, cache_read=0.1), Tier(200, input=2.0, output=20.0, cache_read=0.1)),
    )
    for prompt in (50, 100, 101, 200, 201, 5_000):
        usage = Usage(input_tokens=prompt, output_tokens=1_000)
        expected = model_price.calc_price(genai_usage(usage))
        assert cost_of(usage, price).total_usd == pytest.approx(float(expected["total_price"]), rel=1e-9)


def test_a_genai_price_without_token_prices_is_no_price() -> None:
    assert price_from_genai(genai.ModelPrice(input_mtok=Decimal("1"))) is None
    assert price_from_genai(genai.ModelPrice(output_mtok=Decimal("1"))) is None


def test_a_genai_price_with_a_fee_per_request_is_no_price_rather_than_an_understated_one() -> None:
    fee = genai.ModelPrice(input_mtok=Decimal("1"), output_mtok=Decimal("1"), requests_kcount=Decimal("5"))
    assert price_from_genai(fee) is None


@pytest.mark.parametrize(
    ("model", "provider_id"),
    [
        ("mistral:mistral-small-latest", "mistral"),
        ("groq:llama-3.3-70b-versatile", "groq"),
        ("xai:grok-3-mini", "x-ai"),
        ("openrouter:anthropic/claude-sonnet-4", "openrouter"),
        ("together:meta-llama/Llama-3.3-70B-Instruct-Turbo", "together"),
        ("fireworks:accounts/fireworks/models/llama-v3p1-8b-instruct", "fireworks"),
    ],
)
def test_the_hosted_profiles_are_priced_from_their_own_provider_in_genai_prices(model: str, provider_id: str) -> None:
    from genai_prices import data_snapshot

    name = model.split(":", 1)[1]
    _, info = data_snapshot.get_snapshot().find_provider_model(name, None, provider_id, None)
    listed = find_price(model)
    assert listed is not None
    assert listed.source == "genai-prices"
    assert listed.price == price_from_genai(info.get_prices(datetime.now(tz=UTC)))
