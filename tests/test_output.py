"""Typed output in the loop: the three modes, retries with the errors, ``invalid_output``, unions, output
functions, validators, and the policy when output and function tools come in one turn (on ``ScriptedProvider``;
the wire forms are in ``tests/providers/test_output_wire.py``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from tests.helpers import assert_valid, check_order
from tether import Agent, Limits, PartialOutput, RunCompleted, RunContext, StopReason, TextDelta, tool
from tether.errors import ConfigInvalid, InvalidOutput
from tether.output import ModelRetry, OutputInvalid, OutputSchema, OutputSpec, read_json_answer, strict_schema
from tether.providers.scripted import ScriptedProvider, call, parallel, reply
from tether.sessions import MemorySessionStore


class Invoice(BaseModel):
    number: str
    total: float


@dataclass
class Point:
    x: int
    y: int


class Person(TypedDict):
    name: str
    age: int


@tool
def lookup(number: str) -> str:
    """Look an invoice up."""
    return f"invoice {number}: 12.5 EUR"


def text_model(*steps: Any) -> ScriptedProvider:
    """A model that cannot call tools but has a JSON Schema output (the native mode's default)."""
    return ScriptedProvider(list(steps), supports_tools=False, supports_output_schema=True)


# --- tool mode ----------------------------------------------------------------------------------------------


async def test_tool_mode_offers_an_output_tool_and_ends_with_its_valid_call() -> None:
    model = ScriptedProvider([call("lookup", {"number": "A1"}), call("final_result", {"number": "A1", "total": 12.5})])
    result = await Agent(model, tools=[lookup], output_type=Invoice).run("Total of A1?")
    assert result.stop_reason == StopReason.COMPLETE
    assert result.output == Invoice(number="A1", total=12.5)
    assert json.loads(result.text) == {"number": "A1", "total": 12.5}
    [own, output] = model.requests[0].tools
    assert (own.name, output.name) == ("lookup", "final_result")
    assert output.parameters["required"] == ["number", "total"]
    assert model.requests[0].output is None
    assert result.messages[-1].tool_results[0].content == "Final result processed."
    assert_valid(result)


async def test_an_invalid_output_call_is_answered_with_its_errors_and_asked_again() -> None:
    model = ScriptedProvider(
        [call("final_result", {"number": "A1", "total": "lots"}), call("final_result", {"number": "A1", "total": 3})]
    )
    result = await Agent(model, output_type=Invoice).run("x")
    assert result.output == Invoice(number="A1", total=3.0)
    [refused] = result.messages[2].tool_results
    assert refused.is_error
    assert refused.code == "invalid_output"
    assert "total: Input should be a valid number" in refused.content
    assert "lots" in refused.content
    assert_valid(result)


async def test_text_instead_of_the_output_call_is_sent_back_asking_for_the_call() -> None:
    model = ScriptedProvider([reply("It is 12.5."), call("final_result", {"number": "A1", "total": 12.5})])
    result = await Agent(model, output_type=Invoice).run("x")
    assert result.output == Invoice(number="A1", total=12.5)
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant", "tool"]
    assert "by calling final_result" in result.messages[2].text
    assert_valid(result)


async def test_when_the_retries_run_out_the_run_stops_as_invalid_output_with_the_last_answer() -> None:
    model = ScriptedProvider([call("final_result", {"number": 1})] * 3)
    result = await Agent(model, output_type=Invoice, limits=Limits(output_retries=2)).run("x")
    assert result.stop_reason == StopReason.INVALID_OUTPUT
    assert result.degraded
    assert result.output is None
    assert result.text == '{"number": 1}'
    assert isinstance(result.error, InvalidOutput)
    assert result.error.code == "invalid_output"
    assert result.error.raw == '{"number": 1}'
    assert any("total: required field is missing" in line for line in result.error.errors)
    assert "after 3 tries" in result.detail
    assert len(model.requests) == 3
    assert_valid(result)


async def test_function_tools_of_the_turn_run_and_the_first_valid_output_wins() -> None:
    ran: list[str] = []

    @tool
    def note(text: str) -> str:
        """Note something."""
        ran.append(text)
        return "noted"

    both = parallel(
        call("final_result", {"number": "A1", "total": 1}),
        call("note", {"text": "side effect"}),
        call("final_result", {"number": "B2", "total": 2}),
    )
    result = await Agent(ScriptedProvider([both]), tools=[note], output_type=Invoice).run("x")
    assert result.output == Invoice(number="A1", total=1)
    assert ran == ["side effect"], "the turn's function tools ran"
    results = [r.content for r in result.messages[2].tool_results]
    assert results[0] == "Final result processed."
    assert results[1] == "noted"
    assert results[2].startswith("Not used")
    assert_valid(result)


def test_a_tool_named_like_an_output_tool_is_refused() -> None:
    @tool
    def final_result(x: int) -> int:
        """Clash."""
        return x

    with pytest.raises(ConfigInvalid, match="name of an output tool"):
        Agent(ScriptedProvider([]), tools=[final_result], output_type=Invoice)


# --- native and prompted modes ------------------------------------------------------------------------------


async def test_native_mode_asks_for_the_schema_and_reads_the_answers_json() -> None:
    model = text_model(reply('{"x": 1, "y": 2}'))
    result = await Agent(model, output_type=Point).run("x")
    assert result.output == Point(1, 2)
    output = model.requests[0].output
    assert output is not None
    assert output.name == "Point"
    assert output.strict
    assert output.schema == {
        "type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}, "required": ["x", "y"],
        "additionalProperties": False,
    }  # fmt: skip


async def test_a_native_answer_that_fails_is_kept_with_the_errors_and_asked_again() -> None:
    model = text_model(reply('{"x": "left"}'), reply('```json\n{"x": 3, "y": 4}\n```'))
    result = await Agent(model, output_type=Point).run("x")
    assert result.output == Point(3, 4)
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]
    correction = result.messages[2].text
    assert "x: Input should be a valid integer" in correction
    assert "y: required field is missing" in correction
    assert model.requests[1].messages[-1].text == correction
    assert_valid(result)


async def test_prompted_mode_puts_the_schema_in_the_instructions_and_asks_for_json() -> None:
    model = ScriptedProvider([reply('Sure! {"name": "Ada", "age": 36}')], supports_tools=False)
    result = await Agent(model, system="Be exact.", output_type=Person).run("Who?")
    assert result.output == {"name": "Ada", "age": 36}
    request = model.requests[0]
    assert request.output is not None
    assert request.output.schema is None, "JSON mode, not a schema the server cannot take"
    assert request.system is not None
    assert request.system.startswith("Be exact.\n\nGive your final answer as one JSON object")
    assert '"required": ["name", "age"]' in request.system
    assert result.messages[0].text == "Be exact.", "the transcript keeps the agent's own system prompt"


async def test_a_primitive_or_a_list_is_wrapped_as_result() -> None:
    model = text_model(reply('{"result": [1, 2, 3]}'))
    result = await Agent(model, output_type=list[int]).run("x")
    assert result.output == [1, 2, 3]
    request = model.requests[0].output
    assert request is not None
    assert request.schema is not None
    assert request.schema["properties"]["result"] == {"type": "array", "items": {"type": "integer"}}


async def test_the_mode_can_be_chosen_and_is_checked() -> None:
    model = ScriptedProvider([reply('{"x": 1, "y": 1}')], supports_output_schema=True)
    result = await Agent(model, output_type=Point, output_mode="native").run("x")
    assert result.output == Point(1, 1)
    assert model.requests[0].tools == ()
    with pytest.raises(ConfigInvalid, match="output_mode must be"):
        Agent(model, output_type=Point, output_mode="magic")  # type: ignore[arg-type]


# --- unions, functions, schemas -----------------------------------------------------------------------------


async def test_a_union_is_one_output_tool_per_member() -> None:
    model = ScriptedProvider([call("final_result_Point", {"x": 1, "y": 2})])
    agent: Agent[None, Invoice | Point] = Agent(model, output_type=[Invoice, Point])
    result = await agent.run("x")
    assert result.output == Point(1, 2)
    assert [t.name for t in model.requests[0].tools] == ["final_result_Invoice", "final_result_Point"]


async def test_a_union_in_native_mode_is_one_schema_of_its_members() -> None:
    model = text_model(reply('{"result": {"number": "Z", "total": 1}}'))
    agent: Agent[None, Invoice | Point] = Agent(model, output_type=Invoice | Point)
    result = await agent.run("x")
    assert result.output == Invoice(number="Z", total=1)
    output = model.requests[0].output
    assert output is not None
    assert output.schema is not None
    schema = output.schema
    assert len(schema["properties"]["result"]["anyOf"]) == 2


async def test_an_output_function_is_called_with_the_checked_arguments() -> None:
    async def area(width: int, height: int) -> int:
        """The area of a rectangle."""
        return width * height

    model = ScriptedProvider([call("final_result", {"width": "3", "height": 4})])
    agent: Agent[None, int] = Agent(model, output_type=area)  # an async function: its result type is annotated
    result = await agent.run("x")
    assert result.output == 12
    assert model.requests[0].tools[0].description == "The area of a rectangle."


async def test_a_raw_json_schema_is_an_output_type() -> None:
    schema = {"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]}
    model = text_model(reply('{"sum": "forty"}'), reply('{"sum": 42}'))
    result = await Agent(model, output_type=OutputSchema(schema)).run("17+25?")
    assert result.output == {"sum": 42}
    assert "sum: 'forty' is not of type 'integer'" in result.messages[2].text
    with pytest.raises(ConfigInvalid, match="not a valid JSON Schema"):
        OutputSchema({"type": "nonsense"})


# --- validators ---------------------------------------------------------------------------------------------


async def test_an_output_validator_may_change_the_output_or_ask_again_with_its_context() -> None:
    model = text_model(reply('{"x": 1, "y": 1}'), reply('{"x": 2, "y": 2}'))
    agent = Agent(model, output_type=Point, deps_type=int)
    seen: list[int] = []

    @agent.output_validator
    async def even(ctx: RunContext[int], point: Point) -> Point:
        seen.append(ctx.deps)
        if point.x % 2:
            raise ModelRetry("x must be even")
        return Point(point.x * 10, point.y)

    @agent.output_validator
    def plain(point: Point) -> Point:
        return Point(point.x, point.y + 1)

    result = await agent.run("x", deps=7)
    assert result.output == Point(20, 3)
    assert seen == [7, 7]
    assert "x must be even" in result.messages[2].text


# --- results ------------------------------------------------------------------------------------------------


async def test_a_text_run_has_its_text_as_output_and_a_session_keeps_a_typed_one() -> None:
    result = await Agent(ScriptedProvider([reply("plain")])).run("x")
    assert result.output == "plain"
    store = MemorySessionStore()
    model = ScriptedProvider([call("final_result", {"number": "A1", "total": 2})])
    typed = await Agent(model, output_type=Invoice, store=store).run("x", session="s")
    stored = await store.load("s")
    assert stored.messages == typed.messages
    assert stored.messages[-2].tool_calls[0].arguments == {"number": "A1", "total": 2}


async def test_a_run_may_ask_for_its_own_output_type() -> None:
    model = ScriptedProvider([call("final_result", {"x": 5, "y": 6}), reply("text again")])
    agent = Agent(model)
    typed: Any = (await agent.run("x", output_type=Point)).output  # a type checker sees the agent's output type
    assert typed == Point(5, 6)
    assert (await agent.run("y")).output == "text again"


# --- the pieces ---------------------------------------------------------------------------------------------


def test_strict_schemas_only_where_the_meaning_is_kept() -> None:
    closed = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    assert strict_schema(closed) == {**closed, "additionalProperties": False}
    optional = {"type": "object", "properties": {"a": {"type": "string"}}, "required": []}
    assert strict_schema(optional) is None
    free_form = {"type": "object", "properties": {"a": {"type": "object", "additionalProperties": {"type": "integer"}}},
                 "required": ["a"]}  # fmt: skip
    assert strict_schema(free_form) is None
    assert OutputSpec(Invoice).strict is not None
    assert OutputSpec(dict[str, int]).strict is None


def test_an_answers_json_is_read_tolerantly_but_must_be_there() -> None:
    assert read_json_answer('```json\n{"a": 1}\n```') == {"a": 1}
    assert read_json_answer('Here you go: {"a": 1} - done') == {"a": 1}
    assert read_json_answer('{"text": "two\nlines"}') == {"text": "two\nlines"}
    with pytest.raises(OutputInvalid, match="not JSON"):
        read_json_answer("no json here")
    with pytest.raises(OutputInvalid, match="empty"):
        read_json_answer("  ")


def test_str_is_text_and_a_union_with_str_is_refused() -> None:
    assert OutputSpec.of(str) is None
    with pytest.raises(ConfigInvalid, match="str cannot be a member"):
        OutputSpec([str, int])


# --- streaming ----------------------------------------------------------------------------------------------


async def test_a_native_output_streams_as_partial_outputs_in_place_of_its_json() -> None:
    model = text_model(reply('{"number": "INV-2026-0042", "total": 12.5}', chunk_size=6))
    events = [event async for event in Agent(model, output_type=Invoice).stream("x")]
    check_order(events)
    partials = [e for e in events if isinstance(e, PartialOutput)]
    assert not any(isinstance(e, TextDelta) for e in events), "the raw JSON is not streamed as text"
    assert {"number": "INV-20"} in [p.data for p in partials], "a string cut short is kept as far as it goes"
    assert all(p.output is None for p in partials if "total" not in p.data), "a required field is still missing"
    assert partials[-1].output == Invoice(number="INV-2026-0042", total=12.5)
    completed = events[-1]
    assert isinstance(completed, RunCompleted)
    assert completed.result.output == Invoice(number="INV-2026-0042", total=12.5)


async def test_an_output_calls_arguments_stream_as_partial_outputs() -> None:
    model = ScriptedProvider([call("final_result", {"number": "A1", "total": 3}, chunk_size=5)])
    events = [event async for event in Agent(model, output_type=Invoice).stream("x")]
    check_order(events)
    partials = [e for e in events if isinstance(e, PartialOutput)]
    assert len(partials) >= 3
    assert partials[-1].data == {"number": "A1", "total": 3}
    assert partials[-1].turn == 1
