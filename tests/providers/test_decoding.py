"""The decoder protocol every wire protocol's decoder keeps (``tether.providers.decoding``), checked on all four:
the same three words (``feed``, ``end``, ``whole``), the same events for an answer whether it comes whole or as
one streamed piece, and the same errors for an answer that stops short."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tether.errors import InvalidResponse, TransportError
from tether.events import LlmEvent, StreamEnd, StreamStart, TextDelta
from tether.providers.anthropic_stream import AnthropicDecoder
from tether.providers.decoding import Decoder
from tether.providers.gemini_stream import GeminiDecoder
from tether.providers.openai_chat_stream import ChatDecoder
from tether.providers.openai_responses_stream import ResponsesDecoder
from tether.providers.registry import PROFILES
from tether.usage import Usage

DECODERS: dict[str, Callable[[], Decoder]] = {
    "chat": lambda: ChatDecoder(PROFILES["openai"]),
    "responses": ResponsesDecoder,
    "anthropic": AnthropicDecoder,
    "gemini": GeminiDecoder,
}
"""Each protocol's decoder, typed as the protocol: mypy checks that every one of them keeps it."""

WHOLE_ANSWERS: dict[str, dict[str, Any]] = {
    "chat": {
        "id": "r1",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    },
    "responses": {
        "id": "r1",
        "model": "m",
        "status": "completed",
        "output": [{"type": "message", "id": "msg_1", "content": [{"type": "output_text", "text": "Hi"}]}],
        "usage": {"input_tokens": 3, "output_tokens": 1},
    },
    "anthropic": {
        "type": "message",
        "id": "r1",
        "model": "m",
        "content": [{"type": "text", "text": "Hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 1},
    },
    "gemini": {
        "responseId": "r1",
        "modelVersion": "m",
        "candidates": [{"content": {"parts": [{"text": "Hi"}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1},
    },
}
"""The same one-word answer, as each protocol sends it whole."""

STARTED: dict[str, dict[str, Any]] = {
    "chat": {"id": "r1", "model": "m", "choices": [{"index": 0, "delta": {"content": "Hi"}}]},
    "responses": {"type": "response.created", "response": {"id": "r1", "model": "m"}},
    "anthropic": {"type": "message_start", "message": {"id": "r1", "model": "m"}},
    "gemini": {"responseId": "r1", "modelVersion": "m", "candidates": [{"content": {"parts": [{"text": "Hi"}]}}]},
}
"""A first streamed piece of each protocol, with no finish after it."""

UNFINISHED_WHOLE: dict[str, tuple[dict[str, Any], str]] = {
    "chat": ({"choices": [{"index": 0, "message": {"content": "Hi"}}]}, "choices[0].finish_reason"),
    "anthropic": ({"type": "message", "content": [{"type": "text", "text": "Hi"}]}, "stop_reason"),
    "gemini": ({"candidates": [{"content": {"parts": [{"text": "Hi"}]}}]}, "finishReason"),
}
"""A whole answer without its finish, and the field that names what is missing (a whole Responses answer has
no finish to miss: its ``status`` says it)."""


@pytest.mark.parametrize("protocol", DECODERS)
def test_every_decoder_reads_a_whole_answer_into_the_same_turn(protocol: str) -> None:
    events = DECODERS[protocol]().whole(WHOLE_ANSWERS[protocol])
    assert events[0] == StreamStart("m", "r1")
    assert "".join(event.text for event in events if type(event) is TextDelta) == "Hi"
    end = events[-1]
    assert type(end) is StreamEnd
    assert (end.finish_reason, end.usage) == ("stop", Usage(input_tokens=3, output_tokens=1))


@pytest.mark.parametrize("protocol", DECODERS)
def test_a_whole_answer_fed_as_a_streamed_piece_gives_the_events_of_whole(protocol: str) -> None:
    """A server that ignores ``stream: true`` answers whole: fed and ended, that answer reads as ``whole`` does."""
    whole = DECODERS[protocol]().whole(WHOLE_ANSWERS[protocol])
    decoder = DECODERS[protocol]()
    fed: list[LlmEvent] = decoder.feed(WHOLE_ANSWERS[protocol]) + decoder.end()
    assert fed == whole


@pytest.mark.parametrize("protocol", DECODERS)
def test_a_stream_that_sent_nothing_is_invalid_response(protocol: str) -> None:
    with pytest.raises(InvalidResponse, match="ended the stream without sending anything"):
        DECODERS[protocol]().end()


@pytest.mark.parametrize("protocol", DECODERS)
def test_a_stream_cut_before_its_finish_is_a_transport_error(protocol: str) -> None:
    decoder = DECODERS[protocol]()
    decoder.feed(STARTED[protocol])
    with pytest.raises(TransportError, match="ended the stream before finishing its answer"):
        decoder.end()


@pytest.mark.parametrize("protocol", UNFINISHED_WHOLE)
def test_a_whole_answer_without_its_finish_is_invalid_response_naming_the_field(protocol: str) -> None:
    body, field = UNFINISHED_WHOLE[protocol]
    with pytest.raises(InvalidResponse, match="sent a malformed answer: it has no") as caught:
        DECODERS[protocol]().whole(body)
    assert caught.value.details["field"] == field
