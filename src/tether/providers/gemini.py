"""Google Gemini's native API (``generateContent`` / ``streamGenerateContent?alt=sse``), spoken over plain HTTP.

Requests: tether's messages become ``contents`` with the roles ``user`` and ``model``; the system prompt is
``systemInstruction``; tools are ONE ``tools`` entry of ``functionDeclarations`` whose parameters are translated
to the schema subset Gemini accepts (:mod:`tether.providers.gemini_schema`); the tool choice is
``toolConfig.functionCallingConfig`` (``AUTO``, ``ANY`` with ``allowedFunctionNames`` for a forced tool,
``NONE``); ``ModelSettings.extra`` is merged into the body, which is how thinking is switched on
(``{"generationConfig": {"thinkingConfig": {"includeThoughts": true}}}``). Tool results answering one turn go
back in one ``user`` content of ``functionResponse`` parts, in the calls' order, each with its call's ``id``
and the envelope ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": {"code", "message", "details"}}``.

Answers: a ``functionCall`` part arrives whole, so it becomes ``ToolCallStart``, one ``ToolCallDelta`` with the
arguments as JSON and ``ToolCallEnd`` (a call without an ``id`` gets one); ``thought: true`` parts are thinking.

Thought signatures: a ``thoughtSignature`` on a thought part is its thinking block's ``signature``; on a text
or ``functionCall`` part it rides in the part's ``provider_data`` as ``{"origin": "gemini",
"thoughtSignature": ...}``. Each is sent back, unchanged, on the same part of the next requests. Thinking
whose ``provider_data["origin"]`` is not ``"gemini"`` (written by another provider, or by none) is dropped:
Gemini cannot verify a foreign signature and reads nothing from unsigned thought text of someone else.
Gemini 3 and later refuse (400) a model turn whose first ``functionCall`` part has no signature, which is what
a call made by another provider, or stored without its ``provider_data``, looks like: for those models such a
part is sent with Google's documented placeholder ``skip_thought_signature_validator``. Real signatures are
never replaced, and older models get nothing added.

Candidates: the API may answer with several candidates, some of them blocked. The answer is the first
candidate, in index order, with usable content (text or a call) and a finish reason that is not a block
(``SAFETY``, ``RECITATION``, ``BLOCKLIST``, ``PROHIBITED_CONTENT``, ``SPII``, image blocks) or
``MALFORMED_FUNCTION_CALL``. When none is usable, or the prompt itself was blocked
(``promptFeedback.blockReason``), the turn ends without output (``content_filter`` when every candidate was
blocked), which the loop rejects, retries once with a correction and then stops degraded. A stream that asks
for one candidate (the default) is passed on as it arrives; if that candidate is blocked after part of it was
streamed, the stream fails with ``invalid_response`` (what was streamed cannot be taken back), which the loop
handles the same way. A request for several candidates (``candidateCount`` in ``extra``) is read whole first.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import AsyncIterator, Iterable
from typing import Any

from tether.errors import AuthFailed, BadRequest, ConfigInvalid, InvalidResponse, TransportError
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
from tether.messages import Message, Text, Thinking, ToolCall, ToolResult
from tether.providers.base import ForceTool, ModelInfo, Request, ToolChoice, ToolDefinition, merge_extra
from tether.providers.gemini_schema import to_gemini_schema
from tether.providers.http import HttpClient, RetryPolicy, Secret, decode_events, error_for_payload
from tether.providers.wire import as_count, as_list, as_object, as_text, decoded, malformed
from tether.usage import Usage

__all__ = ["GeminiProvider", "ResponseDecoder", "encode_contents", "from_model_name", "parse_usage"]

PROVIDER = "gemini"
BASE_URL = "https://generativelanguage.googleapis.com/v1beta"
KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
"""Where the API key is read from, in this order, when none is passed."""
FILTERED = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
    }
)
"""Finish reasons of a candidate the provider's filters blocked: ``content_filter``."""
FAILED = frozenset(
    {
        "MALFORMED_FUNCTION_CALL",
        "UNEXPECTED_TOOL_CALL",
        "TOO_MANY_TOOL_CALLS",
        "MISSING_THOUGHT_SIGNATURE",
        "MALFORMED_RESPONSE",
    }
)
"""Finish reasons of a candidate the model failed to write (a broken or unwanted call, a broken answer):
``error``."""
UNUSABLE = FILTERED | FAILED
"""Finish reasons whose candidate is never the answer, whatever it holds."""
FINISH_REASONS: dict[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    **dict.fromkeys(FILTERED, "content_filter"),
    **dict.fromkeys(FAILED, "error"),
}
"""``finishReason`` -> tether's; the others (``LANGUAGE``, ``OTHER``, ``NO_IMAGE``, ``IMAGE_OTHER``,
``FINISH_REASON_UNSPECIFIED``, anything new) are ``other``."""
NO_TOOLS_PREFIXES = ("gemma-", "aqa", "embedding-", "text-embedding-", "imagen-")
"""Models served by the Gemini API that have no function calling."""
MAX_CACHED_TOOLS = 512
"""Translated tool declarations kept per provider."""
_VERSION = re.compile(r"gemini-(\d+)(?:\.(\d+))?")
UNSIGNED_CALL = "skip_thought_signature_validator"
"""The placeholder signature Gemini 3 accepts on a function call it did not sign itself."""


class GeminiProvider:
    """A Gemini model behind Google's Generative Language API (``{base_url}/models/{model}:...``)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        stream: bool = True,
        retry: RetryPolicy | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """
        Args:
            model: the model id (``gemini-2.5-flash``; a ``models/`` or ``tunedModels/`` prefix is accepted).
            base_url: the API up to and including its version; ``https://generativelanguage.googleapis.com/v1beta``.
            api_key: the key; otherwise ``GEMINI_API_KEY``, else ``GOOGLE_API_KEY``. Sent as ``x-goog-api-key``.
            stream: stream answers (the default), or ask for whole answers.
            retry: how failed requests are retried.
            headers: extra headers sent with every request.
        """
        key = api_key or next((os.environ[name] for name in KEY_VARIABLES if os.environ.get(name)), None)
        if not key:
            raise ConfigInvalid(
                f"'gemini:{model}' needs an API key: set {' or '.join(KEY_VARIABLES)}, or pass api_key= to Agent"
            )
        name = model.removeprefix("models/")
        self.streaming = stream
        self.info = ModelInfo(
            PROVIDER,
            name,
            supports_tools=not name.startswith(NO_TOOLS_PREFIXES),
            supports_thinking=_thinks(name),
        )
        self._path = "/" + (name if name.startswith("tunedModels/") else f"models/{name}")
        self._signs_calls = _version(name) >= (3, 0)
        self._declarations: dict[int, tuple[ToolDefinition, dict[str, Any]]] = {}
        self._client = HttpClient(
            base_url or BASE_URL,
            provider=PROVIDER,
            api_key=Secret(key),
            auth_header="x-goog-api-key",
            auth_prefix="",
            headers=headers,
            retry=retry,
        )

    def __repr__(self) -> str:
        return f"GeminiProvider({self.info.model_string!r}, base_url={self._client.base_url!r})"

    async def stream(self, request: Request) -> AsyncIterator[LlmEvent]:
        body = self.request_body(request)
        client, timeout, deadline = self._client, request.timeout, request.deadline
        try:
            if not self.streaming:
                data = await client.post_json(f"{self._path}:generateContent", body, timeout=timeout, deadline=deadline)
                for event in decoded(ResponseDecoder(live=False).whole, data, PROVIDER):
                    yield event
                return
            decoder = ResponseDecoder(live=_candidate_count(body) <= 1)
            path = f"{self._path}:streamGenerateContent?alt=sse"
            events = client.stream_events(path, body, timeout=timeout, deadline=deadline)
            async for event in decode_events(events, decoder.chunk, decoder.end, PROVIDER):
                yield event
        except BadRequest as error:
            if (auth := _auth_failure(error)) is None:
                raise
            raise auth from error

    def request_body(self, request: Request) -> dict[str, Any]:
        """The JSON body for ``request``."""
        system = [request.system] if request.system else []
        system += [m.text for m in request.messages if m.role == "system" and m.text]
        body: dict[str, Any] = {"contents": encode_contents(m for m in request.messages if m.role != "system")}
        if self._signs_calls:
            sign_foreign_calls(body["contents"])
        if system:
            body["systemInstruction"] = {"parts": [{"text": text} for text in system]}
        if request.tools:
            body["tools"] = [{"functionDeclarations": [self._declaration(t) for t in request.tools]}]
            body["toolConfig"] = {"functionCallingConfig": encode_tool_choice(request.tool_choice)}
        settings = request.settings
        config = {
            key: value
            for key, value in (
                ("maxOutputTokens", settings.max_tokens),
                ("temperature", settings.temperature),
                ("topP", settings.top_p),
            )
            if value is not None
        }
        if config:
            body["generationConfig"] = config
        merge_extra(body, settings.extra)
        if request.tools and request.tool_choice == "none":  # the loop's tools-off call: extra must not undo it
            body["toolConfig"] = {**(body.get("toolConfig") or {}), "functionCallingConfig": {"mode": "NONE"}}
        return body

    def _declaration(self, tool: ToolDefinition) -> dict[str, Any]:
        """``encode_tool(tool)``, translated once per tool definition (a run sends the same ones every turn)."""
        cached = self._declarations.get(id(tool))
        if cached is not None and cached[0] is tool:
            return cached[1]
        if len(self._declarations) >= MAX_CACHED_TOOLS:
            self._declarations.clear()
        declaration = encode_tool(tool)
        self._declarations[id(tool)] = (tool, declaration)
        return declaration


# --- the request --------------------------------------------------------------------------------------------


def encode_tool(tool: ToolDefinition) -> dict[str, Any]:
    """A tool as a ``functionDeclaration``."""
    return {"name": tool.name, "description": tool.description, "parameters": to_gemini_schema(tool.parameters)}


def encode_tool_choice(choice: ToolChoice) -> dict[str, Any]:
    """The ``functionCallingConfig`` for a tool choice."""
    if isinstance(choice, ForceTool):
        return {"mode": "ANY", "allowedFunctionNames": [choice.name]}
    return {"mode": {"auto": "AUTO", "required": "ANY", "none": "NONE"}[choice]}


def encode_contents(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Messages as ``contents``: a message with nothing to send is left out, and neighbours of one role are
    joined into one content (so the results of one turn's calls go back together, in order)."""
    contents: list[dict[str, Any]] = []
    for message in messages:
        role = "model" if message.role == "assistant" else "user"
        parts = [part for item in message.parts if (part := encode_part(item, role)) is not None]
        if not parts:
            continue
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"] += parts
        else:
            contents.append({"role": role, "parts": parts})
    return contents


def encode_part(part: Text | Thinking | ToolCall | ToolResult, role: str = "model") -> dict[str, Any] | None:
    """One tether part as a Gemini part, or ``None`` when it is not sent: foreign thinking, and the model's
    empty text (a user's empty prompt is sent: it may be all there is)."""
    if isinstance(part, ToolResult):
        return {"functionResponse": {"id": part.call_id, "name": part.name, "response": result_envelope(part)}}
    if isinstance(part, ToolCall):
        call = {"id": part.id, "name": part.name, "args": part.arguments or {}}
        return _signed({"functionCall": call}, _own_signature(part.provider_data))
    if isinstance(part, Thinking):
        if not _is_own(part.provider_data) or not (part.text or part.signature):
            return None
        return _signed({"text": part.text, "thought": True}, part.signature)
    signature = _own_signature(part.provider_data)
    if not part.text and signature is None and role == "model":
        return None
    return _signed({"text": part.text}, signature)


def sign_foreign_calls(contents: list[dict[str, Any]]) -> None:
    """Give each model turn's first ``functionCall`` part the placeholder signature when it has none.

    Gemini 3 signs only the first call of a turn (parallel calls after it carry none), and requires that
    signature back; a turn it did not write has none to send.
    """
    for content in contents:
        if content["role"] != "model":
            continue
        first = next((part for part in content["parts"] if "functionCall" in part), None)
        if first is not None and not first.get("thoughtSignature"):
            first["thoughtSignature"] = UNSIGNED_CALL


def result_envelope(result: ToolResult) -> dict[str, Any]:
    """The ``functionResponse.response`` object: the result (parsed when it is JSON) or the error."""
    if result.is_error:
        error = {"code": result.code or "tool_failed", "message": result.content, "details": None}
        return {"ok": False, "error": error}
    try:
        value: Any = json.loads(result.content)
    except ValueError:
        value = result.content
    return {"ok": True, "result": value}


def _signed(part: dict[str, Any], signature: str | None) -> dict[str, Any]:
    if signature:
        part["thoughtSignature"] = signature
    return part


def _is_own(provider_data: dict[str, Any] | None) -> bool:
    """Whether data was written by this provider (``provider_data["origin"] == "gemini"``)."""
    return provider_data is not None and provider_data.get("origin") == PROVIDER


def _own_signature(provider_data: dict[str, Any] | None) -> str | None:
    """The thought signature in data this provider wrote, or ``None``."""
    signature = provider_data.get("thoughtSignature") if provider_data is not None and _is_own(provider_data) else None
    return signature if isinstance(signature, str) else None


def _candidate_count(body: dict[str, Any]) -> int:
    count = (body.get("generationConfig") or {}).get("candidateCount")
    return count if isinstance(count, int) else 1


# --- the answer ---------------------------------------------------------------------------------------------


class _Candidate:
    """One candidate's events so far, and what decides whether it can be the answer."""

    __slots__ = ("calls", "events", "finish", "message", "output", "sent", "shown")

    def __init__(self) -> None:
        self.events: list[LlmEvent] = []
        self.sent = 0
        self.calls = 0
        self.output = False  # it holds text or a call
        self.shown = False  # some of that output was handed out already
        self.finish: str | None = None
        self.message: str | None = None

    def take(self) -> list[LlmEvent]:
        """The events not handed out yet."""
        fresh = self.events[self.sent :]
        self.sent = len(self.events)
        self.shown = self.output
        return fresh

    def read(self, part: dict[str, Any], what: str) -> None:
        """One part as events: thought, call or text, a signature on the part it came with. Parts of other
        kinds (``executableCode``, ``codeExecutionResult``, ``inlineData``, ``fileData``, ...) are not shown;
        a signature they carry is kept on an empty text, so that it goes back."""
        signature = as_text(part.get("thoughtSignature"), PROVIDER, f"{what}.thoughtSignature") or None
        text = as_text(part.get("text"), PROVIDER, f"{what}.text")
        thought = part.get("thought")
        if thought is not None and type(thought) is not bool:
            raise malformed(PROVIDER, f"{what}.thought", thought)
        if thought:
            self.events.append(ThinkingDelta(text, signature, {"origin": PROVIDER}))
            return
        owned = {"origin": PROVIDER, "thoughtSignature": signature} if signature else None
        if "functionCall" in part:
            call = as_object(part["functionCall"], PROVIDER, f"{what}.functionCall")
            call_id = as_text(call.get("id"), PROVIDER, f"{what}.functionCall.id") or f"call_{uuid.uuid4().hex[:24]}"
            name = as_text(call.get("name"), PROVIDER, f"{what}.functionCall.name")
            arguments = as_object(call.get("args"), PROVIDER, f"{what}.functionCall.args")
            self.events += [
                ToolCallStart(call_id, name, self.calls, owned),
                ToolCallDelta(call_id, json.dumps(arguments, ensure_ascii=False)),
                ToolCallEnd(call_id),
            ]
            self.calls += 1
            self.output = True
        elif text or owned:  # a signature on a part of a kind tether does not keep: kept on an empty text
            self.events.append(TextDelta(text, owned))
            self.output = self.output or bool(text.strip())


class ResponseDecoder:
    """``GenerateContentResponse`` chunks (or one whole response) to ``LlmEvent``s, for one answer.

    ``live``: one candidate is expected, and its events are handed out as they arrive; otherwise every
    candidate is kept until the end, when the answer is chosen among them (see the module docstring). Every
    field read is type-checked (:mod:`tether.providers.wire`): a wrong JSON type is ``invalid_response``
    naming the field.
    """

    __slots__ = ("_blocked", "_candidates", "_live", "_live_index", "_started", "_usage")

    def __init__(self, *, live: bool = True) -> None:
        self._live = live
        self._live_index: int | None = None
        self._started = False
        self._candidates: dict[int, _Candidate] = {}
        self._blocked: str | None = None
        self._usage = Usage()

    def whole(self, data: Any) -> list[LlmEvent]:
        """The events of a whole (non-streamed) response."""
        return self.chunk(data) + self.end(whole=True)

    def chunk(self, data: Any) -> list[LlmEvent]:
        """The events of one streamed chunk (a JSON array of chunks is read in order)."""
        if type(data) is list:
            return [event for item in data for event in self.chunk(item)]
        if type(data) is not dict:
            raise InvalidResponse(f"gemini sent a chunk that is not a JSON object: {str(data)[:200]}")
        if data.get("error"):
            raise error_for_payload(PROVIDER, data)
        out: list[LlmEvent] = []
        if not self._started:
            self._started = True
            model = as_text(data.get("modelVersion"), PROVIDER, "modelVersion") or None
            out.append(
                StreamStart(model=model, response_id=as_text(data.get("responseId"), PROVIDER, "responseId") or None)
            )
        if "usageMetadata" in data:  # each chunk repeats the running totals: the last one counts
            self._usage = parse_usage(as_object(data["usageMetadata"], PROVIDER, "usageMetadata"))
        feedback = as_object(data.get("promptFeedback"), PROVIDER, "promptFeedback")
        if blocked := as_text(feedback.get("blockReason"), PROVIDER, "promptFeedback.blockReason"):
            self._blocked = blocked
        for position, raw in enumerate(as_list(data.get("candidates"), PROVIDER, "candidates")):
            out += self._candidate(as_object(raw, PROVIDER, f"candidates[{position}]"), position)
        return out

    def _candidate(self, raw: dict[str, Any], position: int) -> list[LlmEvent]:
        what = f"candidates[{position}]"
        index = raw.get("index", position)
        if type(index) is not int or index < 0:
            raise malformed(PROVIDER, f"{what}.index", index)
        candidate = self._candidates.setdefault(index, _Candidate())
        content = as_object(raw.get("content"), PROVIDER, f"{what}.content")
        for number, part in enumerate(as_list(content.get("parts"), PROVIDER, f"{what}.content.parts")):
            where = f"{what}.content.parts[{number}]"
            candidate.read(as_object(part, PROVIDER, where), where)
        if finish := as_text(raw.get("finishReason"), PROVIDER, f"{what}.finishReason"):
            candidate.finish = finish
            candidate.message = as_text(raw.get("finishMessage"), PROVIDER, f"{what}.finishMessage") or None
        if not self._live:
            return []
        self._live_index = index if self._live_index is None else self._live_index
        if index == self._live_index and candidate.finish not in UNUSABLE:
            return candidate.take()
        return []

    def end(self, *, whole: bool = False) -> list[LlmEvent]:
        """Choose the answer and close the turn. With no finish reason and no blocked prompt, a ``whole``
        response is malformed (``invalid_response``); a stream was cut (``transport``), as Gemini's streams
        have no closing event to tell the two apart."""
        if not self._started:
            raise InvalidResponse("gemini ended the stream without sending anything")
        finished = [c for _, c in sorted(self._candidates.items()) if c.finish is not None]
        if not finished and self._blocked is None:
            if whole:
                raise InvalidResponse("gemini sent a malformed answer: no candidate has a finishReason")
            raise TransportError("gemini ended the stream before finishing its answer")
        chosen = next((c for c in finished if c.output and c.finish not in UNUSABLE), None)
        live = self._candidates.get(self._live_index) if self._live_index is not None else None
        if live is not None and live.shown and live is not chosen:
            why = live.finish or "no finish reason"
            detail = f": {live.message}" if live.message else ""
            raise InvalidResponse(f"gemini stopped the answer it was streaming ({why}{detail})")
        if chosen is None:
            return [StreamEnd(self._unusable_finish(finished), self._usage)]
        finish = "tool_calls" if chosen.calls else finish_reason(chosen.finish or "")
        return [*chosen.take(), StreamEnd(finish, self._usage)]

    def _unusable_finish(self, finished: list[_Candidate]) -> FinishReason:
        """``content_filter`` when the prompt (no candidate then) or every candidate was blocked, else the first
        other reason."""
        unfiltered = [c.finish for c in finished if c.finish not in FILTERED]
        if not unfiltered:
            return "content_filter"
        return finish_reason(unfiltered[0] or "")


def finish_reason(reason: str) -> FinishReason:
    """A ``finishReason`` as tether's: see :data:`FINISH_REASONS`; a value added after this was written is
    ``other``."""
    return FINISH_REASONS.get(reason, "other")


def parse_usage(usage: dict[str, Any]) -> Usage:
    """``usageMetadata``: cached prompt tokens counted apart, thoughts counted as output and as reasoning; each
    count through :func:`~tether.providers.wire.as_count`."""
    prompt = as_count(usage.get("promptTokenCount"))
    cached = as_count(usage.get("cachedContentTokenCount"))
    thoughts = as_count(usage.get("thoughtsTokenCount"))
    return Usage(
        input_tokens=max(prompt - cached, 0) + as_count(usage.get("toolUsePromptTokenCount")),
        output_tokens=as_count(usage.get("candidatesTokenCount")) + thoughts,
        cache_read_tokens=cached,
        reasoning_tokens=thoughts,
    )


def _auth_failure(error: BadRequest) -> AuthFailed | None:
    """Gemini answers a bad key with HTTP 400 (``API_KEY_INVALID``), not 401: that is ``auth_failed``."""
    message = error.provider_message or ""
    if "api key" not in message.lower() or not re.search(r"not valid|invalid|expired", message, re.IGNORECASE):
        return None
    return AuthFailed(
        error.message,
        status=error.status,
        provider_message=error.provider_message,
        request_id=error.request_id,
        details=error.details,
    )


def _version(name: str) -> tuple[int, int]:
    """A ``gemini-X.Y-…`` model's (X, Y); (0, 0) for other names (Gemma, tuned models)."""
    match = _VERSION.match(name)
    return (int(match[1]), int(match[2] or 0)) if match else (0, 0)


def _thinks(name: str) -> bool:
    """Gemini 2.5 and later think."""
    return _version(name) >= (2, 5)


def from_model_name(prefix: str, name: str, **options: Any) -> GeminiProvider:
    """The builder behind ``gemini:`` model strings (``options``: ``base_url``, ``api_key``; ``None`` = not given)."""
    return GeminiProvider(name, **{key: value for key, value in options.items() if value is not None})
