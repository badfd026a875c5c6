"""Streamed text masked across its pieces: a known key split between two deltas is still hidden.

A run's answer reaches a client delta by delta, and a model may write a key (one it read in a tool's output) in
pieces. Each piece is masked with what was held back before it (``tether.redaction``), and the end of the masked
text that could be the start of a known key (``Masker.held_back``) is held back until the next piece, or until the
text ends (:meth:`HeldText.flush`). A stream whose redaction knows no key holds nothing back. The redaction's
other rules (bearer tokens, URL passwords, secret-named members) read each piece with what was held back before it.
"""

from __future__ import annotations

from tether.redaction import Redaction

__all__ = ["HeldText"]


class HeldText:
    """One streamed text (an answer's text, a thinking block): its pieces masked, a key's possible start kept."""

    __slots__ = ("_held", "redaction")

    def __init__(self, redaction: Redaction) -> None:
        self.redaction = redaction
        self._held = ""

    def push(self, delta: str) -> str:
        """What of the text can be sent now that ``delta`` came (possibly nothing), masked."""
        text = self.redaction.text(self._held + delta) if delta else self._held
        keep = self.redaction.masker.held_back(text) if len(self.redaction.masker) else 0
        self._held = text[len(text) - keep :] if keep else ""
        return text[: len(text) - keep]

    def flush(self) -> str:
        """The text held back, now that the text has ended."""
        held, self._held = self._held, ""
        return held
