"""Attachments on the wire: what each protocol's encoder shares (``messages.Attachment``).

An attachment goes inline, base64 (``data``), or by reference (``url``) where the API fetches URLs itself. A text
document (plain text, Markdown, CSV, HTML, JSON) goes as its text where an API has no text documents. Each
protocol checks an inline attachment against its documented limit before the request is built, so a part that
is too large is ``ConfigInvalid`` naming the limit, before anything is sent.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable

from tether.errors import ConfigInvalid
from tether.messages import Attachment, Message
from tether.providers.base import ModelInfo

MB = 1024 * 1024


ALL_KINDS = frozenset({"text", "image", "document", "audio"})


def refuse_unreadable(messages: Iterable[Message], info: ModelInfo, where: str = "the prompt") -> None:
    """``ConfigInvalid`` naming the first attachment of ``messages`` whose kind the model does not read
    (``ModelInfo.input_kinds``); a text document goes as its text wherever documents are not read."""
    kinds = info.input_kinds
    if kinds >= ALL_KINDS:
        return
    for message in messages:
        for part in message.parts:
            if type(part) is Attachment and part.category not in kinds and not is_text_document(part):
                taken = ", ".join(sorted(kinds))
                raise ConfigInvalid(
                    f"the model {info.model_string!r} cannot read {part.category}s: {where} holds {part!r} "
                    f"(it reads {taken})"
                )


def base64_of(attachment: Attachment) -> str:
    assert attachment.data is not None, "an inline attachment has its bytes"
    return base64.b64encode(attachment.data).decode("ascii")


def data_url(attachment: Attachment) -> str:
    """The attachment as a URL: its own, or a ``data:`` URL of its bytes."""
    if attachment.url is not None:
        return attachment.url
    return f"data:{attachment.media_type};base64,{base64_of(attachment)}"


def is_text_document(attachment: Attachment) -> bool:
    return attachment.category == "document" and attachment.media_type != "application/pdf"


def document_text(attachment: Attachment) -> str:
    """A text document's text, named, for an API that takes it as text."""
    if attachment.data is None:
        raise ConfigInvalid(f"a text document by URL ({attachment.url}) cannot be sent: attach its bytes")
    text = attachment.data.decode("utf-8", errors="replace")
    return f"[{attachment.name or 'document'} ({attachment.media_type})]\n{text}"


def check_inline(attachment: Attachment, limit: int, where: str) -> None:
    """``ConfigInvalid`` when an inline attachment's base64 passes ``limit`` bytes (``where``: the API and the
    limit's scope)."""
    encoded = (attachment.size + 2) // 3 * 4
    if attachment.data is not None and encoded > limit:
        raise ConfigInvalid(
            f"the attachment {attachment!r} is {encoded / MB:.1f} MB encoded; {where} takes at most "
            f"{limit / MB:.0f} MB: make it smaller"
        )


def refuse_url(attachment: Attachment, api: str) -> None:
    if attachment.url is not None:
        raise ConfigInvalid(
            f"{api} does not fetch a {attachment.category} by URL ({attachment.url[:80]}): attach its bytes instead"
        )
