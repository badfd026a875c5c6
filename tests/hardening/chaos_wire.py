"""The material of the chaos server: real recorded answers per wire protocol, and the ways to break them.

* **Recorded answers.** :class:`Material` loads every 200 answer of ``tests/fixtures/wire/`` per family (whole
  JSON bodies and event streams, kept as recorded), with each tool name the recording declared renamed to
  :data:`TOOL_NAME`, so that a valid answer's tool calls reach the client's one tool.
* **Breaking them.** :func:`retype` gives one field at a random path a value of another JSON type;
  :func:`insert_bad_utf8` puts bytes that are not UTF-8 inside a JSON string; :func:`pad_longest_string`
  makes an answer as large as asked; the error shapes are each family's own (:func:`error_body`,
  :func:`error_frame`). Every choice comes from the ``random.Random`` passed in, so a seed replays it.
"""

from __future__ import annotations

import contextlib
import copy
import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.wire.replay import Cassette, cassette_files

TOOL_NAME = "lookup"
"""What every recorded tool name is renamed to: the one tool the client offers."""
FAMILIES = ("openai_chat", "openai_responses", "anthropic", "gemini")
FOLDERS = {
    "openai_chat": ("openai_chat", "openai_compatible"),
    "openai_responses": ("openai_responses",),
    "anthropic": ("anthropic",),
    "gemini": ("google",),
}
"""The recordings each family's answers are taken from: OpenAI-compatible servers speak OpenAI Chat."""
BAD_UTF8 = (b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf0\x28\x8c\x28", b"\x80", b"\xfe\xfe")
WRONG_VALUES: tuple[Any, ...] = (None, 0, -7, 1.5, True, "chaos", [], {}, [1, "two"], {"chaos": 1})
"""What a field is replaced with: one of another JSON type than it had."""
ERROR_KINDS = {
    "openai_chat": ("server_error", "rate_limit_exceeded", "insufficient_quota", "context_length_exceeded"),
    "openai_responses": ("server_error", "rate_limit_exceeded", "insufficient_quota", "invalid_api_key"),
    "anthropic": ("overloaded_error", "api_error", "rate_limit_error", "authentication_error"),
    "gemini": ("UNAVAILABLE", "RESOURCE_EXHAUSTED", "INTERNAL", "INVALID_ARGUMENT", "PERMISSION_DENIED"),
}
GEMINI_CODES = {"UNAVAILABLE": 503, "RESOURCE_EXHAUSTED": 429, "INTERNAL": 500, "INVALID_ARGUMENT": 400}
# A JSON string, empty ones included (else a match could start at the quote that closes one).
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')


# --- recorded material --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Frame:
    """One server-sent event: its raw text as recorded (no trailing blank line), its name and its data."""

    raw: str
    event: str
    data: str

    @classmethod
    def of(cls, data: str, event: str = "") -> Frame:
        return cls((f"event: {event}\n" if event else "") + f"data: {data}", event, data)

    def json(self) -> Any:
        """The data as JSON (``ValueError`` when it is not)."""
        return json.loads(self.data)


def parse_frames(text: str) -> list[Frame]:
    """A recorded event-stream body as frames (comments and empty frames left out)."""
    frames = []
    for raw in re.split(r"\n\n+", text.replace("\r\n", "\n").strip("\n")):
        event, data = "", []
        for line in raw.split("\n"):
            name, _, value = line.partition(":")
            if name == "event":
                event = value.removeprefix(" ")
            elif name == "data":
                data.append(value.removeprefix(" "))
        if data:
            frames.append(Frame(raw, event, "\n".join(data)))
    return frames


def sse_bytes(frames: list[Frame]) -> bytes:
    return "".join(frame.raw + "\n\n" for frame in frames).encode()


def _tool_names(value: Any) -> set[str]:
    """The tool names a recorded request declares (``name`` anywhere under its ``tools``)."""
    if isinstance(value, dict):
        found = {value["name"]} if isinstance(value.get("name"), str) else set()
        return found.union(*(_tool_names(item) for item in value.values()))
    if isinstance(value, list):
        return set().union(*(_tool_names(item) for item in value))
    return set()


@dataclass(slots=True)
class Material:
    """Recorded 200 answers per family: whole JSON bodies and event streams, tools renamed."""

    whole: dict[str, list[bytes]] = field(default_factory=dict)
    streams: dict[str, list[list[Frame]]] = field(default_factory=dict)

    @classmethod
    def load(cls) -> Material:
        material = cls()
        for family, folders in FOLDERS.items():
            whole, streams = material.whole.setdefault(family, []), material.streams.setdefault(family, [])
            for name in (file for folder in folders for file in cassette_files(folder)):
                cassette = Cassette.load(name)
                names = set().union(*(_tool_names((i.request_body or {}).get("tools")) for i in cassette.interactions))
                for interaction in cassette.interactions:
                    if interaction.status != 200 or interaction.method != "POST":
                        continue
                    text = interaction.body.decode()
                    for tool in names:
                        text = text.replace(f'"{tool}"', f'"{TOOL_NAME}"')
                    if interaction.is_event_stream:
                        streams.append(parse_frames(text))
                    else:
                        whole.append(text.encode())
        return material


# --- breaking JSON ------------------------------------------------------------------------------------------

Path_ = tuple[str | int, ...]


def json_paths(value: Any, at: Path_ = ()) -> list[Path_]:
    """Every path below ``value`` (the root itself not included)."""
    paths: list[Path_] = []
    items: list[tuple[str | int, Any]] = []
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    for key, item in items:
        paths.append((*at, key))
        paths += json_paths(item, (*at, key))
    return paths


def retype(document: Any, rng: random.Random) -> tuple[Any, Path_]:
    """A copy of ``document`` with the value at one random path (``()``: the document itself, when it has
    nothing inside) replaced by a value of another type; and that path."""
    changed = copy.deepcopy(document)
    paths = json_paths(changed)
    if not paths:
        return rng.choice([v for v in WRONG_VALUES if type(v) is not type(document)]), ()
    path = rng.choice(paths)
    parent = get_path(changed, path[:-1])
    old = parent[path[-1]]
    parent[path[-1]] = rng.choice([v for v in WRONG_VALUES if type(v) is not type(old)])
    return changed, path


def path_text(path: Path_) -> str:
    """``("choices", 0, "delta")`` as ``$.choices[0].delta``."""
    return "$" + "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in path)


def pad_longest_string(document: Any, size: int) -> Any:
    """A copy of ``document`` whose longest string is padded to ``size`` characters."""
    changed = copy.deepcopy(document)
    paths = [p for p in json_paths(changed) if isinstance(get_path(changed, p), str)]
    if not paths:
        return {"padding": "x" * size, "document": changed}
    path = max(paths, key=lambda p: len(get_path(changed, p)))
    parent = get_path(changed, path[:-1])
    parent[path[-1]] = parent[path[-1]] + "x" * size
    return changed


def get_path(document: Any, path: Path_) -> Any:
    """The value at ``path`` in ``document``."""
    for key in path:
        document = document[key]
    return document


def insert_bad_utf8(body: bytes, rng: random.Random) -> bytes:
    """``body`` with bytes that are not UTF-8 put inside one of its JSON strings."""
    strings = list(_STRING.finditer(body))
    at = rng.choice(strings).start() + 1 if strings else rng.randrange(len(body) + 1)
    return body[:at] + rng.choice(BAD_UTF8) + body[at:]


def json_frame_indexes(frames: list[Frame]) -> list[int]:
    """Indexes of the frames whose data is a JSON object (not ``[DONE]``)."""
    indexes = []
    for index, frame in enumerate(frames):
        with contextlib.suppress(ValueError):
            if isinstance(frame.json(), dict):
                indexes.append(index)
    return indexes


def delta_frame_index(frames: list[Frame], rng: random.Random) -> int:
    """A frame that carries a piece of the answer (text or arguments), else any JSON frame."""
    indexes = json_frame_indexes(frames) or [0]
    deltas = [i for i in indexes if '"delta"' in frames[i].data or '"text"' in frames[i].data]
    return rng.choice(deltas or indexes)


# --- the families' error shapes -----------------------------------------------------------------------------


def error_body(family: str, kind: str, message: str) -> dict[str, Any]:
    """An error as ``family`` writes it in an error response (and, for most, inside a stream)."""
    if family == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_chaos"}
    if family == "gemini":
        return {"error": {"code": GEMINI_CODES.get(kind, 403), "message": message, "status": kind}}
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


def error_frame(family: str, kind: str, message: str, rng: random.Random) -> Frame:
    """An error event inside a stream, in ``family``'s shape."""
    if family == "openai_responses":
        if rng.random() < 0.5:
            payload = {"type": "error", "code": kind, "message": message, "param": None, "sequence_number": 99}
            return Frame.of(json.dumps(payload), "error")
        failed: dict[str, Any] = {"id": "resp_chaos", "object": "response", "status": "failed", "output": []}
        failed["error"] = {"code": kind, "message": message}
        return Frame.of(
            json.dumps({"type": "response.failed", "sequence_number": 99, "response": failed}), "response.failed"
        )
    return Frame.of(json.dumps(error_body(family, kind, message)), "error" if family == "anthropic" else "")


def api_key_of(request: web.Request) -> str:
    """The key the client sent, however its family sends it."""
    for name in ("x-api-key", "x-goog-api-key"):
        if name in request.headers:
            return request.headers[name]
    return request.headers.get("Authorization", "").removeprefix("Bearer ")


def family_of(path: str) -> str | None:
    """The wire protocol a request path speaks."""
    if path.endswith("/chat/completions"):
        return "openai_chat"
    if path.endswith("/responses"):
        return "openai_responses"
    if path.endswith("/messages"):
        return "anthropic"
    if ":generateContent" in path or ":streamGenerateContent" in path:
        return "gemini"
    return None


def is_streamed(path: str, raw: bytes) -> bool:
    if ":streamGenerateContent" in path:
        return True
    try:
        body = json.loads(raw)
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("stream") is True
