"""Real HTTP: a retried provider call seen as a span event, and spans exported over OTLP/HTTP to a receiver."""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from opentelemetry.trace import SpanKind, StatusCode

from tests.telemetry.conftest import Otel, attrs, check_tree
from tether import Agent, ModelSettings, ResponseCache, tool
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.registry import PROFILES


class FlakyModel:
    """An OpenAI chat server that answers the first request with 429 (``Retry-After: 0``), then streams."""

    def __init__(self) -> None:
        self.requests = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests += 1
        if self.requests == 1:
            error = {"error": {"message": "slow down", "type": "rate_limit_error"}}
            return web.json_response(error, status=429, headers={"Retry-After": "0"})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        chunks: list[dict[str, Any]] = [
            {"id": "resp-7", "model": "gpt-test-0613", "choices": [{"index": 0, "delta": {"content": "Hello"}}]},
            {"id": "resp-7", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {"id": "resp-7", "choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3}},
        ]
        assert body["stream"] is True
        for chunk in chunks:
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        return response


@pytest.fixture
async def flaky() -> AsyncIterator[tuple[FlakyModel, str, int]]:
    model = FlakyModel()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", model.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield model, f"http://127.0.0.1:{port}/v1", port
    await runner.cleanup()


async def test_a_retry_is_an_event_on_the_chat_span_and_counted_by_code(
    otel: Otel, flaky: tuple[FlakyModel, str, int]
) -> None:
    model, base_url, port = flaky
    provider = OpenAIChatProvider("gpt-test", profile=PROFILES["openai"], base_url=base_url, api_key="sk-test-key")
    agent = Agent(provider, telemetry=otel.telemetry())
    result = await agent.run("hi")
    assert result.text == "Hello"
    assert model.requests == 2
    [chat] = otel.named("chat ")
    assert chat.name == "chat gpt-test"
    assert chat.kind is SpanKind.CLIENT
    assert chat.status.status_code is StatusCode.UNSET, "the call succeeded after its retry"
    assert attrs(chat)["gen_ai.provider.name"] == "openai"
    assert attrs(chat)["server.address"] == "127.0.0.1"
    assert attrs(chat)["server.port"] == port
    assert attrs(chat)["gen_ai.response.id"] == "resp-7"
    assert attrs(chat)["gen_ai.response.model"] == "gpt-test-0613"
    assert attrs(chat)["gen_ai.usage.input_tokens"] == 12
    assert attrs(chat)["tether.retries"] == 1
    [retry] = [event for event in chat.events if event.name == "retry"]
    assert attrs(retry)["error.type"] == "rate_limited"
    assert attrs(retry)["tether.retry.attempt"] == 1
    assert attrs(retry)["tether.retry.wait_s"] == 0.0
    [retries] = otel.metrics()["tether.client.retries"]
    assert retries.value == 1
    assert attrs(retries)["error.type"] == "rate_limited"


async def test_a_call_answered_from_the_response_cache_is_marked_on_its_span(
    otel: Otel, flaky: tuple[FlakyModel, str, int], tmp_path: Path
) -> None:
    model, base_url, _ = flaky
    provider = OpenAIChatProvider("gpt-test", profile=PROFILES["openai"], base_url=base_url, api_key="sk-test-key")
    cache = ResponseCache(tmp_path / "cache.db")
    agent = Agent(provider, telemetry=otel.telemetry(), cache=cache, settings=ModelSettings(temperature=0))
    await agent.run("hi")
    replayed = await agent.run("hi")
    assert replayed.text == "Hello"
    assert model.requests == 2, "the 429 and the answer; the second run asked nothing"
    live, cached = otel.named("chat ")
    assert "tether.cached" not in attrs(live)
    assert attrs(cached)["tether.cached"] is True
    assert attrs(cached)["gen_ai.usage.input_tokens"] == 0
    assert attrs(cached)["gen_ai.response.id"] == "resp-7", "the recorded answer's id"


class Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP trace receiver: decodes each protobuf export request and keeps it."""

    received: list[Any]

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        assert self.path == "/v1/traces"
        assert self.headers["Content-Type"] == "application/x-protobuf"
        self.received.append(ExportTraceServiceRequest.FromString(body))
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[Any]]]:
    received: list[Any] = []
    handler = type("Handler", (Receiver,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", received
    server.shutdown()
    server.server_close()
    thread.join()


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_spans_are_exported_over_otlp_http_to_a_receiver(receiver: tuple[str, list[Any]]) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from tether.providers.scripted import ScriptedProvider, call, reply
    from tether.telemetry import Telemetry

    endpoint, received = receiver
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    model = ScriptedProvider([call("add", {"a": 2, "b": 3}), reply("5")])
    agent = Agent(model, tools=[add], telemetry=Telemetry(tracer_provider=provider, agent_name="adder"))
    result = await agent.run("2+3?")
    assert provider.force_flush(10_000)
    provider.shutdown()
    spans = [span for request in received for rs in request.resource_spans for ss in rs.scope_spans
             for span in ss.spans]  # fmt: skip
    by_name: dict[str, list[Any]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    assert sorted(by_name) == ["chat scripted", "execute_tool add", "invoke_agent adder"]
    [run] = by_name["invoke_agent adder"]
    assert len(by_name["chat scripted"]) == 2
    for child in [*by_name["chat scripted"], *by_name["execute_tool add"]]:
        assert child.parent_span_id == run.span_id
        assert child.trace_id == run.trace_id
    attributes = {item.key: item.value for item in run.attributes}
    assert attributes["tether.run.id"].string_value == result.run_id
    assert attributes["gen_ai.agent.name"].string_value == "adder"


def test_the_in_memory_tree_check_catches_a_chat_span_outside_its_run(otel: Otel) -> None:
    """The helper the other tests rely on fails when a chat span has no run above it."""
    tracer = otel.tracer_provider.get_tracer("test")
    tracer.start_span("invoke_agent", attributes={"tether.run.id": "r1"}).end()
    tracer.start_span("chat m").end()
    with pytest.raises(AssertionError, match="not under a run"):
        check_tree(otel.spans())
