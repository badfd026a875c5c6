"""Recovery from a provider's ``context_overflow`` answer, over real HTTP on loopback, for every wire protocol.

A session runs against one replay server (``tests/wire/replay.py``) with OpenAI Chat, OpenAI Responses,
Anthropic and Gemini in turn. Its first run gets an answer; in its second run the model calls a tool, and the
request that carries the tool's result is refused as too long for the model's window. The loop must then make
one summary call with tools off, retry the turn from a history that opens with the summary and keeps the last
exchange verbatim (thinking signatures included), and complete; a second refusal stops the run with
``context_overflow``; a last exchange that cannot fit at all stops it before anything that big is sent.
Every test asserts on the bodies the server received.

What the server answers:

* **recordings** (``tests/fixtures/wire``, named in each :class:`Case`): the first run's answer, the tool call
  (signed where the recording had thinking), the text served as the summary (a recorded text answer of the
  same API; what it says does not matter, only that it is what the retry opens with), and the final answer;
* **documented forms**, not recordings (the fixtures hold no recorded overflow): the HTTP 400 bodies of the
  overflow, as each API documents and returns them:

  - OpenAI Chat: ``{"error": {"message": "This model's maximum context length is N tokens. However, your
    messages resulted in M tokens. Please reduce the length of the messages.", "type": "invalid_request_error",
    "param": "messages", "code": "context_length_exceeded"}}``;
  - OpenAI Responses: ``{"error": {"message": "Your input exceeds the context window of this model. Please
    adjust your input and try again.", "type": "invalid_request_error", "param": "input", "code":
    "context_length_exceeded"}}`` (no size stated: the loop learns the window from what it sent);
  - Anthropic: ``{"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long:
    M tokens > N maximum"}, "request_id": ...}``;
  - Gemini: ``{"error": {"code": 400, "message": "The input token count (M) exceeds the maximum number of
    tokens allowed (N).", "status": "INVALID_ARGUMENT"}}``.

The window an error states is below the size of the conversation the loop sent, as a real refusal's is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from tests.wire import replay as wire
from tests.wire.replay import Cassette, Interaction, Replayer, ReplayServer
from tether import Agent, Compaction
from tether.errors import ContextOverflow
from tether.events import CallFailed, Compacted, RunCompleted, RunEvent, RunResult, TurnCompleted, TurnStarted
from tether.loop.context import COMPACTION_REQUEST, dropped_summary
from tether.messages import SUMMARY_HEADER, Message, compaction_of, transcript_problems
from tether.providers.anthropic import AnthropicProvider
from tether.providers.base import ModelSettings, Provider
from tether.providers.gemini import GeminiProvider
from tether.providers.http import RetryPolicy
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.openai_responses import OpenAIResponsesProvider
from tether.sessions import SQLiteSessionStore
from tether.tools.base import Tool, tool

replay = wire.replay
"""The replay fixture (assigned, not imported, so that ruff does not read the test parameters as redefinitions)."""

NO_RETRY = RetryPolicy(max_retries=0)
"""Each request is answered once: a retry would take the next interaction."""
SESSION = "long-session"


# --- the tools the recorded calls name ----------------------------------------------------------------------

LOG = "\n".join(f"source {n:02d}: consulted, consistent with the answer above" for n in range(40))
"""What each tool adds to its answer in a session that overflows: the output that fills the window."""


def tools(extra: str) -> dict[str, Tool]:
    """The tools the recorded calls name, by name; each gives the recorded answer's fact, then ``extra``."""

    @tool
    def get_user_country() -> str:
        """The user's country."""
        return "Mexico\n" + extra

    @tool
    def get_temperature(city: str) -> str:
        """The temperature in a city, in degrees Celsius."""
        return "20.0\n" + extra

    @tool
    def get_weather_in_city(city: str) -> str:
        """The weather in a city."""
        return "sunny\n" + extra

    @tool
    def update_plan(plan: str) -> str:
        """Record the current plan."""
        return "plan updated\n" + extra

    @tool
    def get_capital(country: str) -> str:
        """Get the capital of a country."""
        return "Paris\n" + extra

    return {t.name: t for t in (get_user_country, get_temperature, get_weather_in_city, update_plan, get_capital)}


# --- the cases ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Recorded:
    """One recorded interaction: a cassette of ``tests/fixtures/wire`` and the index of the answer in it."""

    cassette: str
    index: int

    def interaction(self) -> Interaction:
        return Cassette.load(self.cassette).interactions[self.index]


@dataclass(frozen=True, slots=True)
class Case:
    """One wire protocol: its provider, the recordings a session is answered with, and how its bodies read."""

    name: str
    provider: Callable[[str], Provider]
    """The provider, from the replay server's base URL."""
    system: str | None
    settings: ModelSettings
    tools: tuple[str, ...]
    """The names of the tools the recorded calls call (:func:`tools`)."""
    earlier: tuple[tuple[str, tuple[Recorded, ...]], ...]
    """The session's earlier runs: each prompt and the answers it gets."""
    prompt: str
    call: Recorded
    """The last run's first answer: a call of one of ``tools``."""
    summary: Recorded
    """A recorded text answer, served as the summary."""
    final: Recorded
    """The answer to the tool's result, served to the retried request."""
    final_text: str
    """How the final answer begins."""
    window: int
    """The window the overflow error states: between the sizes of the request answered with the call and of
    the one that sends the tool's result, at four bytes a token."""
    overflow: Callable[[int], dict[str, Any]]
    """The documented body of the API's context-length error (HTTP 400), for a window."""
    conversation: Callable[[dict[str, Any]], list[Any]]
    """The conversation items of a request body (without the system prompt)."""
    tools_off: Callable[[dict[str, Any]], bool]
    """Whether a request body forbids tool calls, as the API spells it."""
    signature: Callable[[dict[str, Any]], str | None]
    """The signature of the thinking in the recorded call (its answer's body), if the recording has one."""


def openai_error(window: int) -> dict[str, Any]:
    message = (
        f"This model's maximum context length is {window} tokens. However, your messages resulted in "
        f"{window + 210} tokens. Please reduce the length of the messages."
    )
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


def responses_error(window: int) -> dict[str, Any]:
    message = "Your input exceeds the context window of this model. Please adjust your input and try again."
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "input",
            "code": "context_length_exceeded",
        }
    }


def anthropic_error(window: int) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": f"prompt is too long: {window + 210} tokens > {window} maximum",
        },
        "request_id": "req_011CUWu7a8bGeMSvA9d7DRLa",
    }


def gemini_error(window: int) -> dict[str, Any]:
    message = f"The input token count ({window + 210}) exceeds the maximum number of tokens allowed ({window})."
    return {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}


def chat_provider(base_url: str) -> Provider:
    return OpenAIChatProvider("gpt-4.1-mini", base_url=base_url, api_key="test-key", stream=True, retry=NO_RETRY)


def responses_provider(base_url: str) -> Provider:
    return OpenAIResponsesProvider("gpt-5", base_url=base_url, api_key="test-key", stream=False, retry=NO_RETRY)


def anthropic_provider(base_url: str) -> Provider:
    return AnthropicProvider(
        "claude-sonnet-4-0", base_url=base_url, api_key="test-key", stream=False, retry=NO_RETRY, prompt_cache="off"
    )


def gemini_provider(base_url: str) -> Provider:
    return GeminiProvider("gemini-2.5-pro", base_url=base_url, api_key="test-key", stream=False, retry=NO_RETRY)


def first_part(body: dict[str, Any], key: str, kind: str, field: str) -> str | None:
    """``field`` of the first output item or content block of type ``kind`` in a recorded answer."""
    return next((item[field] for item in body[key] if item.get("type") == kind), None)


RESPONSES_CALL = "openai_responses/test_openai_responses_thinking_with_tool_calls.yaml"
RESPONSES_FIRST = Cassette.load(RESPONSES_CALL).interactions[0].request_body

RESPONSES_THINKING = "openai_responses/test_openai_responses_model_thinking_part.yaml"
ANTHROPIC_THINKING = "anthropic/test_anthropic_model_thinking_part.yaml"
GEMINI_THINKING = "google/test_google_model_thinking_part.yaml"
CHAT_WEATHER = "openai_chat/test_dbos_agent_with_model_retry.yaml"
CHAT_CALL = "openai_chat/test_openai_instructions_with_tool_calls_keep_instructions.yaml"
RIVER = "Considering the way to cross the street, analogously, how do I cross the river?"

CASES = [
    Case(
        name="openai_chat",
        provider=chat_provider,
        system="You are a helpful assistant.",
        settings=ModelSettings(),
        tools=("get_weather_in_city", "get_temperature"),
        earlier=(("What is the weather in CDMX?", tuple(Recorded(CHAT_WEATHER, n) for n in range(3))),),
        prompt="What is the temperature in Tokyo?",
        call=Recorded(CHAT_CALL, 0),
        summary=Recorded("openai_chat/test_openai_instructions.yaml", 0),
        final=Recorded(CHAT_CALL, 1),
        final_text="The temperature in Tokyo is currently 20.0 degrees Celsius.",
        window=1_800,
        overflow=openai_error,
        conversation=lambda body: [m for m in body["messages"] if m["role"] != "system"],
        tools_off=lambda body: body.get("tool_choice") == "none",
        signature=lambda answer: None,
    ),
    Case(
        name="openai_responses",
        provider=responses_provider,
        system=RESPONSES_FIRST["instructions"],
        settings=ModelSettings(extra={"reasoning": {"effort": "low", "summary": "detailed"}}),
        tools=("update_plan",),
        earlier=(("How do I cross the street?", (Recorded(RESPONSES_THINKING, 0),)),),
        prompt=RESPONSES_FIRST["input"][0]["content"],
        call=Recorded(RESPONSES_CALL, 0),
        summary=Recorded("openai_responses/test_openai_responses_model_simple_response.yaml", 0),
        final=Recorded(RESPONSES_CALL, 1),
        final_text="Softly old fountains illumine alleys",
        window=6_000,
        overflow=responses_error,
        conversation=lambda body: body["input"],
        tools_off=lambda body: body.get("tool_choice") == "none",
        signature=lambda answer: first_part(answer, "output", "reasoning", "encrypted_content"),
    ),
    Case(
        name="anthropic",
        provider=anthropic_provider,
        system=None,
        settings=ModelSettings(extra={"thinking": {"type": "enabled", "budget_tokens": 1024}}),
        tools=("get_user_country",),
        earlier=(
            ("How do I cross the street?", (Recorded(ANTHROPIC_THINKING, 0),)),
            (RIVER, (Recorded(ANTHROPIC_THINKING, 1),)),
        ),
        prompt="What is the largest city in the user country?",
        call=Recorded("anthropic/test_anthropic_tool_with_thinking.yaml", 0),
        summary=Recorded("anthropic/test_anthropic_model_instructions.yaml", 0),
        final=Recorded("anthropic/test_anthropic_tool_with_thinking.yaml", 1),
        final_text="Based on the information that you're from Mexico",
        window=2_000,
        overflow=anthropic_error,
        conversation=lambda body: body["messages"],
        tools_off=lambda body: body.get("tool_choice") == {"type": "none"},
        signature=lambda answer: first_part(answer, "content", "thinking", "signature"),
    ),
    Case(
        name="gemini",
        provider=gemini_provider,
        system="You are a helpful chatbot.",
        settings=ModelSettings(extra={"generationConfig": {"thinkingConfig": {"includeThoughts": True}}}),
        tools=("get_capital",),
        earlier=(
            ("How do I cross the street?", (Recorded(GEMINI_THINKING, 0),)),
            (RIVER, (Recorded(GEMINI_THINKING, 1),)),
        ),
        prompt="What is the capital of France?",
        call=Recorded("google/test_google_model_retry.yaml", 0),
        summary=Recorded("google/test_google_model.yaml", 0),
        final=Recorded("google/test_google_model_retry.yaml", 2),
        final_text="Paris",
        window=6_400,
        overflow=gemini_error,
        conversation=lambda body: body["contents"],
        tools_off=lambda body: body.get("toolConfig", {}).get("functionCallingConfig") == {"mode": "NONE"},
        signature=lambda answer: answer["candidates"][0]["content"]["parts"][0].get("thoughtSignature"),
    ),
]


# --- serving and running ------------------------------------------------------------------------------------

OVERFLOW = "overflow"
"""In a list of answers: the case's documented overflow error."""


def overflow_interaction(case: Case) -> Interaction:
    body = json.dumps(case.overflow(case.window)).encode()
    return Interaction("POST", "", None, 400, "Bad Request", (("content-type", "application/json"),), body)


async def serve(replay: Replayer, case: Case, answers: Sequence[Recorded | str]) -> ReplayServer:
    """A server answering, in order, with ``answers`` (recordings, or the overflow), all on the path of the
    case's recorded call (a Gemini model's path names it: recordings of other models are served there too)."""
    uri = case.call.interaction().uri
    interactions = tuple(
        replace(answer.interaction() if isinstance(answer, Recorded) else overflow_interaction(case), uri=uri)
        for answer in answers
    )
    return await replay.serve(Cassette(f"{case.name}-overflow", interactions))


def earlier_answers(case: Case) -> list[Recorded]:
    return [answer for _, answers in case.earlier for answer in answers]


def agent_for(case: Case, server: ReplayServer, store: SQLiteSessionStore, extra: str = LOG, **options: Any) -> Agent:
    return Agent(
        case.provider(server.base_url),
        tools=[tools(extra)[name] for name in case.tools],
        system=case.system,
        settings=case.settings,
        store=store,
        **options,
    )


async def run(agent: Agent, prompt: str) -> tuple[list[RunEvent], RunResult]:
    events = [event async for event in agent.stream(prompt, session=SESSION)]
    last = events[-1]
    assert isinstance(last, RunCompleted)
    return events, last.result


async def run_earlier(agent: Agent, case: Case) -> None:
    for prompt, _ in case.earlier:
        _, result = await run(agent, prompt)
        assert result.stop_reason == "complete", result.detail


def kinds(events: list[RunEvent]) -> list[str]:
    """The run's events in short: deltas left out, a turn's attempt shown when it is a retry."""
    lines = []
    for event in events:
        if isinstance(event, TurnStarted):
            lines.append(f"turn_started({event.turn}{f', attempt {event.attempt}' if event.attempt > 1 else ''})")
        elif isinstance(event, TurnCompleted):
            lines.append(f"turn_completed({event.turn}{', rejected' if event.rejected else ''})")
        elif isinstance(event, Compacted):
            lines.append(f"compacted({event.reason})")
        elif isinstance(event, CallFailed):
            lines.append(f"call_failed({event.code} -> {event.then})")
        elif event.kind not in ("text_delta", "thinking_delta", "thinking_started", "thinking_ended"):
            lines.append(event.kind)
    return lines


def texts(item: dict[str, Any]) -> list[str]:
    """The texts of a user item of any of the four APIs (its text blocks or parts)."""
    content = item.get("content", item.get("parts")) or []
    if isinstance(content, str):
        return [content]
    return [str(part["text"]) for part in content if "text" in part]


def answer_text(interaction: Interaction) -> str:
    """The text of a recorded whole answer of any of the four APIs."""
    body = interaction.response_json()
    if "choices" in body:
        return str(body["choices"][0]["message"]["content"] or "")
    if "candidates" in body:
        return "".join(part.get("text", "") for part in body["candidates"][0]["content"]["parts"])
    if "output" in body:
        return "".join(c["text"] for item in body["output"] if item["type"] == "message" for c in item["content"])
    return "".join(block["text"] for block in body["content"] if block["type"] == "text")


def common_tail(refused: list[Any], retried: list[Any]) -> int:
    """How many items two requests end with in common."""
    kept = 0
    while kept < min(len(refused), len(retried)) and refused[-kept - 1] == retried[-kept - 1]:
        kept += 1
    return kept


def size(items: list[Any]) -> int:
    return len(json.dumps(items))


def body_of(messages: Sequence[Message]) -> Sequence[Message]:
    return messages[1:] if messages and messages[0].role == "system" else messages


PARAMETRIZE = pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)


# --- recovery -----------------------------------------------------------------------------------------------


@PARAMETRIZE
async def test_an_overflow_answer_is_summarized_tools_off_and_the_turn_retried_from_the_summary(
    replay: Replayer, case: Case, tmp_path: Path
) -> None:
    answers: list[Recorded | str] = [*earlier_answers(case), case.call, OVERFLOW, case.summary, case.final]
    server = await serve(replay, case, answers)
    store = SQLiteSessionStore(tmp_path / "sessions.db")
    agent = agent_for(case, server, store)
    await run_earlier(agent, case)
    events, result = await run(agent, case.prompt)

    assert result.stop_reason == "complete", result.detail
    assert result.text.startswith(case.final_text)
    assert kinds(events) == [
        "run_started",
        "turn_started(1)",
        "turn_completed(1)",
        "tool_call_started",
        "tool_result_received",
        "turn_started(2)",
        "turn_completed(2, rejected)",
        "call_failed(context_overflow -> compact)",
        "compacted(overflow)",
        "turn_started(2, attempt 2)",
        "turn_completed(2)",
        "run_completed",
    ]
    server.assert_all_served()
    refused, summary, retried = server.bodies[-3:]
    assert len(server.requests[-4].raw) < 4 * case.window < len(server.requests[-3].raw)
    refused_items, summary_items, retried_items = (case.conversation(b) for b in (refused, summary, retried))

    # one summary call, tools off, of the part before the exchange kept, with tether's request at its end
    assert case.tools_off(summary)
    assert not case.tools_off(retried)
    assert texts(summary_items[-1])[-1].endswith(COMPACTION_REQUEST)
    kept = common_tail(refused_items, retried_items)
    assert kept >= 2, "the last exchange (the call and its result) is kept verbatim"
    summarized = len(refused_items) - kept
    assert summary_items[: summarized - 1] == refused_items[: summarized - 1]
    assert not any(item in summary_items for item in refused_items[-kept:])

    # the retry opens with the summary, then the last exchange verbatim, and is smaller
    assert texts(retried_items[0])[0].startswith(SUMMARY_HEADER + answer_text(case.summary.interaction()))
    assert retried_items[1:] == refused_items[-kept:]
    assert size(retried_items) < size(refused_items)
    if (signature := case.signature(case.call.interaction().response_json())) is not None:
        assert signature in json.dumps(retried_items[-kept:])  # signed thinking goes back unchanged

    # the transcript keeps everything, the marker is saved with it, and the session loads
    assert transcript_problems(body_of(result.messages)) == []
    assert len([m for m in result.messages if compaction_of(m) is not None]) == 1
    stored = await store.load(SESSION)
    assert stored is not None
    assert stored.messages == result.messages
    prompts = [m.text for m in result.messages if m.role == "user" and compaction_of(m) is None]
    assert prompts == [*(prompt for prompt, _ in case.earlier), case.prompt]
    assert [r.compaction for r in result.turn_records] == [False, False, True, False]


@PARAMETRIZE
async def test_a_tool_call_sent_back_to_the_summary_request_is_never_run(
    replay: Replayer, case: Case, tmp_path: Path
) -> None:
    # The recorded call answers the summary request too: tools were off, so nothing of it is run.
    answers: list[Recorded | str] = [*earlier_answers(case), case.call, OVERFLOW, case.call, case.final]
    server = await serve(replay, case, answers)
    agent = agent_for(case, server, SQLiteSessionStore(tmp_path / "sessions.db"))
    await run_earlier(agent, case)
    events, result = await run(agent, case.prompt)

    assert result.stop_reason == "complete", result.detail
    assert kinds(events).count("tool_call_started") == 1  # the model's real call only
    server.assert_all_served()
    (marker,) = (m for m in result.messages if compaction_of(m) is not None)
    info = compaction_of(marker)
    assert info is not None
    text = answer_text(case.call.interaction()).strip()  # its text, if it has any, is the summary
    assert marker.text == SUMMARY_HEADER + (text or dropped_summary(info.summarized))
    retried = case.conversation(server.bodies[-1])
    assert texts(retried[0])[0].startswith(marker.text)


# --- a second overflow --------------------------------------------------------------------------------------


@PARAMETRIZE
async def test_a_second_overflow_in_the_retried_turn_stops_the_run_and_loses_nothing(
    replay: Replayer, case: Case, tmp_path: Path
) -> None:
    answers: list[Recorded | str] = [*earlier_answers(case), case.call, OVERFLOW, case.summary, OVERFLOW, case.final]
    server = await serve(replay, case, answers)
    store = SQLiteSessionStore(tmp_path / "sessions.db")
    agent = agent_for(case, server, store)
    await run_earlier(agent, case)
    events, result = await run(agent, case.prompt)

    assert result.stop_reason == "error"
    error = result.error
    assert isinstance(error, ContextOverflow)
    assert error.code == "context_overflow"
    assert error.status == 400
    assert "the conversation was compacted and the turn retried, and the provider still refused it" in result.detail
    assert error.provider_message
    assert error.provider_message in result.detail  # the provider's own words are kept

    assert kinds(events)[-7:] == [
        "turn_completed(2, rejected)",
        "call_failed(context_overflow -> compact)",
        "compacted(overflow)",
        "turn_started(2, attempt 2)",
        "turn_completed(2, rejected)",
        "call_failed(context_overflow -> stop)",
        "run_completed",
    ]
    assert len(server.bodies) == len(answers) - 1  # nothing was tried a third time

    # the transcript is valid and whole, and the session loads and goes on from the compacted state
    assert transcript_problems(body_of(result.messages)) == []
    prompts = [m.text for m in result.messages if m.role == "user" and compaction_of(m) is None]
    assert prompts == [*(prompt for prompt, _ in case.earlier), case.prompt]
    assert any(m.tool_results for m in result.messages[result.first_new_message :])
    stored = await store.load(SESSION)
    assert stored is not None
    assert stored.messages == result.messages
    _, resumed = await run(agent, "Go on.")
    assert resumed.stop_reason == "complete", resumed.detail
    assert resumed.messages[: len(result.messages)] == result.messages
    sent = case.conversation(server.bodies[-1])
    assert texts(sent[0])[0].startswith(SUMMARY_HEADER + answer_text(case.summary.interaction()))
    server.assert_all_served()


# --- a last exchange too big for the window -----------------------------------------------------------------

WINDOW = 4_096
HUGE = LOG * 18
"""A tool output of about 40,000 characters: more than a 4,096-token window by itself, at any rate of
characters a token the gauge may calibrate to on the recorded usage (at least two)."""


@PARAMETRIZE
async def test_a_last_exchange_that_cannot_fit_the_window_stops_the_run_before_any_summary_call(
    replay: Replayer, case: Case, tmp_path: Path
) -> None:
    server = await serve(replay, case, [case.call])
    store = SQLiteSessionStore(tmp_path / "sessions.db")
    agent = agent_for(  # the cache off: the whole output goes to the model, as a tool that must be read whole
        case,
        server,
        store,
        HUGE,
        compaction=Compaction(context_window=WINDOW),
        max_tool_output=len(HUGE) + 100,
        cache_tool_outputs=None,
    )
    _, result = await run(agent, case.prompt)

    assert result.stop_reason == "error"
    assert isinstance(result.error, ContextOverflow)
    assert result.error.code == "context_overflow"
    assert "cannot be made to fit the model's 4,096-token context window" in result.detail

    server.assert_all_served()
    (request,) = server.requests  # the one answered with the call: no summary call, no request with the output
    assert HUGE not in request.raw.decode()
    assert len(request.raw) < 4 * WINDOW
    assert not any(compaction_of(m) for m in result.messages)  # nothing was compacted for nothing
    assert transcript_problems(body_of(result.messages)) == []
    stored = await store.load(SESSION)
    assert stored is not None
    assert stored.messages == result.messages
