"""OutputCache: tool outputs too long for the model's context, kept whole, previewed, and read on demand.

The contract
------------
* One cache per run. A tool's output longer than the threshold (``Agent(cache_tool_outputs=8_000)``
  characters, or the tool's ``max_output`` or the agent's ``max_tool_output`` when one of those is smaller) is
  kept whole under a *ref*, and the model gets its *preview* instead: the head and the tail of the text,
  together half the threshold (two thirds head, one third tail, each cut at a line end when one is near), and
  between them one marked line saying how much is not shown, the ref, and how to read the rest. A preview is
  never longer than the threshold, except that it always keeps its whole reference line (about 300
  characters), so a tool with a tiny ``max_output`` gets that line alone.
* Refs are content addresses (``out-`` and 16 hex digits of BLAKE2b: ``sessions.base.output_ref``), so the
  same output is kept once however often a tool returns it.
* The model reads a kept output with the built-in read-only tool ``read_tool_output(ref, offset=0,
  limit=..., find=None)``: ``limit`` characters from ``offset`` (at most :attr:`OutputCache.max_read`, which
  is also the default), each page headed by where it is and where to read on; or, with ``find``, the lines
  that contain a text (ignoring case) from ``offset`` on, each with the offset of its line, for searching a
  long log. Offsets count characters (Python string indices) of the whole output. The tool's results are
  bounded by the threshold and never cached again. It is offered only once there is something to read: from
  the first output cached in the run, or from the start when the history holds a preview.
* Mistakes are error results with the code ``invalid_arguments``, never exceptions: an unknown ref
  (mistyped, or made by a run whose outputs were not kept, such as one continued with ``history=`` and no
  session store), an offset past the end, an argument of the wrong type. A limit above the most is lowered
  to it.
* Persistence: in a session whose store is an :class:`~tether.sessions.base.OutputStore`, new outputs are
  pending until :meth:`OutputCache.flush` writes them to it; the run flushes before each checkpoint, so a
  saved transcript never names a ref its store lacks. A ref not in memory is looked up in the store (an
  output of an earlier run of the session). Outputs already in the store are dropped from memory, least
  recently used first, while those kept pass ``memory_budget`` characters; pending ones never are. Without a
  store, every output stays in memory for the run's life, and only that run can read it.
* What is kept is what the model would otherwise have read: the executor masks known keys first.
* Compaction may show an old preview by its :func:`reference_stub` alone; :func:`reference_in` finds the ref
  a preview carries.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from tether.errors import ConfigInvalid, InvalidArguments
from tether.messages import Message, ToolResult
from tether.sessions.base import output_ref
from tether.tools.base import Tool
from tether.tools.schema import BoundArguments, ContextParameter

if TYPE_CHECKING:
    from tether.sessions.base import OutputStore

READ_TOOL = "read_tool_output"
"""The built-in reader's name, reserved while the cache is on."""
DEFAULT_THRESHOLD = 8_000
"""Characters of output above which the model gets a preview (about 2,000 tokens)."""
MIN_THRESHOLD = 1_000
"""The smallest threshold an agent accepts: below it the reference line would be most of every preview."""
MAX_CACHED = 64 * 1024 * 1024
"""Characters of the longest output kept; a longer one is cut to the output limit, as with the cache off."""
DEFAULT_MEMORY_BUDGET = 64 * 1024 * 1024
"""Characters of stored outputs a cache keeps in memory besides its pending ones."""
MATCH_WIDTH = 200
"""Characters of a matching line that ``find`` shows."""
_READ_HEADER_ROOM = 200
"""Characters kept free in a reader's result for its header."""
_CUT_WINDOW = 5
"""A preview's head ends at a line end found in its last fifth (its tail starts after one in its first)."""
_MARKER = re.compile(
    r"\n\[\.\.\. (\d{1,12}) of (\d{1,12}) characters not shown \(offsets (\d{1,12}) to -?\d{1,12}\)\. "
    r"The whole output (?:of [A-Za-z0-9_-]{1,64} )?is stored as (out-[0-9a-f]{16}): "
)
"""The reference line of a preview: hidden and total characters, where the hidden part starts, the ref."""


class OutputCache:
    """The outputs a run kept whole (see the module docstring)."""

    __slots__ = (
        "_entries", "_pending", "_referenced", "_size", "_tool", "memory_budget", "offered",
        "session_id", "store", "threshold",
    )  # fmt: skip

    def __init__(
        self,
        threshold: int = DEFAULT_THRESHOLD,
        *,
        cap: int | None = None,
        store: OutputStore | None = None,
        session_id: str | None = None,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
    ) -> None:
        if store is not None and session_id is None:
            raise ConfigInvalid("an output cache bound to a store needs the session's id")
        self.threshold = threshold if cap is None else min(threshold, cap)
        """Outputs longer than this (or than a tool's own ``max_output``) are kept and previewed."""
        self.store = store
        self.session_id = session_id
        self.memory_budget = memory_budget
        self.offered = False
        """The run offers the reader to the model (set by the run when it does)."""
        self._entries: dict[str, str] = {}
        """Ref -> output, least recently used first (a dict keeps its order; an ``OrderedDict`` is bigger)."""
        self._pending: dict[str, str] | None = None
        """Kept outputs not yet written to the store (made with the first, so a run without a store, or without a
        long output, keeps no dict for it)."""
        self._size = 0
        self._referenced = False
        self._tool: Tool | None = None

    @property
    def max_read(self) -> int:
        """The most characters one read gives (and the default); worked out when asked, not kept by every run."""
        return max(self.threshold - _READ_HEADER_ROOM, 100)

    # --- keeping ----------------------------------------------------------------------------------------

    def keeps(self, name: str, length: int, limit: int | None = None) -> bool:
        """Whether an output of ``length`` characters from tool ``name`` is kept and previewed (``limit``:
        the tool's output limit, when it has one smaller than the threshold)."""
        return name != READ_TOOL and self._budget(limit) < length <= MAX_CACHED

    def put(self, content: str, *, name: str, limit: int | None = None) -> str:
        """Keep ``content`` whole and return the preview the model gets (at most ``limit`` characters, and
        the threshold, but for its reference line)."""
        ref = output_ref(content)
        if ref in self._entries:
            self._entries[ref] = self._entries.pop(ref)  # now the most recently used
        else:
            self._entries[ref] = content
            self._size += len(content)
            if self.store is not None:
                if self._pending is None:
                    self._pending = {}
                self._pending[ref] = content
        self._trim()
        return preview(content, ref, self._budget(limit), name=name)

    def notice(self, messages: Iterable[Message]) -> bool:
        """Take note of previews in a run's history (the model may want to read them); whether it holds one."""
        self._referenced = self._referenced or holds_reference(messages)
        return self._referenced

    @property
    def needed(self) -> bool:
        """Whether the model has anything to read: an output was kept, or the history holds a preview."""
        return self._referenced or bool(self._entries)

    @property
    def pending(self) -> tuple[str, ...]:
        """Refs not yet written to the store."""
        return tuple(self._pending or ())

    async def flush(self) -> None:
        """Write the pending outputs to the store (nothing without one); the run calls it before each
        checkpoint. An output whose write fails stays pending, and the error propagates."""
        store, session_id = self.store, self.session_id
        if store is None or session_id is None:
            return
        pending = self._pending or {}
        for ref, content in list(pending.items()):
            await store.save_output(session_id, ref, content)
            pending.pop(ref, None)
        self._trim()

    def _budget(self, limit: int | None) -> int:
        return self.threshold if limit is None else min(self.threshold, limit)

    def _trim(self) -> None:
        """Forget outputs the store holds, least recently used first, while more than the budget is kept."""
        if self.store is None or self._size <= self.memory_budget:
            return
        for ref in list(self._entries):
            if self._size <= self.memory_budget:
                break
            if self._pending is None or ref not in self._pending:
                self._size -= len(self._entries.pop(ref))

    # --- reading ----------------------------------------------------------------------------------------

    async def lookup(self, ref: str) -> str | None:
        """The whole output kept under ``ref``: from memory, else from the session's store; ``None`` if neither
        has it."""
        content = self._entries.get(ref)
        if content is not None:
            self._entries[ref] = self._entries.pop(ref)
            return content
        if self.store is None or self.session_id is None or _REF.fullmatch(ref) is None:
            return None
        content = await self.store.load_output(self.session_id, ref)
        if content is not None:
            self._entries[ref] = content
            self._size += len(content)
            self._trim()
        return content

    async def read(self, ref: str, offset: int = 0, limit: int | None = None) -> str:
        """``limit`` characters (at most :attr:`max_read`, the default) of the output ``ref`` from ``offset``;
        ``InvalidArguments`` for an unknown ref or an offset past the end."""
        content = await self._whole(ref)
        _check_offset(ref, offset, len(content))
        return content[offset : offset + self._limit(limit)]

    async def page(self, ref: str, offset: int = 0, limit: int | None = None) -> str:
        """What the reader tool returns: :meth:`read`'s text under a header saying where it is and where to
        read on."""
        content = await self._whole(ref)
        total = len(content)
        _check_offset(ref, offset, total)
        end = min(offset + self._limit(limit), total)
        if end == offset:
            return f"[{ref}: {total} characters; offset {offset} is the end, nothing more to read]"
        where = f"[{ref}: characters {offset} to {end - 1} of {total}"
        more = f"; read on with offset={end}]" if end < total else "; this is the end]"
        return f"{where}{more}\n{content[offset:end]}"

    async def find(self, ref: str, text: str, offset: int = 0, limit: int | None = None) -> str:
        """The lines of output ``ref`` containing ``text`` (ignoring case) from ``offset`` on, each with the
        offset of its start and its number, within ``limit`` characters; then where to search on."""
        content = await self._whole(ref)
        _check_offset(ref, offset, len(content))
        if not text:
            raise InvalidArguments(f"Invalid arguments for tool {READ_TOOL!r}: find must not be empty.")
        budget = self._limit(limit)
        if len(content) - offset < ON_LOOP_FIND:
            return _matches(ref, content, text, offset, budget)
        return await asyncio.to_thread(_matches, ref, content, text, offset, budget)

    async def _whole(self, ref: str) -> str:
        content = await self.lookup(ref)
        if content is None:
            raise InvalidArguments(_unknown(ref, self.store is not None))
        return content

    def _limit(self, limit: int | None) -> int:
        return self.max_read if limit is None else max(1, min(limit, self.max_read))

    # --- the tool ---------------------------------------------------------------------------------------

    @property
    def tool(self) -> Tool:
        """The built-in ``read_tool_output`` tool reading this cache (read-only, made once)."""
        if self._tool is None:
            self._tool = Tool(
                READ_TOOL,
                _description(self.max_read),
                self._call,
                _ReaderArguments(self.max_read),
                read_only=True,
                concurrent=True,
            )
        return self._tool

    async def _call(self, ref: str, offset: int = 0, limit: int | None = None, find: str | None = None) -> str:
        if find is not None:
            return await self.find(ref, find, offset, limit)
        return await self.page(ref, offset, limit)


# --- previews ---------------------------------------------------------------------------------------------


def preview(content: str, ref: str, budget: int, *, name: str | None = None) -> str:
    """``content`` as the model sees it when kept under ``ref``: head, reference line, tail, within ``budget``
    characters but for the reference line."""
    total = len(content)
    room = budget - len(_marker(total, 0, total, ref, name)) - 2 * len(str(total))  # its widest numbers
    body = max(min(budget // 2, room), 0)
    head = _line_end(content, body * 2 // 3)
    tail = _line_start(content, total - (body - body * 2 // 3))
    return content[:head] + _marker(total, head, tail, ref, name) + content[tail:]


def _marker(total: int, head: int, tail: int, ref: str, name: str | None) -> str:
    whose = f"of {name} " if name else ""
    return (
        f"\n[... {tail - head} of {total} characters not shown (offsets {head} to {tail - 1}). The whole output "
        f'{whose}is stored as {ref}: read_tool_output(ref="{ref}", offset={head}) reads on from here, and '
        f'find="some text" lists the lines that contain it ...]\n'
    )


def _line_end(content: str, end: int) -> int:
    """``end``, or just past a line end in the last fifth before it."""
    cut = content.rfind("\n", end - end // _CUT_WINDOW, end)
    return cut + 1 if cut >= 0 else end


def _line_start(content: str, start: int) -> int:
    """``start``, or just past a line end in the first fifth after it."""
    cut = content.find("\n", start, start + (len(content) - start) // _CUT_WINDOW)
    return cut + 1 if cut >= 0 else start


def _reference(content: str) -> tuple[str, int] | None:
    """The ref and the total length named by the reference line of a preview, or ``None``.

    The line counts only where it says the hidden part starts, so a tool output that merely quotes such a
    line (a preview printed by a tool) is not taken for one.
    """
    if "characters not shown" not in content:
        return None
    for match in _MARKER.finditer(content):
        if match.start() == int(match.group(3)):
            return match.group(4), int(match.group(2))
    return None


def reference_in(content: str) -> str | None:
    """The ref a preview carries, or ``None`` when ``content`` is not a preview."""
    found = _reference(content)
    return None if found is None else found[0]


def reference_stub(result: ToolResult) -> str | None:
    """The short text that stands for a previewed result when older outputs are trimmed, or ``None`` when
    ``result`` is not a preview."""
    found = _reference(result.content)
    if found is None:
        return None
    ref, total = found
    return (
        f'[output of {result.name}, {total} characters, stored as {ref}: read_tool_output(ref="{ref}") reads '
        f'it, find="some text" searches it]'
    )


def holds_reference(messages: Iterable[Message]) -> bool:
    """Whether any tool result of ``messages`` is a preview."""
    return any(
        reference_in(part.content) is not None
        for message in messages
        if message.role == "tool"
        for part in message.parts
        if type(part) is ToolResult
    )


# --- the reader's arguments and results -------------------------------------------------------------------

_REF = re.compile(r"out-[0-9a-f]{16}")


def _unknown(ref: str, stored: bool) -> str:
    if _REF.fullmatch(ref) is None:
        return (
            f"Invalid arguments for tool {READ_TOOL!r}: {ref[:40]!r} is not a ref; a ref is 'out-' and 16 hex "
            "digits, as an output's preview gives it."
        )
    where = "this session" if stored else "this run (outputs of earlier runs are kept only in a session)"
    return (
        f"Invalid arguments for tool {READ_TOOL!r}: no output {ref} is stored in {where}. It may be mistyped, "
        "or have expired; run the tool again to see its output."
    )


def _check_offset(ref: str, offset: int, total: int) -> None:
    if offset > total:
        raise InvalidArguments(
            f"Invalid arguments for tool {READ_TOOL!r}: offset {offset} is past the end of {ref}, which has "
            f"{total} characters (offsets 0 to {total - 1})."
        )


ON_LOOP_FIND = 65_536
"""Characters searched on the event loop; a longer search runs on a worker thread, so no run waits on it."""


def _matches(ref: str, content: str, text: str, offset: int, budget: int) -> str:
    """The listing ``find`` returns (see :meth:`OutputCache.find`); may run in a worker thread. The search is
    linear in the output whatever the pattern (``str.find`` on lower-cased text; a regular expression of a long
    literal is quadratic)."""
    lines: list[str] = []
    used, line_no, counted = 0, content.count("\n", 0, offset) + 1, offset
    position, resume = offset, None
    search = _searcher(content, text)
    while (found := search(position)) is not None:
        start = content.rfind("\n", 0, found[0]) + 1
        end = content.find("\n", found[1])
        end = len(content) if end < 0 else end
        line_no += content.count("\n", counted, start)
        counted = start
        shown = content[start:end]
        shown = shown if len(shown) <= MATCH_WIDTH else shown[:MATCH_WIDTH] + "…"
        entry = f"offset={start} line={line_no}: {shown}"
        if used + len(entry) + 1 > budget and lines:
            resume = max(start, offset)
            break
        lines.append(entry)
        used += len(entry) + 1
        position = end + 1
    head = f"[{ref}: {len(lines)} lines containing {text[:80]!r} (any case) from offset {offset}"
    tail = f"; more: find again with offset={resume}]" if resume is not None else "; no more]"
    return "\n".join([head + tail, *lines])


def _searcher(content: str, text: str) -> Callable[[int], tuple[int, int] | None]:
    """Where ``text`` next occurs in ``content`` from a position, ignoring case: ``(start, end)`` or ``None``.
    Both are lower-cased once and searched with ``str.find``; where lower-casing changes the length of the text
    (a few characters, such as "İ", lower to two), the case-insensitive regular expression keeps the offsets."""
    haystack, needle = content.lower(), text.lower()
    if len(haystack) == len(content) and len(needle) == len(text):

        def lowered(position: int) -> tuple[int, int] | None:
            at = haystack.find(needle, position)
            return None if at < 0 else (at, at + len(needle))

        return lowered
    pattern = re.compile(re.escape(text), re.IGNORECASE)

    def matched(position: int) -> tuple[int, int] | None:
        match = pattern.search(content, position)
        return None if match is None else match.span()

    return matched


def _description(max_read: int) -> str:
    return (
        "Read a tool output too long to be shown whole: its preview names it by a ref (out-...). Returns up "
        f"to `limit` characters (at most and by default {max_read}) from `offset` (0 is its first character), "
        "under a header saying where you are and where to read on. With `find`, lists instead the lines "
        "that contain that text (ignoring case) from `offset` on, each with the offset of its line."
    )


class _ReaderArguments:
    """The reader's arguments, checked by hand: no schema library per run, and a clear word for each
    mistake (a negative offset, a number given as a fraction or a boolean, a field it does not take)."""

    __slots__ = ("parameters",)
    context: ContextParameter | None = None
    """The reader takes no run context."""

    def __init__(self, max_read: int) -> None:
        self.parameters: dict[str, Any] = {
            "type": "object",
            "properties": {
                "ref": {"type": "string", "description": "The ref from the output's preview (out-...)."},
                "offset": {"type": "integer", "minimum": 0, "description": "The first character to read; 0."},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "description": f"How many characters to read (at most and by default {max_read}).",
                },
                "find": {
                    "type": "string",
                    "description": "List the lines containing this text (ignoring case) instead of reading.",
                },
            },
            "required": ["ref"],
            "additionalProperties": False,
        }

    def validate(self, tool_name: str, arguments: dict[str, Any]) -> BoundArguments:
        problems = [f"- {name}: unexpected field; remove it" for name in arguments if name not in _FIELDS]
        ref = arguments.get("ref")
        if not isinstance(ref, str):
            problems.append("- ref: required, a string such as 'out-0123456789abcdef'")
        values: dict[str, Any] = {"ref": ref}
        for name, least in (("offset", 0), ("limit", 1)):
            if arguments.get(name) is None:
                continue
            number = _whole(arguments[name])
            if number is None or number < least:
                problems.append(f"- {name}: must be a whole number, {least} or more (got {_short(arguments[name])})")
            values[name] = number
        find = arguments.get("find")
        if find is not None and not isinstance(find, str):
            problems.append(f"- find: must be a string (got {_short(find)})")
        values["find"] = find
        if problems:
            raise InvalidArguments("\n".join([f"Invalid arguments for tool {tool_name!r}:", *problems]))
        return BoundArguments((), values)


_FIELDS = frozenset(("ref", "offset", "limit", "find"))


def _whole(value: Any) -> int | None:
    """``value`` as a whole number: an int (not a bool), a float with no fraction, or a string of digits."""
    if type(value) is int:
        return value
    if type(value) is float and math.isfinite(value) and value == int(value):
        return int(value)
    if type(value) is str and 0 < len(value) <= 20 and value.isascii() and value.isdigit():
        return int(value)
    return None


def _short(value: Any, limit: int = 40) -> str:
    if type(value) is int and abs(value) >= 10**limit:
        return "a very long number"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
