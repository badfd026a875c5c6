"""Every provider accepts a compacted history: random valid transcripts, compaction markers inserted at random
valid cut points, and the model's view checked against the rules of every API (``wire_rules.py``).

Transcripts mix text turns, parallel tool calls, error results, and thinking signed by each provider (Anthropic
thinking and redacted thinking, Gemini thought signatures on thoughts, text and calls, Responses' encrypted
reasoning linked to its message and call items), as a conversation carried from one provider to another has.
A cut point is before a user or an assistant message, never before a tool message. History shaped to
``Limits.max_history_messages`` keeps the same rules.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.providers.wire_rules import assert_every_provider_accepts, tools_for
from tether.loop.context import shape_history
from tether.messages import (
    CompactionInfo,
    Message,
    Part,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    compaction_marker,
    model_view,
    transcript_problems,
)

ORIGINS = ("anthropic", "gemini", "openai-responses", "openai", None)
"""Who wrote an assistant turn: a provider that signs its thinking, Chat Completions (unsigned reasoning), or
none (a turn stored without provider data)."""
WORDS = st.text(alphabet="abcdefgh ,.", min_size=1, max_size=12).filter(str.strip)
RESULTS = st.sampled_from(["42", '{"rows": 3}', "", "line one\nline two"])
TOOL_NAMES = ("search", "read_file", "run")


class Ids:
    """Unique ids for one transcript: calls, item ids and signatures."""

    def __init__(self) -> None:
        self._next = itertools.count(1)

    def __call__(self, prefix: str) -> str:
        return f"{prefix}{next(self._next)}"


def thinking(draw: Any, origin: str | None, ids: Ids) -> list[Part]:
    """The thinking an assistant turn of ``origin`` may start with (possibly none)."""
    if origin is None or not draw(st.booleans()):
        return []
    if origin == "anthropic":
        if draw(st.booleans()):
            return [Thinking("", ids("redacted-"), {"origin": origin, "redacted": True})]
        return [Thinking(draw(WORDS), ids("anthropic-sig-"), {"origin": origin})]
    if origin == "gemini":
        return [Thinking(draw(WORDS), ids("gemini-thought-"), {"origin": origin})]
    if origin == "openai-responses":
        text = draw(st.sampled_from(["", "planning"]))
        summary = [{"type": "summary_text", "text": text}] if text else []
        return [Thinking(text, ids("encrypted-"), {"origin": origin, "id": ids("rs_"), "summary": summary})]
    return [Thinking(draw(WORDS))]  # Chat Completions reasoning: nothing to replay


def answer_text(draw: Any, origin: str | None, ids: Ids, *, required: bool) -> list[Part]:
    """The turn's text (required when it calls no tool), with the data its provider keeps on it."""
    if not required and draw(st.booleans()):
        return []
    text = draw(WORDS)
    if origin == "openai-responses":
        return [Text(text, {"origin": origin, "id": ids("msg_")})]
    if origin == "gemini" and draw(st.booleans()):
        return [Text(text, {"origin": origin, "thoughtSignature": ids("gemini-text-")})]
    return [Text(text)]


def calls(draw: Any, origin: str | None, ids: Ids, count: int) -> list[ToolCall]:
    """``count`` parallel calls, with the ids and data their provider gives them."""
    made = []
    for position in range(count):
        name = draw(st.sampled_from(TOOL_NAMES))
        arguments = {"q": draw(WORDS)}
        data: dict[str, Any] | None = None
        if origin == "anthropic":
            call_id = ids("toolu_")
        elif origin == "openai-responses":
            call_id, data = ids("call_"), {"origin": origin, "id": ids("fc_")}
        elif origin == "gemini" and position == 0:
            call_id, data = ids("call_"), {"origin": origin, "thoughtSignature": ids("gemini-call-")}
        else:
            call_id = ids("call_")
        made.append(ToolCall(call_id, name, arguments, provider_data=data))
    return made


@st.composite
def step(draw: Any, ids: Ids, *, final: bool) -> list[Message]:
    """One assistant turn: a final answer, or calls and the tool message answering them all."""
    origin = draw(st.sampled_from(ORIGINS))
    made = [] if final else calls(draw, origin, ids, draw(st.integers(1, 3)))
    parts = [*thinking(draw, origin, ids), *answer_text(draw, origin, ids, required=final), *made]
    turn = Message("assistant", tuple(parts))
    if final:
        return [turn]
    results = []
    for call in made:
        if draw(st.booleans()):
            results.append(ToolResult(call.id, call.name, draw(RESULTS)))
        else:
            results.append(ToolResult(call.id, call.name, "it failed", is_error=True, code="tool_failed"))
    return [turn, Message("tool", tuple(results))]


@st.composite
def transcripts(draw: Any) -> list[Message]:
    """A valid transcript that a request is made from: it ends with the user's prompt or with tool results."""
    ids = Ids()
    messages = [Message.system("Be brief.")] if draw(st.booleans()) else []
    for _ in range(draw(st.integers(1, 4))):
        messages.append(Message.user(draw(WORDS)))
        for _ in range(draw(st.integers(0, 3))):
            messages += draw(step(ids, final=False))
        if draw(st.booleans()):
            break  # a run in progress: its next request answers the last tool results
        messages += draw(step(ids, final=True))
    if messages[-1].role == "assistant":
        messages.append(Message.user(draw(WORDS)))
    return messages


def cut_points(messages: list[Message]) -> list[int]:
    """Where a compaction may cut: before a user or an assistant message (after the system prompt)."""
    return [i for i, message in enumerate(messages) if message.role in ("user", "assistant")]


@st.composite
def compacted(draw: Any) -> list[Message]:
    """A transcript with one to three compaction markers inserted at valid cut points, the last one trimming
    some of the tool results it kept."""
    messages = draw(transcripts())
    points = draw(st.lists(st.sampled_from(cut_points(messages)), min_size=1, max_size=3, unique=True))
    for number, at in enumerate(sorted(points, reverse=True)):
        rest = messages[at:]
        kept = draw(st.integers(0, len(rest)))
        results = [r.call_id for m in rest[:kept] for r in m.tool_results] if number == 0 else []
        trimmed = {call_id: f"[output {call_id} kept by reference]" for call_id in results if draw(st.booleans())}
        info = CompactionInfo(kept, summarized=at, tokens_before=9_000, tokens_after=900, trimmed=trimmed)
        messages.insert(at, compaction_marker(f"summary of {at} messages", info))
    return list(messages)


def request_of(view: tuple[Message, ...], inline_system: bool) -> tuple[str | None, list[Message]]:
    """The system prompt and messages of a request for ``view``: the system prompt as ``Request.system`` (as
    the loop sends it) or left as the view's first message."""
    if view and view[0].role == "system" and not inline_system:
        return view[0].text, list(view[1:])
    return None, list(view)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    transcript=compacted(),
    inline_system=st.booleans(),
    summary_call=st.booleans(),
    shape=st.none() | st.integers(1, 12),
)
def test_every_provider_accepts_the_view_of_a_compacted_transcript(
    transcript: list[Message], inline_system: bool, summary_call: bool, shape: int | None
) -> None:
    assert transcript_problems(transcript) == []
    view = model_view(transcript)
    assert transcript_problems(view) == []
    system, messages = request_of(view, inline_system)
    if shape is not None and messages[0].role != "system":  # Limits.max_history_messages on top
        messages = list(shape_history(messages, shape))
    if summary_call:  # the tools-off call asking for a summary of the view
        messages.append(Message.user("Summarize the conversation so far."))
    assert_every_provider_accepts(
        system, messages, tools_for(transcript), tool_choice="none" if summary_call else "auto"
    )


@settings(max_examples=200, deadline=None)
@given(transcript=transcripts(), max_messages=st.integers(1, 12))
def test_every_provider_accepts_history_shaped_to_max_history_messages(
    transcript: list[Message], max_messages: int
) -> None:
    system = transcript[0].text if transcript[0].role == "system" else None
    body = transcript[1:] if system is not None else transcript
    shaped = shape_history(body, max_messages)
    assert transcript_problems(shaped) == []
    assert_every_provider_accepts(system, shaped, tools_for(transcript))
