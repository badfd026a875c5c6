"""The file tools: ``read``, ``write`` and ``edit``, built for one :class:`~tether.tools.workspace.Workspace`.

Every path goes through the workspace's checks, so a path outside it reaches the model as a
``permission_denied`` error result; every other refusal is a plain error message saying what to do instead.

- ``read`` pages through a text file by lines (``offset``, ``limit``) under a byte cap, numbering each line;
  when it stops early it says how many lines are left and which ``offset`` reads on. Binary files are
  refused; undecodable bytes in a text file are replaced. A file read is remembered by the workspace.
- ``write`` replaces a whole file atomically (a temporary file in the same directory, fsync, rename, fsync
  of the directory), so a crash leaves the old content or the new, never half of it. It refuses to replace
  a file the agent has not read through the same workspace, unless told ``overwrite=true``.
- ``edit`` replaces an exact piece of text that must occur once (or every occurrence, when asked), writes
  the file the same atomic way and answers with a small unified diff. Bytes that are not UTF-8 are kept as
  they were (``surrogateescape``), so editing one line never damages another.

For modes (read-only / full), ``read`` is marked ``read_only`` and is the only one offered in read-only mode;
:data:`TOOL_ACCESS` says what each tool does; :func:`read_tools` and :func:`write_tools` build the two
groups, :func:`file_tools` both.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import IO, Annotated

from pydantic import Field

from tether.atomic import replace_file
from tether.errors import PermissionDenied, ToolError
from tether.tools.base import Tool
from tether.tools.workspace import Access, Workspace

__all__ = [
    "TOOL_ACCESS",
    "atomic_write",
    "edit_tool",
    "file_tools",
    "read_tool",
    "read_tools",
    "write_tool",
    "write_tools",
]

TOOL_ACCESS: Mapping[str, Access] = MappingProxyType({"read": "read", "write": "write", "edit": "write"})
"""Tool name -> ``"read"`` (only looks at the workspace) or ``"write"`` (may change it)."""

DEFAULT_READ_LINES = 1000
"""Lines ``read`` returns when the model gives no ``limit``."""
DEFAULT_READ_BYTES = 50_000
"""Bytes of output one ``read`` returns at most, whatever the ``limit``."""
MAX_LINE_BYTES = 2000
"""Bytes of one line shown; the rest of a longer line (minified code, data) is cut and counted."""
SNIFF_BYTES = 8192
"""Bytes examined to tell a binary file from a text file."""
BINARY_UNDECODABLE_SHARE = 0.3
"""A sample with more than this share of bytes that are not UTF-8 is binary; fewer are replaced."""
MAX_DIFF_CHARS = 6000
"""Characters of diff ``edit`` returns; the rest is summarized."""
MAX_LISTED_MATCHES = 20
MAX_SCAN_BYTES = 256 * 1024 * 1024
"""Bytes ``read`` goes through to reach its offset, and then counts the lines left by: a file larger than that
(a sparse one of any size, say) costs a bounded time, on a thread that cannot be stopped."""
MAX_EDIT_BYTES = 64 * 1024 * 1024
"""The largest file ``edit`` loads: a larger one is refused (``bash`` with ``sed`` can change it)."""
"""Line numbers listed when ``old`` occurs several times."""

PositiveInt = Annotated[int, Field(ge=1)]
_LINE_NUMBER_PREFIX = re.compile(r"^\s*\d+\t")


# --- read ------------------------------------------------------------------------------------------------------


def read_file(workspace: Workspace, path: str, *, offset: int = 1, limit: int, max_bytes: int) -> str:
    """Lines ``offset`` .. ``offset + limit - 1`` of a text file, numbered, within ``max_bytes`` of output."""
    real = workspace.resolve(path)
    name = workspace.display(real)
    if real.is_dir():
        raise ToolError(f"{name!r} is a directory, not a file; read a file inside it.")
    with _open_binary(workspace, real) as stream:
        if looks_binary(stream.read(SNIFF_BYTES)):
            raise ToolError(f"{name!r} is a binary file; only text files can be read.")
        stream.seek(0)
        shown: list[str] = []
        used = 0
        number = 0
        stopped_at: int | None = None  # the first line not shown, when lines were left
        for line, cut in _lines(stream):
            number += 1
            if number < offset:
                if stream.tell() > MAX_SCAN_BYTES:
                    raise ToolError(
                        f"{name!r} is too long to reach line {offset} by reading: the first "
                        f"{MAX_SCAN_BYTES // 1024 // 1024} MiB hold {number} lines. Use bash (sed -n, tail) for it."
                    )
                continue
            text = _number_line(number, line, cut)
            size = len(text.encode()) + 1
            if len(shown) >= limit or (shown and used + size > max_bytes):
                stopped_at = number
                break
            shown.append(text)
            used += size
        left, counted = (0, True) if stopped_at is None else _count_lines(stream, MAX_SCAN_BYTES)
        total = number if stopped_at is None else stopped_at + left
    workspace.note_read(real)
    if total == 0:
        return f"({name} is empty)"
    if offset > total:
        raise ToolError(f"offset={offset} is past the end of {name!r}, which has {total} lines.")
    if stopped_at is not None:
        more = f"{total - stopped_at + 1}" if counted else f"at least {total - stopped_at + 1}"
        shown.append(f"[truncated: {more} more lines; read again with offset={stopped_at}]")
    return "\n".join(shown)


def looks_binary(sample: bytes) -> bool:
    """Whether a file's first bytes are binary: a NUL byte, or mostly bytes that are not UTF-8."""
    if b"\0" in sample:
        return True
    if not sample:
        return False
    decoded = sample.decode("utf-8", "surrogateescape")
    undecodable = sum(1 for char in decoded if "\udc80" <= char <= "\udcff")
    if len(sample) == SNIFF_BYTES:  # the sample may end inside a character
        undecodable = max(0, undecodable - 3)
    return undecodable > BINARY_UNDECODABLE_SHARE * len(sample)


def _open_binary(workspace: Workspace, real: Path) -> IO[bytes]:
    return os.fdopen(workspace.open_file(real), "rb")


def _lines(stream: IO[bytes]) -> Iterator[tuple[bytes, int]]:
    """Each line's first ``MAX_LINE_BYTES`` bytes and how many more it had, in bounded memory."""
    while piece := stream.readline(MAX_LINE_BYTES):
        cut = 0
        if len(piece) == MAX_LINE_BYTES and not piece.endswith(b"\n"):
            while more := stream.readline(MAX_LINE_BYTES):
                cut += len(more)
                if more.endswith(b"\n"):
                    cut -= 1  # the newline is not part of the line
                    break
        yield piece, cut


def _count_lines(stream: IO[bytes], budget: int) -> tuple[int, bool]:
    """The lines left in ``stream``, counted over at most ``budget`` bytes; whether that was all of them."""
    count, last, read = 0, b"\n", 0
    while chunk := stream.read(1 << 20):
        count += chunk.count(b"\n")
        last = chunk[-1:]
        read += len(chunk)
        if read >= budget:
            return count, False
    return count + (last != b"\n"), True


def _number_line(number: int, line: bytes, cut: int) -> str:
    text = line.decode("utf-8", "replace").removesuffix("\n").removesuffix("\r")
    if cut:
        text += f" [... line truncated: {cut} more bytes]"
    return f"{number:>6}\t{text}"


def read_tool(
    workspace: Workspace, *, max_bytes: int = DEFAULT_READ_BYTES, default_limit: int = DEFAULT_READ_LINES
) -> Tool:
    """The ``read`` tool for ``workspace``."""

    def read(path: str, offset: PositiveInt = 1, limit: PositiveInt = default_limit) -> str:
        """Read a text file in the workspace.

        Args:
            path: The file, relative to the workspace root.
            offset: The first line to show, counting from 1.
            limit: How many lines to show at most.
        """
        return read_file(workspace, path, offset=offset, limit=limit, max_bytes=max_bytes)

    description = (
        "Read a text file in the workspace. Each line comes back prefixed with its line number and a tab "
        "(the prefix is not part of the file; leave it out when you edit). "
        f"One call returns at most {default_limit} lines (or `limit`) and {max_bytes} bytes; when lines are "
        "left the output ends with '[truncated: N more lines; read again with offset=K]': call again with "
        f"that offset to go on. Lines longer than {MAX_LINE_BYTES} bytes are cut. Binary files are refused. "
        "Paths outside the workspace are refused with permission_denied."
    )
    return Tool.from_function(read, description=description, concurrent=True, read_only=True)


# --- write -----------------------------------------------------------------------------------------------------


def write_file(workspace: Workspace, path: str, content: str, *, create_dirs: bool, overwrite: bool) -> str:
    """Create or replace a file atomically; see :func:`write_tool` for the rules."""
    real = workspace.resolve(path)
    name = workspace.display(real)
    if real.is_dir():
        raise ToolError(f"{name!r} is a directory; give the path of a file.")
    existed = os.path.lexists(real)
    if existed and not overwrite and not workspace.was_read(real):
        raise PermissionDenied(
            f"Refused to overwrite {name!r}: it exists and you have not read it in this run. Read it first "
            "(or use edit to change part of it), or pass overwrite=true to replace it entirely."
        )
    parent = real.parent
    if not parent.is_dir():
        folder = workspace.display(parent)
        if os.path.lexists(parent):
            raise ToolError(f"Cannot create {name!r}: {folder!r} is a file, not a directory.")
        if not create_dirs:
            raise ToolError(
                f"Cannot create {name!r}: the directory {folder!r} does not exist. Pass create_dirs=true to create it."
            )
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError as error:
            raise ToolError(f"Cannot create the directory {folder!r}: {error.strerror or error}.") from None
        real = workspace.resolve(path)  # check again what now exists
    data = content.encode("utf-8", "replace")
    try:
        atomic_write(workspace, real, data)
    except OSError as error:
        raise ToolError(f"Could not write {name!r}: {error.strerror or error}. The file is unchanged.") from None
    workspace.note_read(real)
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    return f"{'Overwrote' if existed else 'Created'} {name} ({len(data)} bytes, {lines} lines)."


def atomic_write(workspace: Workspace, real: Path, data: bytes) -> None:
    """Replace ``real`` with ``data`` by :func:`tether.atomic.replace_file` (old content or new, never half;
    the old file's permission bits kept), through a descriptor of the checked directory: the rename lands in
    the directory that was checked, and replaces a symlink swapped in at the target rather than following it.
    """
    dir_fd = workspace.open_directory(real.parent)
    try:
        replace_file(real.name, data, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def write_tool(workspace: Workspace) -> Tool:
    """The ``write`` tool for ``workspace``."""

    def write(path: str, content: str, create_dirs: bool = False, overwrite: bool = False) -> str:
        """Create or replace a file in the workspace.

        Args:
            path: The file, relative to the workspace root.
            content: The whole new content of the file.
            create_dirs: Create missing parent directories.
            overwrite: Replace an existing file even though you have not read it.
        """
        return write_file(workspace, path, content, create_dirs=create_dirs, overwrite=overwrite)

    description = (
        "Create a file in the workspace, or replace the whole content of one. The file is written atomically: "
        "it never ends up half-written. An existing file can only be replaced after you have read it in this "
        "run, or with overwrite=true (refused with permission_denied otherwise). A missing parent directory "
        "is an error unless create_dirs=true. To change part of a file, use edit instead. "
        "Paths outside the workspace are refused with permission_denied."
    )
    return Tool.from_function(write, description=description)


# --- edit ------------------------------------------------------------------------------------------------------


def edit_file(workspace: Workspace, path: str, old: str, new: str, *, replace_all: bool) -> str:
    """Replace ``old`` with ``new`` in a file (once, or everywhere) and return a unified diff."""
    if not old:
        raise ToolError("`old` is empty: give the exact text to replace (to create a file, use write).")
    if old == new:
        raise ToolError("`old` and `new` are the same: there is nothing to change.")
    real = workspace.resolve(path)
    name = workspace.display(real)
    if real.is_dir():
        raise ToolError(f"{name!r} is a directory, not a file.")
    with _open_binary(workspace, real) as stream:
        size = os.fstat(stream.fileno()).st_size
        if size > MAX_EDIT_BYTES:
            raise ToolError(
                f"{name!r} is {size // 1024 // 1024} MiB; edit changes files up to {MAX_EDIT_BYTES // 1024 // 1024} "
                "MiB (use bash with sed for a larger one). Nothing was changed."
            )
        data = stream.read(MAX_EDIT_BYTES + 1)
    if len(data) > MAX_EDIT_BYTES:
        raise ToolError(
            f"{name!r} grew past {MAX_EDIT_BYTES // 1024 // 1024} MiB while it was read; nothing was changed."
        )
    if looks_binary(data[:SNIFF_BYTES]):
        raise ToolError(f"{name!r} is a binary file; only text files can be edited.")
    text = data.decode("utf-8", "surrogateescape")
    workspace.note_read(real)
    count = text.count(old)
    if count == 0:
        raise ToolError(_not_found_message(name, text, old))
    if count > 1 and not replace_all:
        lines = match_lines(text, old)
        listed = ", ".join(map(str, lines[:MAX_LISTED_MATCHES])) + (", ..." if count > MAX_LISTED_MATCHES else "")
        raise ToolError(
            f"`old` occurs {count} times in {name!r}, at lines {listed}. Nothing was changed. Include more of "
            "the surrounding text so that it matches exactly once, or pass replace_all=true to replace all."
        )
    updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    try:
        encoded = updated.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise ToolError("`new` contains characters that cannot be written as UTF-8 (lone surrogates).") from None
    try:
        atomic_write(workspace, real, encoded)
    except OSError as error:
        raise ToolError(f"Could not write {name!r}: {error.strerror or error}. The file is unchanged.") from None
    plural = "occurrence" if count == 1 else "occurrences"
    return f"Edited {name}: replaced {count} {plural}.\n" + unified_diff(name, text, updated)


def match_lines(text: str, old: str) -> list[int]:
    """The line number (from 1) where each non-overlapping occurrence of ``old`` starts."""
    lines: list[int] = []
    line, counted, start = 1, 0, 0
    while (index := text.find(old, start)) != -1:
        line += text.count("\n", counted, index)
        counted = index
        lines.append(line)
        start = index + len(old)
    return lines


def _not_found_message(name: str, text: str, old: str) -> str:
    message = f"`old` was not found in {name!r}; nothing was changed. It must match the file exactly"
    message += " (whitespace and indentation included)."
    if _LINE_NUMBER_PREFIX.match(old):
        message += " Leave out the line-number prefixes that read shows."
    elif "\r\n" in text and "\r" not in old and old.replace("\n", "\r\n") in text:
        message += " The file uses CRLF line endings: write them as \\r\\n in `old` and `new`."
    elif old.strip() and old.strip() in text:
        message += " It matches only without its leading or trailing whitespace."
    else:
        message += " Read the file again to copy the current text."
    return message


def unified_diff(name: str, before: str, after: str) -> str:
    """A unified diff of the change with three lines of context, cut at ``MAX_DIFF_CHARS``."""
    lines = difflib.unified_diff(
        _display(before).splitlines(keepends=True),
        _display(after).splitlines(keepends=True),
        f"a/{name}",
        f"b/{name}",
        n=3,
    )
    out: list[str] = []
    size = 0
    for line in lines:
        shown = line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
        if size + len(shown) > MAX_DIFF_CHARS:
            out.append(f"[diff truncated: {1 + sum(1 for _ in lines)} more lines]\n")
            break
        out.append(shown)
        size += len(shown)
    return "".join(out).rstrip("\n")


def _display(text: str) -> str:
    """Text as the model may read it: bytes that were not UTF-8 shown as replacement characters."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def edit_tool(workspace: Workspace) -> Tool:
    """The ``edit`` tool for ``workspace``."""

    def edit(path: str, old: str, new: str, replace_all: bool = False) -> str:
        """Replace exact text in a file in the workspace.

        Args:
            path: The file, relative to the workspace root.
            old: The exact text to replace, as it is in the file.
            new: The text to put in its place.
            replace_all: Replace every occurrence instead of requiring exactly one.
        """
        return edit_file(workspace, path, old, new, replace_all=replace_all)

    description = (
        "Replace an exact piece of text in a file in the workspace. `old` must occur exactly once (include "
        "enough surrounding lines to make it unique) unless replace_all=true, which replaces every occurrence. "
        "Matching is exact: whitespace and indentation count, and read's line-number prefixes are not part of "
        "the file. When `old` is not found, or found several times (the error lists the lines), nothing is "
        "changed. Returns a unified diff of the change. The file is written atomically. "
        "Paths outside the workspace are refused with permission_denied."
    )
    return Tool.from_function(edit, description=description)


# --- groups ----------------------------------------------------------------------------------------------------


def read_tools(
    workspace: Workspace, *, max_read_bytes: int = DEFAULT_READ_BYTES, max_read_lines: int = DEFAULT_READ_LINES
) -> list[Tool]:
    """The tools that only look at ``workspace``: ``read``."""
    return [read_tool(workspace, max_bytes=max_read_bytes, default_limit=max_read_lines)]


def write_tools(workspace: Workspace) -> list[Tool]:
    """The tools that change files in ``workspace``: ``write`` and ``edit``."""
    return [write_tool(workspace), edit_tool(workspace)]


def file_tools(
    workspace: Workspace, *, max_read_bytes: int = DEFAULT_READ_BYTES, max_read_lines: int = DEFAULT_READ_LINES
) -> list[Tool]:
    """Every file tool for ``workspace``: ``read``, ``write`` and ``edit``."""
    return read_tools(workspace, max_read_bytes=max_read_bytes, max_read_lines=max_read_lines) + write_tools(workspace)
