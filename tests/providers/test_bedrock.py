"""Bedrock over real loopback HTTP: the Converse bodies we send, the SigV4 signature a server recomputes with
botocore, ConverseStream's binary event-stream frames decoded (split anywhere), exceptions in the stream, HTTP
errors, stop reasons, usage and cost."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

pytest.importorskip("botocore")

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.eventstream import EventStreamBuffer

from tests.providers.conftest import Serve
from tether import Agent, tool
from tether.errors import (
    AuthFailed,
    BadRequest,
    ConfigInvalid,
    ContextOverflow,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
)
from tether.events import (
    LlmEvent,
    StreamEnd,
    StreamStart,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from tether.messages import Attachment, Message, Text, Thinking, ToolCall, ToolResult
from tether.pricing import price_for
from tether.providers.base import ForceTool, ModelSettings, OutputFormat, Request, ToolDefinition
from tether.providers.bedrock import BedrockProvider
from tether.providers.http import RetryPolicy
from tether.providers.http.eventstream import EventStreamDecoder
from tether.providers.registry import resolve
from tether.usage import Usage, cost_of

FIXTURES = Path(__file__).parents[1] / "fixtures/wire/bedrock"
MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
ACCESS, SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
WEATHER = ToolDefinition(
    "weather",
    "Weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16


# --- an event-stream encoder, and a server that checks signatures -----------------------------------------------


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message: prelude (lengths and their CRC32), string headers, payload, message CRC32."""
    encoded = b"".join(
        bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(value.encode())) + value.encode()
        for name, value in headers.items()
    )
    prelude = struct.pack(">II", 12 + len(encoded) + len(payload) + 4, len(encoded))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + encoded + payload
    return message + struct.pack(">I", zlib.crc32(message))


def event_frames(events: list[dict[str, Any]]) -> bytes:
    """``[{"<event type>": payload}, ...]`` as event messages (an ``...Exception`` name as an exception)."""
    out = b""
    for event in events:
        ((name, payload),) = event.items()
        kind = "exception" if name.endswith("Exception") else "event"
        headers = {":message-type": kind, f":{kind}-type": name, ":content-type": "application/json"}
        out += frame(headers, json.dumps(payload).encode())
    return out


def signature_ok(request: web.Request, body: bytes, secret: str = SECRET) -> bool:
    """Recompute the request's SigV4 signature with botocore, from what arrived: its raw path, the headers it
    says it signed, its body and its date."""
    authorization = request.headers.get("Authorization", "")
    if not authorization.startswith("AWS4-HMAC-SHA256 "):
        return False
    fields = dict(part.strip().split("=", 1) for part in authorization[len("AWS4-HMAC-SHA256 ") :].split(","))
    signed = fields["SignedHeaders"].split(";")
    headers = {name: request.headers[name] for name in signed}
    url = f"http://{request.host}{request.raw_path}"
    copy = AWSRequest(method=request.method, url=url, headers=headers, data=body)
    copy.context["timestamp"] = request.headers["X-Amz-Date"]
    auth = SigV4Auth(Credentials(ACCESS, secret), "bedrock", "us-east-1")
    expected = auth.signature(auth.string_to_sign(copy, auth.canonical_request(copy)), copy)
    return bool(fields["Signature"] == expected)


class Bedrock:
    """A Bedrock runtime on loopback: checks each request's signature, keeps its body and raw path, answers as
    told (event-stream bytes cut into ``chunk``-byte pieces, or JSON, or an error)."""

    def __init__(self, answer: bytes | dict[str, Any], *, status: int = 200, chunk: int = 0, error: str = "") -> None:
        self.answer, self.status, self.chunk, self.error = answer, status, chunk, error
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.authorizations: list[str] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.paths.append(request.raw_path)
        self.authorizations.append(request.headers.get("Authorization", ""))
        self.bodies.append(json.loads(body))
        bearer = request.headers.get("Authorization", "").startswith("Bearer ")
        if not bearer and not signature_ok(request, body):
            error = {"message": "The request signature we calculated does not match the signature you provided."}
            return web.json_response(error, status=403, headers={"x-amzn-ErrorType": "InvalidSignatureException"})
        if isinstance(self.answer, dict):
            headers = {"x-amzn-ErrorType": f"{self.error}:http://internal.amazon.com/coral/com.amazon.bedrock/"}
            return web.json_response(self.answer, status=self.status, headers=headers if self.error else None)
        response = web.StreamResponse(headers={"Content-Type": "application/vnd.amazon.eventstream"})
        await response.prepare(request)
        step = self.chunk or len(self.answer)
        for start in range(0, len(self.answer), step):
            await response.write(self.answer[start : start + step])
        await response.write_eof()
        return response

    async def start(self, serve: Serve) -> str:
        app = web.Application()
        app.router.add_post("/model/{model}/{action}", self.handle)
        return await serve(app)


def provider(url: str, **options: Any) -> BedrockProvider:
    options.setdefault("access_key", ACCESS)
    options.setdefault("secret_key", SECRET)
    options.setdefault("retry", RetryPolicy(max_retries=0))
    return BedrockProvider(MODEL, region="us-east-1", base_url=url, environ={}, **options)


async def events_of(bedrock: BedrockProvider, request: Request) -> list[LlmEvent]:
    return [event async for event in bedrock.stream(request)]


def asked(text: str = "Weather in Paris?", **fields: Any) -> Request:
    return Request(messages=(Message.user(text),), **fields)


STREAMED = json.loads((FIXTURES / "converse_stream_tool_use.json").read_text())
EXPECTED = [
    StreamStart(),
    ThinkingDelta("The user wants the weather."),
    ThinkingDelta("", signature="EqoBCkgIARABGAIiQL", provider_data={"origin": "bedrock"}),
    TextDelta("Let me check "),
    TextDelta("the weather."),
    ToolCallStart("tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "weather", 0),
    ToolCallDelta("tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", '{"city": '),
    ToolCallDelta("tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", '"Paris"}'),
    ToolCallEnd("tooluse_kZJMlvQmRJ6eAyJE5GIl7Q"),
    StreamEnd("tool_calls", Usage(input_tokens=417, output_tokens=58, cache_read_tokens=1200)),
]


# --- framing ------------------------------------------------------------------------------------------------


def test_the_test_encoder_writes_what_botocore_reads_and_tether_reads_it_byte_by_byte() -> None:
    data = event_frames(STREAMED)
    buffer = EventStreamBuffer()
    buffer.add_data(data)
    read = [(message.headers[":event-type"], json.loads(message.payload)) for message in buffer]
    assert read == [next(iter(event.items())) for event in STREAMED]
    decoder = EventStreamDecoder()
    events = [event for index in range(len(data)) for event in decoder.feed(data[index : index + 1])]
    assert [json.loads(event.data) for event in events] == STREAMED


def test_a_frame_that_fails_its_checksum_is_an_invalid_response() -> None:
    data = bytearray(event_frames(STREAMED[:1]))
    data[-6] ^= 0xFF
    with pytest.raises(ProviderError, match="checksum") as caught:
        EventStreamDecoder().feed(bytes(data))
    assert caught.value.code == "invalid_response"


# --- streaming over HTTP, signed -------------------------------------------------------------------------------


@pytest.mark.parametrize("chunk", [0, 7, 1])
async def test_a_stream_is_decoded_however_its_frames_are_cut(serve: Serve, chunk: int) -> None:
    server = Bedrock(event_frames(STREAMED), chunk=chunk)
    bedrock = provider(await server.start(serve))
    assert await events_of(bedrock, asked(tools=(WEATHER,))) == EXPECTED
    assert server.paths == ["/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse-stream"]
    assert server.authorizations[0].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")


async def test_a_wrong_secret_is_refused_by_the_signature_check(serve: Serve) -> None:
    server = Bedrock(event_frames(STREAMED))
    bedrock = provider(await server.start(serve), secret_key="not-the-secret")
    with pytest.raises(AuthFailed) as caught:
        await events_of(bedrock, asked())
    assert caught.value.status == 403
    assert bedrock.credentials() == ("not-the-secret",)


async def test_a_whole_answer_gives_the_streams_events(serve: Serve) -> None:
    server = Bedrock(json.loads((FIXTURES / "converse_tool_use.json").read_text()))
    bedrock = provider(await server.start(serve), stream=False)
    events = await events_of(bedrock, asked(tools=(WEATHER,)))
    call = "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q"
    assert events == [
        *EXPECTED[:3],
        TextDelta("Let me check the weather."),
        ToolCallStart(call, "weather", 0),
        ToolCallDelta(call, '{"city": "Paris"}'),
        ToolCallEnd(call),
        EXPECTED[-1],
    ]
    assert server.paths == ["/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse"]


async def test_a_bedrock_api_key_is_sent_as_a_bearer_token(serve: Serve) -> None:
    server = Bedrock(event_frames(STREAMED))
    url = await server.start(serve)
    bedrock = BedrockProvider(MODEL, region="us-east-1", base_url=url, environ={"AWS_BEARER_TOKEN_BEDROCK": "br-key"})
    await events_of(bedrock, asked())
    assert server.authorizations == ["Bearer br-key"]
    assert bedrock.credentials() == ("br-key",)


END: list[dict[str, Any]] = [
    {"messageStart": {"role": "assistant"}},
    {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "Hi"}}},
]


@pytest.mark.parametrize(
    ("reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "length"),
        ("guardrail_intervened", "content_filter"),
        ("content_filtered", "content_filter"),
        ("something_new", "other"),
    ],
)
async def test_stop_reasons(serve: Serve, reason: str, finish: str) -> None:
    server = Bedrock(event_frames([*END, {"messageStop": {"stopReason": reason}}]))
    events = await events_of(provider(await server.start(serve)), asked())
    assert events[-1] == StreamEnd(finish, Usage())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "message", "kind"),
    [
        ("throttlingException", "Too many requests, please wait before trying again.", RateLimited),
        ("validationException", "Input is too long for requested model.", ContextOverflow),
        ("validationException", "Malformed input request.", BadRequest),
        ("modelStreamErrorException", "The model stream failed.", ProviderUnavailable),
        ("serviceUnavailableException", "Service unavailable.", ProviderUnavailable),
        ("internalServerException", "Internal error.", ProviderUnavailable),
    ],
)
async def test_an_exception_in_the_stream_is_its_error(
    serve: Serve, name: str, message: str, kind: type[ProviderError]
) -> None:
    server = Bedrock(event_frames([*END, {name: {"message": message}}]))
    received: list[LlmEvent] = []

    async def read() -> None:
        async for event in provider(await server.start(serve)).stream(asked()):
            received.append(event)

    with pytest.raises(kind) as caught:
        await read()
    assert received == [StreamStart(), TextDelta("Hi")]
    assert caught.value.details["provider_code"] == name
    assert message in str(caught.value)


async def test_a_stream_cut_before_its_stop_is_a_transport_error(serve: Serve) -> None:
    data = event_frames(END)
    server = Bedrock(data + event_frames([{"messageStop": {"stopReason": "end_turn"}}])[:10])
    with pytest.raises(ProviderError) as caught:
        await events_of(provider(await server.start(serve)), asked())
    assert caught.value.code == "transport"


@pytest.mark.parametrize(
    ("status", "error", "message", "kind"),
    [
        (403, "UnrecognizedClientException", "The security token included in the request is invalid.", AuthFailed),
        (403, "AccessDeniedException", "You don't have access to the model with the specified model ID.", AuthFailed),
        (429, "ThrottlingException", "Too many requests, please wait before trying again.", RateLimited),
        (400, "ValidationException", "Input is too long for requested model.", ContextOverflow),
        (400, "ValidationException", "The model returned the following errors: malformed", BadRequest),
        (503, "ServiceUnavailableException", "Bedrock is unable to process your request.", ProviderUnavailable),
        (500, "InternalServerException", "An internal server error occurred.", ProviderUnavailable),
    ],
)
async def test_http_errors(serve: Serve, status: int, error: str, message: str, kind: type[ProviderError]) -> None:
    server = Bedrock({"message": message}, status=status, error=error)
    with pytest.raises(kind) as caught:
        await events_of(provider(await server.start(serve)), asked())
    assert caught.value.status == status
    assert caught.value.provider_message == message
    assert caught.value.details["provider_code"] == error


# --- request bodies ---------------------------------------------------------------------------------------------


def body(request: Request) -> dict[str, Any]:
    return provider("http://127.0.0.1:9").request_body(request)


def test_text_system_and_settings() -> None:
    request = Request(
        messages=(Message.system("Be brief."), Message.user("Hi")),
        system="You are tether.",
        settings=ModelSettings(
            temperature=0.2, max_tokens=300, top_p=0.9, extra={"inferenceConfig": {"stopSequences": ["END"]}}
        ),
    )
    assert body(request) == {
        "messages": [{"role": "user", "content": [{"text": "Hi"}]}],
        "system": [{"text": "You are tether."}, {"text": "Be brief."}],
        "inferenceConfig": {"maxTokens": 300, "temperature": 0.2, "topP": 0.9, "stopSequences": ["END"]},
    }


@pytest.mark.parametrize(
    ("choice", "encoded"),
    [("auto", {"auto": {}}), ("required", {"any": {}}), (ForceTool("weather"), {"tool": {"name": "weather"}})],
)
def test_tools_and_tool_choice(choice: Any, encoded: dict[str, Any]) -> None:
    assert body(asked(tools=(WEATHER,), tool_choice=choice))["toolConfig"] == {
        "tools": [
            {
                "toolSpec": {
                    "name": "weather",
                    "description": "Weather in a city.",
                    "inputSchema": {"json": WEATHER.parameters},
                }
            }
        ],
        "toolChoice": encoded,
    }


def test_a_model_that_cannot_be_made_to_call_a_tool_refuses_required() -> None:
    llama = BedrockProvider("meta.llama3-3-70b-instruct-v1:0", region="us-east-1", api_key="k", environ={})
    assert llama.request_body(asked(tools=(WEATHER,)))["toolConfig"]["toolChoice"] == {"auto": {}}
    with pytest.raises(ConfigInvalid, match="tool_choice"):
        llama.request_body(asked(tools=(WEATHER,), tool_choice="required"))


def test_tool_choice_none_leaves_the_tools_out_unless_the_history_holds_tool_blocks() -> None:
    assert "toolConfig" not in body(asked(tools=(WEATHER,), tool_choice="none"))
    history = (
        Message.user("Weather in Paris?"),
        Message("assistant", (ToolCall("tooluse_1", "weather", {"city": "Paris"}),)),
        Message("tool", (ToolResult("tooluse_1", "weather", "sunny"),)),
    )
    forced = ModelSettings(extra={"toolConfig": {"toolChoice": {"any": {}}}})
    sent = body(Request(messages=history, tools=(WEATHER,), tool_choice="none", settings=forced))
    assert sent["toolConfig"] == {"tools": [{"toolSpec": {"name": "weather", "description": "Weather in a city.",
                                                         "inputSchema": {"json": WEATHER.parameters}}}]}  # fmt: skip


def test_a_history_with_tool_calls_continued_without_tools_names_them_as_retired_tools() -> None:
    history = (
        Message.user("Weather in Paris?"),
        Message("assistant", (ToolCall("tooluse_1", "weather", {"city": "Paris"}),)),
        Message("tool", (ToolResult("tooluse_1", "weather", "sunny"),)),
        Message("assistant", (ToolCall("tooluse_2", "weather", {"city": "Rome"}),)),
        Message("tool", (ToolResult("tooluse_2", "weather", "rain"),)),
        Message.user("Thanks: summarise."),
    )
    sent = body(Request(messages=history))
    (spec,) = sent["toolConfig"]["tools"]  # one entry for the tool called twice, and no toolChoice
    assert sent["toolConfig"].keys() == {"tools"}
    assert spec["toolSpec"]["name"] == "weather"
    assert spec["toolSpec"]["inputSchema"] == {"json": {"type": "object"}}
    assert "toolConfig" not in body(Request(messages=(Message.user("Hi"),)))


def test_tool_calls_results_images_and_own_reasoning_go_back() -> None:
    call = ToolCall("tooluse_1", "weather", {"city": "Paris"})
    messages = (
        Message.user("Weather in Paris?"),
        Message(
            "assistant",
            (
                Thinking("Look it up.", signature="sig-1", provider_data={"origin": "bedrock"}),
                Thinking("foreign", signature="x", provider_data={"origin": "anthropic"}),
                Thinking("", signature="cmVkYWN0ZWQ=", provider_data={"origin": "bedrock", "redacted": True}),
                Text("Checking."),
                call,
            ),
        ),
        Message(
            "tool",
            (
                ToolResult("tooluse_1", "weather", "sunny", attachments=(Attachment.from_bytes(PNG, "image/png"),)),
                ToolResult("tooluse_2", "weather", "no such city", is_error=True),
            ),
        ),
    )
    assert body(Request(messages=messages))["messages"] == [
        {"role": "user", "content": [{"text": "Weather in Paris?"}]},
        {
            "role": "assistant",
            "content": [
                {"reasoningContent": {"reasoningText": {"text": "Look it up.", "signature": "sig-1"}}},
                {"reasoningContent": {"redactedContent": "cmVkYWN0ZWQ="}},
                {"text": "Checking."},
                {"toolUse": {"toolUseId": "tooluse_1", "name": "weather", "input": {"city": "Paris"}}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": "tooluse_1",
                        "content": [
                            {"text": "sunny"},
                            {"image": {"format": "png", "source": {"bytes": "iVBORw0KGgoAAAAAAAAAAAAAAAAAAAAA"}}},
                        ],
                        "status": "success",
                    }
                },
                {"toolResult": {"toolUseId": "tooluse_2", "content": [{"text": "no such city"}], "status": "error"}},
            ],
        },
    ]


def test_a_pdf_is_a_document_and_audio_or_a_url_is_refused() -> None:
    pdf = Attachment.from_bytes(b"%PDF-1.4 ...", "application/pdf", name="report (v2).pdf")
    sent = body(Request(messages=(Message("user", (Text("Summarize"), pdf)),)))["messages"][0]["content"][1]
    assert sent == {"document": {"format": "pdf", "name": "report (v2)", "source": {"bytes": "JVBERi0xLjQgLi4u"}}}
    for attachment in (
        Attachment.from_bytes(b"RIFF", "audio/wav"),
        Attachment.from_url("https://x/a.png", "image/png"),
    ):
        with pytest.raises(ConfigInvalid):
            body(Request(messages=(Message("user", (attachment,)),)))


def test_a_typed_output_is_sent_as_a_json_schema_text_format() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    sent = body(asked(output=OutputFormat("Answer", schema)))
    assert sent["outputConfig"] == {
        "textFormat": {
            "type": "json_schema",
            "structure": {"jsonSchema": {"schema": json.dumps(schema, separators=(",", ":")), "name": "Answer"}},
        }
    }


# --- the registry, models, prices ------------------------------------------------------------------------------


def test_a_model_string_builds_the_provider_and_a_region_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "br-key")
    built = resolve("bedrock:us.anthropic.claude-sonnet-4-20250514-v1:0")
    assert isinstance(built, BedrockProvider)
    assert built.server == ("bedrock-runtime.eu-west-3.amazonaws.com", 443)
    assert built.info.supports_thinking
    assert built.info.context_window
    nova = resolve("bedrock:amazon.nova-pro-v1:0")
    assert "tool" in nova.info.tool_choices
    assert resolve("bedrock:meta.llama3-3-70b-instruct-v1:0").info.tool_choices == {"auto", "none"}
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    with pytest.raises(ConfigInvalid, match="region"):
        resolve("bedrock:amazon.nova-pro-v1:0")


def test_cross_region_model_ids_are_priced_as_their_model() -> None:
    regional = price_for("bedrock:us.anthropic.claude-sonnet-4-20250514-v1:0")
    assert regional is not None
    assert regional.input == 3.0
    assert regional.cache_read is not None
    assert price_for("bedrock:amazon.nova-pro-v1:0") is not None
    usage = Usage(input_tokens=1_000_000, output_tokens=0, cache_read_tokens=1_000_000)
    assert cost_of(usage, regional).total_usd == pytest.approx(3.0 + regional.cache_read)


# --- botocore, on first use only ---------------------------------------------------------------------------------


def run_python(code: str) -> str:
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return completed.stdout.strip()


def test_botocore_is_loaded_only_to_sign() -> None:
    code = (
        "import sys, tether\n"
        "from tether.providers import resolve\n"
        "resolve('bedrock:amazon.nova-pro-v1:0', api_key='br-key', base_url='http://127.0.0.1:9')\n"
        "print('botocore' in sys.modules)\n"
        "resolve('bedrock:amazon.nova-pro-v1:0', base_url='http://127.0.0.1:9')\n"
        "print('botocore' in sys.modules)\n"
    )
    environ = "import os\nos.environ.update(AWS_ACCESS_KEY_ID='AKID', AWS_SECRET_ACCESS_KEY='s')\n"
    environ += "os.environ['AWS_REGION'] = 'eu-west-1'\n"
    assert run_python(environ + code).split() == ["False", "True"]


def test_without_botocore_aws_credentials_are_a_config_error_naming_the_extra() -> None:
    code = (
        "import sys; sys.modules['botocore'] = None\n"
        "from tether.errors import ConfigInvalid\n"
        "from tether.providers import BedrockProvider\n"
        "try:\n"
        "    BedrockProvider('amazon.nova-pro-v1:0', region='us-east-1', access_key='AKID', secret_key='s')\n"
        "except ConfigInvalid as error:\n"
        "    print(error)\n"
    )
    assert run_python(code) == (
        "[config_invalid] 'bedrock:' models need botocore, to sign their requests: pip install 'tether[bedrock]'"
    )


def test_the_credentials_and_region_of_an_aws_profile(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "config").write_text("[profile work]\nregion = ap-northeast-1\n")
    (tmp_path / "credentials").write_text(f"[work]\naws_access_key_id = {ACCESS}\naws_secret_access_key = {SECRET}\n")
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    built = BedrockProvider(MODEL, profile="work")
    assert built.server == ("bedrock-runtime.ap-northeast-1.amazonaws.com", 443)
    assert built.credentials() == (SECRET,)


# --- a run ------------------------------------------------------------------------------------------------------


async def test_a_streamed_run_calls_a_tool_replays_its_reasoning_and_is_priced(serve: Serve) -> None:
    answers = [event_frames(STREAMED), event_frames([*END, {"messageStop": {"stopReason": "end_turn"}}, USAGE])]

    class Run(Bedrock):
        async def handle(self, request: web.Request) -> web.StreamResponse:
            self.answer = answers[len(self.bodies)]
            return await super().handle(request)

    @tool
    def weather(city: str) -> str:
        """Weather in a city."""
        return f"sunny in {city}"

    server = Run(b"")
    url = await server.start(serve)
    bedrock = BedrockProvider("us.anthropic.claude-sonnet-4-20250514-v1:0", region="us-east-1", base_url=url,
                              access_key=ACCESS, secret_key=SECRET, environ={})  # fmt: skip
    result = await Agent(bedrock, tools=[weather]).run("Weather in Paris?")
    assert result.text == "Hi", result.detail
    assert len(server.bodies) == 2, "both requests were signed as Bedrock checks them"
    replayed = server.bodies[1]["messages"][1]["content"]
    assert replayed[0] == {
        "reasoningContent": {
            "reasoningText": {"text": "The user wants the weather.", "signature": "EqoBCkgIARABGAIiQL"}
        }
    }
    assert server.bodies[1]["messages"][2]["content"] == [
        {"toolResult": {"toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "content": [{"text": "sunny in Paris"}],
                        "status": "success"}}
    ]  # fmt: skip
    assert result.usage.input_tokens == 417 + 20
    assert result.usage.cache_read_tokens == 1200
    price = price_for("bedrock:us.anthropic.claude-sonnet-4-20250514-v1:0")
    assert price is not None
    assert result.cost is not None
    assert result.cost.total_usd == pytest.approx(
        cost_of(STREAMED_USAGE, price).total_usd + cost_of(Usage(input_tokens=20, output_tokens=2), price).total_usd
    )


USAGE = {"metadata": {"usage": {"inputTokens": 20, "outputTokens": 2, "totalTokens": 22}}}
STREAMED_USAGE = Usage(input_tokens=417, output_tokens=58, cache_read_tokens=1200)
