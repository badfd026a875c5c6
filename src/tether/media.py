"""What an attachment costs a model: its pixel size read from its header, and the tokens it stands for.

Providers count an image by its size, not its bytes: Anthropic about ``width * height / 750`` tokens after
scaling its long side to at most 1,568 pixels, OpenAI 85 plus 170 per 512-pixel tile after fitting 2,048 and
768, Gemini 258 per 768-pixel tile. The compaction's estimate (``loop/context/tokens.py``) takes the largest of the
three, so that it errs towards compacting early; an image whose size cannot be read counts as a large one.
Documents and audio count by their bytes (a PDF page is about 1,500 to 3,000 tokens of text and image).
"""

from __future__ import annotations

import math
import struct

from tether.messages import Attachment

UNKNOWN_IMAGE_TOKENS = 1_600
"""An image whose size cannot be read: what a 1,092 x 1,092 image costs on Anthropic."""
BYTES_PER_TOKEN = {"document": 16, "audio": 200}
"""Tokens of a document (PDF text and page images) and of audio (Gemini: 32 tokens a second), by bytes."""


def image_size(data: bytes) -> tuple[int, int] | None:
    """``(width, height)`` from a PNG, GIF, JPEG or WebP header; ``None`` when it cannot be read."""
    if data.startswith(b"\x89PNG") and len(data) >= 24:
        return struct.unpack(">II", data[16:24])
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return struct.unpack("<HH", data[6:10])
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP" and data[12:16] == b"VP8X" and len(data) >= 30:
        width = int.from_bytes(data[24:27], "little") + 1
        return width, int.from_bytes(data[27:30], "little") + 1
    if data.startswith(b"\xff\xd8"):
        return _jpeg_size(data)
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 9 < len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return width, height
        at += 2 + int.from_bytes(data[at + 2 : at + 4], "big")
    return None


def attachment_tokens(attachment: Attachment) -> int:
    """Input tokens ``attachment`` stands for (see the module docstring)."""
    if attachment.category != "image":
        return max(1, attachment.size // BYTES_PER_TOKEN[attachment.category]) if attachment.data else 1_000
    size = image_size(attachment.data) if attachment.data is not None else None
    if size is None or min(size) <= 0:
        return UNKNOWN_IMAGE_TOKENS
    return max(_anthropic(*size), _openai(*size), _gemini(*size))


def _anthropic(width: int, height: int) -> int:
    scale = min(1.0, 1568 / max(width, height))
    return math.ceil(width * scale * height * scale / 750)


def _openai(width: int, height: int) -> int:
    scale = min(1.0, 2048 / max(width, height))
    fitted_width, fitted_height = width * scale, height * scale
    scale = min(1.0, 768 / min(fitted_width, fitted_height))
    tiles = math.ceil(fitted_width * scale / 512) * math.ceil(fitted_height * scale / 512)
    return 85 + 170 * tiles


def _gemini(width: int, height: int) -> int:
    if max(width, height) <= 384:
        return 258
    return 258 * math.ceil(width / 768) * math.ceil(height / 768)
