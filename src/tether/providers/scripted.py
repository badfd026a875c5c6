"""ScriptedProvider: a deterministic model, for testing agents without a network or an API key.

A script is a list of steps, one per provider call, built with small helpers::

    model = ScriptedProvider([
        call("add", {"a": 2, "b": 3}),          # turn 1: the model calls a tool
        reply("5"),                             # turn 2: it answers
    ])

A step can stream its text in chunks with gaps between them, think, call several tools at once (their
argument deltas interleaved, as real providers stream them), be cut off at the output limit, pause, hang,
fail with any error, replay raw events, or be computed from the request (pass a function of the
``Request``). Every request is recorded in ``model.requests``. A call past the end of the script raises
:class:`ScriptExhausted` (code ``script_exhausted``), which stops the run like any provider's failure: the run
does not raise, its ``stop_reason`` is ``error`` and its ``error`` the exhausted script, saying how many calls the
script had steps for. :meth:`ScriptedProvider.assert_consumed` fails if steps were left over.

Usage is a deterministic estimate (four characters a token) unless a step sets it. Like every provider it
keeps ``Request.timeout``: a scripted pause longer than that fails with ``RequestTimeout``. With a
``context_window``, it is the model's known window (``ModelInfo.context_window``) and, like a real API, it
refuses a request whose input and ``max_tokens`` pass it with ``ContextOverflow``, worded as OpenAI does
(the script does not advance); ``model.largest_request`` is the biggest input it was sent, in tokens.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, replace
from itertools import zip_longest
from typing import Any, ClassVar

from tether.errors import ContextOverflow, ErrorCode, ProviderError, RequestTimeout
from tether.events import (
    FinishReason,
    LlmEvent,
    StreamEnd,
    StreamStart,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from tether.media import attachment_tokens
from tether.messages import Attachment, Part, ToolCall, ToolResult
from tether.providers.base import ModelInfo, Request
from tether.usage import Usage

__all__ = [
    "Pause",
    "ScriptExhausted",
    "ScriptedCall",
    "ScriptedProvider",
    "Step",
    "call",
    "cut_off",
    "empty",
    "events",
    "fail",
    "hang",
    "parallel",
    "reply",
]


class ScriptExhausted(ProviderError, AssertionError):
    """The agent called the model more often than the script has steps.

    A provider's error with a code of its own (``script_exhausted``), so a run ends with it as ``result.error``
    and a ``detail`` that names it, as with any provider that fails; an ``AssertionError`` too, so that a test
    that plays the script itself fails as an assertion would."""

    code: ClassVar[ErrorCode] = "script_exhausted"


@dataclass(frozen=True, slots=True)
class Pause:
    """Wait ``seconds`` in the middle of a stream; ``None`` waits until the call is cancelled."""

    seconds: float | None


@dataclass(frozen=True, slots=True)
class ScriptedCall:
    """One tool call of a step; ``arguments`` is the JSON text sent, verbatim."""

    name: str
    arguments: str
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Step:
    """What one provider call streams. Build it with :func:`reply`, :func:`call` and friends."""

    text: str = ""
    thinking: str | None = None
    signature: str | None = None
    calls: tuple[ScriptedCall, ...] = ()
    chunk_size: int | None = None
    """Stream text and arguments in pieces of this many characters (``None``: one piece each)."""
    gap: float = 0.0
    """Seconds between text pieces."""
    delay: float = 0.0
    """Seconds before the first event."""
    finish: FinishReason | None = None
    """``None``: ``tool_calls`` when the step calls tools, else ``stop``."""
    usage: Usage | None = None
    cut_off: bool = False
    """The last call is cut off at the output limit: half its arguments, no end, ``finish="length"``."""
    hang: bool = False
    """After the text, wait until cancelled; with nothing to stream, send no event at all."""
    error: BaseException | None = None
    """Raised after the text, instead of finishing."""
    raw: tuple[LlmEvent | Pause, ...] | None = None
    """Exactly these events, instead of all of the above."""

    @property
    def label(self) -> str:
        if self.raw is not None:
            return f"events({len(self.raw)} events)"
        parts = [f"text={_short(self.text)}"] if self.text else []
        parts += [f"{c.name}({_short(c.arguments)})" for c in self.calls]
        parts += [f"error={self.error!r}"] if self.error is not None else []
        parts += ["hang"] if self.hang else []
        return "step(" + ", ".join(parts) + ")"


Responder = Callable[[Request], Step]


# --- building steps -----------------------------------------------------------------------------------------


def reply(text: str, **options: Any) -> Step:
    """The model answers ``text``. Options are :class:`Step`'s fields (``chunk_size``, ``gap``, ``thinking``...)."""
    return Step(text=text, **options)


def call(name: str, arguments: dict[str, Any] | str | None = None, *, id: str | None = None, **options: Any) -> Step:  # noqa: A002
    """The model calls one tool; ``arguments`` given as a string are sent verbatim (malformed JSON included)."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return Step(calls=(ScriptedCall(name, raw, id),), **options)


def parallel(*steps: Step, **options: Any) -> Step:
    """One turn with the calls of several :func:`call` steps, their argument deltas interleaved."""
    calls = tuple(c for step in steps for c in step.calls)
    return Step(calls=calls, **options)


def cut_off(step: Step) -> Step:
    """``step`` with its last tool call cut off at the output limit (``finish_reason="length"``)."""
    return replace(step, cut_off=True)


def empty(**options: Any) -> Step:
    """An answer with nothing in it."""
    return Step(**options)


def hang(text: str = "", **options: Any) -> Step:
    """Stream ``text``, then wait until cancelled; without text, never send anything (for timeouts)."""
    return Step(text=text, hang=True, **options)


def fail(error: BaseException, *, after_text: str = "", **options: Any) -> Step:
    """Stream ``after_text`` (if any), then raise ``error``, as a provider failing mid-stream would."""
    return Step(text=after_text, error=error, **options)


def events(*items: LlmEvent | Pause) -> Step:
    """Stream exactly these events (and pauses), for cases the other helpers do not cover."""
    return Step(raw=items)


# --- the provider -------------------------------------------------------------------------------------------


class ScriptedProvider:
    """Plays a script of steps, one per call; see the module docstring."""

    def __init__(
        self,
        steps: Iterable[Step | Responder],
        *,
        model: str = "scripted",
        supports_tools: bool = True,
        supports_json_schema: bool = False,
        supports_output_schema: bool = False,
        input_kinds: Iterable[str] = ("text", "image", "document", "audio"),
        repeat_last: bool = False,
        context_window: int | None = None,
    ) -> None:
        self._steps = list(steps)
        self._repeat_last = repeat_last
        self._ids = 0
        self.info = ModelInfo(
            "scripted",
            model,
            supports_tools=supports_tools,
            supports_json_schema=supports_json_schema,
            supports_output_schema=supports_output_schema,
            input_kinds=frozenset(input_kinds),
            context_window=context_window,
        )
        self.requests: list[Request] = []
        self.refused: list[Request] = []
        """Requests refused as longer than ``context_window`` (not in ``requests``)."""
        self.largest_request = 0
        """The most input tokens a request it answered had (four characters a token)."""

    @classmethod
    def echo(cls) -> ScriptedProvider:
        """A model that answers every request with the last user message (``scripted:echo``)."""

        def echo(request: Request) -> Step:
            users = [m for m in request.messages if m.role == "user"]
            return reply(users[-1].text if users else "")

        return cls([echo], model="echo", repeat_last=True)

    @property
    def unconsumed(self) -> list[str]:
        """Labels of the steps not played yet."""
        return [_label(step) for step in self._steps[len(self.requests) :]]

    def assert_consumed(self) -> None:
        """Fail if the script has steps that were never played."""
        if left := self.unconsumed:
            raise AssertionError(f"ScriptedProvider: {len(left)} step(s) never played: {', '.join(left)}")

    async def stream(self, request: Request) -> AsyncIterator[LlmEvent]:
        window = self.info.context_window
        sent = input_tokens(request)
        if window is not None and sent + (request.settings.max_tokens or 0) > window:
            self.refused.append(request)
            raise ContextOverflow(
                f"This model's maximum context length is {window} tokens. However, your messages resulted in "
                f"{sent} tokens. Please reduce the length of the messages.",
                status=400,
            )
        self.largest_request = max(self.largest_request, sent)
        index = len(self.requests)
        self.requests.append(request)
        if index >= len(self._steps) and not (self._repeat_last and self._steps):
            played = ", ".join(_label(step) for step in self._steps) or "nothing"
            raise ScriptExhausted(
                f"ScriptedProvider was called {index + 1} times but its script has {len(self._steps)} "
                f"step(s) ({played}). Add a step for this call or check why the agent asked again."
            )
        entry = self._steps[min(index, len(self._steps) - 1)]
        step = entry if isinstance(entry, Step) else entry(request)
        for item in self._layout(step, request):
            if type(item) is Pause:
                await _pause(item.seconds, request.timeout)
            elif isinstance(item, BaseException):
                raise item
            else:
                yield item  # type: ignore[misc]

    def _layout(self, step: Step, request: Request) -> list[LlmEvent | Pause | BaseException]:
        """The events of ``step``, in the order a real provider would send them."""
        if step.raw is not None:
            return list(step.raw)
        items: list[LlmEvent | Pause | BaseException] = [Pause(step.delay)] if step.delay else []
        if step.hang and not (step.text or step.thinking or step.calls):
            return [*items, Pause(None)]  # a provider that never answers at all
        items.append(StreamStart(model=self.info.name))
        if step.thinking is not None:
            items.append(ThinkingDelta(step.thinking, step.signature))
        for position, piece in enumerate(_chunks(step.text, step.chunk_size)):
            if position and step.gap:
                items.append(Pause(step.gap))
            items.append(TextDelta(piece))
        items += self._call_events(step)
        if step.hang:
            items.append(Pause(None))
        if step.error is not None:
            items.append(step.error)
            return items
        finish = step.finish or ("length" if step.cut_off else "tool_calls" if step.calls else "stop")
        items.append(StreamEnd(finish, step.usage or _estimate(request, step)))
        return items

    def _call_events(self, step: Step) -> list[LlmEvent]:
        ids = []
        for scripted in step.calls:
            self._ids += 1
            ids.append(scripted.id or f"call_{self._ids}")
        out: list[LlmEvent] = [
            ToolCallStart(i, c.name, n) for n, (i, c) in enumerate(zip(ids, step.calls, strict=True))
        ]
        pieces = []
        for position, scripted in enumerate(step.calls):
            raw = scripted.arguments
            if step.cut_off and position == len(step.calls) - 1:
                raw = raw[: len(raw) // 2]
            pieces.append(_chunks(raw, step.chunk_size))
        for row in zip_longest(*pieces):
            out += [ToolCallDelta(ids[n], piece) for n, piece in enumerate(row) if piece]
        ended = ids[:-1] if step.cut_off else ids
        out += [ToolCallEnd(i) for i in ended]
        return out


async def _pause(seconds: float | None, timeout: float | None) -> None:
    """Wait as scripted, keeping ``Request.timeout`` as every provider must: a longer silence fails."""
    if timeout is not None and (seconds is None or seconds > timeout):
        await asyncio.sleep(timeout)
        raise RequestTimeout(f"scripted provider: nothing sent for request_timeout={timeout:g} s")
    if seconds is None:
        await asyncio.Event().wait()
    else:
        await asyncio.sleep(seconds)


def _chunks(text: str, size: int | None) -> list[str]:
    if not text:
        return []
    if not size or size >= len(text):
        return [text]
    return [text[i : i + size] for i in range(0, len(text), size)]


def input_tokens(request: Request) -> int:
    """The request's input at about four characters a token: its system prompt, messages and tool definitions."""
    sent = len(request.system or "") + sum(_chars(part) for m in request.messages for part in m.parts)
    sent += sum(len(t.name) + len(t.description) + len(json.dumps(t.parameters)) for t in request.tools)
    return (sent + 3) // 4


def _estimate(request: Request, step: Step) -> Usage:
    """About four characters a token: deterministic, and non-zero where text was sent or received."""
    received = len(step.text) + len(step.thinking or "") + sum(len(c.arguments) for c in step.calls)
    return Usage(input_tokens=input_tokens(request), output_tokens=(received + 3) // 4)


def _chars(part: Part) -> int:
    if isinstance(part, Attachment):
        return 4 * attachment_tokens(part)
    if isinstance(part, ToolCall):
        return len(part.name) + len(part.raw_arguments or "")
    if isinstance(part, ToolResult):
        return len(part.content)
    return len(part.text)


def _label(entry: Step | Responder) -> str:
    return entry.label if isinstance(entry, Step) else f"respond({getattr(entry, '__name__', 'function')})"


def _short(text: str, limit: int = 40) -> str:
    return repr(text) if len(text) <= limit else repr(text[: limit - 3] + "...")


def from_model_name(prefix: str, name: str, **options: object) -> ScriptedProvider:
    """``scripted:echo`` is the only scripted model a string can name; scripts are built in code."""
    from tether.errors import ConfigInvalid

    if name != "echo":
        raise ConfigInvalid(
            f"'scripted:{name}' is unknown: a string can only name 'scripted:echo'; "
            "pass a ScriptedProvider([...]) to Agent for a script"
        )
    if given := [key for key, value in options.items() if value is not None]:
        raise ConfigInvalid(f"'scripted:echo' takes no {', '.join(given)}")
    return ScriptedProvider.echo()
