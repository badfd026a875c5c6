"""Attachments on the four wire protocols, over real HTTP on 127.0.0.1: a prompt with an image, a PDF and an
image by URL, and a tool's result with an image, each in the form its API reference documents (Chat Completions
``image_url``/``file``/``input_audio`` content parts, and a user message after the tool messages, which hold
text only; Responses ``input_image``/``input_file``, and a ``function_call_output`` whose output is a list;
Anthropic ``image``/``document`` blocks with ``base64`` or ``url`` sources, also inside a ``tool_result``;
Gemini ``inlineData``/``fileData`` parts; Bedrock Converse ``image``/``document`` blocks, also inside a
``toolResult``). Answers are the documented whole-answer forms of
``test_output_wire.py``."""

from __future__ import annotations

import base64
import struct
from typing import Any

import pytest

from tests.providers.test_output_wire import PROTOCOLS, Protocol, serve
from tests.wire import replay as wire
from tests.wire.replay import Replayer
from tether import Agent, StopReason, tool
from tether.errors import ConfigInvalid
from tether.messages import Attachment

replay = wire.replay

PNG = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", 64, 48) + bytes(20)
IMAGE = Attachment.from_bytes(PNG)
PDF = Attachment.from_bytes(b"%PDF-1.7 a spec", name="spec.pdf")
LINKED = Attachment.from_url("https://example.com/cat.jpg")
B64_PNG = base64.b64encode(PNG).decode()
B64_PDF = base64.b64encode(PDF.data or b"").decode()
DATA_PNG = f"data:image/png;base64,{B64_PNG}"
DATA_PDF = f"data:application/pdf;base64,{B64_PDF}"

GEMINI = ("gemini", "vertex")
"""The protocols that speak Gemini's ``generateContent``."""

PROMPT_FORMS: dict[str, Any] = {
    "openai-chat": [
        {"type": "text", "text": "Look:"},
        {"type": "image_url", "image_url": {"url": DATA_PNG}},
        {"type": "file", "file": {"filename": "spec.pdf", "file_data": DATA_PDF}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
    ],
    "openai-responses": [
        {"type": "input_text", "text": "Look:"},
        {"type": "input_image", "image_url": DATA_PNG},
        {"type": "input_file", "filename": "spec.pdf", "file_data": DATA_PDF},
        {"type": "input_image", "image_url": "https://example.com/cat.jpg"},
    ],
    "anthropic": [
        {"type": "text", "text": "Look:"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64_PNG}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": B64_PDF},
         "title": "spec.pdf"},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
    ],
    "gemini": [
        {"text": "Look:"},
        {"inlineData": {"mimeType": "image/png", "data": B64_PNG}},
        {"inlineData": {"mimeType": "application/pdf", "data": B64_PDF}},
        {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://example.com/cat.jpg"}},
    ],
    "bedrock": [  # Converse fetches nothing by URL (S3 locations only): the image by URL is refused, below
        {"text": "Look:"},
        {"image": {"format": "png", "source": {"bytes": B64_PNG}}},
        {"document": {"format": "pdf", "name": "spec", "source": {"bytes": B64_PDF}}},
    ],
}  # fmt: skip
PROMPT_FORMS["vertex"] = PROMPT_FORMS["gemini"]  # Vertex AI speaks Gemini's protocol


def prompt_content(protocol: Protocol, body: dict[str, Any]) -> Any:
    if protocol.name in GEMINI:
        return body["contents"][0]["parts"]
    if protocol.name == "openai-responses":
        return body["input"][0]["content"]
    return body["messages"][0]["content"]


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=[p.name for p in PROTOCOLS])
async def test_a_prompt_with_an_image_a_pdf_and_an_image_by_url(replay: Replayer, protocol: Protocol) -> None:
    server = await serve(replay, protocol, [protocol.text("A chart, a spec and a cat.")])
    linked = [] if protocol.name == "bedrock" else [LINKED]
    result = await Agent(protocol.provider(server.url)).run(["Look:", IMAGE, PDF, *linked])
    assert result.stop_reason == StopReason.COMPLETE, result.detail
    [body] = (request.body for request in server.requests)
    assert prompt_content(protocol, body) == PROMPT_FORMS[protocol.name]


@tool
def snapshot() -> list[object]:
    """Take a snapshot of the desk."""
    return ["the desk:", IMAGE]


def tool_result_form(protocol: Protocol, body: dict[str, Any]) -> Any:
    if protocol.name == "openai-chat":
        return body["messages"][-2:]
    if protocol.name == "openai-responses":
        return body["input"][-1]
    if protocol.name in ("anthropic", "bedrock"):
        return body["messages"][-1]["content"][0]
    return body["contents"][-1]["parts"]


RESULT_FORMS: dict[str, Any] = {
    "openai-chat": [
        {"role": "tool", "tool_call_id": "call_1", "content": "the desk:"},
        {"role": "user", "content": [
            {"type": "text", "text": "Attached to the result of snapshot (call_1):"},
            {"type": "image_url", "image_url": {"url": DATA_PNG}},
        ]},
    ],
    "openai-responses": {"type": "function_call_output", "call_id": "call_1", "output": [
        {"type": "input_text", "text": "the desk:"}, {"type": "input_image", "image_url": DATA_PNG},
    ]},
    "anthropic": {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": False, "content": [
        {"type": "text", "text": "the desk:"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64_PNG}},
    ]},
    "gemini": [
        {"functionResponse": {"name": "snapshot", "response": {"ok": True, "result": "the desk:"}}},
        {"inlineData": {"mimeType": "image/png", "data": B64_PNG}},
    ],
    "bedrock": {"toolResult": {"toolUseId": "tooluse_1", "status": "success", "content": [
        {"text": "the desk:"}, {"image": {"format": "png", "source": {"bytes": B64_PNG}}},
    ]}},
}  # fmt: skip
RESULT_FORMS["vertex"] = RESULT_FORMS["gemini"]


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=[p.name for p in PROTOCOLS])
async def test_a_tools_image_goes_back_as_the_api_allows(replay: Replayer, protocol: Protocol) -> None:
    server = await serve(replay, protocol, [protocol.call("snapshot", {}), protocol.text("A tidy desk.")])
    result = await Agent(protocol.provider(server.url), tools=[snapshot]).run("What is on the desk?")
    assert result.text == "A tidy desk.", result.detail
    second = server.requests[1].body
    form = tool_result_form(protocol, second)
    if protocol.name in GEMINI:  # the call id is made by the provider for a call that had none
        form[0]["functionResponse"].pop("id", None)
    assert form == RESULT_FORMS[protocol.name]


async def test_chat_completions_sends_wav_audio_as_input_audio(replay: Replayer) -> None:
    [chat] = [p for p in PROTOCOLS if p.name == "openai-chat"]
    server = await serve(replay, chat, [chat.text("A bell.")])
    wav = Attachment.from_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt ")
    await Agent(chat.provider(server.url)).run(["What is this sound?", wav])
    content = server.requests[0].body["messages"][0]["content"]
    assert content[1] == {"type": "input_audio", "input_audio": {"data": base64.b64encode(wav.data or b"").decode(),
                                                                 "format": "wav"}}  # fmt: skip


async def test_what_an_api_cannot_take_is_refused_before_anything_is_sent(replay: Replayer) -> None:
    [anthropic] = [p for p in PROTOCOLS if p.name == "anthropic"]
    server = await serve(replay, anthropic, [anthropic.text("never")])
    agent = Agent(anthropic.provider(server.url))
    with pytest.raises(ConfigInvalid, match="cannot read audios"):
        await agent.run(["Listen:", Attachment.from_bytes(b"ID3\x03\x00", "audio/mpeg")])
    too_large = Attachment.from_bytes(b"\x89PNG\r\n\x1a\n" + bytes(4 * 1024 * 1024))
    result = await agent.run(["Look:", too_large])
    assert result.stop_reason == StopReason.ERROR
    assert isinstance(result.error, ConfigInvalid)
    assert "takes at most 5 MB" in result.detail
    assert server.requests == []
