"""The Tool type and @tool: construction and its checks, direct calls, ``bind()`` (validated calls, sync
functions on a tool thread), ``Done``, and ``render_output`` (a return value as the text the model reads)."""

import dataclasses
import datetime
import inspect
import json
import threading
from collections.abc import AsyncIterator, Iterator
from enum import IntEnum
from typing import Any

import pytest
from pydantic import BaseModel

from tether.errors import ConfigInvalid, InvalidArguments
from tether.tools.base import Done, Tool, render_output, tool

# --- @tool -----------------------------------------------------------------------------------------------------


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def fetch(url: str) -> str:
    """Fetch a page."""
    return f"page at {url}"


def test_tool_on_a_sync_function_takes_name_and_description_from_it() -> None:
    assert isinstance(add, Tool)
    assert add.name == "add"
    assert add.description == "Add two integers."
    assert add.is_async is False


def test_tool_on_an_async_function_is_async() -> None:
    assert fetch.name == "fetch"
    assert fetch.description == "Fetch a page."
    assert fetch.is_async is True


def test_tool_defaults_are_not_concurrent_and_no_timeout() -> None:
    assert add.concurrent is False
    assert add.timeout is None


def test_tool_with_options_overrides_name_description_concurrency_and_timeout() -> None:
    @tool(name="sum-two", description="Sums.", concurrent=True, timeout=2.5)
    def add_numbers(a: int, b: int) -> int:
        """Ignored docstring."""
        return a + b

    assert add_numbers.name == "sum-two"
    assert add_numbers.description == "Sums."
    assert add_numbers.concurrent is True
    assert add_numbers.timeout == 2.5


def test_explicit_empty_description_replaces_the_docstring() -> None:
    @tool(description="")
    def quiet() -> None:
        """A docstring the model should not see."""

    assert quiet.description == ""


def test_function_without_docstring_has_an_empty_description() -> None:
    def bare(x: int) -> int:
        return x

    assert tool(bare).description == ""


def test_calling_a_sync_tool_calls_the_function_directly() -> None:
    caller = threading.get_ident()

    @tool
    def where(x: int) -> tuple[int, int]:
        """Where it ran."""
        return x * 2, threading.get_ident()

    assert where(21) == (42, caller)


def test_calling_a_tool_skips_validation() -> None:
    # A direct call is a plain function call: "2" is not coerced, and no InvalidArguments is raised.
    assert add("2", "3") == "23"


async def test_calling_an_async_tool_returns_its_coroutine() -> None:
    pending = fetch("x")
    assert inspect.iscoroutine(pending)
    assert await pending == "page at x"


def test_repr_names_the_tool_and_its_options() -> None:
    assert repr(Tool.from_function(add.function, concurrent=True, timeout=3)) == (
        "Tool(name='add', concurrent=True, timeout=3)"
    )


# --- construction checks ---------------------------------------------------------------------------------------


def _noop() -> None:
    """Nothing."""


@pytest.mark.parametrize("name", ["a", "read_file", "web-search", "X9", "n" * 64])
def test_valid_tool_names_are_accepted(name: str) -> None:
    assert Tool.from_function(_noop, name=name).name == name


@pytest.mark.parametrize("name", ["n" * 65, "two words", "dotted.name", "slash/name", "ünïcode", "tab\tname"])
def test_invalid_tool_names_are_rejected(name: str) -> None:
    with pytest.raises(ConfigInvalid) as caught:
        Tool.from_function(_noop, name=name)
    assert caught.value.code == "config_invalid"


def test_tool_name_with_a_trailing_newline_is_rejected() -> None:
    with pytest.raises(ConfigInvalid):
        Tool.from_function(_noop, name="search\n")


def test_explicit_empty_tool_name_is_rejected() -> None:
    with pytest.raises(ConfigInvalid):
        Tool.from_function(_noop, name="")


@pytest.mark.parametrize("name", ["", "bad name"])
def test_invalid_name_is_rejected_for_schema_tools_too(name: str) -> None:
    with pytest.raises(ConfigInvalid):
        Tool.from_schema(name, "Bad.", {}, lambda arguments: None)


@pytest.mark.parametrize("timeout", [0, -1, -0.5, float("nan")])
def test_non_positive_timeouts_are_rejected(timeout: float) -> None:
    with pytest.raises(ConfigInvalid, match="timeout") as caught:
        Tool.from_function(_noop, timeout=timeout)
    assert caught.value.code == "config_invalid"


def test_positive_fractional_timeout_is_accepted() -> None:
    assert Tool.from_function(_noop, timeout=0.25).timeout == 0.25


def test_generator_function_is_rejected() -> None:
    def lines() -> Iterator[str]:
        """Yields."""
        yield "a"

    with pytest.raises(ConfigInvalid, match="generator"):
        tool(lines)


def test_async_generator_function_is_rejected() -> None:
    async def chunks() -> AsyncIterator[str]:
        """Yields asynchronously."""
        yield "a"

    with pytest.raises(ConfigInvalid, match="generator"):
        tool(chunks)


# --- bind -----------------------------------------------------------------------------------------------------


async def test_bind_returns_an_awaitable_call_with_the_result() -> None:
    assert await add.bind({"a": 2, "b": 3})() == 5


async def test_bind_validates_before_anything_runs() -> None:
    calls: list[int] = []

    @tool
    def record(n: int) -> None:
        """Record."""
        calls.append(n)

    with pytest.raises(InvalidArguments):
        record.bind({"n": "not a number"})
    assert calls == []


async def test_bind_does_not_run_the_function_until_the_call_is_made() -> None:
    calls: list[int] = []

    @tool
    def record(n: int) -> None:
        """Record."""
        calls.append(n)

    call = record.bind({"n": 1})
    assert calls == []
    await call()
    assert calls == [1]


async def test_bound_sync_function_runs_on_a_tool_thread_not_the_event_loop_thread() -> None:
    @tool
    def where() -> int:
        """Where it ran."""
        return threading.get_ident()

    ran_on = await where.bind({})()
    assert ran_on != threading.get_ident()


async def test_bound_sync_function_does_not_block_the_event_loop() -> None:
    # The tool waits for an event the loop sets only after starting the call: were the tool run on the loop
    # thread, the call would block until the wait timed out and the tool would see the event unset.
    loop_ran = threading.Event()

    @tool
    def wait_for_loop() -> bool:
        """Blocks until the event loop has done some work."""
        return loop_ran.wait(timeout=5)

    pending = wait_for_loop.bind({})()
    loop_ran.set()
    assert await pending is True


async def test_bound_async_function_runs_on_the_event_loop_thread() -> None:
    @tool
    async def where() -> int:
        """Where it ran."""
        return threading.get_ident()

    assert await where.bind({})() == threading.get_ident()


async def test_bound_sync_function_exception_reaches_the_caller() -> None:
    @tool
    def fail() -> None:
        """Fails."""
        raise LookupError("no such row")

    with pytest.raises(LookupError, match="no such row"):
        await fail.bind({})()


async def test_bound_schema_tool_runs_a_sync_function_on_a_tool_thread() -> None:
    t = Tool.from_schema("where", "Where.", {}, lambda arguments: (arguments, threading.get_ident()))
    arguments, ran_on = await t.bind({"k": 1})()
    assert arguments == {"k": 1}
    assert ran_on != threading.get_ident()


# --- Done -----------------------------------------------------------------------------------------------------


def test_done_carries_its_message() -> None:
    done = Done("All files renamed.")
    assert done.message == "All files renamed."
    assert str(done) == "All files renamed."


def test_done_is_raisable_from_a_tool() -> None:
    @tool
    def finish() -> None:
        """Finish the run."""
        raise Done("finished")

    with pytest.raises(Done) as caught:
        finish()
    assert caught.value.message == "finished"


# --- render_output --------------------------------------------------------------------------------------------


class Reading(BaseModel):
    sensor: str
    value: float


@dataclasses.dataclass
class Event:
    name: str
    day: datetime.date


class Opaque:
    def __repr__(self) -> str:
        return "<Opaque>"


def test_render_output_returns_strings_unchanged() -> None:
    assert render_output('already "text"\n') == 'already "text"\n'
    assert render_output("") == ""


def test_render_output_of_none_says_there_was_no_output() -> None:
    assert render_output(None) == "(no output)"


class Level(IntEnum):
    LOW = 1
    HIGH = 2


def test_render_output_writes_numbers_and_booleans_as_json_does() -> None:
    values = [0, -7, 42, 10**300, True, False, 2.5, float("inf"), Level.HIGH]
    assert [render_output(value) for value in values] == [json.dumps(value) for value in values]


def test_render_output_of_dicts_and_lists_is_json() -> None:
    assert render_output({"ok": True, "items": [1, None]}) == '{"ok": true, "items": [1, null]}'
    assert render_output([1, "two"]) == '[1, "two"]'


def test_render_output_keeps_non_ascii_text_readable() -> None:
    assert render_output({"city": "Zürich"}) == '{"city": "Zürich"}'


def test_render_output_of_scalars_is_json() -> None:
    assert render_output(0) == "0"
    assert render_output(False) == "false"
    assert render_output(1.5) == "1.5"


def test_render_output_of_a_pydantic_model_is_json() -> None:
    assert render_output(Reading(sensor="t1", value=21.5)) == '{"sensor": "t1", "value": 21.5}'


def test_render_output_of_a_dataclass_is_json() -> None:
    assert render_output(Event("launch", datetime.date(2024, 5, 1))) == '{"name": "launch", "day": "2024-05-01"}'


def test_render_output_of_models_nested_in_containers_is_json() -> None:
    assert render_output({"readings": [Reading(sensor="a", value=1)]}) == (
        '{"readings": [{"sensor": "a", "value": 1.0}]}'
    )


def test_render_output_of_an_unserializable_object_falls_back_to_repr() -> None:
    assert render_output(Opaque()) == "<Opaque>"


def test_render_output_of_a_container_holding_an_unserializable_object_falls_back_to_repr() -> None:
    assert render_output({"thing": Opaque()}) == "{'thing': <Opaque>}"


def test_render_output_of_a_self_referencing_list_falls_back_to_repr() -> None:
    loop: list[Any] = []
    loop.append(loop)
    assert render_output(loop) == "[[...]]"
