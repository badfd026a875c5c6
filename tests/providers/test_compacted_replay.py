"""Recorded histories with thinking signatures survive compaction: every provider accepts the compacted view.

Three recorded conversations (an Anthropic tool call with thinking, a Gemini 3 tool call with its thought
signature, a Responses tool call with encrypted reasoning) are replayed over loopback HTTP through our
providers and ``Agent`` (``tests/wire/replay.py``), which makes real transcripts of them. Then, for every
request the run made, and for the next prompt after it, a compaction marker is put at every valid cut point:
the model's view keeps every provider's rules (``wire_rules.py``), and each kept assistant message is sent to
its own provider exactly as it was sent in the recorded run, signatures included.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.providers.wire_rules import assert_every_provider_accepts, tools_for
from tests.wire import replay as wire
from tests.wire.events import run_agent
from tests.wire.replay import Replayer, ReplayServer
from tether import Agent
from tether.loop.context import shape_history
from tether.messages import CompactionInfo, Message, compaction_marker, model_view, transcript_problems
from tether.providers.anthropic import AnthropicProvider, assistant_blocks
from tether.providers.base import ModelSettings, Provider
from tether.providers.gemini import GeminiProvider, model_parts
from tether.providers.http import RetryPolicy
from tether.providers.openai_responses import OpenAIResponsesProvider, encode_assistant
from tether.tools.base import Tool, tool

replay = wire.replay

NO_RETRY = RetryPolicy(max_retries=0)


@tool
def get_user_country() -> str:
    """The user's country."""
    return "Mexico"


@tool
def get_country() -> str:
    """The user's country."""
    return "Mexico"


@tool
def update_plan(plan: str) -> str:
    """Record the plan."""
    return "plan updated"


@dataclass(frozen=True)
class Recording:
    """A recorded conversation and how our agent replays it."""

    cassette: str
    origin: str
    """Whose signatures the transcript carries."""
    wire: str
    """The provider of ``wire_rules.wires()`` that speaks for ``origin``."""
    provider: Callable[[ReplayServer], Provider]
    tools: list[Tool]
    settings: Callable[[dict[str, Any]], ModelSettings]
    """The run's settings, from the first recorded request body."""
    system: Callable[[dict[str, Any]], str | None]
    prompt: Callable[[dict[str, Any]], str]
    encode: Callable[[Message], Any]
    """One assistant message as its own provider encodes it."""
    contains: Callable[[dict[str, Any], Any], bool]
    """Whether a body sends that encoding."""


def _model(server: ReplayServer) -> str:
    return str(server.cassette.interactions[0].request_body["model"])


def _gemini_model(server: ReplayServer) -> str:
    return server.cassette.interactions[0].path.split("/models/", 1)[1].split(":", 1)[0]


def _has_run(items: list[Any], run: list[Any]) -> bool:
    return any(items[i : i + len(run)] == run for i in range(len(items) - len(run) + 1))


RECORDINGS = [
    Recording(
        "anthropic/test_anthropic_tool_with_thinking.yaml",
        "anthropic",
        "anthropic",
        lambda s: AnthropicProvider(_model(s), base_url=s.base_url, api_key="test-key", stream=False, retry=NO_RETRY),
        [get_user_country],
        lambda body: ModelSettings(extra={"thinking": body["thinking"]}),
        lambda body: None,
        lambda body: body["messages"][0]["content"][0]["text"],
        lambda message: {"role": "assistant", "content": assistant_blocks(message)},
        lambda body, encoded: encoded in body["messages"],
    ),
    Recording(
        "google/test_google_streaming_tool_call_thought_signature.yaml",
        "gemini",
        "gemini-3",
        lambda s: GeminiProvider(_gemini_model(s), base_url=s.base_url, api_key="test-key", retry=NO_RETRY),
        [get_country],
        lambda body: ModelSettings(),
        lambda body: None,
        lambda body: body["contents"][0]["parts"][0]["text"],
        lambda message: {"role": "model", "parts": model_parts(message)},
        lambda body, encoded: encoded in body["contents"],
    ),
    Recording(
        "openai_responses/test_openai_responses_thinking_with_tool_calls.yaml",
        "openai-responses",
        "openai-responses",
        lambda s: OpenAIResponsesProvider(
            _model(s), base_url=s.base_url, api_key="test-key", stream=False, retry=NO_RETRY
        ),
        [update_plan],
        lambda body: ModelSettings(extra={"reasoning": body["reasoning"]}),
        lambda body: body["instructions"],
        lambda body: body["input"][0]["content"],
        lambda message: encode_assistant(message.parts),
        lambda body, encoded: _has_run(body["input"], encoded),
    ),
]


@dataclass(frozen=True)
class Replayed:
    """A recorded conversation as our agent ran it."""

    recording: Recording
    transcript: list[Message]
    settings: ModelSettings
    sent: list[dict[str, Any]]
    """The request bodies our provider sent to the replay server in the run."""


async def replayed(replay: Replayer, recording: Recording) -> Replayed:
    server = await replay.serve(recording.cassette)
    first = server.cassette.interactions[0].request_body
    settings = recording.settings(first)
    agent = Agent(recording.provider(server), tools=recording.tools, system=recording.system(first), settings=settings)
    _, result = await run_agent(agent, recording.prompt(first))
    server.assert_all_served()
    signed = [m for m in result.messages if m.role == "assistant" and _signatures(m, recording.origin)]
    assert signed, "the recording must give the transcript signed assistant messages"
    return Replayed(recording, list(result.messages), settings, list(server.bodies))


def _signatures(message: Message, origin: str) -> list[str]:
    """The signatures of ``origin`` an assistant message carries."""
    found = []
    for part in message.parts:
        data = getattr(part, "provider_data", None) or {}
        if data.get("origin") != origin:
            continue
        found += [s for s in (getattr(part, "signature", None), data.get("thoughtSignature")) if s]
    return found


def requests_of(transcript: list[Message]) -> list[list[Message]]:
    """Each request the run made (the transcript up to each point where the model was asked), and the next
    prompt's request after the run."""
    asked = [transcript[: i + 1] for i, message in enumerate(transcript) if message.role in ("user", "tool")]
    return [*asked, [*transcript, Message.user("And the second largest?")]]


def compactions_of(messages: list[Message]) -> list[list[Message]]:
    """``messages`` with a compaction marker at each valid cut point in turn (before a user or assistant
    message), the tool results it kept trimmed to references."""
    out = []
    for at, message in enumerate(messages):
        if message.role not in ("user", "assistant"):
            continue
        kept = messages[at:]
        trimmed = {r.call_id: f"[output of {r.name} kept by reference]" for m in kept for r in m.tool_results}
        info = CompactionInfo(len(kept), summarized=at, tokens_before=5_000, tokens_after=600, trimmed=trimmed)
        out.append([*messages[:at], compaction_marker("The user asked about their country.", info), *kept])
    return out


def _split(view: tuple[Message, ...]) -> tuple[str | None, list[Message]]:
    if view and view[0].role == "system":
        return view[0].text, list(view[1:])
    return None, list(view)


@pytest.mark.parametrize("recording", RECORDINGS, ids=[r.origin for r in RECORDINGS])
async def test_every_compaction_of_a_recorded_history_with_signatures_is_accepted(
    replay: Replayer, recording: Recording
) -> None:
    run = await replayed(replay, recording)
    checked = 0
    for request in requests_of(run.transcript):
        for compacted in compactions_of(request):
            assert transcript_problems(compacted) == []
            system, view = _split(model_view(compacted))
            built = assert_every_provider_accepts(system, view, tools_for(request), settings=run.settings)
            for message in view:
                if message.role == "assistant":
                    encoded = recording.encode(message)
                    assert recording.contains(built[recording.wire], encoded), message
                    checked += len(_signatures(message, recording.origin))
    assert checked > 0


@pytest.mark.parametrize("recording", RECORDINGS, ids=[r.origin for r in RECORDINGS])
async def test_a_kept_assistant_message_is_sent_as_it_was_in_the_recorded_run(
    replay: Replayer, recording: Recording
) -> None:
    run = await replayed(replay, recording)
    *_, last_request = [r for r in requests_of(run.transcript) if r[-1].role == "tool"]
    calling = next(m for m in reversed(last_request) if m.role == "assistant")
    encoded = recording.encode(calling)
    assert recording.contains(run.sent[-1], encoded)  # what the replayed API received in the run
    at = last_request.index(calling)
    compacted = compactions_of(last_request)
    cut_before_calling = next(c for c in compacted if c[at + 1] is calling and c[at].role == "user")
    system, view = _split(model_view(cut_before_calling))
    built = assert_every_provider_accepts(system, view, tools_for(last_request), settings=run.settings)
    assert recording.contains(built[recording.wire], encoded)


@pytest.mark.parametrize("recording", RECORDINGS, ids=[r.origin for r in RECORDINGS])
@pytest.mark.parametrize("max_messages", [1, 2, 3])
async def test_recorded_histories_shaped_to_max_history_messages_are_accepted(
    replay: Replayer, recording: Recording, max_messages: int
) -> None:
    run = await replayed(replay, recording)
    for request in requests_of(run.transcript):
        system, body = _split(tuple(request))
        shaped = shape_history(body, max_messages)
        assert_every_provider_accepts(system, shaped, tools_for(request), settings=run.settings)
