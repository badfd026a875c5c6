"""What providers stream to the loop (:data:`LlmEvent`) and what a run streams to its host (:data:`RunEvent`).

A provider turns its wire format into ``LlmEvent``s; the loop folds them into a turn and, as it goes, emits
``RunEvent``s. Text and thinking deltas are the same objects in both streams: the loop passes them through
untouched, so the first token reaches the host as soon as the provider has it.

A run's events come in this order (ARCHITECTURE.md §4): ``RunStarted``; per turn ``TurnStarted``, the provider's
retries (``ProviderRetry``, before its wait) and client-side rate-limit waits (``RateLimitWait``, likewise), the
deltas (a thinking block's between ``ThinkingStarted`` and ``ThinkingEnded``), ``TurnCompleted`` as soon as the
model's message is complete (with that call's usage), a ``CallFailed`` when the call gave no usable answer, then
``ToolCallStarted`` and ``ToolResultReceived`` per tool call the message asked for (between them, the events of
an agent the call runs, as ``SubAgentEvent``s); and ``RunCompleted`` last, always. So a consumer has the whole
message and its usage before the turn's tools run, however long they take.
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, Literal, TypeAlias

import msgspec
from typing_extensions import TypeVar

from tether.limits import StopReason
from tether.messages import JsonObject, Message, ToolCall, ToolResult, model_view
from tether.paused import PausedRun, PendingCall
from tether.usage import Cost, Usage

OutputT = TypeVar("OutputT", default=str)
"""The type of a run's output (``Agent[Deps, Output]``, ``RunResult[Output]``); ``str``, its text, by default."""

FinishReason: TypeAlias = Literal["stop", "length", "tool_calls", "content_filter", "error", "other"]
"""Why the model stopped writing, normalized across providers."""
TurnStatus: TypeAlias = Literal["completed", "rejected", "failed"]
"""How a provider call ended (``TurnCompleted.status``): its answer used, not usable, or no answer at all."""

# --- LlmEvent: provider -> loop -----------------------------------------------------------------------------


class StreamStart(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="stream_start"):
    """The provider accepted the request; ``model`` is the model that actually answers, when known. ``cached``:
    the answer that follows is a replay from a response cache (``providers/response_cache.py``), not a call."""

    model: str | None = None
    response_id: str | None = None
    cached: bool = False
    kind: ClassVar[Literal["stream_start"]] = "stream_start"


class ThinkingDelta(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="thinking_delta"):
    """A piece of reasoning. A ``signature`` closes the current thinking block (Anthropic style)."""

    text: str
    signature: str | None = None
    provider_data: JsonObject | None = None
    kind: ClassVar[Literal["thinking_delta"]] = "thinking_delta"


class TextDelta(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="text_delta"):
    """A piece of the answer's text."""

    text: str
    provider_data: JsonObject | None = None
    kind: ClassVar[Literal["text_delta"]] = "text_delta"


class ToolCallStart(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="tool_call_start"):
    """A tool call begins; ``index`` is its position among the turn's calls as the provider numbers them."""

    id: str
    name: str
    index: int
    provider_data: JsonObject | None = None
    kind: ClassVar[Literal["tool_call_start"]] = "tool_call_start"


class ToolCallDelta(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="tool_call_delta"):
    """A piece of a tool call's JSON arguments; pieces of several calls may interleave, told apart by ``id``."""

    id: str
    arguments_delta: str
    kind: ClassVar[Literal["tool_call_delta"]] = "tool_call_delta"


class ToolCallEnd(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="tool_call_end"):
    """A tool call's arguments are complete."""

    id: str
    kind: ClassVar[Literal["tool_call_end"]] = "tool_call_end"


class StreamEnd(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="stream_end"):
    """The provider finished the turn."""

    finish_reason: FinishReason
    usage: Usage
    provider_data: JsonObject | None = None
    """Kept on the assistant message, for data the provider needs back on a later turn."""
    kind: ClassVar[Literal["stream_end"]] = "stream_end"


class ProviderRetry(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="provider_retry"):
    """The provider's request failed before its answer started (a rate limit, an overloaded server, a dropped
    connection), and it will be made again after ``delay`` seconds: what a consumer shows as "retrying in 2.0 s".

    The HTTP providers' retry ladder (``providers/http/retry.py``) hands it on before each of its waits, as an
    event of the call's stream, so that the loop can pass it to the host in order (before the answer's deltas,
    which only the last attempt has). ``attempt`` is the number of the attempt that follows (2 for the first
    retry); ``code`` the failure's stable code (``rate_limited``, ``provider_unavailable``, ``transport``,
    ``timeout``), ``status`` its HTTP status when it had one, ``message`` its text, with known keys masked."""

    attempt: int
    delay: float
    code: str
    message: str
    status: int | None = None
    kind: ClassVar[Literal["provider_retry"]] = "provider_retry"


class RateLimitWait(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="rate_limit_wait"):
    """The provider's request waits ``delay`` seconds before it is sent, held by its client-side rate limit
    (``providers/http/ratelimit.py``): what a consumer shows as "waiting 1.2 s for the rate limit".

    Handed on before the wait, like ``ProviderRetry``; ``reason`` says what holds it: ``requests`` or ``tokens``
    (the limit's own count), ``server`` (the server's remaining quota is spent until its reset),
    ``retry_after`` (a 429 paused every request to that API)."""

    delay: float
    reason: str
    kind: ClassVar[Literal["rate_limit_wait"]] = "rate_limit_wait"


class FallbackTaken(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="fallback_taken"):
    """A fallback (``Agent(["anthropic:...", "openai:..."])``, ``providers/fallback.py``) moved on: ``model``
    failed before its answer began, for a reason the fallback moves on for, and the same request goes to
    ``next_model``: what a consumer shows as "[anthropic:... rate_limited → openai:...]".

    The fallback hands it on between the two attempts, as an event of the call's stream (like ``ProviderRetry``),
    after the failed attempt's own retries. ``code`` is the failure's stable code (``rate_limited``,
    ``provider_unavailable``, ``timeout``, ``transport``, ``auth_failed``, ``content_filter``,
    ``empty_answer``), ``message`` its text, with known keys masked; ``attempt`` the number of the model asked
    next (2 when the first one failed). The failed attempt is a ``TurnRecord`` of its own (``error`` its code)."""

    model: str
    code: str
    message: str
    next_model: str
    attempt: int
    kind: ClassVar[Literal["fallback_taken"]] = "fallback_taken"


LlmEvent: TypeAlias = (
    StreamStart
    | ThinkingDelta
    | TextDelta
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | StreamEnd
    | ProviderRetry
    | RateLimitWait
    | FallbackTaken
)


# --- records: what each provider call and tool call took ------------------------------------------------------


class ToolCallRecord(msgspec.Struct, frozen=True, gc=False):
    """What became of one tool call, and how long it ran."""

    call_id: str
    name: str
    is_error: bool
    code: str | None = None
    """The result's code (``tool_failed``, ``permission_denied``, ``repeated``, ...), as on ``ToolResult``."""
    duration_ms: float | None = None
    """How long the tool ran; ``None`` for a call answered without running it (refused, unknown, invalid
    arguments, repeated, cancelled before it started)."""
    turn_records: tuple[TurnRecord, ...] = ()
    """The provider calls of the agent the call ran (``agent.as_tool()``, ``tether.team``), each with its own tool
    calls' records; empty for any other tool."""


class TurnRecord(msgspec.Struct, frozen=True, gc=False):
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
    text: str = ""
    """The text of the call's answer as the model wrote it (its thinking aside; a compaction's summary, a rejected
    answer's text, what a failed call gave before it failed). After the fields records had before it, with a
    default, so that a record stored before it existed (a durable run's result) is read back with ``""``."""
    retry_wait_ms: float = 0.0
    """How long the provider's retries waited, in all (part of ``duration_ms``; each is a ``ProviderRetry``)."""
    cached: bool = False
    """The answer was replayed from the run's response cache (``Agent(cache=...)``): no request was made, and
    ``usage`` is zero."""
    cost: Cost | None = None
    """What the call cost at the run's price (its own tier: a tier applies to a request); ``None`` when the
    model's price is unknown. The run's ``cost`` is their sum, with what its sub-agents spent."""


# --- RunEvent: run -> host ----------------------------------------------------------------------------------


class RunResult(msgspec.Struct, Generic[OutputT], frozen=True):
    """How a run ended. Every run produces one, whatever happened.

    ``text`` is the answer (best effort when ``degraded``); ``messages`` the whole transcript, valid even when
    the run was cancelled; ``detail`` says in a sentence why the run stopped; ``error`` is the failure that
    stopped it, if one did. ``degraded`` is set by every stop but ``complete``, ``done_tool`` and ``ask_user``,
    and by an answer still cut at the output limit (``finish_reason`` ``length``) or a failed last save.
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
    output: OutputT = None  # type: ignore[assignment]  # every run sets it; None only where one gave no output
    """The run's output: its text, or, when an output type was asked for (``output_type=``), the validated value
    (``None`` when the run stopped without one: see ``stop_reason``, ``invalid_output`` among others)."""
    finish_reason: FinishReason | None = None
    """How the model's last answer ended (its call's finish reason, a compaction's aside): ``length`` when it was
    cut off at the output limit, which leaves the run ``degraded`` even when it is ``complete`` (the answer is
    continued first, up to ``Limits.answer_continuations`` times); ``None`` when no call was made."""
    last_agent: str | None = None
    """The name of the agent that answered: the last one the run was handed to (``Agent(handoffs=...)``), or the
    agent's own name; ``None`` for an agent without one."""
    pending: tuple[PendingCall, ...] = ()
    """The calls a paused run waits on (``stop_reason`` ``paused``), in the model's order; empty otherwise."""
    state: PausedRun | None = None
    """A paused run's state, to resume it with decisions (``Agent.resume``) here or in another process
    (``state.to_json()``); ``None`` unless the run paused."""

    @property
    def new_messages(self) -> tuple[Message, ...]:
        """The messages this run added: the prompt and everything after it."""
        return self.messages[self.first_new_message :]

    @property
    def model_messages(self) -> tuple[Message, ...]:
        """What the model is sent of ``messages`` on the next run: from the last compaction on
        (:func:`~tether.messages.model_view`). ``messages`` itself is the whole transcript."""
        return model_view(self.messages)


class RunStarted(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="run_started"):
    run_id: str
    model: str
    prompt: str
    kind: ClassVar[Literal["run_started"]] = "run_started"


class TurnStarted(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="turn_started"):
    """A provider call begins. ``attempt`` > 1 is a corrective retry; ``final``: tools are off and only an
    answer is accepted (the summary call after a step limit, or the answer asked for after a repeated call)."""

    turn: int
    attempt: int = 1
    final: bool = False
    kind: ClassVar[Literal["turn_started"]] = "turn_started"


class PartialOutput(msgspec.Struct, frozen=True, tag_field="kind", tag="partial_output"):
    """A typed output as the model has written it so far (``output.py``), in place of its raw JSON's deltas:
    ``data`` is the JSON parsed so far (a string cut short is kept as far as it goes), ``output`` the type's
    validation of it when what is there already passes (``None`` while a required field is still missing, and for
    a union). Not final: output validators have not seen it, and the run's ``result.output`` is the one to keep."""

    data: Any
    output: Any = None
    turn: int = 0
    kind: ClassVar[Literal["partial_output"]] = "partial_output"


class ToolCallStarted(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="tool_call_started"):
    call: ToolCall
    turn: int
    kind: ClassVar[Literal["tool_call_started"]] = "tool_call_started"


class ToolResultReceived(msgspec.Struct, frozen=True, tag_field="kind", tag="tool_result_received"):
    """A call's result, in the model's order. ``exception`` is what the tool raised, for the host's eyes only."""

    result: ToolResult
    turn: int
    exception: BaseException | None = None
    kind: ClassVar[Literal["tool_result_received"]] = "tool_result_received"


class TurnCompleted(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="turn_completed"):
    """A provider call ended. Every ``TurnStarted`` gets one, also when the call failed or was interrupted;
    ``rejected`` then says why the answer was not used (it is not in the transcript). It comes as soon as the
    model's message is complete, before the ``ToolCallStarted`` and ``ToolResultReceived`` of the calls it asked
    for: a turn's tool events follow its ``TurnCompleted``.

    ``status`` is the step's outcome: ``"completed"`` (the answer was used), ``"rejected"`` (it could not be
    used: a corrective retry or a stop followed) or ``"failed"`` (the provider call failed or was
    interrupted). ``cached``: the answer was replayed from the run's response cache (``Agent(cache=...)``): no
    request was made, and ``usage`` is zero (as on its ``TurnRecord``)."""

    turn: int
    message: Message
    usage: Usage
    finish_reason: FinishReason
    rejected: str | None = None
    status: TurnStatus = "completed"
    cached: bool = False
    kind: ClassVar[Literal["turn_completed"]] = "turn_completed"


class ThinkingStarted(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="thinking_started"):
    """A thinking block begins: the ``ThinkingDelta``s that follow are its text, up to its ``ThinkingEnded``.

    The loop tells a block from its deltas, the same way for every provider (``loop/accumulator.py``): a block is
    what becomes one ``Thinking`` part of the message. Only a model that thinks makes these; one instance is
    shared by every run."""

    kind: ClassVar[Literal["thinking_started"]] = "thinking_started"


class ThinkingEnded(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="thinking_ended"):
    """The thinking block under way ended: the provider closed it (a signature), or the answer went on with
    text, a tool call or its end. Every block of an answer that ended has one; a call that fails while the model
    is still thinking has none (its ``TurnCompleted`` says that it failed)."""

    kind: ClassVar[Literal["thinking_ended"]] = "thinking_ended"


THINKING_STARTED = ThinkingStarted()
THINKING_ENDED = ThinkingEnded()
"""The thinking marks, one instance each: they carry nothing but their kind."""

CallNext: TypeAlias = Literal["retry", "compact", "stop"]
"""What follows a failed provider call (``CallFailed.then``)."""


class CallFailed(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="call_failed"):
    """A provider call gave no usable answer, and what the loop does about it. It follows the call's
    ``TurnCompleted`` (``status`` ``"failed"`` or ``"rejected"``), once the loop has decided: ``then`` is
    ``"retry"`` (the call is made again with a correction: a malformed, empty or cut-off answer, up to
    ``Limits.invalid_response_retries``), ``"compact"`` (the history was too long: it is compacted, then the call
    is made again) or ``"stop"`` (the run ends because of it).

    ``code`` is the failure's stable code (``rate_limited`` once the provider's own retries ran out,
    ``auth_failed``, ``timeout``, ``invalid_response`` for an answer that could not be used, ...; ``None`` for an
    unexpected exception of a provider), ``message`` says what happened, with known keys masked. A cancelled call
    has none: cancelling is not a failure."""

    turn: int
    attempt: int
    code: str | None
    message: str
    then: CallNext
    kind: ClassVar[Literal["call_failed"]] = "call_failed"


class Compacted(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="compacted"):
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
    kind: ClassVar[Literal["compacted"]] = "compacted"


class HandoffTaken(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="handoff_taken"):
    """The run moved to another agent (``Agent(handoffs=...)``, ``tether.team.handoffs``): the model of
    ``from_agent`` called its transfer tool in ``turn``, and the turns from now on are ``to_agent``'s (its model,
    instructions, tools and output type)."""

    from_agent: str
    to_agent: str
    turn: int
    kind: ClassVar[Literal["handoff_taken"]] = "handoff_taken"


class RunCompleted(msgspec.Struct, frozen=True, tag_field="kind", tag="run_completed"):
    result: RunResult[Any]
    kind: ClassVar[Literal["run_completed"]] = "run_completed"


class SubAgentEvent(msgspec.Struct, frozen=True, tag_field="kind", tag="sub_agent_event"):
    """An event of an agent this run runs as a tool (``agent.as_tool()``, ``tether.team``), relayed while the
    call runs, between its ``ToolCallStarted`` and its ``ToolResultReceived``. ``path`` names the agents it came
    from, outermost first (each by the name of the tool that runs it: ``("research", "search")`` is an event of
    the agent that ``research``'s agent ran as ``search``); ``call_ids`` are the calls that run them, in the same
    order; ``event`` is the event as that agent's run emitted it (never itself a ``SubAgentEvent``)."""

    path: tuple[str, ...]
    call_ids: tuple[str, ...]
    event: RunEvent
    kind: ClassVar[Literal["sub_agent_event"]] = "sub_agent_event"


RunEvent: TypeAlias = (
    RunStarted
    | TurnStarted
    | ProviderRetry
    | RateLimitWait
    | FallbackTaken
    | ThinkingStarted
    | ThinkingDelta
    | ThinkingEnded
    | TextDelta
    | PartialOutput
    | ToolCallStarted
    | ToolResultReceived
    | TurnCompleted
    | CallFailed
    | Compacted
    | HandoffTaken
    | RunCompleted
    | SubAgentEvent
)
