"""The conversation: messages made of typed parts, and their JSON form.

Every provider maps its wire format to and from these types, so the loop, sessions and tools speak one
language. Parts are immutable; data a provider needs back verbatim on a later turn (reasoning signatures,
encrypted reasoning, Gemini thought signatures) rides in ``provider_data`` and is never interpreted here.

A transcript is *valid* when every tool call is answered by exactly one result before the model speaks
again; :func:`transcript_problems` checks that, and the loop keeps it true even on cancellation.

Parts and messages are frozen msgspec Structs: made in C, parts never tracked by the cyclic collector (they
hold JSON, nothing that can reach back; a message is weak-referenceable, which msgspec allows only of a tracked
type), and encoded and decoded by ``msgspec.json`` with the part's
``kind`` as its tag (:func:`messages_to_json`, :func:`messages_from_json`). Change one with
``msgspec.structs.replace``.

A transcript may hold *compaction markers* (:func:`compaction_marker`): user messages carrying a summary of
everything before them. The transcript keeps every message; the model is sent :func:`model_view`, which
starts at the last marker (docs/context.md).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeAlias

import msgspec
from msgspec.structs import replace

from tether.bounded import read_bounded
from tether.errors import ConfigInvalid, SessionInvalid

if TYPE_CHECKING:
    from tether.redaction import Redaction

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
JsonObject: TypeAlias = dict[str, Any]
"""A JSON object as Python holds it (what ``json`` reads an object as): where ``Any`` stands for JSON."""


class Text(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="text"):
    """Plain text written by a user or the model."""

    text: str
    provider_data: JsonObject | None = None
    kind: ClassVar[Literal["text"]] = "text"


class Thinking(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="thinking"):
    """The model's reasoning, kept apart from its answer; ``signature`` is replayed unchanged."""

    text: str
    signature: str | None = None
    provider_data: JsonObject | None = None
    kind: ClassVar[Literal["thinking"]] = "thinking"


class ToolCall(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="tool_call"):
    """A request by the model to run a tool.

    ``arguments`` is the parsed JSON object, or ``None`` when the model's ``raw_arguments`` are not a JSON
    object (the executor then answers with an ``invalid_arguments`` error). ``raw_arguments`` keeps the text
    as the model wrote it, when it arrived as text, so it can be sent back verbatim.

    Its ``repr`` (and so a ``Message``'s, an event's and a ``RunResult``'s) hides the values of secret-named
    arguments, bearer tokens and URL passwords (``tether.redaction``), in ``arguments`` and in
    ``raw_arguments`` (:meth:`redacted`). It cannot know an agent's known keys; those never reach a call through a
    tool's result, which is masked when recorded (``loop/executor.py``).
    """

    id: str
    name: str
    arguments: JsonObject | None
    raw_arguments: str | None = None
    provider_data: JsonObject | None = None
    kind: ClassVar[Literal["tool_call"]] = "tool_call"

    def __repr__(self) -> str:
        from tether.redaction import default_redaction

        shown = self.redacted(default_redaction())
        return (
            f"ToolCall(id={self.id!r}, name={self.name!r}, arguments={shown.arguments!r}, "
            f"raw_arguments={shown.raw_arguments!r}, provider_data={self.provider_data!r}, kind={self.kind!r})"
        )

    def redacted(self, redaction: Redaction) -> ToolCall:
        """A copy fit to show (a span, a log line, the CLI): its arguments and raw arguments redacted."""
        raw = self.raw_arguments
        arguments = redaction.arguments(self.arguments)
        return replace(self, arguments=arguments, raw_arguments=None if raw is None else redaction.text(raw))


class ToolResult(msgspec.Struct, frozen=True, gc=False, omit_defaults=True, tag_field="kind", tag="tool_result"):
    """What a tool call produced, as the model will read it.

    ``code`` is the stable error code (``tool_not_found``, ``invalid_arguments``, ...) when ``is_error``;
    on a successful result it is ``None``, or ``repeated`` for a call not run again because the model already
    had its result (``loop/repeats.py``). ``attachments``: images, documents or audio the tool returned with its
    text (each provider sends them as its API allows: in the result, or in a message right after the results).
    Its JSON leaves out the fields at their defaults.
    """

    call_id: str
    name: str
    content: str
    is_error: bool = False
    code: str | None = None
    attachments: tuple[Attachment, ...] = ()
    kind: ClassVar[Literal["tool_result"]] = "tool_result"


class Attachment(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="attachment"):
    """Binary content in a message: an image, a document (a PDF, or text) or audio; inline (``data``) or by
    ``url``, with its media type. Make one with :meth:`from_path`, :meth:`from_bytes` or :meth:`from_url`.

    A model reads it as its provider's API has it (``providers/``: data URLs, file inputs, image and document
    blocks, inline data); a model that cannot read its kind is refused it before anything is sent
    (``ModelInfo.input_kinds``). Its ``repr`` names it and its size, never its bytes.
    """

    media_type: str
    data: bytes | None = None
    url: str | None = None
    name: str | None = None
    """A file name, shown to the model where an API takes one (a document's)."""
    kind: ClassVar[Literal["attachment"]] = "attachment"

    @property
    def category(self) -> AttachmentKind:
        """``image``, ``document`` (PDF or text) or ``audio``, from the media type."""
        return attachment_kind(self.media_type)

    @property
    def size(self) -> int:
        """Bytes of inline data (0 for a URL)."""
        return len(self.data) if self.data is not None else 0

    @classmethod
    def from_bytes(cls, data: bytes, media_type: str | None = None, *, name: str | None = None) -> Attachment:
        """Inline ``data``; its media type sniffed from its first bytes when not given."""
        kind = media_type or sniff_media_type(data) or (guess_media_type(name) if name else None)
        if kind is None:
            raise ConfigInvalid(f"the media type of {name or 'these bytes'} is not known: pass media_type=")
        attachment_kind(kind)
        return cls(kind, bytes(data), None, name)

    @classmethod
    def from_path(cls, path: str | PathLike[str], media_type: str | None = None) -> Attachment:
        """A file's bytes, its media type from its name (else its first bytes)."""
        file = Path(path)
        try:
            data = read_bounded(file, MAX_ATTACHMENT_BYTES)
        except OSError as error:
            raise ConfigInvalid(f"cannot read the attachment {str(file)!r}: {error.strerror or error}") from None
        return cls.from_bytes(data, media_type or guess_media_type(file.name) or sniff_media_type(data), name=file.name)

    @classmethod
    def from_url(cls, url: str, media_type: str | None = None) -> Attachment:
        """Content at ``url`` (``https://``, or a ``data:`` URL), sent by reference where the API takes one."""
        if url.startswith("data:"):
            header, _, payload = url.partition(",")
            if not header.endswith(";base64"):
                raise ConfigInvalid("a data: URL attachment must be base64 (data:TYPE;base64,...)")
            return cls.from_bytes(base64.b64decode(payload), media_type or header[5:-7] or None)
        if not url.startswith(("https://", "http://")):
            raise ConfigInvalid(f"an attachment URL must be http(s):// or data:, not {url[:40]!r}")
        kind = media_type or guess_media_type(url.split("?", 1)[0])
        if kind is None:
            raise ConfigInvalid(f"the media type of {url[:80]!r} is not known from its name: pass media_type=")
        attachment_kind(kind)
        return cls(kind, None, url, None)

    def __repr__(self) -> str:
        where = f"url={self.url!r}" if self.url is not None else f"{self.size:,} bytes"
        return f"Attachment({self.media_type!r}, {where}{f', name={self.name!r}' if self.name else ''})"


MAX_ATTACHMENT_BYTES = 100 * 1024 * 1024
"""The largest file :meth:`Attachment.from_path` reads: past any API's limit, well short of a device's endless data."""
AttachmentKind: TypeAlias = Literal["image", "document", "audio"]
_TEXT_DOCUMENTS = frozenset({"text/plain", "text/markdown", "text/csv", "text/html", "application/json"})


def attachment_kind(media_type: str) -> AttachmentKind:
    """What a media type is as an attachment; ``ConfigInvalid`` for one no model takes."""
    if media_type.startswith("image/"):
        return "image"
    if media_type.startswith("audio/"):
        return "audio"
    if media_type == "application/pdf" or media_type in _TEXT_DOCUMENTS:
        return "document"
    raise ConfigInvalid(f"media type {media_type!r} cannot be an attachment: images, audio, PDF and text documents can")


_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"), (b"%PDF-", "application/pdf"), (b"ID3", "audio/mpeg"), (b"\xff\xfb", "audio/mpeg"),
    (b"OggS", "audio/ogg"), (b"fLaC", "audio/flac"),
)  # fmt: skip


def sniff_media_type(data: bytes) -> str | None:
    """The media type ``data`` starts like (PNG, JPEG, GIF, WebP, PDF, MP3, WAV, Ogg, FLAC), else ``None``."""
    for magic, media_type in _MAGIC:
        if data.startswith(magic):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] in (b"WEBP", b"WAVE"):
        return "image/webp" if data[8:12] == b"WEBP" else "audio/wav"
    return None


def guess_media_type(name: str) -> str | None:
    import mimetypes

    guessed = mimetypes.guess_type(name)[0]
    return {"audio/x-wav": "audio/wav", "audio/mp3": "audio/mpeg"}.get(guessed or "", guessed)


Part: TypeAlias = Text | Thinking | ToolCall | ToolResult | Attachment


class Message(msgspec.Struct, frozen=True, weakref=True):
    """One message of a conversation: a role and its parts, in order.

    Weak-referenceable, so that a provider can cache a message's wire form for as long as the message lives.
    """

    role: Role
    parts: tuple[Part, ...]
    provider_data: JsonObject | None = None

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

    @property
    def attachments(self) -> tuple[Attachment, ...]:
        return tuple(p for p in self.parts if type(p) is Attachment)


Prompt: TypeAlias = "str | Sequence[str | Attachment]"
"""What a run is asked: a string, or strings and attachments in order (``agent.run(["Describe:", image])``)."""


def user_message(prompt: Prompt) -> Message:
    """The user message of a run's prompt; ``ConfigInvalid`` for anything but strings and attachments."""
    if isinstance(prompt, str):
        return Message.user(prompt)
    parts: list[Text | Attachment] = []
    for item in prompt:
        if isinstance(item, str):
            parts.append(Text(item))
        elif isinstance(item, Attachment):
            parts.append(item)
        else:
            raise ConfigInvalid(f"a prompt holds strings and Attachments, not {type(item).__name__}")
    if not parts:
        raise ConfigInvalid("the prompt is empty: give a string or at least one part")
    return Message("user", tuple(parts))


def redacted_messages(messages: Sequence[Message], redaction: Redaction) -> list[Message]:
    """Copies of ``messages`` fit to show: every tool call redacted (results are masked when recorded)."""
    return [
        replace(m, parts=tuple(p.redacted(redaction) if type(p) is ToolCall else p for p in m.parts))
        if any(type(p) is ToolCall for p in m.parts)
        else m
        for m in messages
    ]


# --- JSON ---------------------------------------------------------------------------------------------------


_MESSAGES_DECODER = msgspec.json.Decoder(list[Message])


def messages_to_jsonable(messages: Iterable[Message]) -> list[JsonObject]:
    """Messages as plain JSON-ready dicts (lists, strings, numbers, booleans, None); each part names its
    ``kind``."""
    return msgspec.to_builtins(list(messages))  # type: ignore[no-any-return]


def messages_to_json(messages: Iterable[Message]) -> str:
    """Messages as compact JSON text."""
    return msgspec.json.encode(list(messages)).decode()


def messages_from_json(data: str | bytes, *, source: str = "messages") -> list[Message]:
    """Messages from JSON text; anything that is not a list of messages raises ``session_invalid``."""
    try:
        return _MESSAGES_DECODER.decode(data)
    except msgspec.ValidationError as exc:
        raise SessionInvalid(f"{source}: not a valid message list: {_where(exc)}") from exc
    except msgspec.DecodeError as exc:
        raise SessionInvalid(f"{source}: not a valid message list: at (top level): not JSON ({exc})") from exc


def messages_from_jsonable(data: Any, *, source: str = "messages") -> list[Message]:
    """Messages from already-parsed JSON (lists and dicts)."""
    try:
        return msgspec.convert(data, list[Message])
    except msgspec.ValidationError as exc:
        raise SessionInvalid(f"{source}: not a valid message list: {_where(exc)}") from exc


def _where(exc: msgspec.ValidationError) -> str:
    """msgspec's ``Expected `str`, got `int` - at `$[0].parts[1].text``` as ``at 0.parts.1.text: expected
    `str`, got `int```: the place first, as a person reads it (a missing field's place is the field's)."""
    return json_error_place(str(exc))


def json_error_place(error: str) -> str:
    """A msgspec validation error's text with its place first (see :func:`_where`)."""
    message, _, path = error.rpartition(" - at `")
    if not message:
        message, path = error, "$"
    where = path.rstrip("`").removeprefix("$").replace("][", ".").replace("[", ".").replace("]", "").strip(".")
    missing = _MISSING_FIELD.fullmatch(message)
    if missing:
        where = f"{where}.{missing[1]}".strip(".")
    return f"at {where or '(top level)'}: {message[:1].lower()}{message[1:]}"


_MISSING_FIELD = re.compile(r"Object missing required field `(.+)`")


# --- transcript validity ----------------------------------------------------------------------------------


def open_tool_calls(messages: Sequence[Message]) -> list[ToolCall]:
    """The tool calls of the last assistant message that have no result yet, in model order."""
    answered: set[str] = set()
    for message in reversed(messages):
        if message.role == "assistant":
            return [c for c in message.tool_calls if c.id not in answered]
        answered.update(r.call_id for r in message.tool_results)
    return []


def cancelled_result(call: ToolCall, why: str) -> ToolResult:
    """The result that answers a call that never got its own (``why``: the run was cancelled, it stopped, no
    result was recorded), so that the transcript stays valid."""
    return ToolResult(call.id, call.name, f"Not completed: {why}.", is_error=True, code="cancelled")


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


# --- who spoke ---------------------------------------------------------------------------------------------

SPEAKER_KEY = "agent"
"""The ``provider_data`` key that names the agent whose answer an assistant message is (``tether.team``)."""


def spoken_by(message: Message, agent: str) -> Message:
    """``message`` marked as the answer of ``agent`` (in its ``provider_data``, which every store keeps and no
    provider reads: a session written before names no one, and reads as before)."""
    data = message.provider_data
    return replace(message, provider_data={SPEAKER_KEY: agent} if data is None else {**data, SPEAKER_KEY: agent})


def speaker_of(message: Message) -> str | None:
    """The agent that gave ``message`` (see :func:`spoken_by`); ``None`` when none is named."""
    data = message.provider_data
    name = data.get(SPEAKER_KEY) if data is not None and message.role == "assistant" else None
    return name if isinstance(name, str) else None


# --- compaction markers -------------------------------------------------------------------------------------

COMPACTION_KEY = "compaction"
"""The ``provider_data`` key that makes a user message a compaction marker."""
SUMMARY_HEADER = (
    "[Summary of the earlier conversation. It was compacted to fit the model's context window; the messages "
    "after this one are kept as they were.]\n\n"
)


class CompactionInfo(msgspec.Struct, frozen=True, gc=False):
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
