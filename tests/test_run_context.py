"""The run context: what tools and a system function know of their run, deps checked before any request, and
instructions given per run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.helpers import assert_valid, check_order
from tether import Agent, Message, RunContext, StopReason, tool
from tether.errors import ConfigInvalid
from tether.events import RunCompleted, RunEvent
from tether.providers.scripted import ScriptedProvider, call, reply
from tether.sessions import MemorySessionStore


@dataclass
class User:
    name: str


@dataclass
class Admin(User):
    level: int = 1


seen: list[dict[str, Any]] = []


@tool
def whoami(ctx: RunContext[User], greeting: str) -> str:
    """Greet the current user."""
    seen.append(
        {
            "deps": ctx.deps, "run_id": ctx.run_id, "turn": ctx.turn, "call": ctx.tool_call_id, "name": ctx.tool_name,
            "messages": ctx.messages, "input": ctx.usage.input_tokens, "retry": ctx.retry,
        }
    )  # fmt: skip
    return f"{greeting}, {ctx.deps.name}"


@pytest.fixture(autouse=True)
def _forget() -> None:
    seen.clear()


async def test_a_tool_is_handed_the_runs_context_which_the_model_neither_sees_nor_sets() -> None:
    model = ScriptedProvider([call("whoami", {"greeting": "hi"}, id="c1"), reply("ok")])
    agent = Agent(model, tools=[whoami], deps_type=User)
    result = await agent.run("who am I?", deps=User("ada"))
    assert result.messages[2].tool_results[0].content == "hi, ada"
    [context] = seen
    assert context["deps"] == User("ada")
    assert context["run_id"] == result.run_id
    assert (context["turn"], context["call"], context["name"]) == (1, "c1", "whoami")
    assert context["messages"] == result.messages[:2], "the transcript so far, up to the answer that called it"
    assert context["input"] == result.turn_usage[0].input_tokens, "the usage of the calls made so far"
    [offered] = model.requests[0].tools
    assert offered.parameters["properties"] == {"greeting": {"type": "string"}}
    assert offered.parameters["required"] == ["greeting"]
    assert_valid(result)


async def test_arguments_naming_the_context_are_refused_and_the_tool_does_not_run() -> None:
    model = ScriptedProvider([call("whoami", {"greeting": "hi", "ctx": {"deps": "forged"}}), reply("ok")])
    result = await Agent(model, tools=[whoami], deps_type=User).run("x", deps=User("ada"))
    [answer] = result.messages[2].tool_results
    assert answer.is_error
    assert answer.code == "invalid_arguments"
    assert "ctx" in answer.content
    assert seen == []


async def test_retry_counts_the_tools_failed_calls_just_before_this_one() -> None:
    model = ScriptedProvider(
        [
            call("whoami", {}), call("whoami", {"greeting": 3}), call("whoami", {"greeting": "hi"}),
            call("whoami", {"greeting": "again"}), reply("ok"),
        ]
    )  # fmt: skip
    result = await Agent(model, tools=[whoami], deps_type=User).run("x", deps=User("ada"))
    assert [r.is_error for m in result.messages if m.role == "tool" for r in m.tool_results] == [
        True, True, False, False,
    ]  # fmt: skip
    assert [s["retry"] for s in seen] == [2, 0]


async def test_a_tool_ends_the_run_with_an_answer_through_its_context() -> None:
    @tool
    def finish(ctx: RunContext[None], answer: str) -> str:
        """Give the final answer."""
        ctx.stop(f"final: {answer}")

    model = ScriptedProvider([call("finish", {"answer": "42"})])
    result = await Agent(model, tools=[finish]).run("x")
    assert (result.stop_reason, result.text) == (StopReason.DONE_TOOL, "final: 42")
    assert_valid(result)


async def test_an_untyped_context_and_an_async_tool_take_any_deps() -> None:
    @tool
    async def echo(ctx: RunContext, word: str) -> str:
        """Echo with the deps."""
        return f"{word} {ctx.deps!r}"

    model = ScriptedProvider([call("echo", {"word": "hi"}), reply("ok")])
    agent: Agent[Any] = Agent(model, tools=[echo])
    result = await agent.run("x", deps={"k": 1})
    assert result.messages[2].tool_results[0].content == "hi {'k': 1}"


def test_the_context_must_be_the_first_parameter() -> None:
    def late(word: str, ctx: RunContext[User]) -> str:
        return word

    with pytest.raises(ConfigInvalid, match="must be the function's first parameter"):
        tool(late)


# --- deps checked when a run starts -------------------------------------------------------------------------


async def test_deps_of_the_wrong_type_are_refused_before_any_request() -> None:
    model = ScriptedProvider([reply("never")])
    agent = Agent(model, tools=[whoami], deps_type=User)
    with pytest.raises(ConfigInvalid, match=r"needs deps of type User.*given deps of type str"):
        await agent.run("x", deps="ada")  # type: ignore[arg-type]
    with pytest.raises(ConfigInvalid, match="given no deps"):
        agent.stream("x")
    assert model.requests == []
    assert (await agent.run("x", deps=Admin("root"))).text == "never", "a subclass is a User"


async def test_a_tools_declared_deps_are_checked_without_deps_type() -> None:
    model = ScriptedProvider([reply("never")])
    agent: Agent[Any] = Agent(model, tools=[whoami])
    with pytest.raises(ConfigInvalid, match="tool 'whoami' needs deps of type User"):
        await agent.run("x", deps=42)
    assert model.requests == []


def test_a_tool_whose_deps_disagree_with_the_agents_is_refused_when_the_agent_is_made() -> None:
    with pytest.raises(ConfigInvalid, match=r"tool 'whoami' takes RunContext\[User\] but the agent's deps_type is int"):
        Agent(ScriptedProvider([]), tools=[whoami], deps_type=int)
    Agent(ScriptedProvider([]), tools=[whoami], deps_type=Admin)  # narrower: fine


# --- instructions -------------------------------------------------------------------------------------------


async def test_a_system_function_is_evaluated_when_the_run_starts_and_replaces_a_stored_prompt() -> None:
    calls: list[tuple[Any, int, int]] = []

    async def system(ctx: RunContext[User]) -> str:
        calls.append((ctx.deps, ctx.turn, len(ctx.messages)))
        return f"You serve {ctx.deps.name}."

    model = ScriptedProvider([reply("hello"), reply("again")])
    agent = Agent(model, system=system, deps_type=User)
    events: list[RunEvent] = [e async for e in agent.stream("hi", deps=User("ada"))]
    check_order(events)
    completed = events[-1]
    assert isinstance(completed, RunCompleted)
    first = completed.result
    assert model.requests[0].system == "You serve ada."
    assert first.messages[0] == Message.system("You serve ada.")
    assert calls == [(User("ada"), 0, 1)], "once, before the first request, which is all it has: the prompt"
    stored = [Message.system("Old rules."), *first.messages[1:]]
    second = await agent.run("more", history=stored, deps=User("bob"))
    assert model.requests[1].system == "You serve bob."
    assert [m.role for m in second.messages].count("system") == 1
    assert second.new_messages[0].text == "more"
    assert_valid(second)


async def test_a_synchronous_system_function_runs_off_the_event_loop_and_may_give_none() -> None:
    import threading

    threads: list[threading.Thread] = []

    def system(ctx: RunContext[None]) -> str | None:
        threads.append(threading.current_thread())
        return None

    model = ScriptedProvider([reply("hello")])
    history = [Message.system("Stored."), Message.user("a"), Message.assistant("b")]
    result = await Agent(model, system=system).run("hi", history=history)
    assert threads
    assert threads[0] is not threading.main_thread()
    assert model.requests[0].system is None, "the function decides: a stored prompt is not read back"
    assert result.messages[0].role == "user"
    assert result.first_new_message == 2
    assert_valid(result)


async def test_run_instructions_follow_the_system_prompt_for_that_run_only() -> None:
    model = ScriptedProvider([reply("1"), reply("2"), reply("3")])
    agent = Agent(model, system="Be brief.")
    await agent.run("a", instructions="Answer in French.")
    await agent.run("b")
    await Agent(model).run("c", instructions="Only this.")
    assert [r.system for r in model.requests] == ["Be brief.\n\nAnswer in French.", "Be brief.", "Only this."]

    async def dynamic(ctx: RunContext[None]) -> str:
        return "Dynamic."

    model = ScriptedProvider([reply("1")])
    await Agent(model, system=dynamic).run("a", instructions="Extra.")
    assert model.requests[0].system == "Dynamic.\n\nExtra."


@pytest.mark.parametrize("outcome", ["raises", "not a string"])
async def test_a_failing_system_function_stops_the_run_before_any_request(outcome: str) -> None:
    def system(ctx: RunContext[None]) -> Any:
        if outcome == "raises":
            raise LookupError("no such tenant")
        return 42

    model = ScriptedProvider([reply("never")])
    result = await Agent(model, system=system).run("hi")
    assert result.stop_reason == StopReason.ERROR
    assert isinstance(result.error, ConfigInvalid)
    expected = "LookupError: no such tenant" if outcome == "raises" else "returned a int, not a string"
    assert "system function" in result.detail
    assert expected in result.detail
    assert model.requests == []
    assert_valid(result)


async def test_a_session_run_hands_its_tools_the_deps() -> None:
    model = ScriptedProvider([call("whoami", {"greeting": "hey"}), reply("ok")])
    agent = Agent(model, tools=[whoami], store=MemorySessionStore(), deps_type=User)
    result = await agent.run("x", session="s1", deps=User("eve"))
    assert result.messages[2].tool_results[0].content == "hey, eve"
