"""Limits: bounded defaults, validation of every field (naming it), None switches a limit off; StopReason."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from tether.errors import ConfigInvalid
from tether.limits import Limits, StopReason

COUNT_FIELDS = ["max_turns", "max_tool_calls_per_turn", "max_tool_calls", "max_consecutive_errors"]
SECONDS_FIELDS = ["request_timeout", "step_timeout", "tool_timeout", "run_timeout", "max_cost_usd"]
OPTIONAL_FIELDS = [*COUNT_FIELDS, *SECONDS_FIELDS, "max_history_messages"]


@pytest.mark.parametrize("name", ["max_turns", "max_tool_calls_per_turn", "max_tool_calls"])
def test_defaults_bound_turns_and_tool_calls(name: str) -> None:
    value = getattr(Limits(), name)
    assert isinstance(value, int)
    assert value >= 1


@pytest.mark.parametrize("name", ["request_timeout", "step_timeout", "tool_timeout"])
def test_defaults_bound_each_provider_and_tool_call_in_time(name: str) -> None:
    value = getattr(Limits(), name)
    assert isinstance(value, float)
    assert 0 < value < math.inf


def test_default_allows_one_corrective_retry() -> None:
    assert Limits().invalid_response_retries == 1


@pytest.mark.parametrize(
    ("name", "value"),
    [
        *[(name, bad) for name in [*COUNT_FIELDS, "max_history_messages"] for bad in (0, -1, True, 2.0, "3")],
        *[(name, bad) for name in SECONDS_FIELDS for bad in (0, -1.5, math.nan, True, False, "60")],
        ("invalid_response_retries", -1),
        ("invalid_response_retries", None),
        ("invalid_response_retries", True),
        ("invalid_response_retries", 1.0),
    ],
)
def test_invalid_values_raise_config_invalid_naming_the_field(name: str, value: Any) -> None:
    with pytest.raises(ConfigInvalid) as caught:
        Limits(**{name: value})
    assert caught.value.code == "config_invalid"
    assert f"Limits.{name}" in str(caught.value)
    assert repr(value) in str(caught.value)


@pytest.mark.parametrize("name", OPTIONAL_FIELDS)
def test_none_switches_a_limit_off(name: str) -> None:
    settings: dict[str, Any] = {name: None}
    assert getattr(Limits(**settings), name) is None


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("max_turns", 1),
        ("max_history_messages", 1),
        ("invalid_response_retries", 0),
        ("request_timeout", 0.001),
        ("run_timeout", 5),
        ("max_cost_usd", 0.01),
    ],
)
def test_smallest_sensible_values_are_accepted(name: str, value: Any) -> None:
    assert getattr(Limits(**{name: value}), name) == value


def test_limits_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Limits().max_turns = 5  # type: ignore[misc]


@pytest.mark.parametrize(
    ("reason", "text"),
    [(StopReason.COMPLETE, "complete"), (StopReason.MAX_TOOL_CALLS, "max_tool_calls"), (StopReason.BUDGET, "budget")],
)
def test_stop_reason_compares_equal_to_its_string(reason: StopReason, text: str) -> None:
    assert reason == text
    assert text == reason
    assert str(reason) == text
    assert f"{reason}" == text
    assert StopReason(text) is reason


def test_stop_reasons_are_exactly_those_of_the_design() -> None:
    assert {str(reason) for reason in StopReason} == {
        "complete",
        "done_tool",
        "ask_user",
        "max_turns",
        "max_tool_calls",
        "consecutive_errors",
        "timeout",
        "cancelled",
        "invalid_response",
        "budget",
        "error",
    }
