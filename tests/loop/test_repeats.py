"""Repeated turns (loop/repeats.py): answered from the earlier result, then the model is asked only to answer."""

from __future__ import annotations

from tests.helpers import assert_valid, result_of, run_events
from tether import Agent, Limits, tool
from tether.events import TurnStarted
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
