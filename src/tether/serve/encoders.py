"""Each streaming route's encoder (``serve/streaming.py``'s ``Encoder``): a run's events as the bytes its
protocol writes. The translations themselves are the protocol modules' (``events_json``, ``agui``,
``vercel``); these keep each stream's state and its last bytes.

- :class:`JsonEvents` (``POST /api/runs``): ``event: <kind>`` / ``data: <json>``, its ``run_started`` naming
  the run's ``session_id`` too.
- :class:`AguiEvents` (``POST /agui``): AG-UI events; a run that ended without its result ends with
  ``RUN_ERROR``.
- :class:`VercelEvents` (``POST /api/chat``): UI message stream parts, then ``data: [DONE]``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from tether.events import RunEvent, RunStarted
from tether.redaction import Redaction

__all__ = ["AguiEvents", "JsonEvents", "VercelEvents"]


class JsonEvents:
    """The page's JSON events (``tether.serve.events_json.Stream``: text masked across its deltas), masked by
    ``redaction``."""

    __slots__ = ("_session_id", "_stream")

    def __init__(self, redaction: Redaction, session_id: str | None) -> None:
        from tether.serve import events_json

        self._stream = events_json.Stream(redaction)
        self._session_id = session_id

    def event(self, event: RunEvent) -> bytes:
        out = []
        for data in self._stream.events(event):
            if type(event) is RunStarted and data.get("kind") == "run_started":
                data["session_id"] = self._session_id
            out.append(b"event: " + str(data["kind"]).encode() + b"\ndata: " + msgspec.json.encode(data) + b"\n\n")
        return b"".join(out)

    def end(self) -> bytes:
        return b""


class AguiEvents:
    """AG-UI's events of one run (``tether.serve.agui.Translator``)."""

    __slots__ = ("_translator",)

    def __init__(self, translator: Any) -> None:
        self._translator = translator

    def event(self, event: RunEvent) -> bytes:
        from tether.serve import agui

        return "".join(agui.encode(e) for e in self._translator.events(event)).encode()

    def end(self) -> bytes:
        from tether.serve import agui

        if self._translator.finished:
            return b""
        failed = self._translator.fail(RuntimeError("the run ended without a result"))
        return "".join(agui.encode(e) for e in failed).encode()


class VercelEvents:
    """The Vercel AI SDK's UI message stream of one run (``tether.serve.vercel.Translator``)."""

    __slots__ = ("_translator",)

    def __init__(self, translator: Any) -> None:
        self._translator = translator

    def event(self, event: RunEvent) -> bytes:
        from tether.serve import vercel

        return "".join(vercel.encode_part(p) for p in self._translator.events(event)).encode()

    def end(self) -> bytes:
        from tether.serve import vercel

        tail = ""
        if not self._translator.finished:
            failed = self._translator.fail(RuntimeError("the run ended without a result"))
            tail = "".join(vercel.encode_part(p) for p in failed)
        return (tail + vercel.DONE).encode()
