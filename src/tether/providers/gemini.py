"""Google Gemini's native API (``generateContent`` / ``streamGenerateContent?alt=sse``), spoken over plain HTTP.

Requests: tether's messages become ``contents`` with the roles ``user`` and ``model``; the system prompt is
``systemInstruction``; tools are ONE ``tools`` entry of ``functionDeclarations`` whose parameters are sent as
plain JSON Schema (``parametersJsonSchema``), or, with ``json_schema_parameters=False`` for an endpoint that only
reads ``parameters``, translated to the OpenAPI subset it accepts (:mod:`tether.providers.gemini_schema`); the
tool choice is
``toolConfig.functionCallingConfig`` (``AUTO``, ``ANY`` with ``allowedFunctionNames`` for a forced tool,
``NONE``); ``ModelSettings.extra`` is merged into the body, which is how thinking is switched on
(``{"generationConfig": {"thinkingConfig": {"includeThoughts": true}}}``). Tool results answering one turn go
back in one ``user`` content of ``functionResponse`` parts, in the calls' order, each with its call's ``id``
and the envelope ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": {"code", "message", "details"}}``.
A call the model sent without an ``id`` goes back as it came, without one, and so does its
``functionResponse``: the id tether gave it inside the run (``gemini_stream.NO_ID_PREFIX``) is never sent, and
Gemini pairs such calls with their responses by order and name.

Answers, streamed or whole, are read by :class:`~tether.providers.gemini_stream.GeminiDecoder` (how
candidates, parts, finish reasons and usage are read is described there). A model message's ``provider_data``
may carry the parts tether does not read (``executableCode``, ``codeExecutionResult``, ``inlineData``,
``fileData``, ...), each with its place among the message's parts: they go back whole, where they were, the
message's text cut around them.

Thought signatures: a ``thoughtSignature`` on a thought part is its thinking block's ``signature``; on a text
or ``functionCall`` part it rides in the part's ``provider_data`` as ``{"origin": "gemini",
"thoughtSignature": ...}``. Each is sent back, unchanged, on the same part of the next requests. Thinking
whose ``provider_data["origin"]`` is not ``"gemini"`` (written by another provider, or by none) is dropped:
Gemini cannot verify a foreign signature and reads nothing from unsigned thought text of someone else.
Gemini 3 and later refuse (400) a model turn whose first ``functionCall`` part has no signature, which is what
a call made by another provider, or stored without its ``provider_data``, looks like: for those models such a
part is sent with Google's documented placeholder ``skip_thought_signature_validator``. Real signatures are
never replaced, and older models get nothing added.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any, ClassVar

import msgspec

from tether.errors import ConfigInvalid
from tether.events import LlmEvent
from tether.keys import missing_key, read_key
from tether.message_memo import MessageMemo
from tether.messages import Attachment, Message, Part, Text, Thinking, ToolCall, ToolResult
from tether.providers.attachments import ALL_KINDS, MB, base64_of, check_inline, document_text, is_text_document
from tether.providers.base import ForceTool, ModelInfo, Request, ToolChoice, ToolDefinition, merge_extra
from tether.providers.gemini_schema import to_gemini_schema
from tether.providers.gemini_stream import PROVIDER, GeminiDecoder, kept_parts_of, parse_usage, sent_without_id
from tether.providers.http.body import ResponseLimits
from tether.providers.http.client import HttpClient, OverHttp, Secret
from tether.providers.http.ratelimit import RateLimit, limiter_of
from tether.providers.http.retry import RetryPolicy
from tether.providers.memo import RoleJoiner, ToolsMemo, joined_json
from tether.providers.windows import checked_window, context_window_for

__all__ = ["GeminiProvider", "encode_contents", "from_model_name", "parse_usage"]

BASE_URL = "https://generativelanguage.googleapis.com/v1beta"
NO_TOOLS_PREFIXES = ("gemma-", "aqa", "embedding-", "text-embedding-", "imagen-")
"""Models served by the Gemini API that have no function calling."""
MAX_CACHED_TOOLS = 512
"""Translated tool declarations kept per provider."""
_VERSION = re.compile(r"gemini-(\d+)(?:\.(\d+))?")
UNSIGNED_CALL = "skip_thought_signature_validator"
"""The placeholder signature Gemini 3 accepts on a function call it did not sign itself."""


class GeminiProvider(OverHttp):
    """A Gemini model behind Google's Generative Language API (``{base_url}/models/{model}:...``)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        stream: bool = True,
        retry: RetryPolicy | None = None,
        rate_limit: RateLimit | None = None,
        response_limits: ResponseLimits | None = None,
        headers: dict[str, str] | None = None,
        context_window: int | None = None,
        json_schema_parameters: bool = True,
    ) -> None:
        """
        Args:
            model: the model id (``gemini-2.5-flash``; a ``models/`` or ``tunedModels/`` prefix is accepted).
            base_url: the API up to and including its version; ``https://generativelanguage.googleapis.com/v1beta``.
            api_key: the key; otherwise ``GEMINI_API_KEY``, else ``GOOGLE_API_KEY``. Sent as ``x-goog-api-key``.
            stream: stream answers (the default), or ask for whole answers.
            retry: how failed requests are retried.
            rate_limit: requests and tokens per window (``RateLimit``), shared by every run of this process
                that sends to the same API, key and model; none by default.
            response_limits: the most of an answer read (``ResponseLimits``); the defaults when not given.
            headers: extra headers sent with every request.
            context_window: the model's input limit in tokens; the known one by default
                (``tether.providers.windows``).
            json_schema_parameters: send each tool's JSON Schema as is (``parametersJsonSchema``, which the
                Gemini API reads since v1beta); ``False`` translates it to the OpenAPI subset of ``parameters``,
                for an endpoint that does not know the field.
        """
        key, auth_header = self._credential(model, api_key)
        name = model.removeprefix("models/")
        self.streaming = stream
        self.info = ModelInfo(
            self.prefix,
            name,
            supports_tools=not name.startswith(NO_TOOLS_PREFIXES),
            supports_thinking=_thinks(name),
            supports_output_schema=True,
            input_kinds=ALL_KINDS,
            context_window=checked_window(context_window, f"'{self.prefix}:{model}'")
            or context_window_for(PROVIDER, name),
        )
        self._path = "/" + (name if name.startswith("tunedModels/") else f"models/{name}")
        self._signs_calls = _version(name) >= (3, 0)
        self._json_schema_parameters = json_schema_parameters
        self._declarations: dict[int, tuple[ToolDefinition, dict[str, Any]]] = {}
        self._client = HttpClient(
            base_url or BASE_URL,
            provider=self.prefix,
            api_key=Secret(key) if key else None,
            auth_header=auth_header,
            auth_prefix="",
            headers=headers,
            retry=retry,
            limits=response_limits,
            limiter=limiter_of(rate_limit, base_url or BASE_URL, key, self.info.name),
        )

    prefix: ClassVar[str] = PROVIDER
    """The model strings' prefix, the name in ``ModelInfo`` and in errors: the same models reached elsewhere
    (``vertex``) differ in it."""

    def _credential(self, model: str, api_key: str | None) -> tuple[str, str]:
        """The key sent with every request and the header it goes in: Gemini's, ``x-goog-api-key``. A subclass
        that signs its requests otherwise (Vertex AI's tokens) answers ``""`` and sets its own later."""
        key = read_key("gemini", api_key)
        if not key:
            raise ConfigInvalid(missing_key("gemini", model))
        return key, "x-goog-api-key"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.info.model_string!r}, base_url={self._client.base_url!r})"

    def stream(self, request: Request) -> AsyncIterator[LlmEvent]:
        """The events of ``request``'s answer, streamed or read whole; the HTTP client's iterator as it is
        (no generator of this provider's around it), which releases the response however its consumer leaves.
        A streamed answer of several candidates is held back until one is chosen (``GeminiDecoder``)."""
        streaming = self.streaming
        path = f"{self._path}:streamGenerateContent?alt=sse" if streaming else f"{self._path}:generateContent"
        decoder = GeminiDecoder(live=streaming and _candidate_count(request.settings.extra) <= 1)
        return self._client.answer(path, self.request_payload(request), decoder, request, streaming=streaming)

    def request_body(self, request: Request) -> dict[str, Any]:
        """The JSON body for ``request``, as plain data."""
        contents = encode_contents(m for m in request.messages if m.role != "system")
        if self._signs_calls:
            sign_foreign_calls(contents)
        system = [m.text for m in request.messages if m.role == "system" and m.text]
        return self._body(request, contents, system, self._tool_items)

    def request_payload(self, request: Request) -> bytes:
        """:meth:`request_body` encoded, the history and the tools from their kept JSON (``memo.py``): the cost
        of a request grows with the new messages, not with the whole history and every schema encoded again."""
        contents, system = self._contents_json(request.messages)
        tools = _TOOLS[self._json_schema_parameters]

        def declarations(definitions: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
            return [{"functionDeclarations": tools.json(definitions)}]

        return msgspec.json.encode(self._body(request, contents, system, declarations))

    def _contents_json(self, messages: Sequence[Message]) -> tuple[msgspec.Raw, list[str]]:
        """:func:`encode_contents`'s items as JSON, comma-joined, each message encoded once (``message_memo``),
        with each content's first call signed as :func:`sign_foreign_calls` signs it on a model that wants it; and
        the system messages' texts."""
        joined, system = RoleJoiner(_OPENING), []
        signs = self._signs_calls
        unsigned = False  # whether a call in the last item would be its first (see above)
        for message, kept in zip(messages, _MEMO.values(messages, _kept_json), strict=True):
            role, parts, alone, has_call, signed = kept
            if role == "system":
                if text := message.text:
                    system.append(text)
                continue
            if not parts:
                continue
            if role != joined.role:  # a new item
                unsigned = signs and role == "model"
            if unsigned and has_call:
                unsigned = False
                if signed is not None:
                    parts, alone = signed
            joined.add(role, parts, alone)
        return joined.json(), system

    def _body(
        self,
        request: Request,
        contents: Any,
        system: list[str],
        tools_of: Callable[[Sequence[ToolDefinition]], list[dict[str, Any]]],
    ) -> dict[str, Any]:
        """The body with ``contents`` as they are given (plain data or kept JSON), the system messages' ``system``
        texts (the run's system prompt goes first), and the tools as ``tools_of`` gives them."""
        if request.system:
            system.insert(0, request.system)
        body: dict[str, Any] = {"contents": contents}
        if request.tools:
            body["tools"] = tools_of(request.tools)
        if system:
            body["systemInstruction"] = {"parts": [{"text": text} for text in system]}
        if request.tools:
            body["toolConfig"] = {"functionCallingConfig": encode_tool_choice(request.tool_choice)}
        settings = request.settings
        config: dict[str, Any] = {
            key: value
            for key, value in (
                ("maxOutputTokens", settings.max_tokens),
                ("temperature", settings.temperature),
                ("topP", settings.top_p),
            )
            if value is not None
        }
        if (output := request.output) is not None:
            config["responseMimeType"] = "application/json"
            if output.schema is not None:
                config["responseJsonSchema"] = output.schema
        if config:
            body["generationConfig"] = config
        merge_extra(body, settings.extra)
        if request.tools and request.tool_choice == "none":  # the loop's tools-off call: extra must not undo it
            body["toolConfig"] = {**(body.get("toolConfig") or {}), "functionCallingConfig": {"mode": "NONE"}}
        return body

    def _tool_items(self, tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
        return [{"functionDeclarations": [self._declaration(t) for t in tools]}]

    def _declaration(self, tool: ToolDefinition) -> dict[str, Any]:
        """``encode_tool(tool)``, translated once per tool definition (a run sends the same ones every turn)."""
        cached = self._declarations.get(id(tool))
        if cached is not None and cached[0] is tool:
            return cached[1]
        if len(self._declarations) >= MAX_CACHED_TOOLS:
            self._declarations.clear()
        declaration = encode_tool(tool, json_schema=self._json_schema_parameters)
        self._declarations[id(tool)] = (tool, declaration)
        return declaration


# --- the request --------------------------------------------------------------------------------------------


def encode_tool(tool: ToolDefinition, *, json_schema: bool = True) -> dict[str, Any]:
    """A tool as a ``functionDeclaration``: its JSON Schema as is, or translated for ``parameters`` (the two
    fields are mutually exclusive)."""
    if json_schema:
        return {"name": tool.name, "description": tool.description, "parametersJsonSchema": tool.parameters}
    return {"name": tool.name, "description": tool.description, "parameters": to_gemini_schema(tool.parameters)}


_TOOLS = {
    True: ToolsMemo(lambda tool: encode_tool(tool, json_schema=True)),
    False: ToolsMemo(lambda tool: encode_tool(tool, json_schema=False)),
}
"""Each tool's declaration as JSON, kept per tool: with its JSON Schema as is, or translated (``parameters``)."""


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
        if role == "model":
            parts = model_parts(message)
        else:
            parts = [part for item in message.parts if (part := encode_part(item, role)) is not None]
            parts += [
                encode_attachment(a) for item in message.parts if type(item) is ToolResult for a in item.attachments
            ]
        if not parts:
            continue
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"] += parts
        else:
            contents.append({"role": role, "parts": parts})
    return contents


_Kept = tuple[str, bytes, bytes, bool, tuple[bytes, bytes] | None]
"""A message's content as kept (``message_memo``): its role, its parts' JSON (``b""``: nothing to send), the content
of those parts alone (what is sent when its neighbours are of the other role, as in most requests), whether a
part is a call, and both again with the first call given the placeholder signature (``None``: it has one)."""
_MEMO: MessageMemo[_Kept] = MessageMemo()
_OPENING = {"user": b'{"role":"user","parts":[', "model": b'{"role":"model","parts":['}


def _kept_json(message: Message, position: int = 0) -> _Kept:
    """A message's :data:`_Kept` form (a system message's is its role alone: its text goes to
    ``systemInstruction``)."""
    if message.role == "system":
        return "system", b"", b"", False, None
    role = "model" if message.role == "assistant" else "user"
    contents = encode_contents((message,))
    parts: list[dict[str, Any]] = contents[0]["parts"] if contents else []
    opening = _OPENING[role]
    plain = joined_json(parts)
    first = next((index for index, part in enumerate(parts) if "functionCall" in part), None)
    if first is None or parts[first].get("thoughtSignature"):
        return role, plain, opening + plain + b"]}", first is not None, None
    parts[first] = {**parts[first], "thoughtSignature": UNSIGNED_CALL}
    signed = joined_json(parts)
    return role, plain, opening + plain + b"]}", True, (signed, opening + signed + b"]}")


def encode_part(part: Part, role: str = "model") -> dict[str, Any] | None:
    """One tether part as a Gemini part, or ``None`` when it is not sent: foreign thinking, and the model's
    empty text (a user's empty prompt is sent: it may be all there is)."""
    if isinstance(part, Attachment):
        return encode_attachment(part)
    if isinstance(part, ToolResult):
        response = {"name": part.name, "response": result_envelope(part)}
        return {"functionResponse": response if sent_without_id(part.call_id) else {"id": part.call_id, **response}}
    if isinstance(part, ToolCall):
        call = {"name": part.name, "args": part.arguments or {}}
        call = call if sent_without_id(part.id) else {"id": part.id, **call}
        return _signed({"functionCall": call}, _own_signature(part.provider_data))
    if isinstance(part, Thinking):
        if not _is_own(part.provider_data) or not (part.text or part.signature):
            return None
        return _signed({"text": part.text, "thought": True}, part.signature)
    signature = _own_signature(part.provider_data)
    if not part.text and signature is None and role == "model":
        return None
    return _signed({"text": part.text}, signature)


INLINE_LIMIT = 20 * MB
"""Inline data in one request (Gemini's documented limit; larger files go through its Files API)."""


def encode_attachment(attachment: Attachment) -> dict[str, Any]:
    """An attachment as ``inlineData`` (base64), ``fileData`` (by URI), or a text document's text."""
    if is_text_document(attachment):
        return {"text": document_text(attachment)}
    if attachment.url is not None:
        return {"fileData": {"mimeType": attachment.media_type, "fileUri": attachment.url}}
    check_inline(attachment, INLINE_LIMIT, "Gemini's inline data")
    return {"inlineData": {"mimeType": attachment.media_type, "data": base64_of(attachment)}}


def model_parts(message: Message) -> list[dict[str, Any]]:
    """A model message's parts in their order, with the parts tether does not read put back where they were
    (:class:`~tether.providers.gemini_stream.KeptPart`): text merged around one is cut there again, the text's
    signature staying on its first piece."""
    kept = deque(kept_parts_of(message.provider_data))
    out: list[dict[str, Any]] = []
    parts = chars = 0

    def release() -> None:
        while kept and kept[0].parts <= parts and kept[0].chars <= chars:
            out.append(kept.popleft().part)

    for item in message.parts:
        release()
        if type(item) is Text:
            text, data = item.text, item.provider_data
            while kept and kept[0].parts <= parts and chars < kept[0].chars < chars + len(text):
                cut = kept[0].chars - chars
                out.append(_signed({"text": text[:cut]}, _own_signature(data)))
                text, chars, data = text[cut:], chars + cut, None
                release()
            if (encoded := encode_part(Text(text, data), "model")) is not None:
                out.append(encoded)
            chars += len(text)
            continue
        parts += 1
        if (encoded := encode_part(item, "model")) is not None:
            out.append(encoded)
    out += [entry.part for entry in kept]
    return out


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
    """The ``functionResponse.response`` object: the result (parsed when it is JSON) or the error. A result
    that already is such an envelope (the Python assistant's capabilities answer with one) goes as it is."""
    try:
        value: Any = msgspec.json.decode(result.content)
    except (ValueError, RecursionError):
        value = result.content
    if _is_envelope(value) and value["ok"] is not result.is_error:
        return dict(value)
    if result.is_error:
        error = {"code": result.code or "tool_failed", "message": result.content, "details": None}
        return {"ok": False, "error": error}
    return {"ok": True, "result": value}


def _is_envelope(value: Any) -> bool:
    """``{"ok": true, "result": ...}`` or ``{"ok": false, "error": {...}}``, and nothing else."""
    if type(value) is not dict or type(value.get("ok")) is not bool:
        return False
    return set(value) == ({"ok", "result"} if value["ok"] else {"ok", "error"})


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


def _candidate_count(extra: dict[str, Any]) -> int:
    """How many candidates a request asks for: only a setting's ``extra`` can ask
    (``generationConfig.candidateCount``)."""
    config = extra.get("generationConfig")
    count = config.get("candidateCount") if isinstance(config, dict) else None
    return count if isinstance(count, int) else 1


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
