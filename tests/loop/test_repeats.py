"""Repeated turns (loop/repeats.py): answered from the earlier result, stopped the third time."""

from __future__ import annotations

from tests.helpers import assert_valid
from tether import Agent, Limits, tool
from tether.providers.scripted import ScriptedProvider, call, parallel, reply

runs: list[tuple[int, int]] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    runs.append((a, b))
    return a + b


def setup_function() -> None:
    runs.clear()


async def test_a_repeated_call_gets_the_earlier_result_with_a_note_and_is_not_run_again() -> None:
    model = ScriptedProvider([call("add", {"a": 17, "b": 25}), call("add", {"b": 25, "a": 17}), reply("42")])
    result = await Agent(model, tools=[add]).run("17+25?")
    assert runs == [(17, 25)]
    repeated = result.messages[4].tool_results[0]
    assert repeated.content.startswith("42\n\n[Already answered")
    assert not repeated.is_error
    assert result.text == "42"
    assert result.stop_reason == "complete"


async def test_the_third_identical_turn_stops_the_run_with_an_answer_from_what_was_gathered() -> None:
    same = call("add", {"a": 17, "b": 25})
    model = ScriptedProvider([same, same, same, reply("17 + 25 = 42")])
    result = await Agent(model, tools=[add]).run("17+25?")
    assert result.stop_reason == "consecutive_errors"
    assert "3 turns in a row" in result.detail
    assert result.text == "17 + 25 = 42", "the tools-off summary call gives the answer"
    assert result.degraded
    assert runs == [(17, 25)]
    stopped = result.messages[6].tool_results[0]
    assert stopped.code == "permission_denied"
    assert stopped.content.startswith("42\n\n"), "the earlier result is still there for the last answer"
    assert_valid(result)


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
