"""Arguments that are not a JSON object: an ``invalid_arguments`` result by default, or, for a tool defined
with ``raw_arguments=True``, the model's text as its one required string parameter."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import assert_valid
from tether import Agent, Tool, tool
from tether.errors import ConfigInvalid
from tether.providers.scripted import ScriptedProvider, call, parallel, reply

ran: list[str] = []


@tool(raw_arguments=True)
def run_python(code: str, timeout: int = 10) -> str:
    """Run Python code.

    Args:
        code: The code to run.
        timeout: Seconds to allow.
    """
    ran.append(code)
    return f"ran {len(code)} characters"


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


async def run_calls(*arguments: str) -> list[Any]:
    """Results of one turn calling ``run_python`` with each raw ``arguments``, then of ``lookup`` with the
    first of them."""
    steps = [call("run_python", raw) for raw in arguments] + [call("lookup", arguments[0])]
    model = ScriptedProvider([parallel(*steps), reply("done")])
    result = await Agent(model, tools=[run_python, lookup]).run("go")
    assert_valid(result)
    assert result.stop_reason == "complete"
    return list(result.messages[2].tool_results)


async def test_a_raw_arguments_tool_gets_text_that_is_not_json_and_other_tools_still_get_the_error() -> None:
    code = "print('hi')\nfor i in range(3): print(i)"
    python, other = await run_calls(code)
    assert ran == [code]
    assert (python.is_error, python.content) == (False, f"ran {len(code)} characters")
    assert (other.is_error, other.code) == (True, "invalid_arguments")
    assert "not valid JSON" in other.content


async def test_a_json_string_is_passed_as_its_value_and_other_non_objects_as_their_text() -> None:
    await run_calls('"x = 1"', "[1, 2]", "42", '{"code": "print(1)"')
    assert ran == ["x = 1", "[1, 2]", "42", '{"code": "print(1)"']


async def test_a_json_object_is_validated_as_usual() -> None:
    model = ScriptedProvider([call("run_python", {"code": "1 + 1", "timeout": 5}), call("run_python", {}), reply("ok")])
    result = await Agent(model, tools=[run_python]).run("go")
    assert ran == ["1 + 1"]
    missing = result.messages[4].tool_results[0]
    assert (missing.code, "code: required field is missing" in missing.content) == ("invalid_arguments", True)


async def test_arguments_nested_too_deep_are_refused_even_by_a_raw_arguments_tool() -> None:
    deep = '{"code": ' + "[" * 100 + "]" * 100 + "}"
    model = ScriptedProvider([call("run_python", deep), reply("ok")])
    result = await Agent(model, tools=[run_python]).run("go")
    refused = result.messages[2].tool_results[0]
    assert ran == []
    assert (refused.code, "nested more than 64 levels deep" in refused.content) == ("invalid_arguments", True)


def test_raw_arguments_needs_exactly_one_required_str_parameter_checked_when_the_tool_is_defined() -> None:
    def two(code: str, path: str) -> str:
        return code

    def number(count: int) -> str:
        return str(count)

    def optional(code: str = "") -> str:
        return code

    for function, required in ((two, "code, path"), (number, "count"), (optional, "none")):
        with pytest.raises(ConfigInvalid, match=rf"raw_arguments=True needs exactly one required parameter, of type "
                           rf"str, to receive the text \(required parameters: {required}\)"):  # fmt: skip
            tool(raw_arguments=True)(function)
    assert run_python.raw_parameter == "code"
    assert lookup.raw_parameter is None


async def test_a_tool_from_a_json_schema_can_take_raw_arguments() -> None:
    received: list[dict[str, Any]] = []
    schema = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}

    def run_search(arguments: dict[str, Any]) -> str:
        received.append(arguments)
        return "hits"

    search = Tool.from_schema("search", "Search.", schema, run_search, raw_arguments=True)
    model = ScriptedProvider([call("search", "cats AND dogs"), reply("ok")])
    await Agent(model, tools=[search]).run("go")
    assert received == [{"query": "cats AND dogs"}]
