"""The file tools on real files: ``read`` (pagination, byte cap, binary and badly encoded files), ``write``
(atomic temp-and-rename, create_dirs, overwrite protection) and ``edit`` (exactly once, zero, several,
replace_all, the diff), and each one's refusal of a path outside the workspace, as the model sees it."""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tether import Agent
from tether.errors import PermissionDenied, ToolError
from tether.providers.scripted import ScriptedProvider, call, reply
from tether.tools import files
from tether.tools.base import Tool
from tether.tools.files import TOOL_ACCESS, atomic_write, file_tools, read_tool, read_tools, write_tools
from tether.tools.workspace import Workspace


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    (tmp_path / "ws").mkdir()
    return Workspace(tmp_path / "ws")


def tools(workspace: Workspace, **options: Any) -> dict[str, Callable[..., Any]]:
    """The file tools' functions by name, called directly (the checks they do are the ones under test)."""
    return {t.name: t.function for t in file_tools(workspace, **options)}


def lines_file(ws: Workspace, name: str, count: int) -> Path:
    path = ws.root / name
    path.write_text("".join(f"line {n}\n" for n in range(1, count + 1)))
    return path


# --- read ------------------------------------------------------------------------------------------------------


def test_read_numbers_lines_and_pages_with_offset_and_limit(ws: Workspace) -> None:
    lines_file(ws, "ten.txt", 10)
    read = tools(ws)["read"]
    assert read(path="ten.txt", limit=3) == (
        "     1\tline 1\n     2\tline 2\n     3\tline 3\n[truncated: 7 more lines; read again with offset=4]"
    )
    assert read(path="ten.txt", offset=4, limit=3).splitlines() == [
        "     4\tline 4",
        "     5\tline 5",
        "     6\tline 6",
        "[truncated: 4 more lines; read again with offset=7]",
    ]
    last = read(path="ten.txt", offset=8, limit=3)
    assert last == "     8\tline 8\n     9\tline 9\n    10\tline 10", "the end is reached: no marker"


def test_read_counts_a_last_line_without_newline_and_strips_crlf(ws: Workspace) -> None:
    (ws.root / "crlf.txt").write_bytes(b"one\r\ntwo\r\nthree")
    read = tools(ws)["read"]
    assert read(path="crlf.txt") == "     1\tone\n     2\ttwo\n     3\tthree"
    assert read(path="crlf.txt", limit=1).endswith("[truncated: 2 more lines; read again with offset=2]")


def test_read_past_the_end_says_how_many_lines_there_are(ws: Workspace) -> None:
    lines_file(ws, "ten.txt", 10)
    with pytest.raises(ToolError, match=re.escape("offset=11 is past the end of 'ten.txt', which has 10 lines")):
        tools(ws)["read"](path="ten.txt", offset=11)


def test_read_of_an_empty_file_says_it_is_empty(ws: Workspace) -> None:
    (ws.root / "empty.txt").write_text("")
    assert tools(ws)["read"](path="empty.txt") == "(empty.txt is empty)"


def test_read_stops_at_the_byte_cap_with_a_marker_that_says_where_to_go_on(ws: Workspace) -> None:
    lines_file(ws, "fifty.txt", 50)  # each numbered line is "     n\tline n" (13 bytes) plus a newline
    read = tools(ws, max_read_bytes=100)["read"]
    out = read(path="fifty.txt")
    *shown, marker = out.split("\n")
    assert len(shown) == 7, "7 lines take 98 bytes; an 8th would pass 100"
    assert marker == "[truncated: 43 more lines; read again with offset=8]"
    assert read(path="fifty.txt", offset=8).startswith("     8\tline 8\n")


def test_read_cuts_a_very_long_line_and_keeps_counting_lines(ws: Workspace) -> None:
    (ws.root / "long.txt").write_bytes(b"x" * 5000 + b"\nafter\n")
    out = tools(ws)["read"](path="long.txt").splitlines()
    assert out[0] == "     1\t" + "x" * files.MAX_LINE_BYTES + " [... line truncated: 3000 more bytes]"
    assert out[1] == "     2\tafter"


def test_read_refuses_a_file_with_nul_bytes_politely(ws: Workspace) -> None:
    (ws.root / "image.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(ToolError, match=re.escape("'image.bin' is a binary file; only text files can be read")):
        tools(ws)["read"](path="image.bin")


def test_read_refuses_a_file_that_is_mostly_not_utf8(ws: Workspace) -> None:
    (ws.root / "noise.dat").write_bytes(bytes(range(0x80, 0x100)) * 4)
    with pytest.raises(ToolError, match="binary"):
        tools(ws)["read"](path="noise.dat")


def test_read_replaces_a_few_undecodable_bytes_in_a_text_file(ws: Workspace) -> None:
    (ws.root / "latin1.txt").write_bytes(b"caf\xe9 au lait\nplain\n")
    assert tools(ws)["read"](path="latin1.txt") == "     1\tcaf\ufffd au lait\n     2\tplain"


def test_read_of_a_missing_file_or_a_directory_is_an_error_saying_which(ws: Workspace) -> None:
    (ws.root / "dir").mkdir()
    read = tools(ws)["read"]
    with pytest.raises(ToolError, match=re.escape("'nope.txt' does not exist")):
        read(path="nope.txt")
    with pytest.raises(ToolError, match=re.escape("'dir' is a directory")):
        read(path="dir")


def test_read_schema_refuses_an_offset_below_one() -> None:
    tool = read_tool(Workspace("/"))
    assert tool.parameters["properties"]["offset"]["minimum"] == 1
    with pytest.raises(ToolError, match="offset"):
        tool.bind({"path": "x", "offset": 0})


# --- write -----------------------------------------------------------------------------------------------------


def test_write_creates_a_file_and_reports_its_size(ws: Workspace) -> None:
    result = tools(ws)["write"](path="new.txt", content="a\nb\n")
    assert result == "Created new.txt (4 bytes, 2 lines)."
    assert (ws.root / "new.txt").read_text() == "a\nb\n"


def test_write_refuses_to_overwrite_a_file_the_agent_has_not_read(ws: Workspace) -> None:
    (ws.root / "notes.txt").write_text("precious\n")
    with pytest.raises(PermissionDenied, match="you have not read it"):
        tools(ws)["write"](path="notes.txt", content="gone\n")
    assert (ws.root / "notes.txt").read_text() == "precious\n"


def test_write_overwrites_a_file_after_it_was_read(ws: Workspace) -> None:
    (ws.root / "notes.txt").write_text("old\n")
    by_name = tools(ws)
    by_name["read"](path="notes.txt")
    assert by_name["write"](path="notes.txt", content="new\n").startswith("Overwrote notes.txt")
    assert (ws.root / "notes.txt").read_text() == "new\n"


def test_write_overwrites_an_unread_file_when_told_overwrite_true(ws: Workspace) -> None:
    (ws.root / "notes.txt").write_text("old\n")
    tools(ws)["write"](path="notes.txt", content="new\n", overwrite=True)
    assert (ws.root / "notes.txt").read_text() == "new\n"


def test_write_may_rewrite_a_file_it_wrote_itself(ws: Workspace) -> None:
    write = tools(ws)["write"]
    write(path="draft.txt", content="1\n")
    write(path="draft.txt", content="2\n")
    assert (ws.root / "draft.txt").read_text() == "2\n"


def test_reads_count_per_workspace_so_another_run_must_read_again(ws: Workspace) -> None:
    (ws.root / "notes.txt").write_text("old\n")
    tools(ws)["read"](path="notes.txt")
    next_run = Workspace(ws.root)
    with pytest.raises(PermissionDenied):
        tools(next_run)["write"](path="notes.txt", content="new\n")


def test_write_needs_create_dirs_for_a_missing_parent(ws: Workspace) -> None:
    write = tools(ws)["write"]
    with pytest.raises(ToolError, match=re.escape("'a/b' does not exist. Pass create_dirs=true")):
        write(path="a/b/c.txt", content="x")
    assert not (ws.root / "a").exists()
    write(path="a/b/c.txt", content="x", create_dirs=True)
    assert (ws.root / "a" / "b" / "c.txt").read_text() == "x"


def test_write_keeps_an_existing_files_permissions(ws: Workspace) -> None:
    script = ws.root / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o750)
    tools(ws)["write"](path="run.sh", content="#!/bin/sh\necho hi\n", overwrite=True)
    assert stat.S_IMODE(script.stat().st_mode) == 0o750


def test_write_through_a_symlink_inside_updates_the_target_and_keeps_the_link(ws: Workspace) -> None:
    (ws.root / "real.txt").write_text("old\n")
    (ws.root / "alias.txt").symlink_to("real.txt")
    tools(ws)["write"](path="alias.txt", content="new\n", overwrite=True)
    assert (ws.root / "alias.txt").is_symlink()
    assert (ws.root / "real.txt").read_text() == "new\n"


def test_write_keeps_the_old_content_and_no_temp_file_when_the_rename_fails(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws.root / "keep.txt").write_text("old content\n")

    def failing_replace(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(
        ToolError, match=re.escape("Could not write 'keep.txt': Input/output error. The file is unchanged")
    ):
        tools(ws)["write"](path="keep.txt", content="new content\n", overwrite=True)
    assert (ws.root / "keep.txt").read_text() == "old content\n"
    assert sorted(p.name for p in ws.root.iterdir()) == ["keep.txt"], "the temporary file was removed"


def test_atomic_write_replaces_a_symlink_swapped_in_after_the_check_instead_of_following_it(
    ws: Workspace, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("outside\n")
    (ws.root / "f.txt").write_text("old\n")
    checked = ws.resolve("f.txt")
    (ws.root / "f.txt").unlink()
    (ws.root / "f.txt").symlink_to(outside)
    atomic_write(ws, checked, b"new\n")
    assert outside.read_text() == "outside\n"
    assert not (ws.root / "f.txt").is_symlink()
    assert (ws.root / "f.txt").read_text() == "new\n"


def test_write_onto_a_directory_is_an_error(ws: Workspace) -> None:
    (ws.root / "dir").mkdir()
    with pytest.raises(ToolError, match="is a directory"):
        tools(ws)["write"](path="dir", content="x", overwrite=True)


# --- edit ------------------------------------------------------------------------------------------------------


def test_edit_replaces_text_that_occurs_exactly_once_and_returns_a_diff(ws: Workspace) -> None:
    (ws.root / "app.py").write_text("def f():\n    return 1\n\nprint(f())\n")
    result = tools(ws)["edit"](path="app.py", old="return 1", new="return 2")
    assert (ws.root / "app.py").read_text() == "def f():\n    return 2\n\nprint(f())\n"
    assert result == (
        "Edited app.py: replaced 1 occurrence.\n"
        "--- a/app.py\n"
        "+++ b/app.py\n"
        "@@ -1,4 +1,4 @@\n"
        " def f():\n"
        "-    return 1\n"
        "+    return 2\n"
        " \n"
        " print(f())"
    )


def test_edit_with_no_match_changes_nothing_and_says_not_found(ws: Workspace) -> None:
    (ws.root / "a.txt").write_text("alpha\nbeta\n")
    with pytest.raises(ToolError, match=re.escape("`old` was not found in 'a.txt'; nothing was changed")):
        tools(ws)["edit"](path="a.txt", old="gamma", new="delta")
    assert (ws.root / "a.txt").read_text() == "alpha\nbeta\n"


def test_edit_with_several_matches_changes_nothing_and_lists_their_lines(ws: Workspace) -> None:
    (ws.root / "a.txt").write_text("x = 1\ny = 2\nx = 1\nz = 3\n\nx = 1\n")
    with pytest.raises(ToolError, match=r"`old` occurs 3 times in 'a.txt', at lines 1, 3, 6\. Nothing was changed"):
        tools(ws)["edit"](path="a.txt", old="x = 1", new="x = 9")
    assert (ws.root / "a.txt").read_text() == "x = 1\ny = 2\nx = 1\nz = 3\n\nx = 1\n"


def test_edit_with_replace_all_replaces_every_occurrence(ws: Workspace) -> None:
    (ws.root / "a.txt").write_text("x = 1\ny = 2\nx = 1\n")
    result = tools(ws)["edit"](path="a.txt", old="x = 1", new="x = 9", replace_all=True)
    assert result.startswith("Edited a.txt: replaced 2 occurrences.\n")
    assert (ws.root / "a.txt").read_text() == "x = 9\ny = 2\nx = 9\n"


def test_edit_keeps_bytes_that_are_not_utf8_elsewhere_in_the_file(ws: Workspace) -> None:
    (ws.root / "legacy.txt").write_bytes(b"caf\xe9\nx = 1\n")
    result = tools(ws)["edit"](path="legacy.txt", old="x = 1", new="x = 2")
    assert (ws.root / "legacy.txt").read_bytes() == b"caf\xe9\nx = 2\n"
    assert "\ufffd" in result, "the diff shows the odd byte as a replacement character"


def test_edit_hints_at_the_line_number_prefix_read_shows(ws: Workspace) -> None:
    (ws.root / "a.txt").write_text("alpha\n")
    with pytest.raises(ToolError, match="Leave out the line-number prefixes"):
        tools(ws)["edit"](path="a.txt", old="     1\talpha", new="beta")


def test_edit_refuses_a_binary_file_and_an_empty_old(ws: Workspace) -> None:
    (ws.root / "b.bin").write_bytes(b"\x00\x01abc")
    edit = tools(ws)["edit"]
    with pytest.raises(ToolError, match="binary"):
        edit(path="b.bin", old="abc", new="xyz")
    with pytest.raises(ToolError, match="`old` is empty"):
        edit(path="b.bin", old="", new="xyz")


def test_edit_writes_atomically_too(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    (ws.root / "a.txt").write_text("alpha\n")

    def failing_replace(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(ToolError, match="unchanged"):
        tools(ws)["edit"](path="a.txt", old="alpha", new="beta")
    assert (ws.root / "a.txt").read_text() == "alpha\n"
    assert [p.name for p in ws.root.iterdir()] == ["a.txt"]


def test_edit_lets_write_overwrite_the_file_afterwards(ws: Workspace) -> None:
    (ws.root / "a.txt").write_text("alpha\n")
    by_name = tools(ws)
    by_name["edit"](path="a.txt", old="alpha", new="beta")
    by_name["write"](path="a.txt", content="gamma\n")
    assert (ws.root / "a.txt").read_text() == "gamma\n"


# --- classification ------------------------------------------------------------------------------------------


def test_tools_are_classified_read_or_write(ws: Workspace) -> None:
    assert [t.name for t in read_tools(ws)] == ["read"]
    assert [t.name for t in write_tools(ws)] == ["write", "edit"]
    assert {t.name: TOOL_ACCESS[t.name] for t in file_tools(ws)} == {"read": "read", "write": "write", "edit": "write"}


def test_descriptions_tell_the_model_the_limits_and_the_refusals(ws: Workspace) -> None:
    by_name: dict[str, Tool] = {t.name: t for t in file_tools(ws, max_read_bytes=1234, max_read_lines=77)}
    assert "77 lines" in by_name["read"].description
    assert "1234 bytes" in by_name["read"].description
    assert "[truncated: N more lines; read again with offset=K]" in by_name["read"].description
    assert "overwrite=true" in by_name["write"].description
    assert "create_dirs=true" in by_name["write"].description
    assert "replace_all=true" in by_name["edit"].description
    for tool in by_name.values():
        assert "permission_denied" in tool.description
        assert all(p.get("description") for p in tool.parameters["properties"].values())


# --- through the loop: what the model receives ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("read", {"path": "../outside.txt"}),
        ("write", {"path": "../outside.txt", "content": "pwned", "overwrite": True}),
        ("edit", {"path": "../outside.txt", "old": "secret", "new": "pwned"}),
    ],
)
async def test_an_escape_reaches_the_model_as_a_permission_denied_result(
    ws: Workspace, tmp_path: Path, name: str, arguments: dict[str, Any]
) -> None:
    (tmp_path / "outside.txt").write_text("secret\n")
    model = ScriptedProvider([call(name, arguments), reply("understood")])
    result = await Agent(model, tools=file_tools(ws)).run("try it")
    (denied,) = result.messages[2].tool_results
    assert denied.is_error
    assert denied.code == "permission_denied"
    assert "outside the workspace" in denied.content
    assert result.text == "understood"
    assert (tmp_path / "outside.txt").read_text() == "secret\n"


async def test_an_unread_overwrite_reaches_the_model_as_a_permission_denied_result_and_read_unlocks_it(
    ws: Workspace,
) -> None:
    (ws.root / "notes.txt").write_text("precious\n")
    model = ScriptedProvider(
        [
            call("write", {"path": "notes.txt", "content": "new\n"}),
            call("read", {"path": "notes.txt"}),
            call("write", {"path": "notes.txt", "content": "new\n"}),
            reply("done"),
        ]
    )
    result = await Agent(model, tools=file_tools(ws)).run("replace it")
    refused, read, wrote = (m.tool_results[0] for m in result.messages if m.tool_results)
    assert refused.code == "permission_denied"
    assert read.content == "     1\tprecious"
    assert not wrote.is_error
    assert (ws.root / "notes.txt").read_text() == "new\n"


def test_only_read_is_offered_in_read_only_mode(tmp_path: Path) -> None:
    from tether.tools.permissions import Permissions

    tools = file_tools(Workspace(tmp_path))
    read_only = Permissions.of("read-only")
    assert [t.name for t in tools if read_only.offers(t)] == ["read"]
    assert all(t.read_only == (TOOL_ACCESS[t.name] == "read") for t in tools)


# --- bounded work on files of any size ----------------------------------------------------------------------


def test_reading_the_head_of_a_huge_sparse_file_counts_a_bounded_part_of_it(tmp_path: Path) -> None:
    """16 GiB of lines (a sparse file of newlines would take minutes to count): the rest is counted over
    ``MAX_SCAN_BYTES`` at most, and said to be at least that many lines."""
    from tether.tools import files

    workspace = Workspace(tmp_path)
    huge = tmp_path / "huge.log"
    with huge.open("wb") as file:
        file.write(b"first line\n" + b"x\n" * 10_000)  # text past what is sniffed; zeros after
        file.truncate(16 * 1024**3)
    original = files.MAX_SCAN_BYTES
    files.MAX_SCAN_BYTES = 1024 * 1024  # the same rule, at a size a test can afford
    try:
        shown = files.read_file(workspace, "huge.log", limit=1, max_bytes=10_000)
        with pytest.raises(ToolError, match="too long to reach line"):
            files.read_file(workspace, "huge.log", offset=10**9, limit=1, max_bytes=10_000)
    finally:
        files.MAX_SCAN_BYTES = original
    assert "first line" in shown.splitlines()[0]
    assert "[truncated: at least" in shown


def test_edit_refuses_a_file_larger_than_it_loads_and_changes_nothing(tmp_path: Path) -> None:
    from tether.tools import files

    workspace = Workspace(tmp_path)
    big = tmp_path / "big.txt"
    with big.open("wb") as file:
        file.write(b"needle\n")
        file.truncate(files.MAX_EDIT_BYTES + 1)
    with pytest.raises(ToolError, match=r"edit changes files up to 64 MiB"):
        files.edit_file(workspace, "big.txt", "needle", "thread", replace_all=False)
    with big.open("rb") as file:
        assert file.read(7) == b"needle\n"
