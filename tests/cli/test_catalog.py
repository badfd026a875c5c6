"""``tether models``' price list: each price with its tiers, and the table it came from."""

from __future__ import annotations

import sys

import pytest

from tether.cli.catalog import catalog, price_text
from tether.usage import Price, Tier


def line_of(text: str, model: str) -> str:
    (line,) = [line for line in text.splitlines() if line.split()[:1] == [model]]
    return line


def test_a_flat_price_shows_input_output_and_cached_input() -> None:
    assert price_text(Price(input=0.15, output=0.6, cache_read=0.075)) == "$0.15 in, $0.60 out, $0.075 cached in"


def test_each_tier_follows_the_base_price_with_its_threshold() -> None:
    price = Price(
        input=1.25,
        output=10.0,
        tiers=(Tier(200_000, input=2.5, output=15.0, cache_read=0.25), Tier(1_000_000, input=5.0, output=20.0)),
    )
    assert price_text(price) == (
        "$1.25 in, $10.00 out; over 200k: $2.50 in, $15.00 out, $0.25 cached in; over 1M: $5.00 in, $20.00 out"
    )


def test_a_threshold_that_is_not_round_is_written_in_full() -> None:
    assert price_text(Price(1.0, 2.0, tiers=(Tier(128_500, input=2.0, output=4.0),))).endswith(
        "over 128,500: $2.00 in, $4.00 out"
    )


def test_prices_from_genai_prices_say_so() -> None:
    pytest.importorskip("genai_prices")
    line = line_of(catalog({}), "gemini:gemini-2.5-pro")
    assert "genai-prices" in line
    assert "over 200k: $2.50 in, $15.00 out" in line


def test_prices_from_the_builtin_table_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "genai_prices", None)
    text = catalog({})
    line = line_of(text, "anthropic:claude-sonnet-4")
    assert "built-in" in line
    assert "$3.00 in, $15.00 out, $0.30 cached in; over 200k: $6.00 in, $22.50 out, $0.60 cached in" in line
    assert "genai-prices" not in text
