"""Anthropic prompt caching: where the ``cache_control`` breakpoints of a Messages body go.

Anthropic caches a request's prefix (tools, then system, then messages, in that order) up to each block marked
``cache_control``; a later request that starts with the same bytes reads it at a tenth of the input price
instead of paying it again (a write costs 1.25 times the input price for five minutes, twice for an hour).
Without markers an agent pays its whole history at full price every turn. So every body gets, by priority:

1. the last block of the last message: the moving end, written now and read by the next turn;
2. the end of the system prompt (the last tool when there is none): the stable prefix, which compaction leaves
   as it is (it replaces messages only), so a compacted run still reads it;
3. the last tool, when there is a system prompt too (the tools stay cached when the system prompt changes);
4. the last block of the previous turn's last message: exactly where the previous request wrote, so a turn that
   added more than the API's twenty-block look-back still reads it.

The API refuses more than four breakpoints, and TTLs that grow along tools -> system -> messages. Breakpoints
already in the body (put there through ``ModelSettings.extra``: its ``tools``, ``system`` or top-level
``cache_control``) are kept and counted first; a marker of ours goes only where one fits in what is left and
keeps the TTLs non-increasing (the other TTL when the asked one would not, none when neither does).

Prefixes shorter than the model's minimum (1,024 to 4,096 tokens by model) are not cached, without error: the
markers then cost nothing. A ``thinking`` block cannot be marked; the marker goes to the last block that can.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from tether.errors import ConfigInvalid

PromptCache = Literal["off", "5m", "1h"]
PROMPT_CACHE_CHOICES: tuple[PromptCache, ...] = ("off", "5m", "1h")
MAX_BREAKPOINTS = 4
"""The most ``cache_control`` blocks the API takes in one request."""
_RANK = {"5m": 1, "1h": 2}
_END = 1 << 30
"""A block index past any real one: the end of a message whose blocks are not counted."""
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})
_USER_ITEM = b'{"role":"user"'

Position = tuple[int, int, int]
"""Where a breakpoint is, in the API's order: section (0 tools, 1 system, 2 messages), item, block."""


def checked_prompt_cache(value: object) -> PromptCache:
    """``value`` if it is a prompt cache setting, else a ``ConfigInvalid`` naming the choices."""
    if value not in PROMPT_CACHE_CHOICES:
        raise ConfigInvalid(f"prompt_cache must be one of 'off', '5m', '1h', not {value!r}")
    return value


def control(ttl: str) -> dict[str, str]:
    """The ``cache_control`` value for ``ttl`` (five minutes is the API's default and is sent without a TTL)."""
    return {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}


def place_breakpoints(body: dict[str, Any], ttl: str) -> None:
    """Mark ``body`` (see the module docstring). Its ``tools`` and ``messages`` are lists whose items are plain
    data or their JSON (``bytes``); a list or a value that came from the caller is copied, never changed."""
    taken = _existing(body)
    tools, system, messages = body.get("tools"), body.get("system"), body.get("messages")
    candidates: list[Position] = []
    if isinstance(messages, list) and messages:
        candidates.append((2, len(messages) - 1, _END))
    has_tools = isinstance(tools, list) and bool(tools)
    if system and isinstance(system, str | list):
        candidates.append((1, _system_end(system), 0))
    if has_tools:
        candidates.append((0, len(tools) - 1, 0))  # type: ignore[arg-type]
    if isinstance(messages, list) and len(messages) > 2:
        candidates.append((2, len(messages) - 3, _END))
    chosen: list[tuple[Position, str]] = []
    for position in candidates:
        if len(taken) + len(chosen) >= MAX_BREAKPOINTS:
            break
        if any(_same(position, p) for p, _ in taken):
            continue
        fitted = _fit(ttl, position, taken + chosen)
        if fitted is not None and _mark(body, position, fitted):
            chosen.append((position, fitted))


def _same(a: Position, b: Position) -> bool:
    return a[:2] == b[:2] and (a[2] == b[2] or _END in (a[2], b[2]))


def _fit(ttl: str, position: Position, placed: list[tuple[Position, str]]) -> str | None:
    """``ttl``, or else the other TTL, if it keeps the TTLs non-increasing with those ``placed``; else ``None``."""
    ceiling = min((_RANK[t] for p, t in placed if p < position), default=2)
    floor = max((_RANK[t] for p, t in placed if p > position), default=1)
    for choice in (ttl, "1h" if ttl == "5m" else "5m"):
        if floor <= _RANK[choice] <= ceiling:
            return choice
    return None


def _ttl_of(value: object) -> str:
    return "1h" if isinstance(value, dict) and value.get("ttl") == "1h" else "5m"


def _existing(body: dict[str, Any]) -> list[tuple[Position, str]]:
    """The breakpoints already in ``body``: in plain-data tools, system blocks and message blocks, and a top-level
    ``cache_control`` (the API's automatic caching, which marks the last block it can)."""
    found: list[tuple[Position, str]] = []
    for i, tool in enumerate(_plain(body.get("tools"))):
        if isinstance(tool, dict) and "cache_control" in tool:
            found.append(((0, i, 0), _ttl_of(tool["cache_control"])))
    system = body.get("system")
    if isinstance(system, list):
        for i, block in enumerate(system):
            if isinstance(block, dict) and "cache_control" in block:
                found.append(((1, i, 0), _ttl_of(block["cache_control"])))
    messages = body.get("messages")
    for i, item in enumerate(_plain(messages)):
        content = item.get("content") if isinstance(item, dict) else None
        for j, block in enumerate(content if isinstance(content, list) else ()):
            if isinstance(block, dict) and "cache_control" in block:
                found.append(((2, i, j), _ttl_of(block["cache_control"])))
    if "cache_control" in body and isinstance(messages, list) and messages:
        found.append(((2, len(messages) - 1, _END), _ttl_of(body["cache_control"])))
    return found


def _plain(items: object) -> list[Any]:
    """``items`` if it is a list of plain data (the caller's, through ``extra``), else nothing to look through: a
    list of kept JSON is tether's own, which has no breakpoints, and reading it would cost a check an item."""
    return items if isinstance(items, list) and items and not isinstance(items[0], bytes) else []


def _system_end(system: str | list[Any]) -> int:
    return 0 if isinstance(system, str) else len(system) - 1


def _mark(body: dict[str, Any], position: Position, ttl: str) -> bool:
    """Put a breakpoint at ``position``; ``False`` when nothing there can take one."""
    section, index, _ = position
    mark = control(ttl)
    if section == 0:
        tools = body["tools"] = list(body["tools"])
        tools[index] = _with_mark(tools[index], mark)
        return True
    if section == 1:
        system = body["system"]
        if isinstance(system, str):
            body["system"] = [{"type": "text", "text": system, "cache_control": mark}]
            return True
        last = system[index]
        if not isinstance(last, dict):
            return False
        body["system"] = [*system[:index], {**last, "cache_control": mark}]
        return True
    messages = body["messages"] = list(body["messages"])
    marked = _marked_message(messages[index], mark)
    if marked is None:
        return False
    messages[index] = marked
    return True


def _with_mark(item: Any, mark: dict[str, str]) -> Any:
    """A tool (plain data, or its JSON object) with ``mark``."""
    if isinstance(item, bytes):
        return item[:-1] + b',"cache_control":' + msgspec.json.encode(mark) + b"}"
    return {**item, "cache_control": mark}


def _marked_message(item: Any, mark: dict[str, str]) -> Any:
    """A message (plain data or its JSON) with ``mark`` on its last block that can take one; ``None`` if none can.
    A user message's JSON is marked in place of its closing ``}]}`` (every block of a user message can take a
    mark); an assistant message's is decoded, as its last blocks may be reasoning."""
    if isinstance(item, bytes):
        if item.startswith(_USER_ITEM) and item.endswith(b"}]}"):
            return item[:-3] + b',"cache_control":' + msgspec.json.encode(mark) + b"}]}"
        marked = _marked_message(msgspec.json.decode(item), mark)
        return None if marked is None else msgspec.json.encode(marked)
    content = item.get("content") if isinstance(item, dict) else None
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        return None
    for j in range(len(content) - 1, -1, -1):
        block = content[j]
        if isinstance(block, dict) and block.get("type") not in _UNMARKABLE:
            return {**item, "content": [*content[:j], {**block, "cache_control": mark}, *content[j + 1 :]]}
    return None
