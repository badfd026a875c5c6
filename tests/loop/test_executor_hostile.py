"""Tools that misbehave cannot take the loop down: whatever a tool raises (``SystemExit``, ``KeyboardInterrupt``,
a ``CancelledError`` nobody asked for, any ``BaseException``), whatever it returns, however its validator or
its exception's ``__str__`` fails, the model gets an error result and the run goes on; a real cancellation or
timeout still works as ``loop/interrupts.py`` says."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import AfterValidator

from tests.helpers import assert_valid, check_order
from tether import Agent, Done, Limits, tool
from tether.events import RunEvent, ToolCallStarted, ToolResultReceived
from tether.messages import ToolResult
from tether.providers.scripted import ScriptedProvider, call, parallel, reply
from tether.sessions import SQLiteSessionStore
from tether.tools.base import Tool

BASE_EXCEPTIONS: list[type[BaseException]] = [
    BaseException, SystemExit, KeyboardInterrupt, GeneratorExit, asyncio.CancelledError, Exception, RuntimeError,
    MemoryError, RecursionError, ValueError, TimeoutError, OSError, ExceptionGroup, BaseExceptionGroup,
]  # fmt: skip
"""What a tool may raise itself; each also subclassed, as a library's own exceptions are."""


def raiser(kind: type[BaseException], subclass: bool) -> type[BaseException]:
    if not subclass:
        return kind
    return type(f"Custom{kind.__name__}", (kind,), {})


def make(kind: type[BaseException]) -> BaseException:
    if issubclass(kind, BaseExceptionGroup):
        inner = ValueError("one") if issubclass(kind, Exception) else KeyboardInterrupt("two")
        return kind("several", [inner])
    return kind("raised by the tool")


def failing_tool(error: BaseException, *, is_async: bool) -> Tool:
    if is_async:

        async def explode_async() -> str:
            """Fails."""
            raise error

        return Tool.from_function(explode_async, name="explode")

    def explode() -> str:
        """Fails."""
        raise error

    return Tool.from_function(explode, name="explode")


async def run_one(tool_: Tool, arguments: dict[str, Any] | None = None) -> list[RunEvent]:
    model = ScriptedProvider([call(tool_.name, arguments or {}), reply("carried on")])
    events: list[RunEvent] = []
    result = await Agent(model, tools=[tool_], on_event=events.append).run("go")
    assert result.stop_reason == "complete", result.detail
    assert result.text == "carried on"
    assert_valid(result)
    check_order(events)
    return events


def only_result(events: list[RunEvent]) -> ToolResultReceived:
    (received,) = [e for e in events if isinstance(e, ToolResultReceived)]
    return received


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(BASE_EXCEPTIONS), subclass=st.booleans(), is_async=st.booleans())
def test_whatever_a_tool_raises_is_a_tool_failed_result_and_the_run_goes_on(
    kind: type[BaseException], subclass: bool, is_async: bool
) -> None:
    error = make(raiser(kind, subclass))
    events = asyncio.run(run_one(failing_tool(error, is_async=is_async)))
    received = only_result(events)
    assert received.result.is_error
    assert received.result.code == "tool_failed"
    assert received.result.content.startswith(f"Tool 'explode' failed: {type(error).__name__}")
    assert received.exception is error


async def test_a_cancelled_error_raised_by_one_of_several_concurrent_tools_fails_only_that_call() -> None:
    @tool(concurrent=True)
    async def flaky(n: int) -> int:
        """Fails on 1."""
        await asyncio.sleep(0)
        if n == 1:
            raise asyncio.CancelledError("not a cancellation")
        return n

    model = ScriptedProvider([parallel(*[call("flaky", {"n": n}) for n in range(3)]), reply("done")])
    result = await Agent(model, tools=[flaky]).run("go")
    assert result.stop_reason == "complete"
    results = result.messages[2].tool_results
    assert [(r.content, r.code) for r in results] == [
        ("0", None),
        ("Tool 'flaky' failed: CancelledError: not a cancellation", "tool_failed"),
        ("2", None),
    ]


async def test_a_real_cancel_still_cancels_a_tool_that_answers_it_with_a_cancelled_error_of_its_own() -> None:
    started = asyncio.Event()

    @tool
    async def stubborn() -> str:
        """Replaces the cancellation it gets with its own."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise asyncio.CancelledError("cleaning up") from None
        return "unreachable"

    events: list[RunEvent] = []
    agent = Agent(ScriptedProvider([call("stubborn", {}), reply("no")]), tools=[stubborn], on_event=events.append)
    handle = agent.start("go")
    await started.wait()
    handle.cancel()
    result = await handle
    assert result.stop_reason == "cancelled"
    assert result.messages[-1].tool_results[0].code == "cancelled"
    assert_valid(result)
    check_order(events)


async def test_a_host_cancelling_the_task_during_a_tool_still_gets_cancelled_error() -> None:
    started = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Waits."""
        started.set()
        await asyncio.Event().wait()
        return "unreachable"

    agent = Agent(ScriptedProvider([call("wait_forever", {}), reply("no")]), tools=[wait_forever])
    task = asyncio.create_task(agent.run("go"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_tool_timeout_is_still_a_timeout_not_a_failure() -> None:
    @tool(timeout=0.01)
    async def slow() -> str:
        """Too slow."""
        await asyncio.Event().wait()
        return "unreachable"

    received = only_result(await run_one(slow))
    assert received.result.code == "tool_timeout"


# --- return values that cannot be rendered ------------------------------------------------------------------


class HostileRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")

    __str__ = __repr__


class ExitingRepr:
    def __repr__(self) -> str:
        raise SystemExit("repr exits")


def deep_list(depth: int) -> list[Any]:
    root: list[Any] = []
    current = root
    for _ in range(depth):
        current.append([])
        current = current[0]
    return root


def self_referencing() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


UNRENDERABLE: dict[str, Callable[[], Any]] = {
    "huge int": lambda: 10**5000,
    "huge int in a dict": lambda: {"n": 10**5000},
    "repr raises": HostileRepr,
    "repr raises in a list": lambda: [HostileRepr()],
    "repr exits": ExitingRepr,
    "deep list": lambda: deep_list(50_000),
    "non-string keys with a hostile key": lambda: {HostileRepr(): 1},
}
"""Values neither JSON nor repr can render: a ``tool_failed`` result saying why."""
AWKWARD: dict[str, tuple[Callable[[], Any], str]] = {
    "self-referencing list": (self_referencing, "[[...]]"),
    "tuple keys": (lambda: {(1, 2): "a"}, "{(1, 2): 'a'}"),
    "bytes that are not UTF-8": (lambda: b"\xff\xfe", "b'\\xff\\xfe'"),
    "lone surrogate": (lambda: "name-\udcff.txt", "name-\ufffd.txt"),
    "lone surrogate in JSON": (lambda: {"file": "\ud800"}, '{"file": "\ufffd"}'),
}
"""Values that render, if not as JSON: the text the model gets, always encodable as UTF-8."""


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(UNRENDERABLE)), is_async=st.booleans())
def test_a_value_that_cannot_be_rendered_is_a_tool_failed_result(name: str, is_async: bool) -> None:
    value = UNRENDERABLE[name]

    async def give_async() -> Any:
        """Return it."""
        return value()

    def give() -> Any:
        """Return it."""
        return value()

    events = asyncio.run(run_one(Tool.from_function(give_async if is_async else give, name="give")))
    result = only_result(events).result
    assert result.code == "tool_failed"
    assert result.content.startswith("The tool returned a value of type") or "failed: SystemExit" in result.content


@pytest.mark.parametrize("name", sorted(AWKWARD))
async def test_awkward_values_render_as_storable_text(name: str, tmp_path: Path) -> None:
    value, expected = AWKWARD[name]

    @tool
    def give() -> Any:
        """Return it."""
        return value()

    model = ScriptedProvider([call("give", {}), reply("ok")])
    async with SQLiteSessionStore(tmp_path / "s.db") as store:
        result = await Agent(model, tools=[give], store=store).run("go", session="s")
        saved = await store.load("s")
    (stored,) = saved.messages[2].tool_results
    assert result.stop_reason == "complete", result.detail
    assert stored == ToolResult(stored.call_id, "give", expected)
    stored.content.encode("utf-8")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    leaves=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5) | st.binary(max_size=5),
        lambda children: (
            st.lists(children, max_size=3)
            | st.dictionaries(st.text(max_size=3) | st.integers() | st.tuples(st.integers()), children, max_size=3)
        ),
        max_leaves=12,
    ),
    depth=st.integers(0, 3000),
)
def test_any_returned_value_gives_a_result_and_the_run_goes_on(leaves: Any, depth: int) -> None:
    value: Any = leaves
    for _ in range(depth):
        value = [value]

    @tool
    def give() -> Any:
        """Return it."""
        return value

    received = only_result(asyncio.run(run_one(give)))
    assert received.result.code in (None, "tool_failed")
    received.result.content.encode("utf-8")


# --- validators and exceptions that fail in their own way ---------------------------------------------------


def crash(value: int) -> int:
    raise RuntimeError("the validator itself broke")


async def test_a_validator_that_crashes_is_a_tool_failed_result() -> None:
    @tool
    def checked(n: Annotated[int, AfterValidator(crash)]) -> int:
        """Validated by a crashing validator."""
        return n

    received = only_result(await run_one(checked, {"n": 1}))
    assert received.result.code == "tool_failed"
    assert received.result.content == (
        "Tool 'checked' failed while checking its arguments: RuntimeError: the validator itself broke"
    )


async def test_an_exception_whose_message_cannot_be_read_is_still_described() -> None:
    class Mute(Exception):
        def __str__(self) -> str:
            raise ValueError("no message")

    @tool
    def mute() -> str:
        """Fails mutely."""
        raise Mute()

    received = only_result(await run_one(mute))
    assert received.result.content == "Tool 'mute' failed: Mute (its message could not be read)"


async def test_done_with_a_message_that_is_not_text_still_ends_the_run() -> None:
    @tool
    def finish() -> str:
        """Ends the run."""
        raise Done({"answer": 42})  # type: ignore[arg-type]

    events: list[RunEvent] = []
    model = ScriptedProvider([call("finish", {}), reply("never asked")])
    result = await Agent(model, tools=[finish], on_event=events.append).run("go")
    assert result.stop_reason == "done_tool"
    assert result.text == '{"answer": 42}'
    assert result.messages[-1].tool_results[0].content == '{"answer": 42}'
    assert sum(isinstance(e, ToolCallStarted) for e in events) == 1


async def test_a_tool_that_exits_during_a_long_session_does_not_stop_the_next_runs(tmp_path: Path) -> None:
    @tool
    def quit_() -> str:
        """Exit."""
        raise SystemExit(0)

    model = ScriptedProvider([call("quit_", {}), reply("first"), call("quit_", {}), reply("second")])
    agent = Agent(model, tools=[quit_], limits=Limits(max_turns=4))
    first = await agent.run("one")
    second = await agent.run("two", history=first.messages)
    assert (first.text, second.text) == ("first", "second")
    assert [r.code for m in second.messages for r in m.tool_results] == ["tool_failed", "tool_failed"]
