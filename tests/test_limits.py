"""Limits: bounded defaults, one set of rules for every field (Limits and the config table alike, naming the
field), None or "off" switches a limit off; StopReason."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import pytest
from pydantic import ValidationError

from tether.config.schema import CompactionConfig, LimitsConfig
from tether.errors import ConfigInvalid
from tether.limits import Compaction, Limits, StopReason, compaction_problem, limit_problem

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
        "invalid_output",
        "budget",
        "guardrail",
        "paused",
        "error",
    }


@pytest.mark.parametrize("name", SECONDS_FIELDS)
def test_an_infinite_time_or_cost_is_refused_none_is_the_way_to_switch_it_off(name: str) -> None:
    with pytest.raises(ConfigInvalid, match=f"Limits.{name} must be a number > 0, or None, not inf"):
        Limits(**{name: math.inf})  # type: ignore[arg-type]


VALUES: list[Any] = [None, 0, 1, 2, -1, 0.5, 2.0, math.nan, math.inf, True, False, "3", [1]]


def refusal_of_limits(name: str, value: Any) -> str | None:
    try:
        Limits(**{name: value})
    except ConfigInvalid as error:
        return str(error)
    return None


def refusal_of_the_config_table(name: str, value: Any) -> str | None:
    try:
        LimitsConfig.model_validate({name: value})
    except ValidationError as error:
        return str(error)
    return None


@pytest.mark.parametrize("name", [field.name for field in dataclasses.fields(Limits)])
def test_limits_and_the_config_table_accept_and_refuse_the_same_values_with_the_same_message(name: str) -> None:
    for value in VALUES:
        problem = limit_problem(name, value)
        refused = refusal_of_limits(name, value)
        if problem is None:
            assert refused is None, (name, value)
        else:
            assert refused is not None
            assert refused.endswith(f"Limits.{name} {problem}, not {value!r}")
        if value is None or (value is False and name != "invalid_response_retries"):
            continue  # TOML has no null: "off" or false says it (tested below)
        refused = refusal_of_the_config_table(name, value)
        if problem is None:
            assert refused is None, (name, value)
        else:
            assert refused is not None
            assert str(limit_problem(name, value, off='"off"')) in refused, (name, value)


@pytest.mark.parametrize("name", [*COUNT_FIELDS, *SECONDS_FIELDS, "max_history_messages"])
def test_the_config_table_switches_a_limit_off_with_off_or_false(name: str) -> None:
    assert getattr(LimitsConfig.model_validate({name: "off"}).to_limits(), name) is None
    assert getattr(LimitsConfig.model_validate({name: False}).to_limits(), name) is None


def test_the_config_table_cannot_switch_off_invalid_response_retries() -> None:
    with pytest.raises(ValidationError, match="must be a whole number >= 0"):
        LimitsConfig.model_validate({"invalid_response_retries": "off"})


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("context_window", 255, "whole number of tokens >= 256"),
        ("context_window", 256.0, "whole number of tokens >= 256"),
        ("summary_tokens", 15, "whole number of tokens >= 16"),
        ("summary_tokens", True, "whole number of tokens >= 16"),
        ("threshold", 1.0, "fraction between 0 and 1"),
        ("keep_recent", 0, "fraction between 0 and 1"),
        ("threshold", math.nan, "fraction between 0 and 1"),
    ],
)
def test_compaction_and_its_config_table_refuse_the_same_values(name: str, value: Any, problem: str) -> None:
    assert problem in (compaction_problem(name, value) or "")
    with pytest.raises(ConfigInvalid, match=f"Compaction.{name} must be a"):
        Compaction(**{name: value})
    with pytest.raises(ValidationError, match=problem):
        CompactionConfig.model_validate({name: value})


# --- the JSON form ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "limits",
    [
        Limits(),
        Limits(max_turns=None, run_timeout=12, max_cost_usd=0.25, output_retries=0, excess_tool_calls="stop"),
        Limits(request_timeout=1.5, tool_timeout=None, max_history_messages=40, max_tool_calls_per_turn=1),
    ],
)
def test_limits_round_trip_through_json_and_dict_exactly(limits: Limits) -> None:
    again = Limits.from_json(limits.to_json())
    assert again == limits
    assert [type(getattr(again, f.name)) for f in dataclasses.fields(Limits)] == [
        type(getattr(limits, f.name)) for f in dataclasses.fields(Limits)
    ]
    assert Limits.from_dict(limits.to_dict()) == limits


def test_limits_json_uses_null_for_off_and_keeps_defaults_for_keys_left_out() -> None:
    assert json.loads(Limits(run_timeout=None).to_json())["run_timeout"] is None
    assert Limits.from_json('{"max_turns": null, "tool_timeout": 5}') == Limits(max_turns=None, tool_timeout=5)
    assert Limits.from_json(b"{}") == Limits()


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('{"max_turn": 3}', "'max_turn'"),
        ('{"max_turns": 0}', "Limits.max_turns must be a whole number >= 1, or null, not 0"),
        ('{"max_turns": "5"}', 'Limits.max_turns must be a whole number >= 1, or null, not "5"'),
        ('{"max_turns": 2.0}', "Limits.max_turns"),
        ('{"request_timeout": true}', "Limits.request_timeout must be a number > 0, or null, not true"),
        ('{"request_timeout": NaN}', "Limits.request_timeout"),
        ('{"invalid_response_retries": null}', "Limits.invalid_response_retries must be a whole number >= 0"),
        ('{"excess_tool_calls": "halt"}', "Limits.excess_tool_calls must be 'refuse' or 'stop'"),
        ("[1, 2]", "not list"),
        ('{"max_turns": ', "not valid JSON"),
    ],
)
def test_limits_json_refuses_unknown_keys_and_bad_values_naming_the_field(text: str, named: str) -> None:
    with pytest.raises(ConfigInvalid) as caught:
        Limits.from_json(text)
    assert caught.value.code == "config_invalid"
    assert named in str(caught.value)


def test_excess_tool_calls_is_refuse_by_default_and_the_config_table_takes_its_words() -> None:
    assert Limits().excess_tool_calls == "refuse"
    assert LimitsConfig.model_validate({"excess_tool_calls": "stop"}).to_limits().excess_tool_calls == "stop"
    with pytest.raises(ValidationError, match="must be 'refuse' or 'stop'"):
        LimitsConfig.model_validate({"excess_tool_calls": "off"})
