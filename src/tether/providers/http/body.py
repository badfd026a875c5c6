"""How much of an answer is read, and how a whole answer's bytes become JSON.

The contract, before the code:

* **Bounded.** A provider's answer is read piece by piece, never more than the cap of
  :class:`ResponseLimits` plus one piece at a time: a whole (non-streamed) body up to ``max_body_bytes``
  (refused at once when its ``Content-Length`` already says more), one server-sent event up to
  ``max_event_bytes``, a whole stream up to ``max_stream_bytes``. Past a cap the answer is refused with
  ``invalid_response`` naming the limit and how to raise it, and the connection is dropped unread.
* **Strict UTF-8.** JSON is UTF-8 (RFC 8259), whatever ``charset`` a server claims: a whole body is decoded
  strictly, and bytes that are not UTF-8 are ``invalid_response``, the server's fault, not a transport
  failure (so it is not retried: the same server would send the same bytes again).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from tether.errors import ConfigInvalid, InvalidResponse
from tether.providers.http.sse import DEFAULT_MAX_EVENT_BYTES

if TYPE_CHECKING:
    import aiohttp

    from tether.alarms import Deadline

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ResponseLimits:
    """The most of a provider's answer that is read, in bytes (pass ``response_limits=`` to a provider).

    The defaults are far above any answer a model writes as text: the large answers are images, sent as
    base64 inside JSON (an image model's 4096x4096 PNG is some 20-30 MB once encoded), and encrypted
    reasoning (tens of KB per turn). Each cap leaves room for that and stops a broken or hostile server from
    filling the memory of a process that may run thousands of agents.
    """

    max_body_bytes: int = 64 * MIB
    """A whole (non-streamed) answer: room for two such images and their text."""
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    """One server-sent event (32 MiB): one image in one event (Gemini's ``inlineData``, Responses'
    ``output_item.done``), with room to spare."""
    max_stream_bytes: int = 256 * MIB
    """A whole streamed answer, every event together: streams repeat their content (Responses sends the
    deltas, then each finished item, then the whole response), so four times a whole body."""

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_event_bytes", "max_stream_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigInvalid(f"ResponseLimits.{name} must be a positive number of bytes, not {value!r}")


def too_large(provider: str, what: str, setting: str, limit: int) -> InvalidResponse:
    """The error for an answer past ``ResponseLimits.<setting>``."""
    return InvalidResponse(
        f"{provider} sent {what} larger than {limit} bytes (ResponseLimits.{setting}); pass the provider a "
        f"larger response_limits=ResponseLimits({setting}=...) if such answers are expected",
        details={"limit": setting, setting: limit},
    )


async def read_body(
    response: aiohttp.ClientResponse, limit: int, *, provider: str, setting: str, wait: Deadline | None = None
) -> bytearray:
    """The whole body, read piece by piece; ``InvalidResponse`` as soon as it passes ``limit`` bytes (or its
    ``Content-Length`` says it will). ``wait``, when given, bounds the wait for each piece; what has already
    arrived is taken without one (no deadline is set and withdrawn for bytes that are there). The response is
    released, its connection back to the pool, when the body was read to its end, and closed otherwise."""
    reusable = False
    try:
        declared = response.content_length
        if declared is not None and declared > limit:
            raise too_large(provider, "an answer", setting, limit)
        content = response.content
        data = bytearray()
        while True:
            piece = content.read_nowait()  # what has arrived already (often the whole body, with its head)
            if not piece:
                if content.at_eof():
                    break
                if wait is not None:
                    wait.start()
                try:
                    piece = await content.readany()
                finally:
                    if wait is not None:
                        wait.stop()
                if not piece:
                    break
            data += piece
            if len(data) > limit:
                raise too_large(provider, "an answer", setting, limit)
        reusable = True
        return data
    finally:
        response.release() if reusable else response.close()


_BOM = b"\xef\xbb\xbf"


def decode_text(data: bytes | bytearray, provider: str) -> str:
    """A whole body as text: strict UTF-8 (one leading byte-order mark allowed). UTF-8 is decoded in C
    (``"utf-8-sig"`` is a Python codec, a few function calls per body); an error names the offset in the body
    as it came, mark included."""
    start = 3 if data.startswith(_BOM) else 0
    try:
        return (data[3:] if start else data).decode()
    except UnicodeDecodeError as error:
        offset = start + error.start
        bad = bytes(data[offset : offset + 4])
        raise InvalidResponse(
            f"{provider} sent an answer that is not UTF-8 (at byte {offset}: {bad!r})",
            details={"offset": offset},
        ) from None


def parse_json(data: bytes | bytearray, provider: str) -> Any:
    """A whole body's JSON; ``InvalidResponse`` for bytes that are not UTF-8 or text that is not JSON."""
    text = decode_text(data, provider)
    try:
        return msgspec.json.decode(text)
    except ValueError:
        raise InvalidResponse(f"{provider} sent a body that is not JSON: {text[:200]!r}") from None
