"""The conversation: messages made of typed parts, and their JSON form.

Every provider maps its wire format to and from these types, so the loop, sessions and tools speak one
language. Parts are immutable; data a provider needs back verbatim on a later turn (reasoning signatures,
encrypted reasoning, Gemini thought signatures) rides in ``provider_data`` and is never interpreted here.

A transcript is *valid* when every tool call is answered by exactly one result before the model speaks
again; :func:`transcript_problems` checks that, and the loop keeps it true even on cancellation.

A transcript may hold *compaction markers* (:func:`compaction_marker`): user messages carrying a summary of
everything before them. The transcript keeps every message; the model is sent :func:`model_view`, which
starts at the last marker (docs/context.md).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from tether.errors import SessionInvalid
from tether.quickinit import quick_init

if TYPE_CHECKING:
    from pydantic import TypeAdapter

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]


@quick_init
@dataclass(frozen=True, slots=True)
class Text:
    """Plain text written by a user or the model."""

    text: str
    provider_data: dict[str, Any] | None = None
    kind: Literal["text"] = "text"


@quick_init
@dataclass(frozen=True, slots=True)
class Thinking:
    """The model's reasoning, kept apart from its answer; ``signature`` is replayed unchanged."""

    text: str
    signature: str | None = None
    provider_data: dict[str, Any] | None = None
    kind: Literal["thinking"] = "thinking"


@quick_init
@dataclass(frozen=True, slots=True, repr=False)
class ToolCall:
    """A request by the model to run a tool.

    ``arguments`` is the parsed JSON object, or ``None`` when the model's ``raw_arguments`` are not a JSON
    object (the executor then answers with an ``invalid_arguments`` error). ``raw_arguments`` keeps the text
    as the model wrote it, when it arrived as text, so it can be sent back verbatim.

    Its ``repr`` (and so a ``Message``'s, an event's and a ``RunResult``'s) hides the values of secret-named
    arguments, bearer tokens and URL passwords (``tether.telemetry.redact``), in ``arguments`` and in
    ``raw_arguments``. It cannot know an agent's known keys; those never reach a call through a tool's
    result, which is masked when recorded (``loop/executor.py``).
    """

    id: str
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str | None = None
    provider_data: dict[str, Any] | None = None
    kind: Literal["tool_call"] = "tool_call"

    def __repr__(self) -> str:
        from tether.telemetry.redact import default_redaction

        redaction = default_redaction()
        raw = self.raw_arguments
        return (
            f"ToolCall(id={self.id!r}, name={self.name!r}, arguments={redaction.arguments(self.arguments)!r}, "
            f"raw_arguments={raw if raw is None else redaction.text(raw)!r}, "
            f"provider_data={self.provider_data!r}, kind={self.kind!r})"
        )


@quick_init
@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call produced, as the model will read it.

    ``code`` is the stable error code (``tool_not_found``, ``invalid_arguments``, ...) when ``is_error``;
    on a successful result it is ``None``, or ``repeated`` for a call not run again because the model already
    had its result (``loop/repeats.py``).
    """

    call_id: str
    name: str
    content: str
    is_error: bool = False
    code: str | None = None
    kind: Literal["tool_result"] = "tool_result"


Part: TypeAlias = Text | Thinking | ToolCall | ToolResult

if TYPE_CHECKING:
    _Parts: TypeAlias = tuple[Part, ...]
# else: ``_Parts`` is bound by _history_adapter() just before pydantic reads Message's annotations, to the
# same tuple with the union discriminated by ``kind``; this keeps pydantic out of ``import tether``.


@quick_init
@dataclass(frozen=True, slots=True, weakref_slot=True)
class Message:
    """One message of a conversation: a role and its parts, in order.

    Weak-referenceable, so that a provider can cache a message's wire form for as long as the message lives.
    """

    role: Role
    parts: _Parts
    provider_data: dict[str, Any] | None = None

    @classmethod
    def system(cls, text: str) -> Message:
        return cls("system", (Text(text),))

    @classmethod
    def user(cls, text: str) -> Message:
        return cls("user", (Text(text),))

    @classmethod
    def assistant(cls, text: str) -> Message:
        return cls("assistant", (Text(text),))

    @property
    def text(self) -> str:
        """All text parts joined; thinking is not included."""
        return "".join(p.text for p in self.parts if type(p) is Text)

    @property
    def plain_text(self) -> str:
        """The text for an API that takes one string: an assistant's parts run together as they streamed;
        the parts of any other message are separate texts (two prompts merged into one message), so a blank
        line keeps them apart."""
        texts = [p.text for p in self.parts if type(p) is Text]
        return ("" if self.role == "assistant" else "\n\n").join(texts)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(p for p in self.parts if type(p) is ToolCall)

    @property
    def tool_results(self) -> tuple[ToolResult, ...]:
        return tuple(p for p in self.parts if type(p) is ToolResult)


# --- JSON ---------------------------------------------------------------------------------------------------


@functools.cache
def _history_adapter() -> TypeAdapter[list[Message]]:
    """Built on first use so that importing tether does not import pydantic.

    Parts are told apart by their literal ``kind``: each part type accepts only its own.
    """
    from typing import Annotated

    from pydantic import Field, TypeAdapter

    globals()["_Parts"] = tuple[Annotated[Part, Field(discriminator="kind")], ...]
    return TypeAdapter(list[Message])


def messages_to_jsonable(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Messages as plain JSON-ready dicts (lists, strings, numbers, booleans, None)."""
    return _history_adapter().dump_python(list(messages), mode="json")  # type: ignore[no-any-return]


def messages_to_json(messages: Iterable[Message]) -> str:
    """Messages as compact JSON text."""
    return _history_adapter().dump_json(list(messages)).decode()


def messages_from_json(data: str | bytes, *, source: str = "messages") -> list[Message]:
    """Messages from JSON text; anything that is not a list of messages raises ``session_invalid``."""
    from pydantic import ValidationError

    try:
        return _history_adapter().validate_json(data)
    except ValidationError as exc:
        raise SessionInvalid(f"{source}: not a valid message list: {_first_error(exc)}") from exc


def messages_from_jsonable(data: Any, *, source: str = "messages") -> list[Message]:
    """Messages from already-parsed JSON (lists and dicts)."""
    from pydantic import ValidationError

    try:
        return _history_adapter().validate_python(data)
    except ValidationError as exc:
        raise SessionInvalid(f"{source}: not a valid message list: {_first_error(exc)}") from exc


def _first_error(exc: Any) -> str:
    errors = exc.errors()
    first = errors[0]
    where = ".".join(str(p) for p in first["loc"]) or "(top level)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"at {where}: {first['msg']}{more}"


# --- transcript validity ----------------------------------------------------------------------------------


def open_tool_calls(messages: Sequence[Message]) -> list[ToolCall]:
    """The tool calls of the last assistant message that have no result yet, in model order."""
    answered: set[str] = set()
    for message in reversed(messages):
        if message.role == "assistant":
            return [c for c in message.tool_calls if c.id not in answered]
        answered.update(r.call_id for r in message.tool_results)
    return []


def transcript_problems(messages: Sequence[Message]) -> list[str]:
    """What makes a transcript invalid, one sentence each; an empty list means it is valid.

    Valid: system messages only at the start; the first other message is from the user; every tool call is
    answered by exactly one result before the next assistant or user message; no result answers an unknown
    call; tool results only in ``tool`` messages.
    """
    problems: list[str] = []
    pending: dict[str, str] = {}
    seen_non_system = False
    for i, message in enumerate(messages):
        if message.role == "system":
            if seen_non_system:
                problems.append(f"message {i}: a system message after the conversation started")
            continue
        if not seen_non_system and message.role != "user":
            problems.append(f"message {i}: the conversation starts with {message.role!r}, not 'user'")
        seen_non_system = True
        results = message.tool_results
        if results and message.role != "tool":
            problems.append(f"message {i}: tool results in a {message.role!r} message")
        if message.role == "tool":
            for result in results:
                if pending.pop(result.call_id, None) is None:
                    problems.append(f"message {i}: result for unknown or answered call {result.call_id!r}")
            continue
        if pending:
            problems.append(f"message {i}: calls without results before it: {sorted(pending.values())}")
            pending.clear()
        if message.role == "assistant":
            for call in message.tool_calls:
                if call.id in pending:
                    problems.append(f"message {i}: duplicate tool call id {call.id!r}")
                pending[call.id] = f"{call.name}#{call.id}"
    if pending:
        problems.append(f"end: calls without results: {sorted(pending.values())}")
    return problems


# --- compaction markers -------------------------------------------------------------------------------------

COMPACTION_KEY = "compaction"
"""The ``provider_data`` key that makes a user message a compaction marker."""
SUMMARY_HEADER = (
    "[Summary of the earlier conversation. It was compacted to fit the model's context window; the messages "
    "after this one are kept as they were.]\n\n"
)


@quick_init
@dataclass(frozen=True, slots=True)
class CompactionInfo:
    """What a compaction marker records besides its summary text."""

    kept: int
    """Messages after the marker that were kept verbatim when it was made (the ones ``trimmed`` applies to)."""
    summarized: int
    """Messages of the model's view the summary replaced."""
    tokens_before: int
    tokens_after: int
    trimmed: Mapping[str, str]
    """Tool results among the kept messages shown by reference only: call id -> the text the model sees."""


def compaction_marker(summary: str, info: CompactionInfo) -> Message:
    """The user message that stands for everything before it in the model's view: ``summary``, marked."""
    data = {
        "kept": info.kept,
        "summarized": info.summarized,
        "tokens_before": info.tokens_before,
        "tokens_after": info.tokens_after,
        "trimmed": dict(info.trimmed),
    }
    return Message("user", (Text(SUMMARY_HEADER + summary),), {COMPACTION_KEY: data})


def compaction_of(message: Message) -> CompactionInfo | None:
    """The marker's record if ``message`` is a compaction marker, else ``None``.

    A marker from a stored session is read defensively: one whose record is not well formed is taken for an
    ordinary user message, never an error (its text is still sent).
    """
    data = message.provider_data
    if message.role != "user" or data is None:
        return None
    record = data.get(COMPACTION_KEY)
    if not isinstance(record, dict):
        return None
    counts = [record.get(name) for name in ("kept", "summarized", "tokens_before", "tokens_after")]
    if not all(type(count) is int and count >= 0 for count in counts):
        return None
    trimmed = record.get("trimmed", {})
    if not isinstance(trimmed, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in trimmed.items()):
        return None
    kept, summarized, before, after = counts
    return CompactionInfo(kept, summarized, before, after, trimmed)  # type: ignore[arg-type]


def last_compaction(messages: Sequence[Message], start: int = 0) -> int | None:
    """The index of the last compaction marker at or after ``start``, or ``None``."""
    for index in range(len(messages) - 1, start - 1, -1):
        message = messages[index]
        if message.provider_data is not None and compaction_of(message) is not None:
            return index
    return None


def model_view(messages: Sequence[Message]) -> tuple[Message, ...]:
    """What the model is sent of a transcript: the system prompt, then everything from the last compaction
    marker on (its summary merged into the user message after it, if there is one), with the tool results
    it trimmed shown by reference. Without a marker, the transcript itself."""
    head = 1 if messages and messages[0].role == "system" else 0
    marker = last_compaction(messages, head)
    if marker is None:
        return tuple(messages)
    return (*messages[:head], *view_from(messages, marker))


def view_from(messages: Sequence[Message], marker: int) -> list[Message]:
    """The model's view of ``messages`` from the compaction marker at ``marker`` on (see :func:`model_view`)."""
    info = compaction_of(messages[marker])
    assert info is not None, "view_from() needs the index of a compaction marker"
    rest = list(messages[marker + 1 :])
    if info.trimmed:
        for index, message in enumerate(rest[: info.kept]):
            if message.role == "tool" and any(r.call_id in info.trimmed for r in message.tool_results):
                rest[index] = _trimmed(message, info.trimmed)
    head = Message("user", messages[marker].parts)
    if rest and rest[0].role == "user" and compaction_of(rest[0]) is None:
        head = Message("user", head.parts + rest[0].parts, rest[0].provider_data)
        rest = rest[1:]
    return [head, *rest]


def _trimmed(message: Message, trimmed: Mapping[str, str]) -> Message:
    parts = tuple(
        ToolResult(p.call_id, p.name, trimmed[p.call_id], p.is_error, p.code)
        if type(p) is ToolResult and p.call_id in trimmed
        else p
        for p in message.parts
    )
    return Message(message.role, parts, message.provider_data)
