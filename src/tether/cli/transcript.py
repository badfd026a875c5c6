"""Sessions for people and programs: a table of summaries, a transcript as Markdown, a session as JSON.

The Markdown is for people, and may be pasted anywhere: tool calls' secret-named arguments show as ``***``
(``tether.redaction``'s default rules). A compaction marker (``tether.messages.compaction_of``) is a
section of its own, ``## Compacted``: what its summary stood for in the model's view, then the summary;
the messages before it are still shown, as the session keeps them. The JSON is the session as stored, the
model's arguments verbatim: it is the user's own data, like the session file it comes from."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import msgspec

from tether.cli.table import aligned
from tether.messages import (
    SUMMARY_HEADER,
    CompactionInfo,
    Message,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    compaction_of,
    messages_to_jsonable,
    speaker_of,
)
from tether.redaction import default_redaction
from tether.sessions import Session, SessionSummary

_ROLE = {"system": "System", "user": "You", "assistant": "Assistant", "tool": "Tool"}


def summary_json(summary: SessionSummary) -> dict[str, Any]:
    return {
        "id": summary.id,
        "title": summary.title,
        "model": summary.model,
        "created_at": summary.created_at.isoformat(),
        "updated_at": summary.updated_at.isoformat(),
        "message_count": summary.message_count,
    }


def summary_table(summaries: Sequence[SessionSummary]) -> str:
    """One line per session: id, when (local time), messages, model, title."""
    rows = [("ID", "UPDATED", "MSGS", "MODEL", "TITLE")]
    rows += [
        (s.id, f"{s.updated_at.astimezone():%Y-%m-%d %H:%M}", str(s.message_count), s.model, s.title) for s in summaries
    ]
    return "\n".join(aligned(rows, free_last=True))


def session_json(session: Session) -> dict[str, Any]:
    """The whole session: its fields, the usage, and the messages as tether stores them."""
    return {
        "id": session.id,
        "title": session.title,
        "model": session.model,
        "created_at": session.created_at.isoformat(),
        "updated_at": session.updated_at.isoformat(),
        "usage": msgspec.structs.asdict(session.usage),
        "messages": messages_to_jsonable(session.messages),
    }


def to_markdown(session: Session, *, full: bool) -> str:
    """The conversation as Markdown; ``full`` keeps system prompts, thinking and whole tool results."""
    lines = [f"# {session.title or session.id}", ""]
    lines.append(
        f"session `{session.id}` · {session.model or 'unknown model'} · {session.updated_at:%Y-%m-%d %H:%M} UTC"
    )
    for message in session.messages:
        if message.role == "system" and not full:
            continue
        info = compaction_of(message)
        if info is not None:
            lines += ["", "## Compacted", "", f"*{compaction_note(info)}*", "", summary_text(message)]
            continue
        speaker = speaker_of(message)  # the agent that answered, in a run of agents that hand off
        lines += ["", f"## {_ROLE[message.role]}" + (f" ({speaker})" if speaker else ""), ""]
        lines += _parts(message, full)
    return "\n".join(lines) + "\n"


def compaction_note(info: CompactionInfo) -> str:
    """What a compaction marker stands for, in a sentence: the model saw its summary, not what came before."""
    messages = f"{info.summarized:,} message{'' if info.summarized == 1 else 's'}"
    trimmed = len(info.trimmed)
    shown = f"; {trimmed} tool output{'' if trimmed == 1 else 's'} below it shown by reference" if trimmed else ""
    return (
        f"The history was compacted to fit the model's context window ({info.tokens_before:,} → "
        f"{info.tokens_after:,} tokens): from here on the model saw this summary in place of {messages} "
        f"above it{shown}."
    )


def summary_text(marker: Message) -> str:
    """A compaction marker's summary, without the header that tells the model what it is."""
    text = marker.text
    return text[len(SUMMARY_HEADER) :] if text.startswith(SUMMARY_HEADER) else text


def _parts(message: Message, full: bool) -> list[str]:
    out: list[str] = []
    for part in message.parts:
        if isinstance(part, Text):
            out.append(part.text)
        elif isinstance(part, Thinking):
            if full:
                out.append("> " + part.text.replace("\n", "\n> "))
        elif isinstance(part, ToolCall):
            part = part.redacted(default_redaction())
            arguments = (
                json.dumps(part.arguments, ensure_ascii=False) if part.arguments is not None else part.raw_arguments
            )
            out.append(f"**{part.name}** `{arguments}`")
        elif isinstance(part, ToolResult):
            label = f"{part.name} failed ({part.code})" if part.is_error else f"{part.name} returned"
            content = part.content if full or len(part.content) <= 500 else part.content[:500] + "\n[…]"
            out += [f"{label}:", "", "```", content, "```"]
        out.append("")
    while out and out[-1] == "":
        out.pop()
    return out
