"""The hosted OpenAI-style APIs with a profile of their own (Mistral, Groq, xAI, OpenRouter, Together,
Fireworks) and Azure OpenAI, over real HTTP on 127.0.0.1.

Each server's answers are written in the shapes of its API reference: a stream of ``chat.completion.chunk``
events ending with ``data: [DONE]``, the usage on the last chunk, errors as ``{"error": {...}}``; xAI's
usage counts the reasoning tokens apart from ``completion_tokens``; Azure's content filter refuses a prompt
with HTTP 400 and the code ``content_filter``. Every test also checks what was sent: the path, the query,
the credential header and the body.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from tests.providers.conftest import Serve
from tether.cli.catalog import catalog
from tether.errors import AuthFailed, BadRequest, ConfigInvalid, RateLimited
from tether.events import LlmEvent, StreamEnd, TextDelta
from tether.messages import Message
from tether.providers.azure import AzureOpenAIProvider, azure_route
from tether.providers.base import Request
from tether.providers.http import RetryPolicy
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.registry import PROFILES, resolve

HOSTED = ("mistral", "groq", "xai", "openrouter", "together", "fireworks")
KEY = "sk-test-0123456789abcdef"
REQUEST = Request(messages=(Message.user("Say hi"),))


@dataclass
class Recorded:
    """What a fake API server received: path with query, headers and JSON body, per request."""

    paths: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)


def sse(chunks: list[dict[str, Any]]) -> bytes:
    return b"".join(f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks) + b"data: [DONE]\n\n"


def chunks(model: str, usage: dict[str, Any]) -> list[dict[str, Any]]:
    """A streamed answer "Hi there" as the references show it: deltas, the finish, then usage."""
    head = {"id": "cmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model}
    return [
        {**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}, "finish_reason": None}]},
        {**head, "choices": [{"index": 0, "delta": {"content": " there"}, "finish_reason": None}]},
        {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {**head, "choices": [], "usage": usage},
    ]


def app(recorded: Recorded, status: int, body: bytes, content_type: str) -> web.Application:
    async def handle(request: web.Request) -> web.Response:
        recorded.paths.append(request.path_qs)
        recorded.headers.append(dict(request.headers))
        recorded.bodies.append(await request.json())
        return web.Response(status=status, body=body, content_type=content_type)

    application = web.Application()
    application.router.add_post("/{tail:.*}", handle)
    return application


def chat(model: str, **options: Any) -> OpenAIChatProvider:
    """The provider a model string resolves to: a Chat Completions one (Azure's included)."""
    provider = resolve(model, **options)
    assert isinstance(provider, OpenAIChatProvider)
    return provider


async def collect(provider: OpenAIChatProvider) -> list[LlmEvent]:
    return [event async for event in provider.stream(REQUEST)]


def end_of(events: list[LlmEvent]) -> StreamEnd:
    ends = [event for event in events if isinstance(event, StreamEnd)]
    assert len(ends) == 1
    return ends[0]


AZURE_STREAM = sse(chunks("gpt-4o", {"prompt_tokens": 4, "completion_tokens": 2}))


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_AD_TOKEN", "OPENAI_API_VERSION"):
        monkeypatch.delenv(name, raising=False)


# --- the six profiles ---------------------------------------------------------------------------------------


def test_each_profile_is_at_its_documented_url_and_reads_its_own_key_variable() -> None:
    expected = {
        "mistral": ("https://api.mistral.ai/v1", "MISTRAL_API_KEY"),
        "groq": ("https://api.groq.com/openai/v1", "GROQ_API_KEY"),
        "xai": ("https://api.x.ai/v1", "XAI_API_KEY"),
        "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
        "together": ("https://api.together.xyz/v1", "TOGETHER_API_KEY"),
        "fireworks": ("https://api.fireworks.ai/inference/v1", "FIREWORKS_API_KEY"),
    }
    assert {name: (PROFILES[name].base_url, PROFILES[name].key_variables[0]) for name in HOSTED} == expected
    assert all(PROFILES[name].requires_key for name in HOSTED)


@pytest.mark.parametrize("prefix", HOSTED)
def test_a_hosted_profile_without_its_key_is_refused_naming_the_variable(
    prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    variable = PROFILES[prefix].key_variables[0]
    monkeypatch.delenv(variable, raising=False)
    with pytest.raises(ConfigInvalid, match=variable):
        chat(f"{prefix}:some-model")


@pytest.mark.parametrize("prefix", HOSTED)
async def test_a_streamed_answer_is_posted_with_a_bearer_key_and_decoded(prefix: str, serve: Serve) -> None:
    recorded = Recorded()
    usage = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
    url = await serve(app(recorded, 200, sse(chunks("m-1", usage)), "text/event-stream"))
    provider = chat(f"{prefix}:m-1", base_url=url + "/v1", api_key=KEY)
    events = await collect(provider)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hi there"
    end = end_of(events)
    assert (end.finish_reason, end.usage.input_tokens, end.usage.output_tokens) == ("stop", 12, 3)
    assert recorded.paths == ["/v1/chat/completions"]
    assert recorded.headers[0]["Authorization"] == f"Bearer {KEY}"
    body = recorded.bodies[0]
    assert (body["model"], body["stream"], body["messages"]) == ("m-1", True, [{"role": "user", "content": "Say hi"}])
    assert ("stream_options" in body) is PROFILES[prefix].stream_options
    assert provider.info.provider == prefix


async def test_xai_output_tokens_add_the_reasoning_tokens_its_completion_count_leaves_out(serve: Serve) -> None:
    """xAI reports reasoning in ``completion_tokens_details.reasoning_tokens`` beside ``completion_tokens``;
    OpenAI's ``completion_tokens`` already include them. The same usage read both ways."""
    usage = {
        "prompt_tokens": 686,
        "completion_tokens": 11,
        "total_tokens": 809,
        "prompt_tokens_details": {"cached_tokens": 600, "text_tokens": 686},
        "completion_tokens_details": {"reasoning_tokens": 112},
    }
    counted = {}
    for prefix in ("xai", "groq"):
        url = await serve(app(Recorded(), 200, sse(chunks("grok-3-mini", usage)), "text/event-stream"))
        end = end_of(await collect(chat(f"{prefix}:grok-3-mini", base_url=url, api_key=KEY)))
        counted[prefix] = (end.usage.input_tokens, end.usage.cache_read_tokens, end.usage.output_tokens)
        assert end.usage.reasoning_tokens == 112
    assert counted == {"xai": (86, 600, 123), "groq": (86, 600, 11)}


async def test_xai_whole_answers_count_the_reasoning_tokens_too(serve: Serve) -> None:
    whole = {
        "id": "x",
        "object": "chat.completion",
        "model": "grok-3-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "completion_tokens_details": {"reasoning_tokens": 40}},
    }
    url = await serve(app(Recorded(), 200, json.dumps(whole).encode(), "application/json"))
    provider = OpenAIChatProvider("grok-3-mini", profile=PROFILES["xai"], base_url=url, api_key=KEY, stream=False)
    assert end_of(await collect(provider)).usage.output_tokens == 42


@pytest.mark.parametrize(
    ("prefix", "status", "error", "kind"),
    [
        ("groq", 429, {"message": "Rate limit reached", "type": "tokens", "code": "rate_limit_exceeded"}, RateLimited),
        ("mistral", 401, {"message": "Unauthorized", "type": "invalid_request_error", "code": None}, AuthFailed),
        ("openrouter", 400, {"message": "Invalid model", "code": 400}, BadRequest),
        ("together", 401, {"message": "Invalid API key provided", "type": "invalid_request_error"}, AuthFailed),
        ("fireworks", 404, {"type": "invalid_request_error", "message": "Model not found"}, BadRequest),
        ("xai", 400, {"message": "Incorrect API key", "code": "Client specified an invalid argument"}, BadRequest),
    ],
)
async def test_an_error_body_is_raised_with_its_code_and_message(
    prefix: str, status: int, error: dict[str, Any], kind: type[Exception], serve: Serve
) -> None:
    recorded = Recorded()
    url = await serve(app(recorded, status, json.dumps({"error": error}).encode(), "application/json"))
    provider = chat(f"{prefix}:m", base_url=url, api_key=KEY)
    provider._client.retry = RetryPolicy(max_retries=0)
    with pytest.raises(kind, match=error["message"]):
        await collect(provider)
    assert len(recorded.paths) == 1


def test_tether_models_lists_every_new_prefix_with_its_variable() -> None:
    text = catalog({"XAI_API_KEY": "x" * 20})
    for prefix in HOSTED:
        variable = PROFILES[prefix].key_variables[0]
        assert f"{prefix}:" in text
        assert variable in text
    assert "XAI_API_KEY (set)" in text
    (azure,) = [line for line in text.splitlines() if line.strip().startswith("azure:")]
    assert "AZURE_OPENAI_API_KEY" in azure
    assert "AZURE_OPENAI_ENDPOINT" in azure


# --- Azure OpenAI ---------------------------------------------------------------------------------------------


def test_the_route_is_the_deployments_one_with_a_dated_version_and_v1_without() -> None:
    endpoint = "https://res.openai.azure.com"
    assert azure_route(endpoint, "gpt4o", "2024-10-21") == (
        "https://res.openai.azure.com/openai/deployments/gpt4o",
        "/chat/completions?api-version=2024-10-21",
    )
    assert azure_route(endpoint, "gpt4o", "v1") == ("https://res.openai.azure.com/openai/v1", "/chat/completions")
    assert azure_route(endpoint + "/openai/v1", "gpt4o", "v1") == azure_route(endpoint, "gpt4o", "v1")


async def test_a_key_goes_in_the_api_key_header_to_the_deployment_with_its_api_version(
    serve: Serve, clean_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = Recorded()
    url = await serve(app(recorded, 200, AZURE_STREAM, "text/event-stream"))
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", url)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-10-21")
    provider = chat("azure:my-gpt4o")
    events = await collect(provider)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hi there"
    assert recorded.paths == ["/openai/deployments/my-gpt4o/chat/completions?api-version=2024-10-21"]
    assert recorded.headers[0]["api-key"] == KEY
    assert "Authorization" not in recorded.headers[0]
    assert recorded.bodies[0]["model"] == "my-gpt4o"
    assert PROFILES["azure"].max_tokens_field == "max_completion_tokens"
    assert provider.credentials() == (KEY,)
    assert provider.info.model_string == "azure:my-gpt4o"


async def test_without_a_version_the_v1_route_names_the_deployment_in_the_body(serve: Serve, clean_env: None) -> None:
    recorded = Recorded()
    url = await serve(app(recorded, 200, AZURE_STREAM, "text/event-stream"))
    await collect(chat("azure:my-gpt4o", base_url=url, api_key=KEY))
    assert recorded.paths == ["/openai/v1/chat/completions"]
    assert recorded.bodies[0]["model"] == "my-gpt4o"


async def test_an_entra_token_function_is_asked_before_every_request_and_sent_as_bearer(
    serve: Serve, clean_env: None
) -> None:
    recorded = Recorded()
    url = await serve(app(recorded, 200, AZURE_STREAM, "text/event-stream"))
    tokens = iter(f"entra-token-{n:08d}" for n in range(10))
    provider = AzureOpenAIProvider("dep", base_url=url, entra_token=lambda: next(tokens), api_version="2025-01-01")
    await collect(provider)
    await collect(provider)
    sent = [h["Authorization"] for h in recorded.headers]
    assert sent == ["Bearer entra-token-00000001", "Bearer entra-token-00000002"]
    assert all("api-key" not in h for h in recorded.headers)
    assert provider.credentials() == ("entra-token-00000002",)


async def test_a_content_filter_refusal_is_a_bad_request_with_its_code_and_not_retried(
    serve: Serve, clean_env: None
) -> None:
    refusal = {
        "error": {
            "message": "The response was filtered due to the prompt triggering Azure OpenAI's content management "
            "policy.",
            "type": None,
            "param": "prompt",
            "code": "content_filter",
            "status": 400,
            "innererror": {"code": "ResponsibleAIPolicyViolation"},
        }
    }
    recorded = Recorded()
    url = await serve(app(recorded, 400, json.dumps(refusal).encode(), "application/json"))
    provider = AzureOpenAIProvider("dep", base_url=url, api_key=KEY, retry=RetryPolicy(max_retries=3, base_delay=0.0))
    with pytest.raises(BadRequest, match="content management policy") as raised:
        await collect(provider)
    assert raised.value.details["provider_code"] == "content_filter"
    assert KEY not in str(raised.value)
    assert len(recorded.paths) == 1


def test_azure_needs_an_endpoint_and_one_credential(clean_env: None) -> None:
    with pytest.raises(ConfigInvalid, match="AZURE_OPENAI_ENDPOINT"):
        chat("azure:dep", api_key=KEY)
    with pytest.raises(ConfigInvalid, match="AZURE_OPENAI_API_KEY"):
        chat("azure:dep", base_url="https://res.openai.azure.com")
    with pytest.raises(ConfigInvalid, match="not both"):
        AzureOpenAIProvider("dep", base_url="https://res.openai.azure.com", api_key=KEY, entra_token="t" * 20)


def test_an_entra_token_in_the_environment_is_used_without_a_key(
    clean_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_AD_TOKEN", "entra-token-from-env")
    provider = chat("azure:dep", base_url="https://res.openai.azure.com")
    assert provider.credentials() == ("entra-token-from-env",)
