"""Approvals over HTTP: a served run that pauses for a person, its pending calls shown, its decisions posted to
``POST /api/runs/{run_id}/decisions`` and the resumed run streamed; all through uvicorn on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
from starlette.requests import Request

from tether import Agent, tool
from tether.messages import ToolResult
from tether.providers.scripted import ScriptedProvider, call, reply
from tether.sessions.sqlite import SQLiteSessionStore

from .served import json_events, run_events, served

RAN: list[str] = []


@tool(approval=True)
def wire(amount: int, api_key: str) -> str:
    """Wire money (needs a person's approval)."""
    RAN.append(f"wire {amount}")
    return f"wired {amount}"


@tool(external=True)
def pick_color(question: str) -> str:
    """Ask the person in the browser to pick a color."""
    raise AssertionError("an external tool's body never runs")


def paying_agent(store: Any = None) -> Agent[Any, Any]:
    """Asks to wire 10 (paused for approval), then answers."""
    model = ScriptedProvider(
        [call("wire", {"amount": 10, "api_key": "sk-live-0123456789abcdef"}, id="call_w"), reply("Done.")]
    )
    return Agent(model, tools=[wire], store=store)


def by_token(request: Request) -> str | None:
    return {"Bearer token-of-ann-1": "ann", "Bearer token-of-bob-1": "bob"}.get(
        request.headers.get("authorization", "")
    )


ANN = {"authorization": "Bearer token-of-ann-1"}
BOB = {"authorization": "Bearer token-of-bob-1"}


async def decide(
    http: aiohttp.ClientSession, base: str, run_id: str, body: Any, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    """``POST /api/runs/{run_id}/decisions``: its status, and its events (200) or its JSON error."""
    async with http.post(f"{base}/api/runs/{run_id}/decisions", json=body, headers=headers or {}) as response:
        text = await response.text()
        if response.status == 200:
            assert response.headers["content-type"].startswith("text/event-stream")
            return 200, json_events(text)
        return response.status, (await response.json()) if text else None


async def test_a_paused_run_shows_its_pending_call_and_resumes_with_an_approval() -> None:
    RAN.clear()
    agent = paying_agent()
    async with served(agent.to_asgi()) as server, aiohttp.ClientSession() as http:
        async with http.get(server.base + "/api/info") as info:
            assert (await info.json())["approvals"] is True
        events = await run_events(http, server.base, {"prompt": "pay"})
        result = events[-1]["result"]
        assert result["stop_reason"] == "paused"
        [pending] = result["pending"]
        assert (pending["id"], pending["tool"], pending["kind"]) == ("call_w", "wire", "approval")
        assert "sk-live-0123456789abcdef" not in str(pending), "the pending call's arguments are masked"
        assert pending["arguments"]["amount"] == 10
        assert RAN == [], "nothing ran before the approval"
        run_id, session_id = events[0]["run_id"], events[0]["session_id"]
        async with http.get(f"{server.base}/api/runs/{run_id}") as got:
            assert [p["id"] for p in (await got.json())["pending"]] == ["call_w"]
        async with http.get(f"{server.base}/api/sessions/{session_id}") as got:
            assert (await got.json())["paused"]["pending"][0]["id"] == "call_w"

        status, resumed = await decide(
            http, server.base, run_id, {"call_w": {"decision": "approve", "digest": pending["digest"]}}
        )
        assert status == 200, resumed
        kinds = [e["kind"] for e in resumed]
        assert kinds[0] == "run_started"
        assert resumed[0]["run_id"] == run_id
        assert resumed[0]["session_id"] == session_id
        assert "tool_result_received" in kinds
        assert resumed[-1]["result"]["stop_reason"] == "complete"
        assert resumed[-1]["result"]["text"] == "Done."
        assert resumed[-1]["result"]["pending"] == []
        assert RAN == ["wire 10"], "the approved tool ran once"
        async with http.get(f"{server.base}/api/sessions/{session_id}") as got:
            assert (await got.json())["paused"] is None

        status, again = await decide(http, server.base, run_id, {"call_w": {"decision": "approve"}})
        assert status == 409
        assert again["error"]["code"] == "run_not_paused"
    assert RAN == ["wire 10"], "a second answer to the same pause ran nothing"


async def test_a_rejection_reason_reaches_the_model_and_the_tool_never_runs() -> None:
    RAN.clear()
    agent = paying_agent()
    async with served(agent.to_asgi()) as server, aiohttp.ClientSession() as http:
        run_id = (await run_events(http, server.base, {"prompt": "pay"}))[0]["run_id"]
        status, resumed = await decide(
            http, server.base, run_id, {"call_w": {"decision": "reject", "reason": "too much this month"}}
        )
        assert status == 200
        assert resumed[-1]["result"]["stop_reason"] == "complete"
    assert RAN == []
    model = agent.provider
    assert isinstance(model, ScriptedProvider)
    answered = [p for m in model.requests[-1].messages for p in m.parts if isinstance(p, ToolResult)]
    assert [(r.content, r.code) for r in answered] == [("too much this month", "permission_denied")]


async def test_an_external_call_takes_its_result_from_the_decision() -> None:
    model = ScriptedProvider([call("pick_color", {"question": "which?"}, id="call_c"), reply("Blue it is.")])
    agent = Agent(model, tools=[pick_color])
    async with served(agent.to_asgi()) as server, aiohttp.ClientSession() as http:
        events = await run_events(http, server.base, {"prompt": "choose"})
        [pending] = events[-1]["result"]["pending"]
        assert pending["kind"] == "external"
        body = {"call_c": {"decision": "external_result", "content": {"color": "blue"}}}
        status, resumed = await decide(http, server.base, events[0]["run_id"], body)
        assert status == 200
        assert resumed[-1]["result"]["text"] == "Blue it is."
    answered = [p for m in model.requests[-1].messages for p in m.parts if isinstance(p, ToolResult)]
    assert len(answered) == 1
    assert "blue" in str(answered[0].content)


async def test_a_bad_decision_is_400_and_runs_nothing_and_the_pause_stays() -> None:
    RAN.clear()
    async with served(paying_agent().to_asgi()) as server, aiohttp.ClientSession() as http:
        run_id = (await run_events(http, server.base, {"prompt": "pay"}))[0]["run_id"]
        wrong = {"call_w": {"decision": "approve", "digest": "0" * 64}}
        status, error = await decide(http, server.base, run_id, wrong)
        assert status == 400
        assert error["error"]["code"] == "decision_invalid"
        assert error["error"]["details"]["calls"] == ["call_w"]
        status, error = await decide(http, server.base, run_id, {"call_x": {"decision": "approve"}})
        assert status == 400
        assert set(error["error"]["details"]["calls"]) == {"call_x", "call_w"}
        status, error = await decide(http, server.base, run_id, {"call_w": {"decision": "maybe"}})
        assert status == 400
        assert error["error"]["code"] == "request_invalid"
        assert RAN == []
        status, resumed = await decide(http, server.base, run_id, {"call_w": {"decision": "approve"}})
        assert status == 200
        assert resumed[-1]["result"]["stop_reason"] == "complete"
    assert RAN == ["wire 10"]


async def test_another_tokens_paused_run_is_404_and_a_run_not_paused_409() -> None:
    RAN.clear()
    agent = paying_agent()
    async with served(agent.to_asgi(authenticate=by_token)) as server, aiohttp.ClientSession() as http:
        run_id = (await run_events(http, server.base, {"prompt": "pay"}, ANN))[0]["run_id"]
        status, error = await decide(http, server.base, run_id, {"call_w": {"decision": "approve"}}, BOB)
        assert status == 404
        assert error["error"]["code"] == "not_found"
        assert RAN == []
        status, _ = await decide(http, server.base, run_id, {"call_w": {"decision": "approve"}}, ANN)
        assert status == 200
        finished = (await run_events(http, server.base, {"prompt": "hello"}, ANN))[0]["run_id"]
        status, error = await decide(http, server.base, finished, {"call_w": {"decision": "approve"}}, ANN)
        assert status == 409
        assert error["error"]["code"] == "run_not_paused"
        status, error = await decide(http, server.base, "no-such-run", {"call_w": {"decision": "approve"}}, ANN)
        assert status == 404
    assert RAN == ["wire 10"]


async def test_a_server_started_again_resumes_the_paused_run_from_its_session(tmp_path: Path) -> None:
    RAN.clear()
    database = tmp_path / "sessions.db"
    async with served(paying_agent(SQLiteSessionStore(database)).to_asgi()) as first, aiohttp.ClientSession() as http:
        events = await run_events(http, first.base, {"prompt": "pay"})
        run_id, session_id = events[0]["run_id"], events[0]["session_id"]
        assert events[-1]["result"]["stop_reason"] == "paused"
    again = Agent(
        ScriptedProvider([reply("Done after the restart.")]), tools=[wire], store=SQLiteSessionStore(database)
    )
    async with served(again.to_asgi()) as second, aiohttp.ClientSession() as http:
        status, resumed = await decide(http, second.base, run_id, {"call_w": {"decision": "approve"}})
        assert status == 200, resumed
        assert resumed[0]["run_id"] == run_id
        assert resumed[0]["session_id"] == session_id
        assert resumed[-1]["result"]["text"] == "Done after the restart."
        async with http.get(f"{second.base}/api/runs/{run_id}") as got:
            assert (await got.json())["stop_reason"] == "complete"
    assert RAN == ["wire 10"]


async def test_a_durable_run_paused_is_decided_through_its_workflow_and_its_rest_streams(tmp_path: Path) -> None:
    from tether.durable import DurableAgent, launch, shutdown

    RAN.clear()
    durable = DurableAgent(paying_agent(SQLiteSessionStore(tmp_path / "sessions.db")), name="payer")
    launch(tmp_path / "runs.sqlite")
    try:
        async with served(durable.to_asgi()) as server, aiohttp.ClientSession() as http:
            events = await run_events(http, server.base, {"prompt": "pay"})
            assert events[-1]["result"]["stop_reason"] == "paused", "the page's stream ends at the pause"
            run_id = events[0]["run_id"]
            async with http.get(f"{server.base}/api/runs/{run_id}") as got:
                shown = await got.json()
            assert shown["status"] == "paused"
            assert [p["id"] for p in shown["pending"]] == ["call_w"]
            status, error = await decide(http, server.base, run_id, {"call_x": {"decision": "approve"}})
            assert status == 400
            assert error["error"]["code"] == "decision_invalid"
            assert RAN == []
            status, resumed = await decide(http, server.base, run_id, {"call_w": {"decision": "approve"}})
            assert status == 200, resumed
            assert resumed[-1]["result"]["stop_reason"] == "complete"
            assert resumed[-1]["result"]["text"] == "Done."
            status, again = await decide(http, server.base, run_id, {"call_w": {"decision": "approve"}})
            assert status == 409
            assert again["error"]["code"] == "run_not_paused"
    finally:
        shutdown()
    assert RAN == ["wire 10"]


async def test_a_durable_run_paused_outlives_its_server_and_another_server_decides_it(tmp_path: Path) -> None:
    """The server that streamed the pause stops; the run is not cancelled: it waits in its database. A new
    server of the same durable agent takes its decisions (202: the run goes on where its workflow runs)."""
    from tether.durable import DurableAgent, launch, shutdown

    RAN.clear()
    durable = DurableAgent(paying_agent(SQLiteSessionStore(tmp_path / "sessions.db")), name="payer2")
    launch(tmp_path / "runs.sqlite")
    try:
        async with served(durable.to_asgi()) as first, aiohttp.ClientSession() as http:
            events = await run_events(http, first.base, {"prompt": "pay"})
            run_id = events[0]["run_id"]
            assert events[-1]["result"]["stop_reason"] == "paused"
        assert (await durable.pending(run_id)) is not None, "still waiting after its server stopped"
        async with served(durable.to_asgi()) as second, aiohttp.ClientSession() as http:
            async with http.post(
                f"{second.base}/api/runs/{run_id}/decisions", json={"call_w": {"decision": "approve"}}
            ) as response:
                assert response.status == 202
                assert (await response.json()) == {"run_id": run_id, "decided": ["call_w"]}
            result = await durable.result(run_id)
        assert result.text == "Done."
    finally:
        shutdown()
    assert RAN == ["wire 10"]
