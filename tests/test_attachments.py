"""Images, documents and audio: attachments in prompts and in tool results, refused before anything is sent
to a model that cannot read them, costed for compaction, shown to telemetry by reference only."""

from __future__ import annotations

import asyncio
import json
import struct
from pathlib import Path

import pytest

from tests.helpers import assert_valid
from tether import Agent, tool
from tether.errors import ConfigInvalid
from tether.media import UNKNOWN_IMAGE_TOKENS, attachment_tokens, image_size
from tether.messages import Attachment, Message, messages_from_json, messages_to_json, user_message
from tether.providers.scripted import ScriptedProvider, call, reply
from tether.redaction import default_redaction
from tether.sessions import MemorySessionStore
from tether.telemetry.otel_content import input_messages


def png(width: int, height: int) -> bytes:
    """The first bytes of a PNG of that size: what its header says is all that is read of it."""
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", width, height) + bytes(20)


IMAGE = Attachment.from_bytes(png(640, 480))
PDF = Attachment.from_bytes(b"%PDF-1.7\n...", name="spec.pdf")


# --- the part -------------------------------------------------------------------------------------------------


def test_an_attachment_knows_its_kind_from_its_bytes_its_name_or_its_url(tmp_path: Path) -> None:
    assert (IMAGE.media_type, IMAGE.category, IMAGE.size) == ("image/png", "image", 44)
    assert (PDF.media_type, PDF.category, PDF.name) == ("application/pdf", "document", "spec.pdf")
    (tmp_path / "notes.md").write_text("# Notes")
    notes = Attachment.from_path(tmp_path / "notes.md")
    assert (notes.media_type, notes.category, notes.data) == ("text/markdown", "document", b"# Notes")
    wav = Attachment.from_bytes(b"RIFF\x00\x00\x00\x00WAVEfmt ")
    assert (wav.media_type, wav.category) == ("audio/wav", "audio")
    linked = Attachment.from_url("https://example.com/cat.jpg?size=2")
    assert (linked.media_type, linked.url, linked.data) == ("image/jpeg", "https://example.com/cat.jpg?size=2", None)
    inline = Attachment.from_url("data:image/png;base64,iVBORw0KGgo=")
    assert (inline.media_type, inline.data) == ("image/png", b"\x89PNG\r\n\x1a\n")
    assert repr(IMAGE) == "Attachment('image/png', 44 bytes)", "never its bytes"


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda: Attachment.from_bytes(b"\x00\x01 no magic"), "media type of these bytes is not known"),
        (lambda: Attachment.from_bytes(b"x", "application/zip"), "cannot be an attachment"),
        (lambda: Attachment.from_path("/no/such/file.png"), "cannot read the attachment"),
        (lambda: Attachment.from_url("ftp://example.com/a.png"), "must be http"),
        (lambda: Attachment.from_url("https://example.com/noextension"), "pass media_type="),
    ],
)
def test_what_cannot_be_an_attachment_is_refused_saying_why(make: object, problem: str) -> None:
    with pytest.raises(ConfigInvalid, match=problem):
        make()  # type: ignore[operator]


def test_a_message_with_attachments_round_trips_through_json() -> None:
    message = user_message(["What is in these?", IMAGE, PDF, Attachment.from_url("https://example.com/a.png")])
    assert messages_from_json(messages_to_json([message])) == [message]
    with pytest.raises(ConfigInvalid, match="strings and Attachments"):
        user_message(["text", 3])  # type: ignore[list-item]


# --- in a run -----------------------------------------------------------------------------------------------


async def test_a_prompt_with_attachments_reaches_the_model_and_the_session() -> None:
    model = ScriptedProvider([reply("A chart and a spec.")])
    store = MemorySessionStore()
    result = await Agent(model, store=store).run(["What are these?", IMAGE, PDF], session="s")
    sent = model.requests[0].messages[0]
    assert sent.parts == (user_message(["What are these?", IMAGE, PDF]).parts)
    assert (await store.load("s")).messages[0].attachments == (IMAGE, PDF)
    assert_valid(result)


async def test_a_model_that_cannot_read_a_kind_is_refused_it_before_anything_is_sent() -> None:
    text_only = ScriptedProvider([reply("never")], input_kinds=["text"])
    agent = Agent(text_only)
    with pytest.raises(ConfigInvalid, match=r"cannot read images: .*Attachment\('image/png', 44 bytes\)"):
        await agent.run(["Describe:", IMAGE])
    history = [Message.user("Earlier:"), Message("assistant", ()), user_message(["this", PDF])]
    with pytest.raises(ConfigInvalid, match="cannot read documents"):
        await agent.run("And now?", history=[history[0], Message.assistant("ok"), history[2], Message.assistant("ok")])
    notes = Attachment.from_bytes(b"plain notes", "text/plain", name="notes.txt")
    assert (await Agent(ScriptedProvider([reply("read")], input_kinds=["text"])).run(["Read:", notes])).text == "read"
    assert text_only.requests == []


async def test_a_stored_session_with_an_image_is_refused_to_a_text_only_model() -> None:
    store = MemorySessionStore()
    await Agent(ScriptedProvider([reply("seen")]), store=store).run(["Look:", IMAGE], session="s")
    blind = ScriptedProvider([reply("never")], input_kinds=["text"])
    with pytest.raises(ConfigInvalid, match="the session 's' holds"):
        await Agent(blind, store=store).run("Again?", session="s")
    assert blind.requests == []


async def test_a_tool_may_return_attachments_with_its_text() -> None:
    @tool
    def snapshot(name: str) -> list[object]:
        """Take a snapshot."""
        return [f"snapshot of {name}:", IMAGE, {"pixels": 307200}]

    model = ScriptedProvider([call("snapshot", {"name": "desk"}), reply("A desk.")])
    result = await Agent(model, tools=[snapshot]).run("Look at the desk")
    [answered] = result.messages[2].tool_results
    assert answered.attachments == (IMAGE,)
    assert answered.content == 'snapshot of desk:\n{"pixels": 307200}'
    assert model.requests[1].messages[2].tool_results[0].attachments == (IMAGE,)


async def test_an_attachment_the_model_cannot_read_is_named_in_the_tools_result_never_dropped() -> None:
    @tool
    def snapshot() -> Attachment:
        """Take a snapshot."""
        return IMAGE

    model = ScriptedProvider([call("snapshot", {}), reply("I cannot see it.")], input_kinds=["text"])
    result = await Agent(model, tools=[snapshot]).run("Look")
    [answered] = result.messages[2].tool_results
    assert answered.attachments == ()
    assert answered.content == "[Attachment('image/png', 44 bytes): not shown, the model cannot read images]"


# --- what it costs, what is shown ---------------------------------------------------------------------------


def test_an_image_costs_tokens_by_its_size_and_a_document_by_its_bytes() -> None:
    assert image_size(png(1024, 768)) == (1024, 768)
    small, large = attachment_tokens(Attachment.from_bytes(png(200, 200))), attachment_tokens(IMAGE)
    assert 258 <= small < large
    assert attachment_tokens(Attachment("image/png", b"\x89PNG broken")) == UNKNOWN_IMAGE_TOKENS
    assert attachment_tokens(Attachment("application/pdf", bytes(160_000))) == 10_000


def test_telemetry_records_a_reference_never_the_bytes() -> None:
    shown = json.loads(input_messages([user_message(["Look", IMAGE])], default_redaction()))
    assert shown[0]["parts"][1] == {"type": "blob", "mime_type": "image/png", "modality": "image", "size": 44}


async def test_a_20_mb_image_in_a_10_turn_session_is_stored_once(tmp_path: Path) -> None:
    """SQLite writes each message once, when a save first holds it: the image's message is not written again by
    the nine saves after it."""
    import base64
    import random

    from tether.sessions import SQLiteSessionStore

    image = Attachment.from_bytes(png(4000, 3000) + random.Random(7).randbytes(20 * 1024 * 1024))
    store = SQLiteSessionStore(tmp_path / "sessions.db")
    model = ScriptedProvider([reply(f"turn {n}") for n in range(10)])
    agent = Agent(model, store=store)
    await agent.run(["Remember this image.", image], session="s")
    for n in range(1, 10):
        await agent.run(f"Turn {n}: still there?", session="s")
    store.close()
    stored = await asyncio.to_thread(_files_of, tmp_path)
    encoded = base64.b64encode(image.data or b"")
    markers = [encoded[at : at + 48] for at in range(0, len(encoded), len(encoded) // 10)]  # short: within a page
    counts = [stored.count(marker) for marker in markers]
    assert max(counts) == 1, counts
    assert sum(counts) >= len(markers) - 2, "a marker may straddle a page of the database, not most of them"
    assert len(stored) < 1.2 * len(encoded)
    assert (await SQLiteSessionStore(tmp_path / "sessions.db").load("s")).messages[0].attachments == (image,)


def _files_of(folder: Path) -> bytes:
    """Everything the store wrote in ``folder``, joined."""
    return b"".join(path.read_bytes() for path in sorted(folder.iterdir()))
