"""An answer cut at the output limit, as each provider's API says it (Chat Completions' and an OpenAI-compatible
server's ``length``, the Responses API's ``incomplete`` for ``max_output_tokens``, Anthropic's ``max_tokens``,
Gemini's ``MAX_TOKENS``, Bedrock's ``max_tokens``), over real HTTP on 127.0.0.1: the run asks the model to go on,
sends the cut answer back as the assistant's with the request to continue, and a run whose answer stays cut ends
``complete`` but ``degraded`` with ``finish_reason`` ``length``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web

from tether import Agent, Limits
from tether.loop.context import CONTINUATION_REQUEST
from tether.providers import resolve
from tether.providers.anthropic import AnthropicProvider
from tether.providers.base import Provider
from tether.providers.bedrock import BedrockProvider
from tether.providers.gemini import GeminiProvider
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.openai_responses import OpenAIResponsesProvider

PIECES = ("The capital of", " France is")


def chat(text: str) -> dict[str, Any]:
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
    return {"id": "c", "model": "m", "choices": [choice], "usage": {"prompt_tokens": 9, "completion_tokens": 4}}


def responses(text: str) -> dict[str, Any]:
    item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "incomplete",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}  # fmt: skip
    return {"id": "resp_1", "model": "m", "status": "incomplete", "output": [item],
            "incomplete_details": {"reason": "max_output_tokens"},
            "usage": {"input_tokens": 9, "output_tokens": 4}}  # fmt: skip


def anthropic(text: str) -> dict[str, Any]:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": text}], "stop_reason": "max_tokens",
            "usage": {"input_tokens": 9, "output_tokens": 4}}  # fmt: skip


def gemini(text: str) -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "MAX_TOKENS"}]}


def bedrock(text: str) -> dict[str, Any]:
    return {"output": {"message": {"role": "assistant", "content": [{"text": text}]}}, "stopReason": "max_tokens",
            "usage": {"inputTokens": 9, "outputTokens": 4, "totalTokens": 13}}  # fmt: skip


def sent_texts(kind: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """The conversation a request sent, as ``(role, text)``, the system prompt aside."""
    if kind == "gemini":
        return [(c["role"], "".join(p.get("text", "") for p in c["parts"])) for c in body["contents"]]
    if kind == "responses":
        out = []
        for item in body["input"]:
            content = item.get("content")
            text = content if isinstance(content, str) else "".join(c.get("text", "") for c in content or [])
            out.append((item.get("role", ""), text))
        return out
    out = []
    for message in body["messages"]:
        content = message["content"]
        text = content if isinstance(content, str) else "".join(c.get("text", "") for c in content or [])
        out.append((message["role"], text))
    return [pair for pair in out if pair[0] != "system"]


KINDS: dict[str, tuple[str, Callable[[str], dict[str, Any]], Callable[[str], Provider]]] = {
    "chat": ("/v1/chat/completions", chat,
             lambda url: OpenAIChatProvider("m", base_url=url + "/v1", api_key="k", stream=False)),
    "openai-compatible": ("/v1/chat/completions", chat,
                          lambda url: resolve("openai-compatible:m", base_url=url + "/v1", stream=False)),
    "responses": ("/v1/responses", responses,
                  lambda url: OpenAIResponsesProvider("m", base_url=url + "/v1", api_key="k", stream=False)),
    "anthropic": ("/v1/messages", anthropic,
                  lambda url: AnthropicProvider("m", base_url=url + "/v1", api_key="k", stream=False)),
    "gemini": ("/v1beta/models/m:generateContent", gemini,
               lambda url: GeminiProvider("m", base_url=url + "/v1beta", api_key="k", stream=False)),
    "bedrock": ("/model/m/converse", bedrock,
                lambda url: BedrockProvider("m", region="us-east-1", base_url=url, api_key="k", environ={},
                                            stream=False)),
}  # fmt: skip


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[str, Callable[[str], dict[str, Any]]], Any]]:
    runners: list[web.AppRunner] = []
    bodies: list[dict[str, Any]] = []

    async def start(path: str, answer: Callable[[str], dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        async def handle(request: web.Request) -> web.Response:
            bodies.append(await request.json())
            return web.json_response(answer(PIECES[min(len(bodies), len(PIECES)) - 1]))

        app = web.Application()
        app.router.add_post(path, handle)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        runners.append(runner)
        return f"http://127.0.0.1:{runner.addresses[0][1]}", bodies

    yield start
    for runner in runners:
        await runner.cleanup()


@pytest.mark.parametrize("kind", KINDS)
async def test_an_answer_cut_at_the_output_limit_is_continued_then_marked_degraded(kind: str, serve: Any) -> None:
    path, answer, build = KINDS[kind]
    url, bodies = await serve(path, answer)
    result = await Agent(build(url), limits=Limits(answer_continuations=1)).run("Capital of France?")
    assert result.stop_reason == "complete"
    assert result.degraded, "an answer still cut is never a clean success"
    assert result.finish_reason == "length"
    assert result.text == "The capital of France is"
    assert "cut off at the output limit" in result.detail
    assert len(bodies) == 2, "one continuation, as the limits allow"
    sent = sent_texts(kind, bodies[1])
    assert sent[-2][1] == "The capital of", "the cut answer goes back as the assistant's"
    assert sent[-2][0] in ("assistant", "model")
    assert sent[-1] == ("user", CONTINUATION_REQUEST)
