"""Usage adds up; prices (with their tiers by prompt size) turn one request's tokens into dollars."""

from __future__ import annotations

import pytest

from tether.errors import ConfigInvalid
from tether.usage import Cost, Price, Tier, Usage, cost_of


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


# --- tiers -------------------------------------------------------------------------------------------------

LONG = Tier(above_input_tokens=200_000, input=2.0, output=20.0, cache_read=0.4)
TIERED = Price(input=1.0, output=10.0, cache_read=0.1, tiers=(LONG,))


def test_a_prompt_at_the_threshold_pays_the_base_rates() -> None:
    cost = cost_of(Usage(input_tokens=200_000, output_tokens=1_000_000), TIERED)
    assert cost.input_usd == pytest.approx(0.2)
    assert cost.output_usd == pytest.approx(10.0)


def test_a_prompt_past_the_threshold_pays_the_tier_rates_on_all_its_tokens() -> None:
    cost = cost_of(Usage(input_tokens=200_001, output_tokens=1_000_000), TIERED)
    assert cost.input_usd == pytest.approx(200_001 * 2.0 / 1e6)
    assert cost.output_usd == pytest.approx(20.0)


def test_cached_prompt_tokens_count_towards_the_tier_and_pay_its_cache_rates() -> None:
    usage = Usage(input_tokens=50_000, cache_read_tokens=150_000, cache_write_tokens=1)
    cost = cost_of(usage, TIERED)
    # 200,001 prompt tokens: the tier applies; its cache writes default to the tier's input price.
    assert cost.input_usd == pytest.approx((50_000 * 2.0 + 150_000 * 0.4 + 1 * 2.0) / 1e6)


def test_the_highest_tier_the_prompt_passes_wins() -> None:
    price = Price(input=1.0, output=1.0, tiers=(Tier(100, input=2.0, output=2.0), Tier(1_000, input=3.0, output=3.0)))
    assert cost_of(Usage(input_tokens=50), price).input_usd == pytest.approx(50 * 1.0 / 1e6)
    assert cost_of(Usage(input_tokens=500), price).input_usd == pytest.approx(500 * 2.0 / 1e6)
    assert cost_of(Usage(input_tokens=5_000), price).input_usd == pytest.approx(5_000 * 3.0 / 1e6)


@pytest.mark.parametrize("bounds", [(1_000, 100), (100, 100), (-1,)])
def test_tiers_out_of_order_repeated_or_negative_are_refused(bounds: tuple[int, ...]) -> None:
    with pytest.raises(ConfigInvalid, match="tiers") as caught:
        Price(input=1.0, output=1.0, tiers=tuple(Tier(bound, input=2.0, output=2.0) for bound in bounds))
    assert caught.value.code == "config_invalid"


def test_costs_add_field_by_field() -> None:
    assert Cost(1.0, 2.0) + Cost(0.5, 0.25) == Cost(1.5, 2.25)
