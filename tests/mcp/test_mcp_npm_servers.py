"""MCPTools against the reference servers from npm: server-everything and server-filesystem (TypeScript SDK)."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from tests.helpers import assert_valid
from tests.mcp.conftest import everything, filesystem, py_server
from tether import Agent
from tether.errors import InvalidArguments
from tether.messages import Attachment, ToolResult
from tether.providers.scripted import ScriptedProvider, call, reply
from tether.tools.mcp import MCPTools


def tiny_image(modules: Path) -> bytes:
    """The PNG that server-everything's get-tiny-image sends, read from its source."""
    source = modules / "@modelcontextprotocol/server-everything/dist/tools/get-tiny-image.js"
    match = re.search(r'MCP_TINY_IMAGE = "([A-Za-z0-9+/=]+)"', source.read_text())
    assert match is not None
    return base64.b64decode(match.group(1))


def results_of(messages: object) -> list[ToolResult]:
    return [result for message in messages for result in message.tool_results]  # type: ignore[attr-defined]


async def test_everything_lists_its_tools_with_their_schemas_and_answers_calls(node_modules: Path) -> None:
    async with MCPTools([everything(node_modules)]) as mcp:
        names = {tool.name for tool in mcp.tools}
        assert {"echo", "get-sum", "get-tiny-image", "get-structured-content", "get-env"} <= names
        assert mcp.skipped == {}, "every schema of the reference server compiles"
        get_sum = mcp.get("get-sum")
        assert get_sum is not None
        assert get_sum.parameters["properties"]["a"]["type"] == "number"
        assert sorted(get_sum.parameters["required"]) == ["a", "b"]
        assert "7" in await get_sum.bind({"a": 3, "b": 4})()
        with pytest.raises(InvalidArguments, match="'three' is not of type 'number'"):
            get_sum.bind({"a": "three", "b": 4})


async def test_structured_content_reaches_the_model_as_json(node_modules: Path) -> None:
    async with MCPTools([everything(node_modules)]) as mcp:
        weather = mcp.get("get-structured-content")
        assert weather is not None
        text = await weather({"location": "Chicago"})
    assert json.loads(text) == {"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82}


async def test_an_image_is_an_attachment_between_its_texts(node_modules: Path) -> None:
    async with MCPTools([everything(node_modules)]) as mcp:
        image = mcp.get("get-tiny-image")
        assert image is not None
        parts = await image({})
    assert parts == [
        "Here's the image you requested:",
        Attachment("image/png", tiny_image(node_modules)),
        "The image above is the MCP logo.",
    ]


async def test_env_expansion_reaches_a_node_server(node_modules: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_TEST_REGION", "eu-north-1")
    async with MCPTools([everything(node_modules, env={"REGION": "${TETHER_TEST_REGION}"})]) as mcp:
        get_env = mcp.get("get-env")
        assert get_env is not None
        environment = json.loads(await get_env({}))
    assert environment["REGION"] == "eu-north-1"


async def test_a_clash_between_servers_prefixes_only_the_clashing_tools(node_modules: Path) -> None:
    async with MCPTools([everything(node_modules), py_server("py")]) as mcp:
        names = {tool.name for tool in mcp.tools}
        assert {"everything__echo", "py__echo"} <= names
        assert "echo" not in names
        assert {"get-sum", "add"} <= names, "tools without a clash keep their names"
        theirs, ours = mcp.get("everything__echo"), mcp.get("py__echo")
        assert theirs is not None
        assert ours is not None
        assert await theirs({"message": "hi"}) == "Echo: hi"
        assert await ours({"message": "hi"}) == "hi"


async def test_filesystem_reads_inside_its_root_and_an_is_error_outside_is_tool_failed(
    node_modules: Path, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "notes.txt").write_text("buy milk\n")
    outside = tmp_path / "secret.txt"
    outside.write_text("hunter2\n")
    async with MCPTools([filesystem(node_modules, root)]) as mcp:
        model = ScriptedProvider(
            [
                call("read_text_file", {"path": str(root / "notes.txt")}),
                call("read_text_file", {"path": str(outside)}),
                reply("done"),
            ]
        )
        result = await Agent(model, tools=mcp.tools).run("read my notes")
    inside, denied = results_of(result.messages)
    assert (inside.is_error, inside.content) == (False, "buy milk\n"), "the text restating the structure, once"
    assert (denied.is_error, denied.code) == (True, "tool_failed")
    assert "outside allowed directories" in denied.content
    assert "hunter2" not in denied.content
    assert_valid(result)


async def test_tools_the_server_marks_read_only_are_offered_in_read_only_mode(
    node_modules: Path, tmp_path: Path
) -> None:
    from tether.tools.permissions import Permissions

    async with MCPTools([filesystem(node_modules, tmp_path)]) as mcp:
        read_only = {tool.name for tool in mcp.tools if Permissions.of("read-only").offers(tool)}
    assert "read_text_file" in read_only
    assert "list_directory" in read_only
    assert "write_file" not in read_only
    assert "edit_file" not in read_only
