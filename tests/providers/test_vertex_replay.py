"""Recorded Gemini traffic replayed through the Vertex AI provider: Vertex AI streams the same SSE of the same
JSON, so every cassette of ``tests/fixtures/wire/google/`` is served at Vertex AI's route for its model and
must decode as the recording reads, and every request must be the one recorded (see
``test_gemini_replay.py`` for the oracles, shared here)."""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.providers.test_gemini_replay import (
    CASSETTES,
    STREAMED,
    essentials,
    in_recorded_terms,
    is_streamed,
    model_of,
    recorded_turn,
    recorded_with_openapi_parameters,
    request_from,
)
from tests.providers.vertex_servers import fixed_credentials
from tests.wire import replay as wire
from tests.wire.events import collect, streamed
from tests.wire.replay import Cassette, Replayer, ReplayServer
from tether.errors import ProviderError
from tether.providers.http import RetryPolicy
from tether.providers.vertex import VertexProvider

replay = wire.replay
NO_RETRY = RetryPolicy(max_retries=0)
ROOT = "/v1/projects/replay-proj/locations/us-central1/publishers/google"


def at_vertex(name: str) -> Cassette:
    """The cassette with each request's path moved from the Gemini API's (``/v1beta/models/M:...``) to Vertex
    AI's (``/v1/projects/P/locations/L/publishers/google/models/M:...``), its query kept."""
    recorded = Cassette.load(name)

    def moved(uri: str) -> str:
        parts = urlsplit(uri)
        path = ROOT + "/models/" + parts.path.split("/models/", 1)[1]
        return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))

    return replace(recorded, interactions=tuple(replace(i, uri=moved(i.uri)) for i in recorded.interactions))


def provider(server: ReplayServer, *, stream: bool) -> VertexProvider:
    return VertexProvider(
        model_of(server.cassette.interactions[0]),
        project="replay-proj",
        location="us-central1",
        base_url=server.url,
        credentials=fixed_credentials("replay-token"),
        stream=stream,
        retry=NO_RETRY,
        json_schema_parameters=not recorded_with_openapi_parameters(server),
    )


@pytest.mark.parametrize("name", CASSETTES)
async def test_every_recorded_answer_decodes_and_every_request_is_sent_as_recorded(replay: Replayer, name: str) -> None:
    server = await replay.serve(at_vertex(name))
    for index, interaction in enumerate(server.cassette.interactions):
        recorded = interaction.request_body
        model = provider(server, stream=is_streamed(interaction))
        if interaction.status >= 400:
            with pytest.raises(ProviderError) as caught:
                await collect(model, request_from(recorded))
            assert (caught.value.code, caught.value.status) == ("bad_request", interaction.status)
            assert caught.value.provider_message == interaction.response_json()["error"]["message"]
        else:
            got = in_recorded_terms(streamed(await collect(model, request_from(recorded))))
            assert got == recorded_turn(interaction)
        sent = server.requests[index]
        assert sent.path.startswith(ROOT + "/models/")
        assert essentials(sent.body) == essentials(recorded)
        assert sent.headers["authorization"] == "Bearer replay-token"
        assert "x-goog-api-key" not in sent.headers
        assert sent.query == ("alt=sse" if is_streamed(interaction) else "")
    server.assert_all_served()


@pytest.mark.parametrize("name", STREAMED)
async def test_a_recorded_stream_sent_one_byte_at_a_time_decodes_the_same(replay: Replayer, name: str) -> None:
    server = await replay.serve(at_vertex(name), chunk_size=1)
    for interaction in server.cassette.interactions:
        events = await collect(provider(server, stream=True), request_from(interaction.request_body))
        assert in_recorded_terms(streamed(events)) == recorded_turn(interaction)
    server.assert_all_served()
