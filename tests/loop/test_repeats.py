"""Repeated turns (loop/repeats.py): answered from the earlier result, then the model is asked only to answer."""

from __future__ import annotations

from typing import Any

from tests.helpers import assert_valid, result_of, run_events
from tether import Agent, Limits, tool
from tether.events import TurnStarted
from tether.loop import repeats
from tether.messages import ToolCall
from tether.providers.scripted import ScriptedProvider, call, parallel, reply

runs: list[tuple[int, int]] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    runs.append((a, b))
    return a + b


def setup_function() -> None:
    runs.clear()


async def test_a_repeated_call_gets_the_earlier_result_as_it_was_and_is_not_run_again() -> None:
    model = ScriptedProvider([call("add", {"a": 17, "b": 25}), call("add", {"b": 25, "a": 17}), reply("42")])
    result = await Agent(model, tools=[add]).run("17+25?")
    assert runs == [(17, 25)]
    repeated = result.messages[4].tool_results[0]
    assert repeated.content == "42", "no note: a small model would copy it into its answer"
    assert (repeated.is_error, repeated.code) == (False, "repeated"), "not a refusal: its own outcome"
    assert result.text == "42"
    assert result.stop_reason == "complete"


async def test_after_a_repeat_the_next_request_lets_the_model_only_answer_and_its_answer_completes_the_run() -> None:
    model = ScriptedProvider([call("add", {"a": 17, "b": 25}), call("add", {"a": 17, "b": 25}), reply("42")])
    events = await run_events(Agent(model, tools=[add]), "17+25?")
    result = result_of(events)
    assert [request.tool_choice for request in model.requests] == ["auto", "auto", "none"]
    assert [(e.turn, e.final) for e in events if isinstance(e, TurnStarted)] == [(1, False), (2, False), (3, True)]
    assert (result.stop_reason, result.text, result.turns, result.degraded) == ("complete", "42", 3, False)
    assert_valid(result)


async def test_calls_sent_anyway_when_only_an_answer_is_allowed_are_dropped_and_their_text_is_the_answer() -> None:
    same = call("add", {"a": 17, "b": 25})
    model = ScriptedProvider([same, same, call("add", {"a": 17, "b": 25}, text="It is 42.")])
    result = await Agent(model, tools=[add]).run("17+25?")
    assert (result.stop_reason, result.text) == ("complete", "It is 42.")
    assert runs == [(17, 25)]
    assert result.messages[-1].tool_calls == (), "no call is stored without a result"
    assert_valid(result)


async def test_a_model_that_will_not_answer_after_a_repeat_ends_with_the_results_it_had() -> None:
    same = call("add", {"a": 17, "b": 25})
    model = ScriptedProvider([same], repeat_last=True)
    result = await Agent(model, tools=[add], limits=Limits(max_turns=10, invalid_response_retries=1)).run("17+25?")
    assert result.stop_reason == "consecutive_errors"
    assert "asked again for the calls it had the results of (add)" in result.detail
    assert result.text.endswith("returned:\n\n42"), "the best-effort answer is what the tool returned"
    assert result.degraded
    assert runs == [(17, 25)]
    assert len(model.requests) == 4, "two turns, then the answer asked for twice; no summary call after it"
    assert "No tools can be called now" in model.requests[3].messages[-1].text
    assert_valid(result)


async def test_the_results_a_model_had_are_each_listed_once_in_its_best_effort_answer() -> None:
    twice = parallel(call("add", {"a": 17, "b": 25}), call("add", {"a": 1, "b": 1}), call("add", {"a": 17, "b": 25}))
    model = ScriptedProvider([twice], repeat_last=True)
    result = await Agent(model, tools=[add], limits=Limits(max_turns=10, invalid_response_retries=1)).run("sums?")
    assert result.stop_reason == "consecutive_errors"
    assert result.text == "The model gave no final answer. Its last tool calls returned:\n\nadd:\n42\n\nadd:\n2"
    assert runs == [(17, 25), (1, 1), (17, 25)], "the same call twice in a turn runs twice: only the answer is once"


async def test_a_repeat_on_the_last_allowed_turn_ends_with_the_summary_call() -> None:
    same = call("add", {"a": 17, "b": 25})
    model = ScriptedProvider([same, same, reply("42")])
    result = await Agent(model, tools=[add], limits=Limits(max_turns=2)).run("17+25?")
    assert (result.stop_reason, result.text) == ("max_turns", "42")
    assert model.requests[-1].tool_choice == "none"


async def test_a_different_call_in_between_lets_the_same_call_run_again() -> None:
    model = ScriptedProvider(
        [call("add", {"a": 1, "b": 1}), call("add", {"a": 2, "b": 2}), call("add", {"a": 1, "b": 1}), reply("done")]
    )
    await Agent(model, tools=[add]).run("go")
    assert runs == [(1, 1), (2, 2), (1, 1)]


async def test_a_turn_that_repeats_only_part_of_the_previous_one_runs_in_full() -> None:
    model = ScriptedProvider(
        [
            parallel(call("add", {"a": 1, "b": 1}), call("add", {"a": 2, "b": 2})),
            call("add", {"a": 1, "b": 1}),
            reply("k"),
        ]
    )
    await Agent(model, tools=[add]).run("go")
    assert runs == [(1, 1), (2, 2), (1, 1)]


async def test_a_repeated_parallel_turn_is_answered_call_by_call() -> None:
    both = parallel(call("add", {"a": 1, "b": 1}), call("add", {"a": 2, "b": 2}))
    model = ScriptedProvider([both, parallel(call("add", {"a": 2, "b": 2}), call("add", {"a": 1, "b": 1})), reply("k")])
    result = await Agent(model, tools=[add]).run("go")
    assert runs == [(1, 1), (2, 2)]
    assert [r.content.split("\n")[0] for r in result.messages[4].tool_results] == ["4", "2"]


async def test_a_repeatable_tool_always_runs() -> None:
    ticks: list[int] = []

    @tool(repeatable=True)
    def clock() -> int:
        """The time."""
        ticks.append(len(ticks))
        return len(ticks)

    model = ScriptedProvider([call("clock"), call("clock"), call("clock"), call("clock"), reply("done")])
    result = await Agent(model, tools=[clock], limits=Limits(max_turns=10)).run("go")
    assert ticks == [0, 1, 2, 3]
    assert result.stop_reason == "complete"


async def test_a_call_that_failed_is_run_again_when_asked_again() -> None:
    attempts: list[int] = []

    @tool
    def flaky(n: int) -> str:
        """Fails the first time."""
        attempts.append(n)
        if len(attempts) == 1:
            raise ConnectionError("server went away")
        return "ok"

    same = call("flaky", {"n": 1})
    result = await Agent(ScriptedProvider([same, same, reply("done")]), tools=[flaky]).run("go")
    assert attempts == [1, 1]
    first, second = (message.tool_results[0] for message in result.messages if message.tool_results)
    assert (first.is_error, second.is_error, second.content) == (True, False, "ok")
    assert result.stop_reason == "complete"


async def test_a_turn_repeating_the_successes_of_a_partly_failed_turn_runs_in_full() -> None:
    @tool
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("no")

    model = ScriptedProvider([parallel(call("add", {"a": 1, "b": 1}), call("broken")), call("add", {"a": 1, "b": 1}),
                              reply("done")])  # fmt: skip
    await Agent(model, tools=[add, broken]).run("go")
    assert runs == [(1, 1), (1, 1)], "not the same turn as the one before, so it runs"


async def test_a_turn_that_is_no_repeat_is_told_apart_without_encoding_its_calls(monkeypatch: Any) -> None:
    """The arguments are compared as values first: only a turn that may repeat the one before is encoded."""

    def encoded(tool_call: ToolCall) -> str:
        raise AssertionError(f"{tool_call.name} was encoded")

    monkeypatch.setattr(repeats, "signature", encoded)
    then_two = parallel(call("add", {"a": 2, "b": 1}), call("add", {"a": 3, "b": 1}))
    model = ScriptedProvider([call("add", {"a": 1, "b": 1}), call("add", {"a": 2, "b": 1}), then_two, reply("done")])
    result = await Agent(model, tools=[add], limits=Limits(max_turns=10)).run("go")
    assert runs == [(1, 1), (2, 1), (2, 1), (3, 1)]
    assert result.stop_reason == "complete"


async def test_arguments_equal_as_numbers_but_written_differently_are_a_new_call() -> None:
    """``1`` and ``1.0`` are equal values but not the same call: the repeat is decided on the JSON the model sent."""
    model = ScriptedProvider([call("add", {"a": 1, "b": 1}), call("add", {"a": 1.0, "b": 1}), reply("done")])
    await Agent(model, tools=[add]).run("go")
    assert runs == [(1, 1), (1, 1)]


async def test_a_turn_of_more_calls_than_are_compared_one_by_one_is_still_recognised_as_a_repeat() -> None:
    many = [call("add", {"a": n, "b": 0}) for n in range(repeats._SCANNED + 4)]
    changed = [*many[:-1], call("add", {"a": -1, "b": 0})]
    model = ScriptedProvider([parallel(*many), parallel(*reversed(many)), reply("done")])
    await Agent(model, tools=[add], limits=Limits(max_tool_calls_per_turn=50)).run("go")
    assert len(runs) == len(many), "the reversed turn is the same calls: not run again"
    runs.clear()
    model = ScriptedProvider([parallel(*many), parallel(*changed), reply("done")])
    await Agent(model, tools=[add], limits=Limits(max_tool_calls_per_turn=50)).run("go")
    assert len(runs) == 2 * len(many), "one call differs: the whole turn runs"


async def test_a_call_with_a_nan_argument_asked_again_is_a_repeat() -> None:
    """NaN equals no other NaN, but the arguments read from the model's JSON share one: compared as values
    first, the repeated call is still found."""
    seen: list[float] = []

    @tool
    def scale(x: float) -> str:
        """Scale."""
        seen.append(x)
        return "scaled"

    model = ScriptedProvider([call("scale", {"x": float("nan")}), call("scale", {"x": float("nan")}), reply("done")])
    await Agent(model, tools=[scale]).run("go")
    assert len(seen) == 1
