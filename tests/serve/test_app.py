"""The served agent's HTTP API over a real socket: runs streamed as JSON events, their summaries, sessions,
AG-UI and useChat, the page, and the app mounted in another one."""

from __future__ import annotations

import base64
import json
from typing import Any

import aiohttp
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from tether import Agent, tool
from tether.messages import Attachment, transcript_problems
from tether.providers import ScriptedProvider
from tether.providers.scripted import call, hang, reply
from tether.sessions import MemorySessionStore

from .served import json_events, parse_sse, read_until, run_events, served

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def adder(*steps: Any) -> tuple[Agent[Any, Any], ScriptedProvider]:
    model = ScriptedProvider(list(steps) or [call("add", {"a": 2, "b": 3}), reply("It is 5.")])
    return Agent(model, tools=[add], name="adder", store=MemorySessionStore()), model


async def test_a_run_streams_its_events_from_run_started_with_its_session_to_run_completed() -> None:
    agent, _ = adder()
    async with served(agent.to_asgi()) as server, aiohttp.ClientSession() as http:
        events = await run_events(http, server.base, {"prompt": "add 2 and 3"})
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "run_started"
    assert kinds[-1] == "run_completed"
    assert events[0]["run_id"]
    assert events[0]["session_id"]
    assert "tool_call_started" in kinds
    assert "tool_result_received" in kinds
    assert "".join(e["text"] for e in events if e["kind"] == "text_delta") == "It is 5."
    assert events[-1]["result"]["stop_reason"] == "complete"
    assert "messages" not in events[-1]["result"]  # a summary, never the transcript


async def test_a_runs_details_give_its_stop_reason_usage_and_turn_records_with_tool_calls() -> None:
    agent, _ = adder()
    async with served(agent.to_asgi()) as server, aiohttp.ClientSession() as http:
        run_id = (await run_events(http, server.base, {"prompt": "add"}))[0]["run_id"]
        async with http.get(f"{server.base}/api/runs") as response:
            listed = (await response.json())["runs"]
        async with http.get(f"{server.base}/api/runs/{run_id}") as response:
            details = await response.json()
    assert [r["run_id"] for r in listed] == [run_id]
    assert listed[0]["status"] == "complete"
    assert details["stop_reason"] == "complete"
    assert details["turns"] == 2
    assert details["usage"]["requests"] == 2
    first = details["turn_records"][0]
    assert first["tool_calls"][0]["name"] == "add"
    assert first["tool_calls"][0]["is_error"] is False
    assert first["duration_ms"] >= 0
    assert first["usage"]["input_tokens"] > 0


async def test_a_second_run_in_the_session_continues_its_conversation() -> None:
    agent, model = adder(reply("Hello Ann."), reply("You are Ann."))
    async with served(agent.to_asgi()) as server, aiohttp.ClientSession() as http:
        first = await run_events(http, server.base, {"prompt": "I am Ann"})
        session_id = first[0]["session_id"]
        second = await run_events(http, server.base, {"prompt": "who am I?", "session_id": session_id})
        async with http.get(f"{server.base}/api/sessions") as response:
            sessions = (await response.json())["sessions"]
        async with http.get(f"{server.base}/api/sessions/{session_id}") as response:
            stored = await response.json()
    assert second[0]["session_id"] == session_id
    sent = [m.text for m in model.requests[1].messages if m.role in ("user", "assistant")]
    assert sent == ["I am Ann", "Hello Ann.", "who am I?"]
    assert [s["id"] for s in sessions] == [session_id]
    assert sessions[0]["message_count"] == 4
    assert [m["role"] for m in stored["messages"]] == ["user", "assistant", "user", "assistant"]
    assert stored["messages"][-1]["parts"][0]["text"] == "You are Ann."


async def test_an_attachment_reaches_the_model_as_an_attachment() -> None:
    agent, model = adder(reply("A pixel."))
    body = {"prompt": "what is it?", "attachments": [{"name": "p.png", "media_type": "image/png",
                                                      "data": base64.b64encode(PNG).decode()}]}  # fmt: skip
    async with served(agent.to_asgi()) as server, aiohttp.ClientSession() as http:
        events = await run_events(http, server.base, body)
    assert events[-1]["result"]["stop_reason"] == "complete"
    parts = model.requests[0].messages[-1].parts
    attachment = next(p for p in parts if isinstance(p, Attachment))
    assert attachment.data == PNG
    assert attachment.media_type == "image/png"
    assert attachment.name == "p.png"


async def test_info_names_the_agent_its_models_and_tools() -> None:
    agent, _ = adder()
    other, _ = adder()
    app = agent.to_asgi(models={"scripted:other": other})
    async with served(app) as server, aiohttp.ClientSession() as http, http.get(f"{server.base}/api/info") as response:
        info = await response.json()
    assert info["name"] == "adder"
    assert info["models"] == [info["model"], "scripted:other"]
    assert info["tools"] == [{"name": "add", "description": "Add two integers."}]
    assert info["auth"] is False
    assert info["approvals"] is False


async def test_a_run_on_another_offered_model_runs_that_agent() -> None:
    agent, model = adder(reply("from the first"))
    other, other_model = adder(reply("from the other"))
    async with served(agent.to_asgi(models={"scripted:other": other})) as server, aiohttp.ClientSession() as http:
        events = await run_events(http, server.base, {"prompt": "hi", "model": "scripted:other"})
        async with http.post(f"{server.base}/api/runs", json={"prompt": "hi", "model": "nope:x"}) as response:
            refused = response.status, await response.json()
    assert events[-1]["result"]["text"] == "from the other"
    assert len(other_model.requests) == 1
    assert model.requests == []
    assert refused[0] == 400
    assert refused[1]["error"]["code"] == "request_invalid"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", "request_invalid"),
        (json.dumps({"prompt": 5}).encode(), "request_invalid"),
        (json.dumps({"prompt": "  "}).encode(), "request_invalid"),
        (json.dumps({"prompt": "x", "attachments": [{"media_type": "image/png", "data": "%%%"}]}).encode(),
         "request_invalid"),
        (json.dumps({"prompt": "x", "session_id": "../etc"}).encode(), "session_invalid"),
    ],
)  # fmt: skip
async def test_a_bad_run_request_is_a_400_with_a_stable_code(body: bytes, code: str) -> None:
    agent, model = adder()
    async with (
        served(agent.to_asgi()) as server,
        aiohttp.ClientSession() as http,
        http.post(f"{server.base}/api/runs", data=body) as response,
    ):
        assert response.status == 400
        assert (await response.json())["error"]["code"] == code
    assert model.requests == []


async def test_an_unknown_session_is_404_and_a_deleted_one_is_gone() -> None:
    agent, _ = adder(reply("hi"))
    async with served(agent.to_asgi()) as server, aiohttp.ClientSession() as http:
        async with http.post(f"{server.base}/api/runs", json={"prompt": "x", "session_id": "local-nope"}) as r:
            assert r.status == 404
            assert (await r.json())["error"]["code"] == "not_found"
        session_id = (await run_events(http, server.base, {"prompt": "hello"}))[0]["session_id"]
        async with http.delete(f"{server.base}/api/sessions/{session_id}") as response:
            assert response.status == 204
        async with http.get(f"{server.base}/api/sessions/{session_id}") as response:
            assert response.status == 404


async def test_cancel_stops_a_run_which_ends_cancelled_with_a_valid_saved_transcript() -> None:
    agent, _ = adder(hang("thinking it over"))
    async with served(agent.to_asgi()) as server, aiohttp.ClientSession() as http:
        async with http.post(f"{server.base}/api/runs", json={"prompt": "go"}) as response:
            started = await read_until(response, "text_delta")
            run_id, session_id = started[0]["run_id"], started[0]["session_id"]
            async with http.post(f"{server.base}/api/runs/{run_id}/cancel") as cancel:
                assert (await cancel.json())["cancelled"] is True
            rest = json_events(await response.text())
        session = await agent.store.load(session_id)  # type: ignore[union-attr]
    assert rest[-1]["kind"] == "run_completed"
    assert rest[-1]["result"]["stop_reason"] == "cancelled"
    assert transcript_problems(session.messages) == []


async def test_agui_streams_a_run_as_ag_ui_events() -> None:
    agent, _ = adder()
    body = {"threadId": "t1", "runId": "r1", "state": {}, "tools": [], "context": [], "forwardedProps": {},
            "messages": [{"id": "m1", "role": "user", "content": "add 2 and 3"}]}  # fmt: skip
    async with (
        served(agent.to_asgi()) as server,
        aiohttp.ClientSession() as http,
        http.post(f"{server.base}/agui", json=body) as response,
    ):
        assert response.status == 200
        events = [json.loads(data) for _, data in parse_sse(await response.text())]
    types = [e["type"] for e in events]
    assert types[0] == "RUN_STARTED"
    assert types[-1] == "RUN_FINISHED"
    assert "TOOL_CALL_START" in types
    assert "TEXT_MESSAGE_CONTENT" in types


async def test_use_chat_gets_the_ui_message_stream_and_done() -> None:
    agent, _ = adder()
    body = {"id": "chat1", "trigger": "submit-message",
            "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "add 2 and 3"}]}]}  # fmt: skip
    async with (
        served(agent.to_asgi()) as server,
        aiohttp.ClientSession() as http,
        http.post(f"{server.base}/api/chat", json=body) as response,
    ):
        assert response.status == 200
        assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
        datas = [data for _, data in parse_sse(await response.text())]
    assert datas[-1] == "[DONE]"
    parts = [json.loads(d) for d in datas[:-1]]
    assert parts[0]["type"] == "start"
    assert parts[-1]["type"] == "finish"
    assert any(p["type"] == "tool-output-available" and p["output"] for p in parts)


async def test_a_bad_ag_ui_body_is_a_400_request_invalid() -> None:
    agent, _ = adder()
    async with (
        served(agent.to_asgi()) as server,
        aiohttp.ClientSession() as http,
        http.post(f"{server.base}/agui", json={"messages": "no"}) as response,
    ):
        assert response.status == 400
        assert (await response.json())["error"]["code"] == "request_invalid"


async def test_the_page_is_served_at_the_root_and_its_files_under_static() -> None:
    agent, _ = adder()
    async with served(agent.to_asgi()) as server, aiohttp.ClientSession() as http:
        async with http.get(server.base + "/") as response:
            assert response.status == 200
            assert response.headers["content-type"].startswith("text/html")
            page = await response.text()
        async with http.get(server.base + "/static/index.html") as response:
            assert response.status == 200
            assert await response.text() == page


async def test_the_app_mounted_under_a_prefix_of_another_app_serves_runs_there() -> None:
    agent, _ = adder()
    parent = Starlette(routes=[Mount("/agent", agent.to_asgi())])
    async with served(parent, root="/agent") as server, aiohttp.ClientSession() as http:
        events = await run_events(http, server.base, {"prompt": "add"})
        async with http.get(server.base + "/") as response:
            assert response.status == 200
    assert events[-1]["result"]["stop_reason"] == "complete"


async def test_a_use_chat_conversation_is_kept_as_the_session_of_its_chat() -> None:
    agent, _ = adder(reply("Hello."), reply("Bye."))
    first = {"id": "chat/1", "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]}
    second = {"id": "chat/1", "messages": [
        *first["messages"],
        {"id": "a1", "role": "assistant", "parts": [{"type": "text", "text": "Hello."}]},
        {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "bye"}]},
    ]}  # fmt: skip
    async with served(agent.to_asgi()) as server, aiohttp.ClientSession() as http:
        for body in (first, second):
            async with http.post(f"{server.base}/api/chat", json=body) as response:
                await response.read()
        async with http.get(f"{server.base}/api/sessions") as response:
            sessions = (await response.json())["sessions"]
        async with http.get(f"{server.base}/api/sessions/{sessions[0]['id']}") as response:
            stored = await response.json()
    assert [s["id"] for s in sessions] == ["local-chat-chat-1"]
    assert [m["parts"][0]["text"] for m in stored["messages"]] == ["hi", "Hello.", "bye", "Bye."]
