"""A mock of the Hugging Face Hub's HTTP API, as much of it as ``huggingface_hub`` uses to fetch one file, for
driving ``tether models pull`` (``HF_ENDPOINT`` points the Hub's client at it).

It serves on two ports of 127.0.0.1, as the Hub does on two hosts: the Hub itself and a storage host.

* ``GET /api/models/{owner}/{name}/revision/{rev}?blobs=true``: the repository at a commit, each file with its
  size and, for the files kept in LFS (every file served here), its SHA-256.
* ``HEAD /{owner}/{name}/resolve/{rev}/{file}``: ``302`` to the storage host, with ``X-Repo-Commit``,
  ``X-Linked-Etag`` (the SHA-256, quoted) and ``X-Linked-Size``; ``GET`` of the same path is redirected too.
* ``GET /blobs/{sha256}`` on the storage host: the bytes, honouring ``Range: bytes=N-`` with ``206``.

How a download of a file goes can be scripted per request: ``drop`` sends part of the file then closes the
connection; ``stall`` sends part and waits until released (a client killed meanwhile leaves its part on disk);
``corrupt`` serves bytes of the right size whose SHA-256 is not the advertised one. Every request is recorded
with its headers.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Literal

from aiohttp import web

WAIT = 30.0
COMMIT = "0123456789abcdef0123456789abcdef01234567"

Mode = Literal["whole", "drop", "stall", "corrupt"]


@dataclass(frozen=True)
class HubFile:
    name: str
    data: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass(frozen=True)
class Seen:
    """A request the mock received."""

    method: str
    host: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)


class MockHub:
    """The server (see the module docstring); a context manager that starts and stops its thread."""

    def __init__(self, repo: str, files: list[HubFile], downloads: list[Mode] | None = None) -> None:
        self.repo = repo
        self.files = {file.name: file for file in files}
        self.downloads: list[Mode] = list(downloads or [])
        """How each download (GET of a blob) goes, in order; ``whole`` once the list is used up."""
        self.seen: list[Seen] = []
        self.stalled = threading.Event()
        """Set when a stalling download has sent its part and waits."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mock-hub", daemon=True)
        self._runner: web.AppRunner | None = None
        self._release: asyncio.Event | None = None
        self.hub_port = 0
        self.storage_port = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.hub_port}"

    def blob_gets(self) -> list[Seen]:
        return [seen for seen in self.seen if seen.method == "GET" and seen.path.startswith("/blobs/")]

    def __enter__(self) -> MockHub:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(WAIT)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._release is not None:
            self._loop.call_soon_threadsafe(self._release.set)
        with suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(WAIT)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(WAIT)
        self._loop.close()

    async def _start(self) -> None:
        self._release = asyncio.Event()
        app = web.Application()
        app.router.add_get("/api/models/{owner}/{name}/revision/{revision}", self._info)
        app.router.add_route("*", "/{owner}/{name}/resolve/{revision}/{file:.+}", self._resolve)
        app.router.add_get("/blobs/{sha}", self._blob)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        hub = web.TCPSite(self._runner, "127.0.0.1", 0)
        await hub.start()
        storage = web.TCPSite(self._runner, "127.0.0.1", 0)
        await storage.start()
        self.hub_port, self.storage_port = (address[1] for address in self._runner.addresses)

    async def _stop(self) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    def _record(self, request: web.Request) -> None:
        self.seen.append(Seen(request.method, request.host, request.path, dict(request.headers)))

    def _known(self, request: web.Request) -> bool:
        repo = f"{request.match_info['owner']}/{request.match_info['name']}"
        return repo == self.repo and request.match_info["revision"] in {"main", COMMIT}

    async def _info(self, request: web.Request) -> web.Response:
        self._record(request)
        if not self._known(request):
            return web.json_response(
                {"error": "Repository not found"}, status=404, headers={"X-Error-Code": "RepoNotFound"}
            )
        siblings = [{"rfilename": "README.md", "size": 10, "blobId": "ab" * 20}] + [
            {
                "rfilename": file.name,
                "size": len(file.data),
                "blobId": "cd" * 20,
                "lfs": {"sha256": file.sha256, "size": len(file.data), "pointerSize": 135},
            }
            for file in self.files.values()
        ]
        return web.json_response({"id": self.repo, "modelId": self.repo, "sha": COMMIT, "siblings": siblings})

    async def _resolve(self, request: web.Request) -> web.Response:
        self._record(request)
        file = self.files.get(request.match_info["file"])
        if not self._known(request) or file is None:
            return web.Response(status=404, headers={"X-Error-Code": "EntryNotFound", "X-Repo-Commit": COMMIT})
        headers = {
            "X-Repo-Commit": COMMIT,
            "X-Linked-Etag": f'"{file.sha256}"',
            "X-Linked-Size": str(len(file.data)),
            "ETag": '"' + "ef" * 20 + '"',
            "Location": f"http://127.0.0.1:{self.storage_port}/blobs/{file.sha256}",
        }
        return web.Response(status=302, headers=headers)

    async def _blob(self, request: web.Request) -> web.StreamResponse:
        self._record(request)
        transport = request.transport
        assert transport is not None
        if transport.get_extra_info("sockname")[1] != self.storage_port:
            return web.Response(status=404)  # the bytes are on the storage host only
        file = next((file for file in self.files.values() if file.sha256 == request.match_info["sha"]), None)
        if file is None:
            return web.Response(status=404)
        mode = self.downloads.pop(0) if self.downloads else "whole"
        data = file.data if mode != "corrupt" else bytes(reversed(file.data))
        start = 0
        if (wanted := request.headers.get("Range", "")).startswith("bytes="):
            start = int(wanted.removeprefix("bytes=").split("-")[0])
        body = data[start:]
        response = web.StreamResponse(status=206 if start else 200)
        response.content_length = len(body)
        if start:
            response.headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        await response.prepare(request)
        if mode in {"drop", "stall"}:
            await response.write(body[: len(body) // 2])
            if mode == "stall":
                self.stalled.set()
                assert self._release is not None
                await self._release.wait()
            transport.close()  # the connection breaks mid-file (a no-op if the client has gone already)
            return response
        await response.write(body)
        await response.write_eof()
        return response
