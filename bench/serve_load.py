"""A served agent under load: concurrent streaming chats against ``tether serve``, and the memory of a stream.

Run: .venv/bin/python bench/serve_load.py [--streams 200]

The server is the real command (``tether serve --agent bench.serve_agents:agent``) in its own process on
127.0.0.1; the clients are aiohttp in this one. The model is scripted (``serve_agents.py``): eight streamed
pieces an answer, no network, so what is measured is the server.

- **Complete**: ``--streams`` chats at once through ``POST /api/runs``, each read to its end; counts the streams
  whose last event is ``run_completed`` with the whole answer, and prints the wall time.
- **Held**: ``--streams`` streams held open (each run sends one piece and waits), the server's RSS
  (``/proc/PID/status``) before and with them open; the difference divided by the streams is the memory of
  one open stream (its run, its session, its queue and its connection). The clients then go, which cancels
  the runs (the server's default).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from serve_agents import ANSWER  # noqa: E402 - this folder, put on the path above


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


async def chat(http: aiohttp.ClientSession, base: str, prompt: str) -> tuple[str, str]:
    """One whole chat: the kind of its last event and its text."""
    text, last = [], ""
    async with http.post(base + "/api/runs", json={"prompt": prompt}) as response:
        response.raise_for_status()
        async for line in response.content:
            if line.startswith(b"data: "):
                event = json.loads(line[6:])
                last = event["kind"]
                if last == "text_delta":
                    text.append(event["text"])
    return last, "".join(text)


async def hold(http: aiohttp.ClientSession, base: str, opened: asyncio.Event, release: asyncio.Event) -> None:
    """One stream held open until ``release``: read until its first piece, then left open."""
    async with http.post(base + "/api/runs", json={"prompt": "hold"}) as response:
        async for line in response.content:
            if line.startswith(b"data: ") and b'"text_delta"' in line:
                break
        opened.set()
        await release.wait()


async def measure(base: str, pid: int, streams: int) -> dict[str, Any]:
    connector = aiohttp.TCPConnector(limit=streams * 2)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=600)) as http:
        await chat(http, base, "warm up")
        started = time.perf_counter()
        done = await asyncio.gather(*(chat(http, base, f"chat {i}") for i in range(streams)))
        wall = time.perf_counter() - started
        complete = sum(1 for last, text in done if last == "run_completed" and text == ANSWER)
        await chat(http, base, "settle")
        before = rss_kb(pid)
        release = asyncio.Event()
        opened = [asyncio.Event() for _ in range(streams)]
        holders = [asyncio.create_task(hold(http, base, o, release)) for o in opened]
        await asyncio.gather(*(o.wait() for o in opened))
        held = rss_kb(pid)
        release.set()
        await asyncio.gather(*holders)
    return {
        "streams": streams,
        "complete": complete,
        "wall_s": round(wall, 3),
        "chats_per_s": round(streams / wall, 1),
        "rss_before_kb": before,
        "rss_held_kb": held,
        "kb_per_open_stream": round((held - before) / streams, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=200)
    streams = parser.parse_args().streams
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, "-m", "tether", "serve", "--agent", "bench.serve_agents:agent", "--port", "0",
               "--max-runs", str(streams * 2)]  # fmt: skip
    with subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True) as server:
        assert server.stderr is not None
        line = server.stderr.readline()
        if "listening on " not in line:
            raise SystemExit(f"the server did not start: {line}{server.stderr.read()}")
        base = line.split("listening on ", 1)[1].split()[0].rstrip("/")
        try:
            figures = asyncio.run(measure(base, server.pid, streams))
        finally:
            server.send_signal(2)
            server.wait(timeout=60)
    print(json.dumps(figures, indent=2))
    print(
        f"{figures['complete']}/{streams} streams complete in {figures['wall_s']} s "
        f"({figures['chats_per_s']} chats/s); {figures['kb_per_open_stream']} KB RSS per open stream"
    )


if __name__ == "__main__":
    main()
