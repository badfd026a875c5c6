"""What providers stream to the loop (:data:`LlmEvent`) and what a run streams to its host (:data:`RunEvent`).

A provider turns its wire format into ``LlmEvent``s; the loop folds them into a turn and, as it goes, emits
``RunEvent``s. Text and thinking deltas are the same objects in both streams: the loop passes them through
untouched, so the first token reaches the host as soon as the provider has it.

A run's events come in this order (DESIGN.md §4): ``RunStarted``; per turn ``TurnStarted``, the deltas,
``TurnCompleted`` as soon as the model's message is complete (with that call's usage), then ``ToolCallStarted``
and ``ToolResultReceived`` per tool call the message asked for; and ``RunCompleted`` last, always. So a consumer
has the whole message and its usage before the turn's tools run, however long they take.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from tether.limits import StopReason
from tether.messages import Message, ToolCall, ToolResult, model_view
from tether.quickinit import quick_init
from tether.usage import Cost, Usage

FinishReason: TypeAlias = Literal["stop", "length", "tool_calls", "content_filter", "error", "other"]
"""Why the model stopped writing, normalized across providers."""
TurnStatus: TypeAlias = Literal["completed", "rejected", "failed"]
"""How a provider call ended (``TurnCompleted.status``): its answer used, not usable, or no answer at all."""

# --- LlmEvent: provider -> loop -----------------------------------------------------------------------------


@quick_init
@dataclass(frozen=True, slots=True)
class StreamStart:
    """The provider accepted the request; ``model`` is the model that actually answers, when known."""

    model: str | None = None
    response_id: str | None = None
    kind: Literal["stream_start"] = "stream_start"


@quick_init
@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    """A piece of reasoning. A ``signature`` closes the current thinking block (Anthropic style)."""

    text: str
    signature: str | None = None
    provider_data: dict[str, Any] | None = None
    kind: Literal["thinking_delta"] = "thinking_delta"


@quick_init
@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the answer's text."""

    text: str
    provider_data: dict[str, Any] | None = None
    kind: Literal["text_delta"] = "text_delta"


@quick_init
@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """A tool call begins; ``index`` is its position among the turn's calls as the provider numbers them."""

    id: str
    name: str
    index: int
    provider_data: dict[str, Any] | None = None
    kind: Literal["tool_call_start"] = "tool_call_start"


@quick_init
@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A piece of a tool call's JSON arguments; pieces of several calls may interleave, told apart by ``id``."""

    id: str
    arguments_delta: str
    kind: Literal["tool_call_delta"] = "tool_call_delta"


@quick_init
@dataclass(frozen=True, slots=True)
class ToolCallEnd:
    """A tool call's arguments are complete."""

    id: str
    kind: Literal["tool_call_end"] = "tool_call_end"


@quick_init
@dataclass(frozen=True, slots=True)
class StreamEnd:
    """The provider finished the turn."""

    finish_reason: FinishReason
    usage: Usage
    provider_data: dict[str, Any] | None = None
    """Kept on the assistant message, for data the provider needs back on a later turn."""
    kind: Literal["stream_end"] = "stream_end"


LlmEvent: TypeAlias = StreamStart | ThinkingDelta | TextDelta | ToolCallStart | ToolCallDelta | ToolCallEnd | StreamEnd


# --- records: what each provider call and tool call took ------------------------------------------------------


@quick_init
@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """What became of one tool call, and how long it ran."""

    call_id: str
    name: str
    is_error: bool
    code: str | None = None
    """The result's code (``tool_failed``, ``permission_denied``, ``repeated``, ...), as on ``ToolResult``."""
    duration_ms: float | None = None
    """How long the tool ran; ``None`` for a call answered without running it (refused, unknown, invalid
    arguments, repeated, cancelled before it started)."""


@quick_init
@dataclass(frozen=True, slots=True)
class TurnRecord:
    """One provider call of a run (corrective retries and the final summary call included) and the tool calls
    its answer asked for. ``RunResult.turn_records`` has one per call, in order, like ``turn_usage``."""

    turn: int
    attempt: int
    final: bool
    """Tools were off: the summary call after a limit, or the answer asked for after a repeated call."""
    duration_ms: float
    """From the request to the last event of the answer (retries and their waits included)."""
    ttft_ms: float | None
    """Time to the first streamed event after the provider accepted the request; ``None`` if none came."""
    usage: Usage
    finish_reason: FinishReason
    model: str | None = None
    """The model that answered, as the provider named it."""
    response_id: str | None = None
    retries: int = 0
    """Attempts the provider made again after a retryable failure (rate limit, overload, transport)."""
    rejected: str | None = None
    """Why the answer was not used (a corrective retry or a stop followed), as on ``TurnCompleted``."""
    error: str | None = None
    """The stable code of the failure that ended the call (``rate_limited``, ``timeout``, ...), if one did."""
    tool_calls: tuple[ToolCallRecord, ...] = ()
    compaction: bool = False
    """The call asked for a summary of the conversation, to compact it (``Compacted``); not a turn."""


# --- RunEvent: run -> host ----------------------------------------------------------------------------------


@quick_init
@dataclass(frozen=True, slots=True)
class RunResult:
    """How a run ended. Every run produces one, whatever happened.

    ``text`` is the answer (best effort when ``degraded``); ``messages`` the whole transcript, valid even when
    the run was cancelled; ``detail`` says in a sentence why the run stopped; ``error`` is the failure that
    stopped it, if one did.
    """

    text: str
    stop_reason: StopReason
    messages: tuple[Message, ...]
    usage: Usage
    degraded: bool = False
    detail: str = ""
    error: Exception | None = None
    turns: int = 0
    turn_usage: tuple[Usage, ...] = ()
    """Usage of each provider call, in order (invalid answers and the final summary included)."""
    cost: Cost | None = None
    """``None`` when the model's price is not known."""
    run_id: str = ""
    first_new_message: int = 0
    """Index in ``messages`` of the first message this run added (the prompt)."""
    turn_records: tuple[TurnRecord, ...] = ()
    """Per provider call: its duration, time to first token, usage, finish reason, retries, and the duration and
    outcome of each tool call it asked for (:class:`TurnRecord`)."""
    duration_ms: float = 0.0
    """The run's wall time, from its start to its result."""

    @property
    def new_messages(self) -> tuple[Message, ...]:
        """The messages this run added: the prompt and everything after it."""
        return self.messages[self.first_new_message :]

    @property
    def model_messages(self) -> tuple[Message, ...]:
        """What the model is sent of ``messages`` on the next run: from the last compaction on
        (:func:`~tether.messages.model_view`). ``messages`` itself is the whole transcript."""
        return model_view(self.messages)


@quick_init
@dataclass(frozen=True, slots=True)
class RunStarted:
    run_id: str
    model: str
    prompt: str
    kind: Literal["run_started"] = "run_started"


@quick_init
@dataclass(frozen=True, slots=True)
class TurnStarted:
    """A provider call begins. ``attempt`` > 1 is a corrective retry; ``final``: tools are off and only an
    answer is accepted (the summary call after a step limit, or the answer asked for after a repeated call)."""

    turn: int
    attempt: int = 1
    final: bool = False
    kind: Literal["turn_started"] = "turn_started"


@quick_init
@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    call: ToolCall
    turn: int
    kind: Literal["tool_call_started"] = "tool_call_started"


@quick_init
@dataclass(frozen=True, slots=True)
class ToolResultReceived:
    """A call's result, in the model's order. ``exception`` is what the tool raised, for the host's eyes only."""

    result: ToolResult
    turn: int
    exception: BaseException | None = None
    kind: Literal["tool_result_received"] = "tool_result_received"


@quick_init
@dataclass(frozen=True, slots=True)
class TurnCompleted:
    """A provider call ended. Every ``TurnStarted`` gets one, also when the call failed or was interrupted;
    ``rejected`` then says why the answer was not used (it is not in the transcript). It comes as soon as the
    model's message is complete, before the ``ToolCallStarted`` and ``ToolResultReceived`` of the calls it asked
    for: a turn's tool events follow its ``TurnCompleted``.

    ``status`` is the step's outcome: ``"completed"`` (the answer was used), ``"rejected"`` (it could not be
    used: a corrective retry or a stop followed) or ``"failed"`` (the provider call failed or was
    interrupted)."""

    turn: int
    message: Message
    usage: Usage
    finish_reason: FinishReason
    rejected: str | None = None
    status: TurnStatus = "completed"
    kind: Literal["turn_completed"] = "turn_completed"


@quick_init
@dataclass(frozen=True, slots=True)
class Compacted:
    """The history was compacted before ``turn``: the model now sees ``marker`` (a summary of what came
    before it) and the messages after it. ``tokens_before``/``tokens_after`` are the next request's
    estimated size either side. ``reason``: the request would pass ``Compaction.threshold``, or the provider
    answered ``context_overflow``."""

    turn: int
    tokens_before: int
    tokens_after: int
    summarized: int
    """Messages of the model's view the summary replaced."""
    kept: int
    """Messages kept verbatim after the summary."""
    trimmed: int
    """Tool outputs among the kept messages now shown by reference only."""
    reason: Literal["threshold", "overflow"]
    marker: Message
    kind: Literal["compacted"] = "compacted"


@quick_init
@dataclass(frozen=True, slots=True)
class RunCompleted:
    result: RunResult
    kind: Literal["run_completed"] = "run_completed"


RunEvent: TypeAlias = (
    RunStarted
    | TurnStarted
    | ThinkingDelta
    | TextDelta
    | ToolCallStarted
    | ToolResultReceived
    | TurnCompleted
    | Compacted
    | RunCompleted
)
