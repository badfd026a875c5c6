"""A hostile model server on loopback: every request is answered with a fault chosen by a seeded die.

The contract
------------
* **What it serves.** The four wire protocols tether speaks, under ``/chaos/<run>/``: OpenAI Chat
  (``.../v1/chat/completions``), OpenAI Responses (``.../v1/responses``), Anthropic (``.../v1/messages``) and
  Gemini (``.../v1beta/models/<model>:generateContent`` and ``:streamGenerateContent?alt=sse``), streamed when
  the request asks for it (``"stream": true``, or Gemini's streaming path) and whole otherwise. ``<run>`` is the
  number the client put in its base URL: it names the run a request belongs to.
* **Which fault.** Each request draws one of :data:`FAULTS` (weighted) from ``random.Random(f"{seed}/{run}/{n}")``,
  ``n`` being the request's number within its run. One run's requests are sequential, so the faults a run
  meets depend only on the seed and the run, whatever the concurrency: any run can be replayed alone.
* **What the faults are made of.** Real recorded answers from ``tests/fixtures/wire/`` for the family served
  (OpenAI-compatible servers count as OpenAI Chat), with every tool name the recording declared renamed to
  :data:`TOOL_NAME`, so that a valid answer's tool calls reach the client's one tool. The faults break those
  answers: one field at a random path given another JSON type, a body cut short, bytes that are not UTF-8,
  a byte-order mark, an event of the wrong type, an error inside the stream, and so on (see :data:`FAULTS`).
* **Elsewhere.** A second server, on another port, is where redirects point. It answers like a healthy
  server (so a client that follows a redirect notices nothing) and records every request it gets, headers
  and body: nothing should ever arrive there.
* **Report.** ``GET /__chaos__/report`` on the main server gives, as JSON, every request served (per run, in
  order: family, streamed, fault, variant), everything the elsewhere server received, and the server's own
  failures (a bug here must not pass for one in the client).
* **Process.** ``python -m tests.hardening.chaos_server --seed N`` prints one JSON line with both URLs and
  serves until its standard input closes; :func:`running` starts and stops one from async code.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: the repository is the import root
    sys.path.insert(0, str(ROOT))

from tests.hardening.chaos_wire import (  # noqa: E402
    ERROR_KINDS,
    FAMILIES,
    TOOL_NAME,
    WRONG_VALUES,
    Frame,
    Material,
    api_key_of,
    delta_frame_index,
    error_body,
    error_frame,
    family_of,
    insert_bad_utf8,
    is_streamed,
    json_frame_indexes,
    pad_longest_string,
    path_text,
    retype,
    sse_bytes,
)

__all__ = ["FAMILIES", "FAULTS", "TOOL_NAME", "ChaosServer", "running"]

OVERSIZE = 3 * 1024 * 1024
"""Bytes of an oversized body, stream or SSE line: a few MB, far above any recorded answer (200 KB at most)."""
STREAM_PIECE = 16 * 1024
"""Characters of each event of an oversized stream: a long stream of events of a fair size."""
FAULTS: dict[str, int] = {
    "valid": 30,
    "not_json": 4,
    "truncated_json": 4,
    "wrong_type": 8,
    "wrong_event_type": 4,
    "invalid_utf8": 4,
    "oversized_body": 2,
    "oversized_line": 2,
    "cut_stream": 4,
    "stall": 4,
    "redirect": 4,
    "error_status": 8,
    "error_event": 5,
    "bom": 4,
    "empty_body": 3,
}
"""Fault name -> weight. ``valid`` is a recorded answer as it was; every other one breaks something."""
ERROR_STATUSES = (400, 401, 403, 404, 408, 409, 413, 422, 429, 451, 500, 502, 503, 504, 529)
REDIRECTS = (301, 302, 303, 307, 308)
JSON_TYPE = "application/json"
EVENT_STREAM = "text/event-stream"
GARBAGE = (
    b"<html><body><h1>502 Bad Gateway</h1></body></html>",
    b"upstream connect error or disconnect/reset before headers",
    b"{'role': 'assistant', 'content': 'single quotes'}",
    b"NaN",
    b'{"choices": [}',
    b"\x00\x01\x02\x03 binary",
)
RETRY_AFTER = ("soon", "-5", "1e309", "nan", "99999", "0.01", "Wed, 21 Oct 2015 07:28:00 GMT")


def choose_fault(rng: random.Random) -> str:
    """One fault, drawn by weight."""
    return rng.choices(list(FAULTS), weights=list(FAULTS.values()))[0]


def die(seed: int, run: int, number: int) -> random.Random:
    """The die of a run's ``number``-th request: the same for the same three numbers, in any process."""
    return random.Random(f"{seed}/{run}/{number}")


# --- answering ----------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Ask:
    """One request being answered: what it asked for and the die that decides how."""

    request: web.Request
    family: str
    streamed: bool
    rng: random.Random
    material: Material
    elsewhere: str
    entry: dict[str, Any]

    def note(self, variant: str) -> None:
        self.entry["variant"] = variant

    def valid_body(self) -> bytes:
        return self.rng.choice(self.material.whole[self.family])

    def valid_frames(self) -> list[Frame]:
        return list(self.rng.choice(self.material.streams[self.family]))

    def valid(self) -> bytes:
        return sse_bytes(self.valid_frames()) if self.streamed else self.valid_body()


async def send(
    ask: Ask, body: bytes, *, status: int = 200, content_type: str | None = None, headers: dict[str, str] | None = None
) -> web.StreamResponse:
    """Answer with ``body``: streamed answers chunked in pieces of a random size, whole ones with a length."""
    kind = content_type if content_type is not None else (EVENT_STREAM if ask.streamed else JSON_TYPE)
    response = web.StreamResponse(
        status=status, headers={**({"Content-Type": kind} if kind else {}), **(headers or {})}
    )
    if ask.streamed:
        response.enable_chunked_encoding()
        size = max(len(body) // 512, ask.rng.choice((7, 64, 1024, len(body) or 1)))
    else:
        response.content_length = len(body)
        size = 1 << 16
    await response.prepare(ask.request)
    for start in range(0, len(body), size):
        await response.write(body[start : start + size])
    await response.write_eof()
    return response


async def forever() -> None:
    """Wait until the client goes away (the server cancels a handler whose connection is lost)."""
    await asyncio.Event().wait()


async def fault_valid(ask: Ask) -> web.StreamResponse:
    """A recorded answer of the family, as it was recorded (tools renamed)."""
    return await send(ask, ask.valid())


async def fault_not_json(ask: Ask) -> web.StreamResponse:
    """A body that is not JSON (an HTML error page, quoted wrongly, binary), or one such event in a stream."""
    garbage = ask.rng.choice(GARBAGE)
    if not ask.streamed or ask.rng.random() < 0.5:
        ask.note("body")
        return await send(ask, garbage, content_type=JSON_TYPE)
    ask.note("event")
    frames = ask.valid_frames()
    at = ask.rng.randrange(len(frames) + 1)
    return await send(ask, sse_bytes(frames[:at]) + b"data: " + garbage + b"\n\n" + sse_bytes(frames[at:]))


async def fault_truncated_json(ask: Ask) -> web.StreamResponse:
    """A whole body cut short at a random byte (its length honest), or one event's JSON cut short."""
    if not ask.streamed:
        body = ask.valid_body()
        return await send(ask, body[: ask.rng.randint(1, len(body) - 1)])
    frames = ask.valid_frames()
    index = ask.rng.choice(json_frame_indexes(frames) or [0])
    data = frames[index].data
    frames[index] = Frame.of(data[: ask.rng.randint(1, max(1, len(data) - 1))], frames[index].event)
    return await send(ask, sse_bytes(frames))


async def fault_wrong_type(ask: Ask) -> web.StreamResponse:
    """A recorded answer (or one event of it) with one field at a random path given another JSON type."""
    if not ask.streamed:
        changed, path = retype(json.loads(ask.valid_body()), ask.rng)
        ask.note(path_text(path))
        return await send(ask, json.dumps(changed).encode())
    frames = ask.valid_frames()
    index = ask.rng.choice(json_frame_indexes(frames) or [0])
    changed, path = retype(frames[index].json(), ask.rng)
    ask.note(f"event {index}: {path_text(path)}")
    frames[index] = Frame.of(json.dumps(changed), frames[index].event)
    return await send(ask, sse_bytes(frames))


async def fault_wrong_event_type(ask: Ask) -> web.StreamResponse:
    """A body of the wrong JSON type; in a stream, an event of the wrong type: a bare value in
    place of an object, an unknown event, or an event relabelled with another type of the stream."""
    rng = ask.rng
    wrong = rng.choice([v for v in WRONG_VALUES if not isinstance(v, dict)] + [{"chaos": "foreign object"}])
    if not ask.streamed:
        ask.note(f"body {json.dumps(wrong)}")
        return await send(ask, json.dumps(wrong).encode())
    frames = ask.valid_frames()
    objects = json_frame_indexes(frames)
    index = rng.choice(objects or [0])
    original = frames[index].json() if index in objects else {}
    types = sorted({frames[i].json().get("type") for i in objects} - {None})
    variant = rng.choice(("value", "unknown", "swapped") if types and "type" in original else ("value", "unknown"))
    ask.note(f"event {index}: {variant}")
    if variant == "value":
        frames[index] = Frame.of(json.dumps(wrong), frames[index].event)
    elif variant == "unknown":
        frames.insert(index, Frame.of(json.dumps({"type": "chaos.unknown", "chaos": [1, 2]}), "chaos.unknown"))
    else:
        kind = rng.choice(types)
        frames[index] = Frame.of(json.dumps({**original, "type": kind}), kind if frames[index].event else "")
    return await send(ask, sse_bytes(frames))


async def fault_invalid_utf8(ask: Ask) -> web.StreamResponse:
    """A recorded answer with bytes that are not UTF-8 inside a string, with or without a charset."""
    charset = ask.rng.choice(("", "; charset=utf-8"))
    ask.note(f"content-type{charset or ' without charset'}")
    kind = (EVENT_STREAM if ask.streamed else JSON_TYPE) + charset
    return await send(ask, insert_bad_utf8(ask.valid(), ask.rng), content_type=kind)


async def fault_oversized_body(ask: Ask) -> web.StreamResponse:
    """A whole answer padded to :data:`OVERSIZE`, or a stream whose events add up to it."""
    if not ask.streamed:
        ask.note("one huge answer")
        return await send(ask, json.dumps(pad_longest_string(json.loads(ask.valid_body()), OVERSIZE)).encode())
    frames = ask.valid_frames()
    index = delta_frame_index(frames, ask.rng)
    piece = frames[index]
    if piece.data.startswith("{"):  # a long stream of fair-sized events, not a flood of tiny ones
        piece = Frame.of(json.dumps(pad_longest_string(piece.json(), STREAM_PIECE)), piece.event)
    copies = OVERSIZE // len(piece.raw) + 1
    ask.note(f"event {index} x {copies}")
    return await send(ask, sse_bytes(frames[:index] + [piece] * copies + frames[index + 1 :]))


async def fault_oversized_line(ask: Ask) -> web.StreamResponse:
    """One SSE line of :data:`OVERSIZE` bytes; a whole answer followed by that much whitespace."""
    if not ask.streamed:
        ask.note("answer then whitespace")
        return await send(ask, ask.valid_body() + b" " * OVERSIZE)
    frames = ask.valid_frames()
    index = delta_frame_index(frames, ask.rng)
    ask.note(f"event {index}")
    huge = json.dumps(pad_longest_string(frames[index].json(), OVERSIZE)) if frames[index].data.startswith("{") else ""
    frames[index] = Frame.of(huge or "x" * OVERSIZE, frames[index].event)
    return await send(ask, sse_bytes(frames))


async def fault_cut_stream(ask: Ask) -> web.StreamResponse:
    """Part of an answer, then the connection reset (or, for a stream, its clean end too early)."""
    body = ask.valid()
    at = ask.rng.randint(1, len(body) - 1)
    reset = not ask.streamed or ask.rng.random() < 0.5
    ask.note(f"{'reset' if reset else 'end'} after {at} of {len(body)} bytes")
    response = web.StreamResponse(headers={"Content-Type": EVENT_STREAM if ask.streamed else JSON_TYPE})
    if ask.streamed:
        response.enable_chunked_encoding()
    else:
        response.content_length = len(body)
    await response.prepare(ask.request)
    await response.write(body[:at])
    if not reset:
        await response.write_eof()
        return response
    transport = ask.request.transport
    if transport is not None:
        transport.abort()
    await forever()
    return response


async def fault_stall(ask: Ask) -> web.StreamResponse:
    """Silence until the client gives up: before the headers, after them, or half-way through the body."""
    variant = ask.rng.choice(("before headers", "after headers", "mid-body"))
    ask.note(variant)
    if variant == "before headers":
        await forever()
    body = ask.valid()
    response = web.StreamResponse(headers={"Content-Type": EVENT_STREAM if ask.streamed else JSON_TYPE})
    if ask.streamed:
        response.enable_chunked_encoding()
    else:
        response.content_length = len(body)
    await response.prepare(ask.request)
    if variant == "mid-body":
        await response.write(body[: len(body) // 2])
    await forever()
    return response


async def fault_redirect(ask: Ask) -> web.StreamResponse:
    """A redirect (301, 302, 303, 307 or 308) to the elsewhere server, same path and query."""
    status = ask.rng.choice(REDIRECTS)
    ask.note(str(status))
    location = ask.elsewhere + ask.request.path_qs
    return await send(
        ask, b"<html>moved</html>", status=status, content_type="text/html", headers={"Location": location}
    )


def _error_variant(ask: Ask, status: int) -> bytes:
    rng, family = ask.rng, ask.family
    kind = rng.choice(ERROR_KINDS[family])
    variant = rng.choice(("garbage", "html", "truncated", "wrong_type", "echo_key", "plain", "empty", "huge"))
    ask.note(f"{status} {variant} {kind}")
    if variant == "garbage":
        return rng.randbytes(rng.randint(1, 512))
    if variant == "html":
        return b"<html><body>" + str(status).encode() + b" Server Error</body></html>"
    if variant == "empty":
        return b""
    if variant == "huge":
        return b"x" * (1 << 20)
    message = f"Incorrect API key provided: {api_key_of(ask.request)}." if variant == "echo_key" else "chaos"
    body = json.dumps(error_body(family, kind, message)).encode()
    if variant == "truncated":
        return body[: rng.randint(1, len(body) - 1)]
    if variant == "wrong_type":
        return json.dumps(retype(error_body(family, kind, message), rng)[0]).encode()
    return body


async def fault_error_status(ask: Ask) -> web.StreamResponse:
    """An HTTP error status with a garbage, HTML, truncated, wrongly typed, empty, huge or well-formed
    body (well-formed ones may quote the key back), sometimes with a nonsensical ``Retry-After``."""
    status = ask.rng.choice(ERROR_STATUSES)
    body = _error_variant(ask, status)
    headers = {"Retry-After": ask.rng.choice(RETRY_AFTER)} if ask.rng.random() < 0.5 else {}
    return await send(ask, body, status=status, content_type=JSON_TYPE, headers=headers)


async def fault_error_event(ask: Ask) -> web.StreamResponse:
    """An error in the family's in-band shape: inside the stream after some events (sometimes wrongly
    typed), or as a whole 200 answer; some quote the key back, as a real API does for a wrong key."""
    rng, family = ask.rng, ask.family
    kind = rng.choice(ERROR_KINDS[family])
    echo = rng.random() < 0.3
    message = f"Incorrect API key provided: {api_key_of(ask.request)}." if echo else "the chaos engine overheated"
    if not ask.streamed:
        ask.note(f"{kind} in a 200 body{' echoing the key' if echo else ''}")
        return await send(ask, json.dumps(error_body(family, kind, message)).encode())
    frames = ask.valid_frames()
    at = rng.randrange(len(frames))
    error = error_frame(family, kind, message, rng)
    if rng.random() < 0.3:
        error = Frame.of(json.dumps(retype(json.loads(error.data), rng)[0]), error.event)
    ask.note(f"{kind} after event {at}{' echoing the key' if echo else ''}")
    return await send(ask, sse_bytes([*frames[:at], error, *frames[at:]]))


async def fault_bom(ask: Ask) -> web.StreamResponse:
    """A recorded answer preceded by a UTF-8 byte-order mark."""
    return await send(ask, b"\xef\xbb\xbf" + ask.valid())


async def fault_empty_body(ask: Ask) -> web.StreamResponse:
    """Nothing: a 200 with an empty body, a 204, or an empty body without a content type."""
    variant = ask.rng.choice(("200", "204", "no content-type"))
    ask.note(variant)
    if variant == "no content-type":
        return await send(ask, b"", content_type="")
    return await send(ask, b"", status=int(variant))


HANDLERS: dict[str, Callable[[Ask], Awaitable[web.StreamResponse]]] = {
    name: globals()[f"fault_{name}"] for name in FAULTS
}


# --- the servers --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class ChaosServer:
    """The hostile server and its elsewhere twin, in this process (see the module docstring)."""

    seed: int
    material: Material
    served: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    elsewhere_requests: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    url: str = ""
    elsewhere: str = ""
    _runners: list[web.AppRunner] = field(default_factory=list)

    async def start(self) -> None:
        self.url = await self._listen(
            [web.get("/__chaos__/report", self._report), web.post(r"/chaos/{run:\d+}/{tail:.*}", self._handle)]
        )
        self.elsewhere = await self._listen([web.route("*", "/{tail:.*}", self._handle_elsewhere)])

    async def _listen(self, routes: list[web.RouteDef]) -> str:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.add_routes(routes)
        runner = web.AppRunner(
            app, access_log=None, handle_signals=False, handler_cancellation=True, shutdown_timeout=1.0
        )
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        self._runners.append(runner)
        return f"http://127.0.0.1:{runner.addresses[0][1]}"

    async def close(self) -> None:
        for runner in self._runners:
            await runner.cleanup()

    async def _report(self, request: web.Request) -> web.Response:
        report = {"served": self.served, "elsewhere": self.elsewhere_requests, "errors": self.errors}
        return web.json_response(report)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        run, family = int(request.match_info["run"]), family_of(request.path)
        if family is None:
            self.errors.append(f"run {run}: a request to an unknown path: {request.method} {request.path_qs}")
            return web.Response(status=404)
        log = self.served.setdefault(run, [])
        rng = die(self.seed, run, len(log) + 1)
        fault = choose_fault(rng)
        streamed = is_streamed(request.path, raw)
        entry: dict[str, Any] = {"n": len(log) + 1, "family": family, "streamed": streamed, "fault": fault}
        entry["variant"] = ""
        log.append(entry)
        ask = Ask(request, family, streamed, rng, self.material, self.elsewhere, entry)
        try:
            return await HANDLERS[fault](ask)
        except ConnectionError:  # the client hung up (a limit, a timeout): its business, not a server fault
            return web.Response(status=499)
        except Exception:
            self.errors.append(f"run {run} request {entry}: {traceback.format_exc()}")
            raise

    async def _handle_elsewhere(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        headers = {name.lower(): value for name, value in request.headers.items()}
        record = {"method": request.method, "path": request.path_qs, "headers": headers}
        record["body"] = raw[: 1 << 16].decode(errors="replace")
        self.elsewhere_requests.append(record)
        family = family_of(request.path)
        if family is None:
            return web.Response(status=404)
        streamed = is_streamed(request.path, raw)
        ask = Ask(request, family, streamed, random.Random(0), self.material, "", {})
        return await send(ask, ask.valid())


@contextlib.asynccontextmanager
async def running(seed: int) -> AsyncIterator[tuple[str, str, Callable[[], Awaitable[dict[str, Any]]]]]:
    """A chaos server in a child process for the block: ``(url, elsewhere_url, report)``, where ``await
    report()`` fetches what it served and what the elsewhere server received."""
    import aiohttp

    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.hardening.chaos_server", "--seed", str(seed),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=ROOT,
    )  # fmt: skip
    assert process.stdout is not None
    assert process.stdin is not None
    try:
        line = await process.stdout.readline()
        if not line:
            raise RuntimeError(f"the chaos server did not start (exit status {await process.wait()})")
        urls = json.loads(line)

        async def report() -> dict[str, Any]:
            async with aiohttp.ClientSession() as session, session.get(urls["url"] + "/__chaos__/report") as answer:
                data: dict[str, Any] = await answer.json()
                return data

        yield urls["url"], urls["elsewhere"], report
    finally:
        process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            process.kill()
            await process.wait()


async def _serve(seed: int) -> None:
    server = ChaosServer(seed, Material.load())
    await server.start()
    print(json.dumps({"url": server.url, "elsewhere": server.elsewhere}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until the parent closes stdin
    await server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="A hostile model server on 127.0.0.1 (see the module docstring).")
    parser.add_argument("--seed", type=int, required=True)
    asyncio.run(_serve(parser.parse_args().seed))


if __name__ == "__main__":
    main()
