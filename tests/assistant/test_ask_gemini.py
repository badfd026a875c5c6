"""ask() speaking Gemini natively over real HTTP on 127.0.0.1: functionCall / functionResponse with the ids
echoed, several calls of one turn answered in one content, a blocked first candidate passed over, and the
model check at start.

One conversation is a recording of Gemini 3 (``tests/fixtures/wire/google/``, served by
``tests/wire/replay.py``): it calls a function the assistant does not have. The others are composed here from
the bodies the Gemini API documents (``GenerateContentResponse``: ``candidates[].content.parts[].functionCall``
with its ``id``, ``finishReason``, ``index``), since no recording calls the assistant's capabilities or has
several candidates. The replay server answers whatever is asked, so every test asserts what was sent.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.wire.replay import Cassette, Interaction, ReplayServer
from tether import Assistant, ask
from tether.errors import ConfigInvalid
from tether.limits import StopReason
from tether.providers.gemini import GeminiProvider
from tether.providers.http import RetryPolicy

MODEL = "gemini-2.5-flash"
BASE = f"https://generativelanguage.googleapis.com/v1beta/models/{MODEL}"
USAGE = {"promptTokenCount": 120, "candidatesTokenCount": 12, "totalTokenCount": 132}


def streamed(*chunks: dict[str, Any]) -> Interaction:
    """An answer to ``streamGenerateContent?alt=sse``: one ``data:`` event per chunk, as Gemini frames them."""
    body = b"".join(b"data: " + json.dumps(chunk).encode() + b"\r\n\r\n" for chunk in chunks)
    return Interaction(
        "POST", f"{BASE}:streamGenerateContent?alt=sse", None, 200, "OK", (("content-type", "text/event-stream"),), body
    )


def whole(response: dict[str, Any]) -> Interaction:
    """An answer to ``generateContent``: one JSON body."""
    headers = (("content-type", "application/json; charset=UTF-8"),)
    return Interaction("POST", f"{BASE}:generateContent", None, 200, "OK", headers, json.dumps(response).encode())


def candidate(parts: list[dict[str, Any]], finish: str = "STOP", index: int = 0) -> dict[str, Any]:
    return {"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": index}


def text_answer(text: str) -> dict[str, Any]:
    return {"candidates": [candidate([{"text": text}])], "usageMetadata": USAGE, "modelVersion": MODEL}


@contextmanager
def serving(cassette: Cassette) -> Iterator[ReplayServer]:
    """A replay server on its own thread and event loop: ``ask()`` blocks the test's thread while it asks."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = ReplayServer(cassette)
    asyncio.run_coroutine_threadsafe(server.start(), loop).result()
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
    server.assert_all_served()


def gemini(server: ReplayServer, model: str = MODEL, *, stream: bool = True) -> GeminiProvider:
    return GeminiProvider(
        model, base_url=server.base_url, api_key="test-key", stream=stream, retry=RetryPolicy(max_retries=0)
    )


def function_responses(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``functionResponse`` parts of a request's last content, in order."""
    last = body["contents"][-1]
    assert last["role"] == "user"
    return [part["functionResponse"] for part in last["parts"]]


def test_function_calls_go_to_the_session_and_their_responses_echo_the_ids() -> None:
    calls = [
        {"functionCall": {"id": "fc-type-1", "name": "get_type", "args": {"expr": "df"}}},
        {"functionCall": {"id": "fc-repr-2", "name": "get_repr", "args": {"expr": "df"}}},
        {"functionCall": {"id": "fc-repr-3", "name": "get_repr", "args": {"expr": "frame"}}},
    ]
    cassette = Cassette(
        "composed",
        (
            streamed({"candidates": [candidate(calls)], "usageMetadata": USAGE, "modelVersion": MODEL}),
            streamed(text_answer("`df` is a dict with one key, `'a'`.")),
        ),
    )

    with serving(cassette) as server:
        result = ask("what is df?", {"df": {"a": 1}}, model=gemini(server))

    assert (result.stop_reason, result.text) == (StopReason.COMPLETE, "`df` is a dict with one key, `'a'`.")
    first, second = server.bodies
    declared = [d["name"] for d in first["tools"][0]["functionDeclarations"]]
    assert {"list_globals", "get_type", "get_repr", "get_last_exception"} <= set(declared)
    assert "Never invent" in first["systemInstruction"]["parts"][0]["text"]
    answered = function_responses(second)
    assert [(r["id"], r["name"]) for r in answered] == [
        ("fc-type-1", "get_type"),
        ("fc-repr-2", "get_repr"),
        ("fc-repr-3", "get_repr"),
    ]
    assert answered[0]["response"] == {
        "ok": True,
        "result": {"name": "dict", "module": "builtins", "qualified": "dict"},
    }
    assert answered[1]["response"] == {
        "ok": True,
        "result": {"repr": "{'a': 1}", "truncated": False, "original_len": 8},
    }
    failed = answered[2]["response"]  # the capability's own error envelope, not wrapped in another
    assert failed["ok"] is False
    assert failed["error"]["code"] == "python_exception"
    assert failed["error"]["details"]["exc_type"] == "NameError"
    model_turn = second["contents"][-2]
    assert [p["functionCall"]["id"] for p in model_turn["parts"]] == ["fc-type-1", "fc-repr-2", "fc-repr-3"]


def test_a_blocked_first_candidate_is_passed_over_for_the_second() -> None:
    blocked = candidate([{"text": "I cannot"}], finish="SAFETY", index=0)
    usable = candidate([{"functionCall": {"id": "fc-exc", "name": "get_last_exception", "args": {}}}], index=1)
    cassette = Cassette(
        "composed",
        (
            whole({"candidates": [blocked, usable], "usageMetadata": USAGE, "modelVersion": MODEL}),
            whole(text_answer("The last line raised KeyError: 'col'.")),
        ),
    )

    with serving(cassette) as server:
        result = ask("why did that fail?", {}, model=gemini(server, stream=False), last_exception=KeyError("col"))

    assert (result.stop_reason, result.text) == (StopReason.COMPLETE, "The last line raised KeyError: 'col'.")
    (answered,) = function_responses(server.bodies[1])
    assert (answered["id"], answered["name"]) == ("fc-exc", "get_last_exception")
    assert answered["response"]["result"]["exception"]["exc_type"] == "KeyError"
    assert "I cannot" not in json.dumps(server.bodies[1]["contents"])


def test_a_recorded_call_to_a_function_the_assistant_lacks_is_answered_with_the_unknown_function_envelope() -> None:
    cassette = Cassette.load("google/test_google_streaming_tool_call_thought_signature.yaml")
    signature = json.loads(cassette.interactions[0].events_data()[0])["candidates"][0]["content"]["parts"][0][
        "thoughtSignature"
    ]

    with serving(cassette) as server:
        result = ask("what is the capital of the user's country?", {}, model=gemini(server, "gemini-3-pro-preview"))

    assert result.stop_reason == StopReason.COMPLETE
    assert result.text.startswith("The capital of Mexico")
    second = server.bodies[1]
    (call,) = [p for p in second["contents"][-2]["parts"] if "functionCall" in p]
    assert call["functionCall"]["name"] == "get_country"
    assert call["thoughtSignature"] == signature
    (answered,) = function_responses(second)
    assert "id" not in call["functionCall"], "no id came with the call: none goes back"
    assert "id" not in answered
    declared = ["list_globals", "get_type", "get_repr", "get_dir", "get_doc", "eval_expr", "get_last_exception"]
    assert answered["response"] == {
        "ok": False,
        "error": {
            "code": "unknown_function",
            "message": f"no function 'get_country'; available: {', '.join(declared)}",
            "details": {"name": "get_country", "available": declared},
        },
    }


def test_a_gemini_model_without_function_calling_is_refused_at_start() -> None:
    gemma = GeminiProvider("gemma-3-27b-it", api_key="test-key")

    with pytest.raises(ConfigInvalid, match="TETHER_MODEL") as refused:
        Assistant(gemma)

    assert "'gemini:gemma-3-27b-it' cannot" in refused.value.message
    assert "tool_mode='json'" in refused.value.message
    assert Assistant(gemma, tool_mode="json").tool_mode == "json"


def test_the_model_comes_from_tether_model_else_from_the_keys_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY", "TETHER_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", "test-key")
    assert Assistant().provider.info.model_string == "gemini:gemini-2.5-flash"

    monkeypatch.setenv("TETHER_MODEL", "gemini:gemma-3-27b-it")
    with pytest.raises(ConfigInvalid, match="'gemini:gemma-3-27b-it' cannot: choose another"):
        Assistant()
