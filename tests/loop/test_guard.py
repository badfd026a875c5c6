"""LoopGuard: each rule of the contract in guard.py's docstring, and the order in which stops win."""

from __future__ import annotations

from typing import Any

import pytest

from tether.limits import Limits, StopReason
from tether.loop.guard import LoopGuard
from tether.messages import ToolCall, ToolResult
from tether.usage import Price, Tier, Usage, cost_of

PRICE = Price(input=1.0, output=1.0)
"""One dollar per million tokens, so a million tokens cost exactly $1."""


def calls(n: int) -> list[ToolCall]:
    return [ToolCall(f"c{i}", "tool", {}) for i in range(n)]


def ok() -> ToolResult:
    return ToolResult("c", "tool", "fine")


def calls_for(results: list[ToolResult]) -> list[ToolCall]:
    """The calls these results answer (distinct arguments, so that no turn repeats another)."""
    return [ToolCall(r.call_id, r.name, {"position": n}) for n, r in enumerate(results)]


def failed() -> ToolResult:
    return ToolResult("c", "tool", "boom", is_error=True, code="tool_failed")


def guard(**limits: Any) -> LoopGuard:
    return LoopGuard(Limits(**limits), None)


# --- tool calls ---------------------------------------------------------------------------------------------


def test_per_turn_cap_refuses_the_excess_calls_in_model_order_with_a_reason() -> None:
    g = guard(max_tool_calls_per_turn=2)
    verdicts = g.admit(calls(4))
    assert verdicts[:2] == [None, None]
    for reason in verdicts[2:]:
        assert isinstance(reason, str)
        assert "4 tool calls" in reason
        assert "at most 2" in reason
    assert g.tool_calls == 2


def test_per_turn_refusals_do_not_stop_the_run() -> None:
    g = guard(max_tool_calls_per_turn=1)
    g.admit(calls(3))
    g.record_turn()
    assert g.after_turn() is None


def test_calls_refused_per_turn_do_not_count_towards_the_run_total() -> None:
    g = guard(max_tool_calls_per_turn=1, max_tool_calls=2)
    assert g.admit(calls(3))[0] is None
    assert g.admit(calls(1)) == [None]
    assert g.tool_calls == 2


def test_total_cap_is_counted_exactly_across_turns() -> None:
    g = guard(max_tool_calls=3, max_tool_calls_per_turn=None)
    assert g.admit(calls(2)) == [None, None]
    g.record_turn()
    assert g.after_turn() is None
    verdicts = g.admit(calls(2))
    assert verdicts[0] is None
    assert isinstance(verdicts[1], str)
    assert "limit of 3 tool calls" in verdicts[1]
    assert g.tool_calls == 3


def test_a_call_past_the_total_cap_stops_the_run_with_max_tool_calls() -> None:
    g = guard(max_tool_calls=1)
    g.admit(calls(2))
    g.record_turn()
    stop = g.after_turn()
    assert stop is not None
    assert stop.reason is StopReason.MAX_TOOL_CALLS
    assert "1 tool calls" in stop.detail


def test_reaching_the_total_cap_exactly_runs_every_call_and_does_not_stop_yet() -> None:
    g = guard(max_tool_calls=3)
    assert g.admit(calls(3)) == [None, None, None]
    g.record_turn()
    assert g.after_turn() is None


def test_no_tool_call_caps_admit_everything() -> None:
    g = guard(max_tool_calls=None, max_tool_calls_per_turn=None)
    assert g.admit(calls(500)) == [None] * 500


# --- consecutive errors -------------------------------------------------------------------------------------


def test_consecutive_error_turns_stop_the_run() -> None:
    g = guard(max_consecutive_errors=2)
    g.record_results(calls_for([failed(), failed()]), [failed(), failed()])
    assert g.after_turn() is None
    g.record_results(calls_for([failed()]), [failed()])
    stop = g.after_turn()
    assert stop is not None
    assert stop.reason is StopReason.CONSECUTIVE_ERRORS
    assert "2 turns" in stop.detail


def test_a_turn_with_one_successful_result_resets_the_error_count() -> None:
    g = guard(max_consecutive_errors=2)
    g.record_results(calls_for([failed()]), [failed()])
    g.record_results(calls_for([failed(), ok()]), [failed(), ok()])
    g.record_results(calls_for([failed()]), [failed()])
    assert g.after_turn() is None
    assert g.error_turns == 1


def test_consecutive_errors_limit_none_never_stops() -> None:
    g = guard(max_consecutive_errors=None)
    for _ in range(50):
        g.record_results(calls_for([failed()]), [failed()])
    assert g.after_turn() is None


# --- invalid responses --------------------------------------------------------------------------------------


def test_invalid_answers_stop_only_after_the_retries_are_used_up() -> None:
    g = guard(invalid_response_retries=1)
    assert g.record_invalid("empty answer") is None
    stop = g.record_invalid("empty answer")
    assert stop is not None
    assert stop.reason is StopReason.INVALID_RESPONSE
    assert "empty answer" in stop.detail
    assert "2 attempts" in stop.detail


def test_zero_retries_stop_at_the_first_invalid_answer() -> None:
    stop = guard(invalid_response_retries=0).record_invalid("cut off")
    assert stop is not None
    assert stop.reason is StopReason.INVALID_RESPONSE


def test_an_accepted_turn_resets_the_invalid_count() -> None:
    g = guard(invalid_response_retries=1)
    assert g.record_invalid("empty") is None
    g.record_turn()
    assert g.record_invalid("empty") is None


def test_rejected_answers_do_not_count_as_turns() -> None:
    g = guard(max_turns=1, invalid_response_retries=5)
    g.record_invalid("empty")
    g.record_invalid("empty")
    assert g.turns == 0
    assert g.after_turn() is None


# --- turns --------------------------------------------------------------------------------------------------


def test_turn_limit_stops_after_the_last_allowed_turn() -> None:
    g = guard(max_turns=2)
    g.record_turn()
    assert g.after_turn() is None
    g.record_turn()
    stop = g.after_turn()
    assert stop is not None
    assert stop.reason is StopReason.MAX_TURNS
    assert "2 turns" in stop.detail


def test_turn_limit_none_never_stops() -> None:
    g = guard(max_turns=None)
    for _ in range(1000):
        g.record_turn()
    assert g.after_turn() is None


# --- budget -------------------------------------------------------------------------------------------------


def budget_stop_at_the_second_call(g: LoopGuard, first: Usage, second: Usage) -> str:
    """Record two calls, each followed by its turn: the first must not stop the run, the second must stop it
    for the budget. Returns the stop's detail."""
    g.record_call(first)
    assert g.after_turn() is None
    g.record_call(second)
    stop = g.after_turn()
    assert stop is not None
    assert stop.reason is StopReason.BUDGET
    return stop.detail


def test_budget_stops_once_the_run_has_cost_the_limit() -> None:
    g = LoopGuard(Limits(max_cost_usd=1.0), PRICE)
    detail = budget_stop_at_the_second_call(g, Usage(input_tokens=600_000), Usage(output_tokens=400_000))
    assert "$1.0000" in detail


def test_budget_is_checked_when_an_answer_is_rejected() -> None:
    g = LoopGuard(Limits(max_cost_usd=0.5, invalid_response_retries=3), PRICE)
    g.record_call(Usage(output_tokens=600_000))
    stop = g.record_invalid("empty")
    assert stop is not None
    assert stop.reason is StopReason.BUDGET


def test_budget_without_a_known_price_never_stops_and_has_no_cost() -> None:
    g = LoopGuard(Limits(max_cost_usd=0.01), None)
    g.record_call(Usage(input_tokens=10**9, output_tokens=10**9))
    assert g.cost is None
    assert g.after_turn() is None


def test_usage_and_cost_add_up_over_calls() -> None:
    g = LoopGuard(Limits(), Price(input=2.0, output=4.0))
    g.record_call(Usage(input_tokens=1_000_000, requests=1))
    g.record_call(Usage(output_tokens=500_000, requests=1))
    assert g.usage == Usage(input_tokens=1_000_000, output_tokens=500_000, requests=2)
    assert g.cost is not None
    assert g.cost.total_usd == 4.0


LONG_CONTEXT = Price(input=1.0, output=1.0, tiers=(Tier(above_input_tokens=200_000, input=2.0, output=2.0),))
"""$1 per million tokens, $2 for every token of a request whose prompt passes 200k tokens."""


def test_each_call_is_priced_by_its_own_prompt_not_by_the_runs_total() -> None:
    g = LoopGuard(Limits(), LONG_CONTEXT)
    g.record_call(Usage(input_tokens=150_000))
    g.record_call(Usage(input_tokens=150_000))
    assert g.cost is not None
    assert g.cost.total_usd == pytest.approx(0.30), "two 150k prompts: both at the base rate"
    assert cost_of(g.usage, LONG_CONTEXT).total_usd == pytest.approx(0.60), "their sum would pass the tier"


def test_a_call_past_the_tier_is_charged_the_tier_rate_and_can_reach_the_budget_alone() -> None:
    g = LoopGuard(Limits(max_cost_usd=0.5), LONG_CONTEXT)
    budget_stop_at_the_second_call(g, Usage(input_tokens=100_000), Usage(input_tokens=200_001))
    assert g.cost is not None
    assert g.cost.total_usd == pytest.approx(0.1 + 200_001 * 2.0 / 1e6)


# --- which stop wins ----------------------------------------------------------------------------------------


def everything_reached(*, budget: bool, tool_calls: bool, errors: bool, turns: bool) -> StopReason | None:
    """One turn that reaches each chosen limit at once."""
    limits = Limits(
        max_cost_usd=0.5 if budget else None,
        max_tool_calls=1 if tool_calls else None,
        max_consecutive_errors=1 if errors else None,
        max_turns=1 if turns else None,
    )
    g = LoopGuard(limits, PRICE)
    g.record_call(Usage(output_tokens=1_000_000))
    g.record_turn()
    g.admit(calls(2))
    g.record_results(calls_for([failed(), failed()]), [failed(), failed()])
    stop = g.after_turn()
    return None if stop is None else stop.reason


def test_budget_wins_over_every_other_stop() -> None:
    assert everything_reached(budget=True, tool_calls=True, errors=True, turns=True) is StopReason.BUDGET


def test_tool_calls_win_over_consecutive_errors_and_turns() -> None:
    assert everything_reached(budget=False, tool_calls=True, errors=True, turns=True) is StopReason.MAX_TOOL_CALLS


def test_consecutive_errors_win_over_turns() -> None:
    reason = everything_reached(budget=False, tool_calls=False, errors=True, turns=True)
    assert reason is StopReason.CONSECUTIVE_ERRORS


def test_turns_stop_when_nothing_else_is_reached() -> None:
    assert everything_reached(budget=False, tool_calls=False, errors=False, turns=True) is StopReason.MAX_TURNS
    assert everything_reached(budget=False, tool_calls=False, errors=False, turns=False) is None
