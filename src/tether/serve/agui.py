"""AG-UI (the Agent-User Interaction protocol): a ``RunAgentInput`` as a run's input, a run's events as AG-UI
events, each encoded as a server-sent event. Its shapes are the official ones (``ag_ui.core``, the ``serve``
extra's ``ag-ui-protocol``), so what is sent is what every AG-UI client reads.

In: :func:`run_input` reads the request body (``RunAgentInput``): its messages become tether messages (a user's
text, images, audio and documents, inline or by URL; an assistant's text and tool calls; a tool's results, an
``error`` one as an error result), its system and developer messages and its ``context`` the run's instructions.
Reasoning and activity messages, and the messages of a sub-agent (those with a ``subagentRunId``, which a client
keeps as the stream gave them), are the client's to show, not the model's to read, and are left out.

Out: a :class:`Translator` per run turns each ``RunEvent`` into AG-UI events, in the protocol's order:
``RUN_STARTED`` first; a provider call is a step (``STEP_STARTED`` ... ``STEP_FINISHED``, around its tool calls);
thinking is a reasoning message (``REASONING_START``, ``REASONING_MESSAGE_START``/``CONTENT``/``END``,
``REASONING_END``); text a text message (``TEXT_MESSAGE_START``/``CONTENT``/``END``), closed before anything else
starts; a tool call ``TOOL_CALL_START``/``ARGS``/``END`` when it starts and ``TOOL_CALL_RESULT`` when it ends (an
error result says so in its ``metadata``: ``isError``, ``code``); an agent run as a tool is a sub-agent
(``SUBAGENT_STARTED``, its events carrying its ``subagentRunId``, ``SUBAGENT_FINISHED`` or ``SUBAGENT_ERROR``).
What AG-UI has no event for is a ``CUSTOM`` event named ``tether.<kind>`` whose value is the event's JSON
(``tether.serve.events_json``): each call's usage (``tether.usage``), retries, rate-limit waits, fallbacks, failed
calls, compactions, handoffs, a typed output as it is written (``tether.partial_output``) and as it is
(``tether.output``). Last, always: ``RUN_FINISHED`` (its ``result`` the output, its ``usage`` the run's tokens,
its ``outcome`` ``success`` or ``cancelled``, its ``metadata`` the stop reason, ``degraded`` and ``detail``) or,
for a run that failed, ``RUN_ERROR`` (its message and stable code).

Texts and tool calls' arguments are masked as ``events_json`` masks them: no known key leaves the server.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    AudioPart,
    BaseEvent,
    DataSource,
    DeveloperMessage,
    DocumentPart,
    ImagePart,
    RunAgentInput,
    SystemMessage,
    TextPart,
    ToolMessage,
    UrlSource,
    UserMessage,
)
from ag_ui.encoder import EventEncoder
from pydantic import ValidationError

from tether.errors import RequestInvalid
from tether.messages import Attachment, Message, Text, ToolCall
from tether.serve.agui_stream import Translator, token_usage
from tether.serve.inputs import (
    Conversation,
    attachment_from_data,
    attachment_from_url,
    conversation,
    tool_call,
    tool_result,
)

__all__ = ["CONTENT_TYPE", "AguiRun", "Translator", "encode", "run_input", "token_usage"]

CONTENT_TYPE = "text/event-stream"
"""The media type of an AG-UI event stream (server-sent events)."""

_ENCODER = EventEncoder()


def encode(event: BaseEvent) -> str:
    """``event`` as one server-sent event (``data: {json}``), as the official encoder writes it."""
    return _ENCODER.encode(event)


# --- in --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AguiRun:
    """An AG-UI request read for a run: ``agent.stream(run.prompt, history=run.history,
    instructions=run.instructions)``. ``tools`` are the client's own tools (as it sent them: tether does not run
    them); ``state`` and ``forwarded_props`` are the client's, as sent."""

    thread_id: str
    run_id: str
    prompt: list[str | Attachment] | None
    history: tuple[Message, ...]
    instructions: str | None
    parent_run_id: str | None = None
    state: Any = None
    tools: tuple[dict[str, Any], ...] = ()
    forwarded_props: Any = None
    resume: tuple[dict[str, Any], ...] = ()
    """The client's answers to a paused run's interrupts (``interruptId``, ``status``, ``payload``), as sent."""


def run_input(body: bytes | str) -> AguiRun:
    """A ``RunAgentInput`` (the request's JSON body) read for a run; ``RequestInvalid`` when it is not one, or
    holds a conversation tether cannot run."""
    try:
        request = RunAgentInput.model_validate_json(body)
    except ValidationError as error:
        problems = [f"{'.'.join(str(p) for p in e['loc']) or '(body)'}: {e['msg']}" for e in error.errors()]
        raise RequestInvalid(f"not an AG-UI RunAgentInput: {problems[0]}", details={"errors": problems}) from None
    system = [m.content for m in request.messages if isinstance(m, SystemMessage | DeveloperMessage)]
    system += [f"{c.description}:\n{c.value}" for c in request.context or ()]
    try:
        asked = conversation(_messages(request), system)
    except RequestInvalid:
        if not request.resume:
            raise
        asked = Conversation(None, (), None)  # answers to a paused run's interrupts: the server holds its transcript
    return AguiRun(
        thread_id=request.thread_id,
        run_id=request.run_id,
        prompt=asked.prompt,
        history=asked.history,
        instructions=asked.instructions,
        parent_run_id=request.parent_run_id,
        state=request.state,
        tools=tuple(tool.model_dump(mode="json", by_alias=True) for tool in request.tools or ()),
        forwarded_props=request.forwarded_props,
        resume=tuple(entry.model_dump(mode="json", by_alias=True) for entry in request.resume or ()),
    )


def _messages(request: RunAgentInput) -> list[Message]:
    calls: dict[str, ToolCall] = {}
    messages: list[Message] = []
    for message in request.messages:
        if message.subagent_run_id is not None:
            continue  # a sub-agent's messages (a client keeps them as the stream gave them): its own, not the model's
        if isinstance(message, UserMessage):
            messages.append(Message("user", _parts(message.content)))
        elif isinstance(message, AssistantMessage):
            made = [tool_call(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or ()]
            calls.update((call.id, call) for call in made)
            text = (Text(message.content),) if message.content else ()
            messages.append(Message("assistant", (*text, *made)))
        elif isinstance(message, ToolMessage):
            call = calls.get(message.tool_call_id)
            if call is None:
                raise RequestInvalid(f"the tool message {message.id!r} answers no tool call ({message.tool_call_id!r})")
            parts = _parts(message.content)
            content = "\n\n".join(p.text for p in parts if type(p) is Text)
            if message.error is not None:
                content = message.error if not content else f"{message.error}\n\n{content}"
            found = tuple(p for p in parts if type(p) is Attachment)
            result = tool_result(call, content, error=message.error is not None, attachments=found)
            messages.append(Message("tool", (result,)))
    return messages


def _parts(content: Any) -> tuple[Text | Attachment, ...]:
    if isinstance(content, str):
        return (Text(content),) if content else ()
    parts: list[Text | Attachment] = []
    for part in content:
        if isinstance(part, TextPart):
            parts.append(Text(part.text))
        elif isinstance(part, ImagePart | AudioPart | DocumentPart):
            source = part.source
            if isinstance(source, DataSource):
                parts.append(attachment_from_data(source.value, source.mime_type))
            elif isinstance(source, UrlSource):
                parts.append(attachment_from_url(source.value, source.mime_type))
            else:
                raise RequestInvalid(
                    f"the {part.type} part is a provider's file handle, which cannot be read: send its data"
                )
        else:
            raise RequestInvalid(f"a {part.type} part cannot be an attachment: images, audio and documents can")
    return tuple(parts)
