"""The replay server itself: it serves what was recorded, in order, and says so when a request was not."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import aiohttp
import pytest

from tests.wire.replay import (
    FIXTURES,
    UNEXPECTED_STATUS,
    Cassette,
    Interaction,
    ReplayServer,
    cassette_files,
    recorded_request_bodies,
    serve,
)

TOOL_ROUND_TRIP = "openai_chat/test_openai_instructions_with_tool_calls_keep_instructions.yaml"
STREAM = "openai_chat/test_dbos_agent_run_stream.yaml"


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def test_the_nth_request_to_a_path_gets_the_nth_interaction_recorded_for_it(
    client: aiohttp.ClientSession,
) -> None:
    cassette = Cassette.load(TOOL_ROUND_TRIP)
    async with serve(cassette) as server:
        answers = []
        for body in ({"n": 1}, {"n": 2}):
            async with client.post(server.base_url + "/chat/completions", json=body) as response:
                assert response.status == 200
                answers.append(await response.json())
        server.assert_all_served()
    recorded = [interaction.response_json() for interaction in cassette.interactions]
    assert answers == recorded
    assert answers[0]["choices"][0]["finish_reason"] == "tool_calls"
    assert answers[1]["choices"][0]["finish_reason"] == "stop"


async def test_every_request_is_recorded_with_its_method_path_query_headers_and_parsed_body(
    client: aiohttp.ClientSession,
) -> None:
    async with serve(STREAM) as server:
        url = server.base_url + "/chat/completions?beta=true"
        async with client.post(url, json={"model": "m"}, headers={"X-Probe": "1"}) as response:
            await response.read()
    (request,) = server.requests
    assert (request.method, request.path, request.query) == ("POST", "/v1/chat/completions", "beta=true")
    assert request.headers["x-probe"] == "1"
    assert request.headers["content-type"] == "application/json"
    assert request.body == {"model": "m"}
    assert json.loads(request.raw) == {"model": "m"}
    assert request.served == 0
    assert server.bodies == [{"model": "m"}]


async def test_an_event_stream_is_served_byte_for_byte_with_its_content_type_and_status(
    client: aiohttp.ClientSession,
) -> None:
    cassette = Cassette.load(STREAM)
    for chunk_size in (None, 3):
        async with (
            serve(cassette, chunk_size=chunk_size) as server,
            client.post(server.base_url + "/chat/completions", json={}) as response,
        ):
            body = await response.read()
            assert (response.status, response.reason) == (200, "OK")
            assert response.headers["Content-Type"] == "text/event-stream; charset=utf-8"
            assert response.headers.get("Transfer-Encoding") == "chunked"
        assert body == cassette.interactions[0].body
        assert body.startswith(b"data: {")
        assert body.endswith(b"data: [DONE]\n\n")


async def test_a_json_body_is_served_as_json_dumps_of_the_parsed_body_with_the_recorded_status(
    client: aiohttp.ClientSession,
) -> None:
    name = "openai_chat/test_model_name_suggestion[openai-chat].yaml"
    async with serve(name) as server, client.post(server.base_url + "/chat/completions", json={}) as response:
        assert (response.status, response.reason) == (404, "Not Found")
        assert response.headers["Content-Type"] == "application/json; charset=utf-8"
        text = await response.text()
    assert json.loads(text)["error"]["code"] == "model_not_found"
    assert text.encode() == Cassette.load(name).interactions[0].body


async def test_transfer_headers_are_dropped_and_the_others_kept(client: aiohttp.ClientSession) -> None:
    cassette = Cassette.load(TOOL_ROUND_TRIP)
    recorded_names = {name for name, _ in cassette.interactions[0].headers}
    assert "openai-processing-ms" in recorded_names
    assert not recorded_names & {"content-length", "transfer-encoding", "connection"}
    async with serve(cassette) as server, client.post(server.base_url + "/chat/completions", json={}) as response:
        await response.read()
        assert response.headers["openai-processing-ms"] == "490"
        # aiohttp sets the length of the body it actually sends, not the recorded one (1089)
        assert response.headers["Content-Length"] == str(len(cassette.interactions[0].body))
        assert "chunked" not in response.headers.get("Transfer-Encoding", "")


async def post_twice(client: aiohttp.ClientSession, server: ReplayServer) -> aiohttp.ClientResponse:
    for _ in range(2):
        async with client.post(server.base_url + "/chat/completions", json={}) as response:
            await response.read()
    return response


async def test_a_request_beyond_the_recording_gets_599_with_a_message_naming_it(
    client: aiohttp.ClientSession,
) -> None:
    server = ReplayServer(Cassette.load(STREAM))
    await server.start()
    try:
        response = await post_twice(client, server)
        assert response.status == UNEXPECTED_STATUS
        message = (await response.json())["error"]["message"]
    finally:
        await server.close()
    assert message == (
        "replay of test_dbos_agent_run_stream.yaml: unexpected request POST /v1/chat/completions: "
        "all 1 recorded for this path were used"
    )
    assert [request.served for request in server.requests] == [0, None]
    with pytest.raises(AssertionError, match=r"unexpected requests: POST /v1/chat/completions$"):
        server.check()


async def test_serve_fails_the_block_that_made_an_unexpected_request(client: aiohttp.ClientSession) -> None:
    async def one_too_many() -> None:
        async with serve(STREAM) as server:
            await post_twice(client, server)

    with pytest.raises(AssertionError, match=r"unexpected requests: POST /v1/chat/completions$"):
        await one_too_many()


async def test_a_path_the_cassette_does_not_have_gets_599_naming_method_and_path(
    client: aiohttp.ClientSession,
) -> None:
    server = ReplayServer(Cassette.load(STREAM))
    await server.start()
    try:
        async with client.get(server.base_url + "/models") as response:
            status, text = response.status, await response.text()
    finally:
        await server.close()
    assert status == UNEXPECTED_STATUS
    assert "unexpected request GET /v1/models: none is recorded for this path" in text
    assert server.unserved == [0]
    with pytest.raises(AssertionError, match=r"GET /v1/models"):
        server.assert_all_served()


@pytest.mark.parametrize(
    ("name", "base_path"),
    [
        (STREAM, "/v1"),
        ("openai_compatible/test_compatible_api_with_tool_calls_without_id.yaml", "/v1beta/openai"),
        ("openai_compatible/test_deepseek_model_thinking_stream.yaml", ""),
        ("openai_compatible/test_openrouter_errors_raised.yaml", "/api/v1"),
        ("openai_compatible/test_tool_use_failed_error.yaml", "/openai/v1"),
    ],
)
async def test_the_base_url_keeps_the_cassettes_path_prefix(name: str, base_path: str) -> None:
    async with serve(name) as server:
        assert server.base_url == f"http://127.0.0.1:{server.url.rsplit(':', 1)[1]}{base_path}"
        assert server.cassette.interactions[0].path == base_path + "/chat/completions"


def test_recorded_request_bodies_are_the_parsed_bodies_in_order() -> None:
    bodies = recorded_request_bodies(TOOL_ROUND_TRIP)
    assert [len(body["messages"]) for body in bodies] == [2, 4]
    assert bodies[1]["messages"][3] == {
        "content": "20.0",
        "role": "tool",
        "tool_call_id": "call_bhZkmIKKItNGJ41whHUHB7p9",
    }
    assert recorded_request_bodies(FIXTURES / TOOL_ROUND_TRIP) == bodies


def test_every_copied_cassette_loads_with_a_status_and_a_body_for_each_interaction() -> None:
    names = cassette_files("openai_chat") + cassette_files("openai_compatible")
    assert len(names) == 16
    for name in names:
        for interaction in Cassette.load(name).interactions:
            assert isinstance(interaction, Interaction)
            assert interaction.method == "POST"
            assert interaction.body, name
            assert isinstance(interaction.request_body, dict), name
            if interaction.is_event_stream:
                assert interaction.events_data()[-1] == "[DONE]", name
            else:
                interaction.response_json()


def test_the_copies_carry_the_licence_notice_and_say_what_they_are() -> None:
    readme = (FIXTURES / "README.md").read_text()
    assert "copies" in readme.split("\n\n", 1)[0].lower()
    assert "The MIT License (MIT) Copyright (c) Pydantic Services Inc. 2024 to present" in readme
