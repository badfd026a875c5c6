"""The parts of MCP support that need no server: names, results, ``${VAR}``, lazy imports (a server entry's
rules are in test_mcp_spec.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from tether.errors import ConfigInvalid, ToolError
from tether.messages import Attachment
from tether.tools.mcp import exposed_names
from tether.tools.mcp_connection import expand, render_result

# --- configuration ------------------------------------------------------------------------------------------


# --- ${VAR} -------------------------------------------------------------------------------------------------


def test_expand_replaces_variables_and_leaves_other_dollars(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_T_USER", "ada")
    assert expand("${TETHER_T_USER}:$HOME:$${TETHER_T_USER}:${TETHER_T_USER}", "here") == "ada:$HOME:$ada:ada"


def test_expand_names_a_missing_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TETHER_T_NOPE", raising=False)
    with pytest.raises(ConfigInvalid, match=r"server 'x': env 'K' uses \$\{TETHER_T_NOPE\}, but TETHER_T_NOPE is"):
        expand("a${TETHER_T_NOPE}", "server 'x': env 'K'")
    with pytest.raises(ConfigInvalid, match="not a valid environment variable reference"):
        expand("${1BAD}", "here")


# --- names --------------------------------------------------------------------------------------------------


def test_names_are_kept_when_unique_and_prefixed_on_clash_only() -> None:
    tools = [("a", False, "search"), ("a", False, "read"), ("b", False, "search"), ("c", False, "write")]
    assert exposed_names(tools) == ["a__search", "read", "b__search", "write"]


def test_a_server_set_to_prefix_always_does() -> None:
    assert exposed_names([("gh", True, "search"), ("fs", False, "read")]) == ["gh__search", "read"]


def test_invalid_characters_become_underscores() -> None:
    assert exposed_names([("s", False, "files/read.v2 now"), ("s", False, "")]) == ["files_read_v2_now", "_"]


def test_names_that_still_collide_or_run_long_get_a_stable_hash_suffix() -> None:
    names = exposed_names([("s", False, "a.b"), ("s", False, "a/b"), ("s", False, "x" * 80)])
    assert names[0] == "a_b"
    assert names[1].startswith("a_b_")
    assert len(names[1]) == len("a_b_") + 8
    assert len(names[2]) == 64
    assert names[2].startswith("x" * 55 + "_")
    assert names == exposed_names([("s", False, "a.b"), ("s", False, "a/b"), ("s", False, "x" * 80)])
    assert len(set(names)) == 3


# --- results ------------------------------------------------------------------------------------------------


def test_images_audio_and_binary_documents_are_attachments_and_other_blocks_notes() -> None:
    result = CallToolResult(
        content=[
            TextContent(text="Here:"),
            ImageContent(data="AAAA", mime_type="image/png"),
            ResourceLink(name="report", uri="file:///r.pdf", mime_type="application/pdf"),
            EmbeddedResource(resource=TextResourceContents(uri="file:///a.txt", text="hello", mime_type="text/plain")),
            EmbeddedResource(resource=BlobResourceContents(uri="file:///b.bin", blob="AAAAAA==")),
            EmbeddedResource(
                resource=BlobResourceContents(uri="file:///c.pdf", blob="JVBERg==", mime_type="application/pdf")
            ),
            AudioContent(data="not base64!", mime_type="audio/wav"),
        ]
    )
    assert render_result(result) == [
        "Here:",
        Attachment("image/png", b"\x00\x00\x00"),
        "[resource link: report <file:///r.pdf>, application/pdf]",
        "[resource: file:///a.txt, text/plain]\nhello",
        "[resource: file:///b.bin, 4 bytes]",
        Attachment("application/pdf", b"%PDF"),
        "[audio: audio/wav, 8 bytes]",
    ]
    only_text = CallToolResult(content=[TextContent(text="a"), TextContent(text="b")])
    assert render_result(only_text) == "a\nb"


def test_structured_content_comes_first_as_json_unless_a_text_block_restates_it() -> None:
    alone = CallToolResult(content=[TextContent(text="a note")], structured_content={"n": 1})
    assert render_result(alone) == '{"n": 1}\na note'
    restated = CallToolResult(content=[TextContent(text='{\n  "n": 1\n}')], structured_content={"n": 1})
    assert render_result(restated) == '{\n  "n": 1\n}'
    wrapped = CallToolResult(content=[TextContent(text="3")], structured_content={"result": 3})
    assert render_result(wrapped) == "3"


def test_an_error_result_raises_tool_error_with_its_text() -> None:
    with pytest.raises(ToolError, match="no such city") as caught:
        render_result(CallToolResult(content=[TextContent(text="no such city")], is_error=True))
    assert caught.value.code == "tool_failed"
    with pytest.raises(ToolError, match="without a message"):
        render_result(CallToolResult(content=[], is_error=True))


def test_an_empty_result_says_so() -> None:
    assert render_result(CallToolResult(content=[])) == "(no output)"


# --- imports ------------------------------------------------------------------------------------------------


def test_neither_tether_nor_the_mcp_module_imports_the_sdk_until_a_server_is_used() -> None:
    code = (
        "import sys, tether, tether.tools.mcp as m\n"
        "m.MCPServerConfig('s', command='x')\n"
        "print(sorted({n.split('.')[0] for n in sys.modules} & {'mcp', 'mcp_types', 'anyio', 'httpx2'}))"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert completed.stdout.strip() == "[]"
