"""Gemini on Vertex AI, over real HTTP on 127.0.0.1: the route, the bearer token of real google-auth
credentials (a service account's key, exchanged at a loopback token endpoint), the request bodies the Gemini
provider would send, the answers read as Gemini's, and Vertex AI's errors."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.providers.conftest import Serve
from tests.providers.vertex_servers import (
    CLOUD_PLATFORM,
    HELLO,
    PROJECT,
    Received,
    TokenServer,
    VertexApi,
    fixed_credentials,
    google_error,
    sse,
    streamed,
)
from tests.wire.events import collect
from tether import Agent, tool
from tether.errors import AuthFailed, ConfigInvalid, ContextOverflow, ProviderError
from tether.events import StreamEnd, TextDelta
from tether.messages import Attachment, Message, Text
from tether.pricing import find_price
from tether.providers.base import OutputFormat, Request, ToolDefinition
from tether.providers.gemini import GeminiProvider
from tether.providers.http import RetryPolicy
from tether.providers.registry import resolve
from tether.providers.vertex import VertexProvider, vertex_root
from tether.usage import Usage

NO_RETRY = RetryPolicy(max_retries=0)
MODEL = "gemini-2.5-flash"
ROUTE = f"/v1/projects/my-proj/locations/us-central1/publishers/google/models/{MODEL}"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No project, location or credentials from the machine running the tests."""
    for name in ("GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_APPLICATION_CREDENTIALS", "GCLOUD_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))


def vertex(url: str, **options: Any) -> VertexProvider:
    options.setdefault("credentials", fixed_credentials())
    options.setdefault("retry", NO_RETRY)
    return VertexProvider(MODEL, project="my-proj", location="us-central1", base_url=url, **options)


def ask(text: str = "Hi") -> Request:
    return Request((Message("user", (Text(text),)),))


def text_of(events: list[Any]) -> str:
    return "".join(event.text for event in events if isinstance(event, TextDelta))


# --- where, and signed how ------------------------------------------------------------------------------------


def test_the_route_names_project_location_and_model_and_global_has_no_region_in_its_host() -> None:
    assert vertex_root("p", "us-central1") == (
        "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/publishers/google"
    )
    assert (
        vertex_root("p", "global")
        == "https://aiplatform.googleapis.com/v1/projects/p/locations/global/publishers/google"
    )
    assert vertex_root("p", "europe-west4", "http://127.0.0.1:9/") == (
        "http://127.0.0.1:9/v1/projects/p/locations/europe-west4/publishers/google"
    )


async def test_a_request_goes_to_the_models_route_with_the_bearer_token(serve: Serve) -> None:
    api = VertexApi()
    provider = vertex(await serve(api.app()), credentials=fixed_credentials("ya29.token"))
    events = await collect(provider, ask())
    assert text_of(events) == "Hello"
    (sent,) = api.received
    assert (sent.path, sent.query) == (f"{ROUTE}:streamGenerateContent", "alt=sse")
    assert sent.headers["authorization"] == "Bearer ya29.token"
    assert "x-goog-api-key" not in sent.headers
    assert provider.credentials() == ("ya29.token",), "the token is a secret every run masks"
    assert provider.info.model_string == f"vertex:{MODEL}"


async def test_a_whole_answer_is_asked_of_generate_content(serve: Serve) -> None:
    whole = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "Hi"}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1},
    }
    api = VertexApi([lambda _: web.json_response(whole)])
    events = await collect(vertex(await serve(api.app()), stream=False), ask())
    assert text_of(events) == "Hi"
    assert (api.received[0].path, api.received[0].query) == (f"{ROUTE}:generateContent", "")


async def test_project_and_location_come_from_the_environment_when_not_given(
    serve: Serve, clean_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "env-proj")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "asia-northeast1")
    api = VertexApi()
    provider = VertexProvider(MODEL, base_url=await serve(api.app()), credentials=fixed_credentials())
    await collect(provider, ask())
    assert api.received[0].path.startswith("/v1/projects/env-proj/locations/asia-northeast1/publishers/google/")


def test_the_location_is_global_by_default(clean_env: None) -> None:
    provider = VertexProvider(MODEL, project="p", credentials=fixed_credentials())
    assert repr(provider) == (
        "VertexProvider('vertex:gemini-2.5-flash', "
        "base_url='https://aiplatform.googleapis.com/v1/projects/p/locations/global/publishers/google')"
    )


async def test_an_express_mode_key_goes_in_its_header_to_the_projectless_route(serve: Serve, clean_env: None) -> None:
    api = VertexApi()
    provider = VertexProvider(MODEL, base_url=await serve(api.app()), api_key="express-key")
    await collect(provider, ask())
    (sent,) = api.received
    assert sent.path == f"/v1/publishers/google/models/{MODEL}:streamGenerateContent"
    assert sent.headers["x-goog-api-key"] == "express-key"
    assert "authorization" not in sent.headers
    assert provider.credentials() == ("express-key",)


def test_a_model_string_resolves_to_vertex_and_is_priced(clean_env: None) -> None:
    provider = resolve(f"vertex:{MODEL}", api_key="express-key")
    assert isinstance(provider, VertexProvider)
    assert provider.info.provider == "vertex"
    assert provider.info.context_window == GeminiProvider(MODEL, api_key="k").info.context_window
    assert find_price(f"vertex:{MODEL}") == find_price(f"gemini:{MODEL}") is not None


def test_tether_models_lists_vertex_with_what_it_reads() -> None:
    from tether.cli.catalog import catalog

    (line,) = [line for line in catalog({}).splitlines() if line.strip().startswith("vertex:")]
    assert "Application Default Credentials" in line
    assert "GOOGLE_CLOUD_PROJECT" in line


# --- the request: the Gemini provider's, byte for byte --------------------------------------------------------


@tool
def weather(city: str, days: int = 1) -> str:
    """The forecast for a city."""
    return "sunny"


PNG = b"\x89PNG\r\n\x1a\n" + bytes(40)
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
REQUESTS = {
    "text": Request((Message("user", (Text("Hi"),)),), system="Be brief."),
    "tools": Request(
        (Message("user", (Text("Weather in Paris?"),)),),
        tools=(ToolDefinition("weather", "The forecast for a city.", weather.parameters),),
        tool_choice="required",
    ),
    "image": Request((Message("user", (Text("What is this?"), Attachment.from_bytes(PNG))),)),
    "typed output": Request((Message("user", (Text("Where?"),)),), output=OutputFormat("City", SCHEMA, strict=True)),
}


@pytest.mark.parametrize("name", list(REQUESTS))
async def test_the_body_sent_is_the_gemini_providers(serve: Serve, name: str) -> None:
    request = REQUESTS[name]
    on_vertex, on_gemini = VertexApi(), VertexApi()
    await collect(vertex(await serve(on_vertex.app())), request)
    gemini = GeminiProvider(MODEL, base_url=await serve(on_gemini.app()), api_key="k", retry=NO_RETRY)
    await collect(gemini, request)
    assert on_vertex.received[0].body == on_gemini.received[0].body
    assert on_vertex.received[0].json()["contents"][0]["role"] == "user"


# --- the answer -----------------------------------------------------------------------------------------------


async def test_usage_is_read_as_vertex_reports_it(serve: Serve) -> None:
    usage = {
        "promptTokenCount": 1200,
        "cachedContentTokenCount": 1000,
        "candidatesTokenCount": 30,
        "thoughtsTokenCount": 70,
        "totalTokenCount": 1300,
    }
    answer = sse(
        {
            "candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}],
            "usageMetadata": usage,
        }
    )
    api = VertexApi([lambda _: streamed(answer)])
    (end,) = [e for e in await collect(vertex(await serve(api.app())), ask()) if isinstance(e, StreamEnd)]
    assert end.usage == Usage(input_tokens=200, output_tokens=100, cache_read_tokens=1000, reasoning_tokens=70)


async def test_an_agent_runs_tools_through_vertex_and_its_cost_is_priced(serve: Serve) -> None:
    call = {"functionCall": {"id": "c1", "name": "weather", "args": {"city": "Paris"}}}
    first = sse(
        {
            "candidates": [{"content": {"role": "model", "parts": [call]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 5},
        }
    )
    api = VertexApi([lambda _: streamed(first), lambda _: streamed(HELLO)])
    agent = Agent(vertex(await serve(api.app())), tools=[weather])
    result = await agent.run("Weather in Paris?")
    assert result.text == "Hello"
    answered = api.received[1].json()["contents"][-1]["parts"][0]["functionResponse"]
    assert answered == {"id": "c1", "name": "weather", "response": {"ok": True, "result": "sunny"}}
    assert result.cost is not None
    assert result.cost.total_usd > 0


# --- errors ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "name", "message", "code"),
    [
        (429, "RESOURCE_EXHAUSTED", "Resource exhausted. Please try again later.", "rate_limited"),
        (503, "UNAVAILABLE", "The service is currently unavailable.", "provider_unavailable"),
        (403, "PERMISSION_DENIED", "Permission 'aiplatform.endpoints.predict' denied on resource", "auth_failed"),
        (400, "INVALID_ARGUMENT", "Request contains an invalid argument.", "bad_request"),
        (
            400,
            "INVALID_ARGUMENT",
            "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
            "context_overflow",
        ),
        (404, "NOT_FOUND", "Publisher Model `gemini-9` was not found or your project does not have access to it.",
         "bad_request"),
    ],
)  # fmt: skip
async def test_vertex_errors_have_their_codes(serve: Serve, status: int, name: str, message: str, code: str) -> None:
    api = VertexApi([lambda _: google_error(status, name, message)])
    with pytest.raises(ProviderError) as caught:
        await collect(vertex(await serve(api.app())), ask())
    assert (caught.value.code, caught.value.status, caught.value.provider_message) == (code, status, message)
    assert caught.value.details["provider_code"] in (str(status), name)
    assert "fixed-token" not in str(caught.value)


async def test_a_rate_limit_is_retried_and_a_context_overflow_is_not(serve: Serve) -> None:
    limited = VertexApi(
        [lambda _: google_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded"), lambda _: streamed(HELLO)]
    )
    retry = RetryPolicy(max_retries=2, base_delay=0.0, max_delay=0.0)
    assert text_of(await collect(vertex(await serve(limited.app()), retry=retry), ask())) == "Hello"
    assert len(limited.received) == 2
    too_long = "The input token count (2000000) exceeds the maximum number of tokens allowed (1048576)."
    overflow = VertexApi([lambda _: google_error(400, "INVALID_ARGUMENT", too_long)])
    with pytest.raises(ContextOverflow):
        await collect(vertex(await serve(overflow.app()), retry=retry), ask())
    assert len(overflow.received) == 1


async def test_an_error_in_the_stream_is_mapped_as_gemini_maps_it(serve: Serve) -> None:
    broken = sse(
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}]},
        {"error": {"code": 500, "message": "Internal error encountered.", "status": "INTERNAL"}},
    )
    api = VertexApi([lambda _: streamed(broken)])
    with pytest.raises(ProviderError) as caught:
        await collect(vertex(await serve(api.app())), ask())
    assert caught.value.code == "provider_unavailable"


# --- Application Default Credentials, for real -------------------------------------------------------------------


async def adc(serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **token: Any) -> TokenServer:
    """A token endpoint on loopback, and GOOGLE_APPLICATION_CREDENTIALS naming a service account key for it."""
    server = TokenServer(**token)
    server.url = await serve(server.app())
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(server.key_file(tmp_path)))
    return server


async def test_adc_exchanges_a_signed_jwt_for_a_token_and_names_the_project(
    serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_env: None
) -> None:
    tokens = await adc(serve, tmp_path, monkeypatch)
    api = VertexApi()
    provider = resolve(f"vertex:{MODEL}", base_url=await serve(api.app()))
    assert isinstance(provider, VertexProvider)
    assert provider.credentials() == (), "no token is asked for before the first request"
    await collect(provider, ask())
    await collect(provider, ask())
    assert api.tokens == ["Bearer tok-1", "Bearer tok-1"], "a valid token is reused"
    (claims,) = tokens.claims
    assert claims["scope"] == CLOUD_PLATFORM
    assert claims["iss"] == "runner@proj.iam.gserviceaccount.com"
    assert api.received[0].path.startswith(f"/v1/projects/{PROJECT}/locations/global/")
    assert provider.credentials() == ("tok-1",)


async def test_an_expired_token_is_refreshed_before_the_request(
    serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_env: None
) -> None:
    """google-auth counts a token with less than a few minutes left as expired: one of a minute is, at once."""
    tokens = await adc(serve, tmp_path, monkeypatch, expires_in=60)
    api = VertexApi()
    provider = VertexProvider(MODEL, base_url=await serve(api.app()), retry=NO_RETRY)
    await collect(provider, ask())
    await collect(provider, ask())
    assert api.tokens == ["Bearer tok-1", "Bearer tok-2"]
    assert len(tokens.claims) == 2
    assert provider.credentials() == ("tok-2",)


def unauthenticated(received: Received) -> web.Response:
    return google_error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")


async def test_a_refused_token_is_refreshed_once_and_the_request_sent_again(
    serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_env: None
) -> None:
    tokens = await adc(serve, tmp_path, monkeypatch)
    api = VertexApi([unauthenticated, lambda _: streamed(HELLO)])
    provider = VertexProvider(MODEL, base_url=await serve(api.app()), retry=NO_RETRY)
    assert text_of(await collect(provider, ask())) == "Hello"
    assert api.tokens == ["Bearer tok-1", "Bearer tok-2"]
    assert len(tokens.claims) == 2


async def test_a_token_refused_again_is_auth_failed_after_one_refresh(
    serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_env: None
) -> None:
    await adc(serve, tmp_path, monkeypatch)
    api = VertexApi([unauthenticated])
    provider = VertexProvider(MODEL, base_url=await serve(api.app()), retry=NO_RETRY)
    with pytest.raises(AuthFailed) as caught:
        await collect(provider, ask())
    assert caught.value.status == 401
    assert api.tokens == ["Bearer tok-1", "Bearer tok-2"]
    assert "tok-2" not in str(caught.value)


async def test_a_permission_error_is_not_retried_with_a_new_token(
    serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_env: None
) -> None:
    tokens = await adc(serve, tmp_path, monkeypatch)
    api = VertexApi([lambda _: google_error(403, "PERMISSION_DENIED", "Permission denied")])
    with pytest.raises(AuthFailed):
        await collect(VertexProvider(MODEL, base_url=await serve(api.app()), retry=NO_RETRY), ask())
    assert len(api.received) == len(tokens.claims) == 1


async def test_a_token_endpoint_that_refuses_the_key_is_auth_failed(
    serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_env: None
) -> None:
    await adc(serve, tmp_path, monkeypatch, refuse=True)
    api = VertexApi()
    with pytest.raises(AuthFailed, match="access token") as caught:
        await collect(VertexProvider(MODEL, base_url=await serve(api.app()), retry=NO_RETRY), ask())
    assert caught.value.code == "auth_failed"
    assert "invalid_grant" in str(caught.value)
    assert api.received == [], "nothing is sent without a token"


def test_credentials_that_name_no_project_need_one(clean_env: None) -> None:
    with pytest.raises(ConfigInvalid, match="GOOGLE_CLOUD_PROJECT"):
        VertexProvider(MODEL, credentials=fixed_credentials())


def test_a_key_and_credentials_together_are_refused() -> None:
    with pytest.raises(ConfigInvalid, match="not both"):
        VertexProvider(MODEL, api_key="k", credentials=fixed_credentials())


def test_no_application_default_credentials_is_a_coded_error(tmp_path: Path) -> None:
    """In a process of its own: google-auth reads its metadata server settings when first imported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GCLOUD", "GCE_"))}
    env |= {"CLOUDSDK_CONFIG": str(tmp_path), "NO_GCE_CHECK": "true", "HOME": str(tmp_path)}
    code = (
        "from tether.providers.registry import resolve\n"
        "from tether.errors import ConfigInvalid\n"
        "try:\n    resolve('vertex:gemini-2.5-flash')\n"
        "except ConfigInvalid as error:\n    print(error.code, '|', error.message)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60, check=True)
    code_name, _, message = done.stdout.partition(" | ")
    assert code_name == "config_invalid"
    assert "Application Default Credentials" in message
    assert "GOOGLE_APPLICATION_CREDENTIALS" in message


def test_without_google_auth_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tether.providers.vertex_auth", None)  # as when google-auth is not installed
    with pytest.raises(ConfigInvalid, match=r"tether\[vertex\]"):
        VertexProvider(MODEL, project="p")


def test_import_tether_and_its_providers_face_loads_no_google_auth() -> None:
    code = "import sys, tether, tether.providers; tether.providers.VertexProvider; print('google.auth' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "False"


async def test_health_counts_tokens_of_the_model(serve: Serve) -> None:
    api = VertexApi([lambda _: web.json_response({"totalTokens": 1})])
    provider = vertex(await serve(api.app()))
    found = await provider.reach(5.0)
    assert api.received[0].path == f"{ROUTE}:countTokens"
    assert json.loads(api.received[0].body)["contents"][0]["parts"] == [{"text": "ping"}]
    assert "1 tokens" in found


async def test_tether_doctor_gets_a_token_and_counts_a_words_tokens(serve: Serve, tmp_path: Path) -> None:
    """The command, in a process of its own, with a service account key for the loopback token endpoint."""
    from tests.cli.test_doctor_command import checks, environment, write_config

    tokens = TokenServer()
    tokens.url = await serve(tokens.app())
    api = VertexApi([lambda _: web.json_response({"totalTokens": 1})])
    write_config(tmp_path, f"vertex:{MODEL}", base_url=await serve(api.app()))
    env = environment(tmp_path, GOOGLE_APPLICATION_CREDENTIALS=str(tokens.key_file(tmp_path)), NO_GCE_CHECK="true")
    env = {name: value for name, value in env.items() if not name.startswith(("GOOGLE_CLOUD_", "GCLOUD"))}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tether", "doctor", "--json", cwd=tmp_path, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 120)
    done = subprocess.CompletedProcess([], process.returncode or 0, out.decode(), err.decode())
    found = checks(done)
    assert found["api_key"]["status"] == "skipped"
    assert "Application Default Credentials" in found["api_key"]["detail"]
    assert found["provider"]["status"] == "ok", found["provider"]
    assert [r.path for r in api.received] == [
        f"/v1/projects/{PROJECT}/locations/global/publishers/google/models/{MODEL}:countTokens"
    ]
    assert api.tokens == ["Bearer tok-1"]
    assert "tok-1" not in done.stdout + done.stderr
