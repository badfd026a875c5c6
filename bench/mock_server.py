"""A mock OpenAI-compatible server for the benchmarks: scripted tool-call turns, then a final answer.

Run: python bench/mock_server.py PORT   (the driver polls ``GET /stats`` until it answers)

The model name says what to play: ``tools-N`` answers N tool-call turns (one ``add`` call each) and then the
final text; ``tools-N-parallel-K`` asks for K calls per turn. ``work-N`` plays a long working session that
survives compaction: each of N turns says a sentence and asks for one ``read_file`` call, the turn is read from
the id of the last tool result (not by counting messages, which a compaction removes), a tools-off request
(``tool_choice: "none"``, the summary a compaction asks for) gets a summary (900 to 1,600 characters), and
``prompt_tokens`` is the request body's size at four bytes a token, so a client's token gauge sees requests
grow as they would. Requests with ``"stream": true`` get the answer
as server-sent events (arguments in three pieces, the final text in eight), others as one JSON body. The
first text chunk of a streamed final answer starts with ``t=<monotonic ns>`` stamped just before it is
written, so a client can measure how long the first token takes to reach its consumer.

``GET /stats`` returns the number of chat requests served, the number held and the server's own CPU seconds,
so the driver can check that no run short-circuited and report what the server cost.

Holding (``bench/objects.py``): after ``POST /hold`` the server holds every ``tools-N`` request of a run's first
two turns (none after a tool call yet, or one) until ``POST /release``, so that a client can look at all of
its runs while they wait for the same answer; ``POST /release?stop=1`` also ends holding.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time
from typing import Any

from aiohttp import web

FINAL_WORDS = ["The ", "sum ", "of ", "all ", "the ", "numbers ", "is ", "done."]

requests_served = 0
requests_held = 0
holding = False
gate = asyncio.Event()


def _usage(body: dict[str, Any]) -> dict[str, int]:
    return {"prompt_tokens": 20 + 10 * len(body["messages"]), "completion_tokens": 12, "total_tokens": 0}


def _plan(model: str) -> tuple[int, int]:
    """(tool turns, calls per turn) from a model name like ``tools-5`` or ``tools-5-parallel-3``."""
    parts = model.split("-")
    turns = int(parts[1])
    parallel = int(parts[3]) if len(parts) > 3 and parts[2] == "parallel" else 1
    return turns, parallel


def _tool_calls(turn: int, parallel: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"call_{turn}_{k}",
            "type": "function",
            "function": {"name": "add", "arguments": json.dumps({"a": turn, "b": k + 1})},
        }
        for k in range(parallel)
    ]


async def chat(request: web.Request) -> web.StreamResponse:
    global requests_served
    requests_served += 1
    raw = await request.read()
    body = json.loads(raw)
    if body["model"].startswith("work-"):
        return web.json_response(_work(body, len(raw)))
    tool_turns, parallel = _plan(body["model"])
    turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
    if holding and turn < 2:
        await _held()
    calls = _tool_calls(turn, parallel) if turn < tool_turns else None
    if not body.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": None if calls else "".join(FINAL_WORDS)}
        if calls:
            message["tool_calls"] = calls
        choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        return web.json_response(
            {"id": "chatcmpl-bench", "object": "chat.completion", "model": body["model"], "choices": [choice],
             "usage": _usage(body)}
        )  # fmt: skip
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    head = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "model": body["model"]}
    if calls:
        for index, call in enumerate(calls):
            arguments = call["function"]["arguments"]
            thirds = [arguments[: len(arguments) // 3], arguments[len(arguments) // 3 : 2 * len(arguments) // 3],
                      arguments[2 * len(arguments) // 3 :]]  # fmt: skip
            first = {"index": index, "id": call["id"], "type": "function",
                     "function": {"name": "add", "arguments": thirds[0]}}  # fmt: skip
            await _send(response, head, {"tool_calls": [first]})
            for piece in thirds[1:]:
                await _send(response, head, {"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        await _send(response, head, {}, finish="tool_calls")
    else:
        for position, word in enumerate(FINAL_WORDS):
            text = f"t={time.monotonic_ns()} {word}" if position == 0 else word
            await _send(response, head, {"content": text})
        await _send(response, head, {}, finish="stop")
    await response.write(f"data: {json.dumps({**head, 'choices': [], 'usage': _usage(body)})}\n\n".encode())
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


SUMMARY = (
    "The user asked for a review of the request handlers under src/app before the release. Done so far: "
    "{done} modules read in order, each defining handler functions that call compute_N on the request payload "
    "with a retry count and answer with status 200-202; no handler validates its payload before computing, "
    "and the retry counts differ between modules without a stated reason. Decisions: keep the public "
    "signatures; note every handler whose retries exceed three; collect the status codes per module. In "
    "progress: reading the remaining modules one by one with read_file, in numeric order, to finish the list. "
    "Still to do: read the rest, then write the findings as a short report grouped by module, with the "
    "handlers to fix first. Facts to keep: the modules are src/app/module_NN.py; every function body has "
    "three lines; compute_N and respond are imported from the same package; nothing was changed yet. "
    "Findings for the last modules read:"
)
FINDING = " module_{n:02d}: {retries} retries, no payload check;"


def _work(body: dict[str, Any], size: int) -> dict[str, Any]:
    """A ``work-N`` answer: a tool call for the next turn, the final text, or a summary (module docstring)."""
    turns = int(body["model"].split("-")[1])
    turn = next((int(m["tool_call_id"].split("_")[1]) + 1 for m in reversed(body["messages"]) if m["role"] == "tool"),
                0)  # fmt: skip
    message: dict[str, Any] = {"role": "assistant", "content": "".join(FINAL_WORDS)}
    if body.get("tool_choice") == "none":
        message["content"] = SUMMARY.format(done=turn) + "".join(
            FINDING.format(n=n, retries=n % 5 + 1) for n in range(max(turn - 12, 0), turn)
        )
    elif turn < turns:
        path = f"src/app/module_{turn:02d}.py"
        message["content"] = f"Reading {path} next, to follow the handlers it defines and what they call."
        call = {"name": "read_file", "arguments": json.dumps({"path": path})}
        message["tool_calls"] = [{"id": f"call_{turn}", "type": "function", "function": call}]
    finish = "tool_calls" if "tool_calls" in message else "stop"
    usage = {"prompt_tokens": size // 4, "completion_tokens": len(json.dumps(message)) // 4, "total_tokens": 0}
    choice = {"index": 0, "message": message, "finish_reason": finish}
    return {"id": "chatcmpl-bench", "object": "chat.completion", "model": body["model"], "choices": [choice],
            "usage": usage}  # fmt: skip


async def _send(
    response: web.StreamResponse, head: dict[str, Any], delta: dict[str, Any], finish: str | None = None
) -> None:
    chunk = {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    await response.write(f"data: {json.dumps(chunk)}\n\n".encode())


async def _held() -> None:
    """Wait for the next ``POST /release`` (see the module docstring)."""
    global requests_held
    requests_held += 1
    try:
        await gate.wait()
    finally:
        requests_held -= 1


async def hold(request: web.Request) -> web.Response:
    global holding
    holding = True
    return web.json_response({"held": requests_held})


async def release(request: web.Request) -> web.Response:
    """Let every held request answer; a fresh gate holds the next ones (unless ``stop`` ends holding)."""
    global gate, holding
    released, gate = gate, asyncio.Event()
    released.set()
    holding = holding and not request.query.get("stop")
    return web.json_response({"held": requests_held})


async def stats(request: web.Request) -> web.Response:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return web.json_response(
        {"requests": requests_served, "held": requests_held, "cpu_s": usage.ru_utime + usage.ru_stime}
    )


def main() -> None:
    port = int(sys.argv[1])
    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/stats", stats)
    app.router.add_post("/hold", hold)
    app.router.add_post("/release", release)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, backlog=16384)


if __name__ == "__main__":
    main()
