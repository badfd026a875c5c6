"""Recorded provider answers with one field of the wrong JSON type, and the check that decoding them is safe.

:func:`mutated` takes a real recorded JSON document (an event of a stream, or a whole body) and changes one
value at a random path: it is replaced by a value of another JSON type (null, boolean, integer, float,
string, array, object), or deleted. :func:`check_events` is the contract the decoders must keep for whatever
they let through: every field of every event has the Python type the event promises, usage counts are
non-negative integers, ``provider_data`` is JSON, and the turn folds (``StreamAccumulator``) and stores (the
session codec) without any exception but ``InvalidResponse``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, get_args

from hypothesis import strategies as st

from tests.wire.events import run_agent
from tests.wire.replay import Cassette, Interaction, cassette_files
from tether import Agent, Limits
from tether.errors import InvalidResponse
from tether.events import (
    FinishReason,
    LlmEvent,
    StreamEnd,
    StreamStart,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from tether.loop.accumulator import AccumulatedTurn, StreamAccumulator
from tether.messages import Message, messages_from_jsonable, messages_to_jsonable
from tether.providers.base import Provider
from tether.tools.base import tool
from tether.usage import Usage

JsonPath = tuple[str | int, ...]

FINISH_REASONS = frozenset(get_args(FinishReason))

_SCALARS: dict[str, st.SearchStrategy[Any]] = {
    "null": st.none(),
    "bool": st.booleans(),
    "int": st.integers(min_value=-(2**40), max_value=2**40),
    "float": st.floats(allow_nan=False, allow_infinity=False, width=32),
    "str": st.text(max_size=8),
}
_ANY_SCALAR = st.one_of(*_SCALARS.values())
_VALUES: dict[str, st.SearchStrategy[Any]] = {
    **_SCALARS,
    "list": st.lists(_ANY_SCALAR, max_size=3),
    "object": st.dictionaries(st.sampled_from(["type", "text", "id", "x"]), _ANY_SCALAR, max_size=3),
}


def json_kind(value: Any) -> str:
    """The JSON type of a parsed value, as the keys of :data:`_VALUES` name them."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    return "list" if isinstance(value, list) else "object"


def paths(value: Any, prefix: JsonPath = ()) -> list[JsonPath]:
    """Every path into ``value`` (the root excluded), in document order."""
    found: list[JsonPath] = []
    items: list[tuple[str | int, Any]] = []
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    for key, child in items:
        path = (*prefix, key)
        found.append(path)
        found += paths(child, path)
    return found


def at(document: Any, path: JsonPath) -> Any:
    for key in path:
        document = document[key]
    return document


@st.composite
def mutated(draw: st.DrawFn, document: Any) -> tuple[Any, str]:
    """``document`` (deep-copied) with one value replaced by one of another JSON type, or deleted; and a
    description of the change, for the failure report."""
    changed = copy.deepcopy(document)
    path = draw(st.sampled_from(paths(changed))) if paths(changed) else ()
    if not path:
        kind = draw(st.sampled_from(sorted(set(_VALUES) - {json_kind(changed)})))
        replacement = draw(_VALUES[kind])
        return replacement, f"the whole document -> {replacement!r}"
    parent, key = at(changed, path[:-1]), path[-1]
    if isinstance(parent, dict) and draw(st.booleans()):
        del parent[key]
        return changed, f"{list(path)} deleted"
    kind = draw(st.sampled_from(sorted(set(_VALUES) - {json_kind(parent[key])})))
    parent[key] = draw(_VALUES[kind])
    return changed, f"{list(path)} -> {parent[key]!r}"


# --- recorded documents -------------------------------------------------------------------------------------


SHAPES = Path(__file__).resolve().parent.parent / "fixtures" / "shapes"
"""Answer shapes written from the API reference (their README says which)."""


def _interactions(folder: str) -> list[Interaction]:
    """The successful answers of a folder of ``tests/fixtures/wire/`` and of ``tests/fixtures/shapes/`` (the
    deliberately broken ``malformed_*`` ones, and the ``error_*`` ones that end in an error event, left out)."""
    names: list[str | Path] = list(cassette_files(folder))
    names += sorted(
        file for file in (SHAPES / folder).glob("*.yaml") if not file.name.startswith(("malformed_", "error_"))
    )
    return [i for name in names for i in Cassette.load(name).interactions if i.status == 200]


def recorded_streams(folder: str) -> list[list[Any]]:
    """The event-stream answers of ``folder`` (see :func:`_interactions`): each a list of JSON events."""
    return [[json.loads(data) for data in i.events_data()] for i in _interactions(folder) if i.is_event_stream]


def recorded_bodies(folder: str) -> list[Any]:
    """The whole (non-streamed) answers of ``folder`` (see :func:`_interactions`)."""
    return [i.response_json() for i in _interactions(folder) if not i.is_event_stream]


# --- the contract -------------------------------------------------------------------------------------------


def _optional(value: Any, kind: type) -> bool:
    return value is None or type(value) is kind


def _check_usage(usage: Any) -> None:
    assert type(usage) is Usage, usage
    for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens"):
        count = getattr(usage, name)
        assert type(count) is int, f"usage.{name} = {count!r}"
        assert count >= 0, f"usage.{name} = {count!r}"


def _check_data(data: Any) -> None:
    assert _optional(data, dict), data
    json.dumps(data)  # provider_data is stored with the session: it must be JSON


def check_event(event: LlmEvent) -> None:
    """Every field of ``event`` has the type the event promises."""
    if isinstance(event, StreamStart):
        assert _optional(event.model, str), event
        assert _optional(event.response_id, str), event
    elif isinstance(event, TextDelta):
        assert type(event.text) is str, event
        _check_data(event.provider_data)
    elif isinstance(event, ThinkingDelta):
        assert type(event.text) is str, event
        assert _optional(event.signature, str), event
        _check_data(event.provider_data)
    elif isinstance(event, ToolCallStart):
        assert type(event.id) is str, event
        assert type(event.name) is str, event
        assert type(event.index) is int, event
        assert event.index >= 0, event
        _check_data(event.provider_data)
    elif isinstance(event, ToolCallDelta):
        assert type(event.id) is str, event
        assert type(event.arguments_delta) is str, event
    elif isinstance(event, ToolCallEnd):
        assert type(event.id) is str, event
    else:
        assert isinstance(event, StreamEnd), event
        assert event.finish_reason in FINISH_REASONS, event
        _check_usage(event.usage)
        _check_data(event.provider_data)


def check_events(events: list[LlmEvent]) -> AccumulatedTurn | None:
    """Check every event, then fold them into a turn and store its message as a session would: nothing may
    fail on the way but the accumulator's ``InvalidResponse`` (a stream that breaks the event contract)."""
    for event in events:
        check_event(event)
    accumulator = StreamAccumulator()
    try:
        for event in events:
            accumulator.add(event)
    except InvalidResponse:
        return None
    turn = accumulator.finish()
    stored = json.loads(json.dumps(messages_to_jsonable([turn.message])))
    assert messages_from_jsonable(stored) == [turn.message]
    return turn


def history_with(turn: AccumulatedTurn | None) -> tuple[Message, ...]:
    """A conversation ending with ``turn``'s message, to send back as the next request's history."""
    messages: tuple[Message, ...] = (Message.user("Go on."),)
    return messages if turn is None else (*messages, turn.message, Message.user("And then?"))


async def assert_a_malformed_answer_ends_the_run_as_invalid_response(provider: Provider) -> None:
    """Run an agent over ``provider``, whose answers hold fields of the wrong type: the run stops as
    ``invalid_response`` carrying that error, and no call read from such an answer is run."""

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        raise AssertionError("a call read from a malformed answer is never run")

    agent = Agent(provider, tools=[lookup], limits=Limits(invalid_response_retries=1))
    _, result = await run_agent(agent, "Hi")
    assert result.stop_reason == "invalid_response"
    assert isinstance(result.error, InvalidResponse)
    assert result.error.code == "invalid_response"
    assert "malformed" in result.detail
