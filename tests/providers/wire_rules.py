"""What each provider's API refuses: its structural rules, checked on the exact request bodies tether sends.

The contract, before the code:

* **Rules the real APIs enforce.** Each ``*_problems`` function checks one API's request body against the rules
  that API answers with HTTP 400 when broken (the API's own error text is quoted in the rule). It returns one
  sentence per broken rule, naming where; an empty list means the body keeps every rule known here. The rules
  are checked on recorded request bodies the real APIs accepted (``test_wire_rules.py``), so they are not
  stricter than the APIs, and each rule has a test showing it catches a body that breaks it.
* **The bodies tether sends.** :func:`wires` builds, for one :class:`~tether.providers.base.Request`, the body
  each provider sends, with the provider's own body builder (Chat Completions' from the bytes it posts): OpenAI
  Chat Completions, OpenAI Responses, Anthropic Messages, Gemini 2.5 and Gemini 3 (which requires the thought
  signature of each function call turn).
* **Signatures survive.** :func:`lost_signatures` lists the signatures (Anthropic thinking signatures, Gemini
  thought signatures, Responses' encrypted reasoning) that the messages carry for a provider and that its
  body does not send back on the same part.
* :func:`assert_every_provider_accepts` is all of that for one conversation: every body keeps its API's rules,
  and every provider gets its own signatures back; :func:`assert_request_accepted` is the same for a
  ``Request`` a run made.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tether.messages import Message, Text, Thinking, ToolCall
from tether.providers.anthropic import AnthropicProvider
from tether.providers.base import ModelSettings, Request, ToolChoice, ToolDefinition
from tether.providers.gemini import GeminiProvider
from tether.providers.gemini_stream import sent_without_id
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.openai_responses import OpenAIResponsesProvider

Body = dict[str, Any]

# --- Anthropic Messages ---------------------------------------------------------------------------------------

TOOL_USE_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
"""What Anthropic accepts as a ``tool_use`` id ("String should match pattern '^[a-zA-Z0-9_-]+$'")."""


def _blocks(content: Any) -> list[dict[str, Any]]:
    """A message's content as blocks: a string is one text block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []


def anthropic_problems(body: Body) -> list[str]:
    """Anthropic Messages: roles, blocks, tool use and results, thinking; one sentence per broken rule."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ["messages: at least one message is required"]
    problems: list[str] = []
    open_uses: list[str] = []
    for index, message in enumerate(messages):
        where, role = f"messages.{index}", message.get("role")
        blocks = _blocks(message.get("content"))
        if role not in ("user", "assistant"):
            problems.append(f"{where}: role {role!r} is neither 'user' nor 'assistant'")
        if index == 0 and role != "user":
            problems.append(f"{where}: the first message must use the user role")
        if index and messages[index - 1].get("role") == role:
            problems.append(f"{where}: roles must alternate between 'user' and 'assistant'")
        if not blocks:
            problems.append(f"{where}: all messages must have non-empty content")
        problems += [f"{where}: text content blocks must be non-empty" for b in blocks if _empty_text(b)]
        if role == "assistant":
            problems += _assistant_blocks(blocks, where)
            open_uses = [b.get("id", "") for b in blocks if b.get("type") == "tool_use"]
        else:
            problems += _answers(blocks, open_uses, where)
            open_uses = []
    if open_uses:
        problems.append(f"end: tool_use ids were found without tool_result blocks immediately after: {open_uses}")
    if messages[-1].get("role") != "user":
        problems.append("end: the conversation must end with a user message (Claude 4.6 and later refuse prefill)")
    if _uses_tools(messages) and not body.get("tools"):
        problems.append("tools: requests which include tool_use or tool_result blocks must define tools")
    return problems + _thinking_first(body, messages)


def _empty_text(block: dict[str, Any]) -> bool:
    return block.get("type") == "text" and not str(block.get("text") or "").strip()


def _assistant_blocks(blocks: list[dict[str, Any]], where: str) -> list[str]:
    """An assistant message's blocks: tool uses well formed, thinking signed, no tool results."""
    problems: list[str] = []
    ids = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
    for position, block in enumerate(blocks):
        at, kind = f"{where}.content.{position}", block.get("type")
        if kind == "tool_use":
            if not isinstance(block.get("id"), str) or not TOOL_USE_ID.match(block["id"]):
                problems.append(f"{at}: tool_use.id {block.get('id')!r} does not match {TOOL_USE_ID.pattern}")
            if not isinstance(block.get("input"), dict):
                problems.append(f"{at}: tool_use.input must be an object")
        elif kind == "thinking" and not block.get("signature"):
            problems.append(f"{at}: thinking.signature is required to replay a thinking block")
        elif kind == "redacted_thinking" and not block.get("data"):
            problems.append(f"{at}: redacted_thinking.data is required")
        elif kind == "tool_result":
            problems.append(f"{at}: tool_result blocks belong in a user message")
    if len(ids) != len(set(ids)):
        problems.append(f"{where}: tool_use ids must be unique: {ids}")
    return problems


def _answers(blocks: list[dict[str, Any]], open_uses: list[str], where: str) -> list[str]:
    """A user message after an assistant's tool uses begins with one tool_result for each; no other results."""
    problems: list[str] = []
    leading = []
    for block in blocks:
        if block.get("type") != "tool_result":
            break
        leading.append(block.get("tool_use_id"))
    results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
    if open_uses and Counter(leading) != Counter(open_uses):
        problems.append(
            f"{where}: did not find {len(open_uses)} tool_result block(s) at the beginning of this message: "
            f"messages following tool_use blocks must begin with a matching number of tool_result blocks"
        )
    if unexpected := [r for r in results if r not in open_uses]:
        problems.append(
            f"{where}: unexpected tool_use_id found in tool_result blocks: {unexpected}; each tool_result block "
            "must have a corresponding tool_use block in the previous message"
        )
    misplaced = [b for b in blocks if b.get("type") == "tool_use"]
    problems += [f"{where}: tool_use blocks belong in an assistant message" for _ in misplaced]
    return problems


def _uses_tools(messages: list[dict[str, Any]]) -> bool:
    return any(b.get("type") in ("tool_use", "tool_result") for m in messages for b in _blocks(m.get("content")))


def _thinking_first(body: Body, messages: list[dict[str, Any]]) -> list[str]:
    """With thinking on, the assistant message whose tool uses the last message answers starts with thinking
    ("a final assistant message must start with a thinking block (preceding the lastmost set of tool_use and
    tool_result blocks)")."""
    thinking = body.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") not in ("enabled", "adaptive") or len(messages) < 2:
        return []
    last, previous = _blocks(messages[-1].get("content")), _blocks(messages[-2].get("content"))
    if not last or last[0].get("type") != "tool_result" or not previous:
        return []
    if previous[0].get("type") in ("thinking", "redacted_thinking"):
        return []
    index = len(messages) - 2
    return [f"messages.{index}.content.0: expected thinking or redacted_thinking, found {previous[0].get('type')}"]


# --- OpenAI Chat Completions ----------------------------------------------------------------------------------

CHAT_ROLES = ("system", "developer", "user", "assistant", "tool")


def chat_problems(body: Body) -> list[str]:
    """Chat Completions: every tool call answered by a tool message before the next other message, and no tool
    message without its call."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ["messages: at least one message is required"]
    problems: list[str] = []
    pending: list[str] = []
    for index, message in enumerate(messages):
        where, role = f"messages[{index}]", message.get("role")
        if role not in CHAT_ROLES:
            problems.append(f"{where}: invalid role {role!r}")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                problems.append(
                    f"{where}: messages with role 'tool' must be a response to a preceding message with "
                    f"'tool_calls' (tool_call_id {call_id!r})"
                )
            else:
                pending.remove(call_id)
            continue
        if pending:
            problems.append(_unanswered(where, pending))
        pending = []
        if role == "assistant":
            problems += _chat_assistant(message, where)
            pending = [call.get("id") for call in message.get("tool_calls") or []]
    if pending:
        problems.append(_unanswered("end", pending))
    for field in ("tool_choice", "parallel_tool_calls"):
        if field in body and not body.get("tools"):
            problems.append(f"{field}: only allowed when tools are specified")
    return problems


def _unanswered(where: str, pending: list[str]) -> str:
    return (
        f"{where}: an assistant message with 'tool_calls' must be followed by tool messages responding to each "
        f"'tool_call_id'; these did not have response messages: {pending}"
    )


def _chat_assistant(message: dict[str, Any], where: str) -> list[str]:
    problems: list[str] = []
    calls = message.get("tool_calls") or []
    content = message.get("content")
    if not calls and not (isinstance(content, str) or (isinstance(content, list) and content)):
        problems.append(f"{where}: an assistant message needs content unless it has tool_calls")
    ids = [call.get("id") for call in calls]
    for position, call in enumerate(calls):
        at, function = f"{where}.tool_calls[{position}]", call.get("function") or {}
        if not call.get("id") or call.get("type") != "function" or not function.get("name"):
            problems.append(f"{at}: a tool call needs an id, type 'function' and a function name")
        if not isinstance(function.get("arguments"), str):
            problems.append(f"{at}: function.arguments must be a string")
    if len(ids) != len(set(ids)):
        problems.append(f"{where}: duplicate tool call ids {ids}")
    return problems


# --- OpenAI Responses ---------------------------------------------------------------------------------------

ITEM_PREFIXES = {"reasoning": "rs", "function_call": "fc", "message": "msg"}
"""The prefix each output item's id must have ("Expected an ID that begins with 'fc'")."""


def _kind(item: dict[str, Any]) -> str:
    kind = item.get("type")
    return kind if isinstance(kind, str) else ("message" if "role" in item else "")


def _is_output(item: dict[str, Any]) -> bool:
    """An item the model wrote: reasoning, a function call, or an assistant message."""
    kind = _kind(item)
    return kind in ("reasoning", "function_call") or (kind == "message" and item.get("role") == "assistant")


def responses_problems(body: Body) -> list[str]:
    """Responses: calls and outputs paired, reasoning items complete and followed by their output item, ids of
    output items only with their reasoning."""
    items = body.get("input")
    if isinstance(items, str):
        return []
    if not isinstance(items, list) or not items:
        return ["input: at least one item is required"]
    problems: list[str] = []
    calls: list[str] = []
    answered: set[str] = set()
    run_reasoned = False
    for index, item in enumerate(items):
        where, kind = f"input[{index}]", _kind(item)
        run_reasoned = run_reasoned and _is_output(item)
        problems += _item_id(item, kind, where, run_reasoned, body)
        if kind == "reasoning":
            run_reasoned = True
            if not _followed_by_output(items, index):
                problems.append(f"{where}: item of type 'reasoning' was provided without its required following item")
        elif kind == "function_call":
            calls.append(item.get("call_id", ""))
            if not isinstance(item.get("arguments"), str):
                problems.append(f"{where}: function_call.arguments must be a string")
        elif kind == "function_call_output":
            if item.get("call_id") not in calls:
                call_id = item.get("call_id")
                problems.append(f"{where}: no tool call found for function call output with call_id {call_id!r}")
            answered.add(item.get("call_id", ""))
        elif kind == "message" and item.get("role") not in ("user", "assistant", "system", "developer"):
            problems.append(f"{where}: invalid role {item.get('role')!r}")
    problems += [f"input: no tool output found for function call {call!r}" for call in calls if call not in answered]
    if len(calls) != len(set(calls)):
        problems.append(f"input: duplicate function_call call_ids {calls}")
    return problems


def _item_id(item: dict[str, Any], kind: str, where: str, run_reasoned: bool, body: Body) -> list[str]:
    """An output item's id: the right prefix; on a message or call only after a reasoning item of its turn;
    a reasoning item sent back statelessly carries its encrypted content."""
    problems: list[str] = []
    item_id = item.get("id")
    prefix = ITEM_PREFIXES.get(kind)
    if item_id is not None and prefix and _is_output(item) and not str(item_id).startswith(prefix):
        problems.append(f"{where}: expected an id that begins with {prefix!r}, not {item_id!r}")
    if item_id is not None and kind in ("function_call", "message") and _is_output(item) and not run_reasoned:
        missing = "was provided without its required 'reasoning' item"
        problems.append(f"{where}: item {item_id!r} of type {kind!r} {missing}")
    if kind == "reasoning" and body.get("store") is False and not item.get("encrypted_content"):
        problems.append(f"{where}: a reasoning item sent with store=false needs its encrypted_content")
    return problems


def _followed_by_output(items: list[dict[str, Any]], index: int) -> bool:
    """A message or function call follows the reasoning item at ``index`` within its turn's output items."""
    for item in items[index + 1 :]:
        if not _is_output(item):
            return False
        if _kind(item) != "reasoning":
            return True
    return False


# --- Gemini -------------------------------------------------------------------------------------------------


def _parts(content: dict[str, Any], key: str) -> list[dict[str, Any]]:
    return [part[key] for part in content.get("parts") or [] if isinstance(part, dict) and key in part]


def gemini_problems(body: Body, *, signs_calls: bool = False) -> list[str]:
    """Gemini: contents start with the user and alternate; each function call turn comes after a user turn and
    is answered by the next turn with as many function responses, for the same functions; with
    ``signs_calls`` (Gemini 3), the first function call of each model turn of the current turn is signed."""
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return ["contents: at least one content is required"]
    problems: list[str] = []
    for index, content in enumerate(contents):
        where, role = f"contents[{index}]", content.get("role")
        if role not in ("user", "model"):
            problems.append(f"{where}: role {role!r} is neither 'user' nor 'model'")
        if not content.get("parts"):
            problems.append(f"{where}: contents.parts must not be empty")
        if index == 0 and role != "user":
            problems.append(f"{where}: the first content should be with role 'user', got {role!r}")
        if index and contents[index - 1].get("role") == role:
            problems.append(f"{where}: multiturn requests must alternate between user and model")
        calls, responses = _parts(content, "functionCall"), _parts(content, "functionResponse")
        if role == "model" and calls:
            problems += _answered_by_next(contents, index, calls)
        if responses and (role != "user" or not index or not _parts(contents[index - 1], "functionCall")):
            problems.append(f"{where}: a function response turn must come immediately after a function call turn")
    return problems + (_unsigned_calls(contents) if signs_calls else [])


def _answered_by_next(contents: list[dict[str, Any]], index: int, calls: list[dict[str, Any]]) -> list[str]:
    where = f"contents[{index}]"
    if not index:
        return [f"{where}: a function call turn must come immediately after a user turn or a function response turn"]
    following = contents[index + 1] if index + 1 < len(contents) else None
    responses = _parts(following, "functionResponse") if following else []
    if len(responses) != len(calls):
        return [
            f"{where}: the number of function response parts ({len(responses)}) must equal the number of function "
            f"call parts of the function call turn ({len(calls)})"
        ]
    if Counter(c.get("name") for c in calls) != Counter(r.get("name") for r in responses):
        return [f"{where}: the function responses after this turn answer other functions than it called"]
    ids = [c.get("id") for c in calls]
    if all(ids) and Counter(ids) != Counter(r.get("id") for r in responses):
        return [f"{where}: the function responses after this turn answer other call ids than it made"]
    return []


def _unsigned_calls(contents: list[dict[str, Any]]) -> list[str]:
    """Gemini 3: "Function call is missing a thought_signature in functionCall parts" — the first call of each
    model turn since the last user text (the current turn) carries one."""
    start = max((i for i, c in enumerate(contents) if c.get("role") == "user" and _parts(c, "text")), default=0)
    problems: list[str] = []
    for index in range(start, len(contents)):
        parts = contents[index].get("parts") or []
        first = next((p for p in parts if isinstance(p, dict) and "functionCall" in p), None)
        if contents[index].get("role") == "model" and first is not None and not first.get("thoughtSignature"):
            problems.append(f"contents[{index}]: function call is missing a thought_signature in functionCall parts")
    return problems


# --- the bodies tether sends --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Wire:
    """One provider as tether speaks to it: how it builds a body, the rules of its API, whose data it replays."""

    name: str
    origin: str
    """The ``provider_data["origin"]`` of what it sends back (its own signatures)."""
    build: Callable[[Request], Body]
    check: Callable[[Body], list[str]]


@functools.cache
def wires() -> tuple[Wire, ...]:
    """The providers every compacted history must satisfy (built once; building sends nothing)."""
    chat = OpenAIChatProvider("gpt-4o", api_key="test-key")
    responses = OpenAIResponsesProvider("gpt-5", api_key="test-key")
    anthropic = AnthropicProvider("claude-sonnet-4-5", api_key="test-key")
    gemini = GeminiProvider("gemini-2.5-flash", api_key="test-key")
    gemini_3 = GeminiProvider("gemini-3-pro-preview", api_key="test-key")
    return (
        Wire("openai-chat", "openai", lambda r: json.loads(chat.request_payload(r)), chat_problems),
        Wire("openai-responses", "openai-responses", responses.request_body, responses_problems),
        Wire("anthropic", "anthropic", anthropic.request_body, anthropic_problems),
        Wire("gemini-2.5", "gemini", gemini.request_body, gemini_problems),
        Wire("gemini-3", "gemini", gemini_3.request_body, functools.partial(gemini_problems, signs_calls=True)),
    )


def tools_for(messages: Iterable[Message]) -> tuple[ToolDefinition, ...]:
    """A definition for every tool the messages call, in order of first call (an agent offers them all)."""
    names = dict.fromkeys(call.name for message in messages for call in message.tool_calls)
    schema = {"type": "object", "properties": {}}
    return tuple(ToolDefinition(name, f"The {name} tool.", schema) for name in names)


def bodies(
    system: str | None,
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition] = (),
    *,
    tool_choice: ToolChoice = "auto",
    settings: ModelSettings | None = None,
) -> dict[str, Body]:
    """The body each provider of :func:`wires` sends for this request, by wire name."""
    request = Request(tuple(messages), system, tuple(tools), tool_choice, settings=settings or ModelSettings())
    return {wire.name: wire.build(request) for wire in wires()}


def problems_of(built: dict[str, Body]) -> dict[str, list[str]]:
    """The broken rules of each body, by wire name; only the wires with problems are listed."""
    checks = {wire.name: wire.check for wire in wires()}
    found = {name: checks[name](body) for name, body in built.items()}
    return {name: listed for name, listed in found.items() if listed}


def assert_every_provider_accepts(
    system: str | None,
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition] | None = None,
    *,
    tool_choice: ToolChoice = "auto",
    settings: ModelSettings | None = None,
) -> dict[str, Body]:
    """Every provider's body for this conversation keeps its API's rules and sends back the signatures the
    messages carry for it; the bodies, by wire name. ``tools=None``: a definition for each tool called."""
    offered = tools_for(messages) if tools is None else tools
    built = bodies(system, messages, offered, tool_choice=tool_choice, settings=settings)
    found = problems_of(built)
    lost = lost_signatures(messages, built)
    if found or lost:
        report = [f"{name}: {problem}" for name, listed in found.items() for problem in listed] + lost
        raise AssertionError("a provider would refuse this history:\n  " + "\n  ".join(report))
    return built


def assert_request_accepted(request: Request) -> dict[str, Body]:
    """:func:`assert_every_provider_accepts` for a request a run made (``ScriptedProvider.requests``): its
    messages, tools, tool choice and settings sent to every provider."""
    return assert_every_provider_accepts(
        request.system, request.messages, request.tools, tool_choice=request.tool_choice, settings=request.settings
    )


# --- signatures ---------------------------------------------------------------------------------------------


def _own(data: dict[str, Any] | None, origin: str) -> bool:
    return data is not None and data.get("origin") == origin


def lost_signatures(messages: Sequence[Message], built: dict[str, Body]) -> list[str]:
    """The signatures the assistant messages carry for a provider that its body does not send back on the same
    part, one sentence each."""
    lost: list[str] = []
    for wire in wires():
        body = built.get(wire.name)
        if body is None or wire.origin not in _SENT:
            continue  # Chat Completions sends no reasoning back
        sent = _SENT[wire.origin](body)
        for expected in _expected(messages, wire.origin):
            if expected not in sent:
                lost.append(f"{wire.name}: {expected[0]} {expected[1][:24]}... is not sent back")
    return lost


def _expected(messages: Sequence[Message], origin: str) -> list[tuple[str, str]]:
    """``(kind, signature)`` pairs a provider of ``origin`` must get back, from the assistant messages."""
    expected: list[tuple[str, str]] = []
    for message in messages:
        if message.role != "assistant":
            continue
        for part in message.parts:
            data = getattr(part, "provider_data", None)
            if origin == "openai-responses" and not (data and data.get("id")):
                continue  # reasoning without its item id cannot be sent back (the encoder drops it)
            if type(part) is Thinking and part.signature and _own(data, origin):
                kind = "redacted" if data and data.get("redacted") else "thinking"
                expected.append((kind, part.signature))
            elif type(part) in (Text, ToolCall) and _own(data, origin) and origin == "gemini":
                signature = data.get("thoughtSignature") if data else None
                if isinstance(signature, str) and signature:
                    label = "call" if type(part) is ToolCall else "text"
                    expected.append((f"{label}:{_call_key(part)}" if type(part) is ToolCall else label, signature))
    return expected


def _call_key(call: ToolCall) -> str:
    """How a Gemini call is found in a body: its id, or its name when the model sent it without one."""
    return call.name if sent_without_id(call.id) else call.id


def _anthropic_sent(body: Body) -> set[tuple[str, str]]:
    sent: set[tuple[str, str]] = set()
    for message in body.get("messages") or []:
        for block in _blocks(message.get("content")) if message.get("role") == "assistant" else []:
            if block.get("type") == "thinking":
                sent.add(("thinking", block.get("signature", "")))
            elif block.get("type") == "redacted_thinking":
                sent.add(("redacted", block.get("data", "")))
    return sent


def _responses_sent(body: Body) -> set[tuple[str, str]]:
    items = body.get("input")
    if not isinstance(items, list):
        return set()
    reasoning = [item for item in items if isinstance(item, dict) and _kind(item) == "reasoning"]
    return {("thinking", item.get("encrypted_content", "")) for item in reasoning}


def _gemini_sent(body: Body) -> set[tuple[str, str]]:
    sent: set[tuple[str, str]] = set()
    for content in body.get("contents") or []:
        for part in content.get("parts") or [] if content.get("role") == "model" else []:
            signature = part.get("thoughtSignature")
            if not signature:
                continue
            if "functionCall" in part:
                call = part["functionCall"]
                sent.add((f"call:{call.get('id') or call.get('name')}", signature))  # no id came: none goes back
            elif part.get("thought"):
                sent.add(("thinking", signature))
            elif "text" in part:
                sent.add(("text", signature))
    return sent


_SENT: dict[str, Callable[[Body], set[tuple[str, str]]]] = {
    "anthropic": _anthropic_sent,
    "openai-responses": _responses_sent,
    "gemini": _gemini_sent,
}
"""How to read the signatures a body sends back, by the origin of the provider that sends it."""
