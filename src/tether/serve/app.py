"""``create_app(agent)``: an agent served over HTTP as a Starlette app (``agent.to_asgi()``, ``tether serve``).

Routes (docs/serving.md has their JSON):

- ``GET /`` the page, ``GET /static/...`` its files (``serve/page/``): open, so the page can ask for a token.
- ``POST /agui``: an AG-UI run (``RunAgentInput`` in, AG-UI events out as SSE; ``serve/agui.py``).
- ``POST /api/chat``: the Vercel AI SDK's ``useChat`` (its UI message stream out; ``serve/vercel.py``).
- ``GET /api/info``; ``POST /api/runs`` (a run, its events as SSE); ``POST /api/runs/{id}/cancel``;
  ``POST /api/runs/{id}/decisions`` (a paused run's pending calls decided, the resumed run's events as SSE);
  ``GET /api/runs``, ``GET /api/runs/{id}``; ``GET /api/sessions``, ``GET|DELETE /api/sessions/{id}``.

Every route but the page's needs the caller's token when the server has one (``serve/security.py``).

What a client's disconnect does to a streaming route's run (``serve/runs.py``): with
``on_disconnect="cancel"`` (the default) the run is cancelled, and its session keeps a valid transcript (every
tool call answered); with ``"detach"`` it runs to its end and is saved. A client too slow to read its stream is
dropped, by the same rule; no client ever slows a run or another client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from tether.errors import ConfigInvalid, TetherError
from tether.serve.api import Api
from tether.serve.runs import OnDisconnect, RunRegistry
from tether.serve.security import DEFAULT_MAX_REQUEST_BYTES, Access, ApiError, Authenticate
from tether.serve.sources import DurableServed, ServedAgent, plain_agent
from tether.sessions.base import SessionStore
from tether.sessions.memory import MemorySessionStore

__all__ = ["PAGE", "create_app"]

PAGE = Path(__file__).parent / "page"
"""The page's files: ``index.html`` at ``/``, the rest under ``/static/``."""


def create_app(
    agent: ServedAgent | DurableServed,
    *,
    token: str | None = None,
    authenticate: Authenticate | None = None,
    cors_origins: Sequence[str] = (),
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    max_concurrent_runs: int = 64,
    session_store: SessionStore | None = None,
    on_disconnect: OnDisconnect = "cancel",
    models: Mapping[str, ServedAgent] | None = None,
    stream_buffer: int = 1024,
    page: bool = True,
) -> Starlette:
    """The ASGI app serving ``agent`` (an ``Agent``, or a ``DurableAgent`` whose runs are durable: call
    ``tether.durable.launch()`` before serving it).

    Args:
        token: the bearer token every API request must carry; needed (or ``authenticate``) on a host beyond
            this machine. Sessions and runs belong to the token that made them.
        authenticate: instead of one token, a hook naming a request's caller (``None``: 401).
        cors_origins: the origins a browser may call the API from (none by default: CORS off).
        max_request_bytes: the largest request body read (413 beyond it).
        max_concurrent_runs: runs in flight at once (429 beyond it).
        session_store: where sessions are kept: the agent's store by default; an in-memory one when it has none.
        on_disconnect: what a client's disconnect does to its run: ``"cancel"`` it, or ``"detach"`` and let it
            finish.
        models: more agents the page may choose by name (``POST /api/runs`` ``model``), each with its model.
        stream_buffer: events kept for one stream whose client reads slowly, before it is dropped.
        page: serve the page at ``/``.
    """
    plain = plain_agent(agent)
    others = [plain_agent(other) for other in (models or {}).values()]
    if on_disconnect not in ("cancel", "detach"):
        raise ConfigInvalid(f"on_disconnect must be 'cancel' or 'detach', not {on_disconnect!r}")
    limits = (
        ("max_request_bytes", max_request_bytes),
        ("max_concurrent_runs", max_concurrent_runs),
        ("stream_buffer", stream_buffer),
    )
    for name, value in limits:
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigInvalid(f"{name} must be a positive integer, not {value!r}")
    access = Access(token, authenticate)
    store = _store_for(plain, session_store)
    for other in others:  # the page may switch models within a session: one store for all
        if other.store is None:
            other.store = store
    api = Api(
        agent,
        plain,
        store,
        access,
        RunRegistry(max_concurrent_runs),
        dict(models or {}),
        max_request_bytes=max_request_bytes,
        on_disconnect=on_disconnect,
        stream_buffer=stream_buffer,
    )
    routes = _api_routes(api)
    if page:
        routes += [Route("/", _page, methods=["GET"]), Mount("/static", StaticFiles(directory=PAGE), name="static")]
    middleware = []
    if cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(cors_origins),
                allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
                allow_headers=["authorization", "content-type"],
            )
        )
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={ApiError: _api_error, TetherError: _tether_error},  # type: ignore[dict-item]
        lifespan=api.lifespan,
    )
    app.state.tether = api
    return app


def _api_routes(api: Api) -> list[Route | Mount]:
    return [
        Route("/api/info", api.info, methods=["GET"]),
        Route("/api/runs", api.start_run, methods=["POST"]),
        Route("/api/runs", api.list_runs, methods=["GET"]),
        Route("/api/runs/{run_id}", api.get_run, methods=["GET"]),
        Route("/api/runs/{run_id}/cancel", api.cancel_run, methods=["POST"]),
        Route("/api/runs/{run_id}/decisions", api.decide, methods=["POST"]),
        Route("/api/sessions", api.list_sessions, methods=["GET"]),
        Route("/api/sessions/{session_id}", api.get_session, methods=["GET"]),
        Route("/api/sessions/{session_id}", api.delete_session, methods=["DELETE"]),
        *api.protocol_routes(),
    ]


def _store_for(agent: ServedAgent, store: SessionStore | None) -> SessionStore:
    """The store the served runs keep their sessions in: the agent's is set to it when it had none."""
    if store is not None and agent.store is not None and store is not agent.store:
        raise ConfigInvalid("the agent has a session store of its own: give create_app() that one or none")
    chosen = store or agent.store or MemorySessionStore()
    agent.store = chosen
    return chosen


async def _page(request: Request) -> Response:
    return FileResponse(PAGE / "index.html", headers={"cache-control": "no-cache"})


async def _api_error(request: Request, error: ApiError) -> Response:
    headers = {"www-authenticate": "Bearer"} if error.status == 401 else None
    shown: dict[str, Any] = {"code": error.code, "message": error.message}
    details = getattr(error, "details", None)
    if details:
        shown["details"] = details
    return JSONResponse({"error": shown}, status_code=error.status, headers=headers)


_BAD_REQUEST = frozenset(
    {"request_invalid", "session_invalid", "config_invalid", "invalid_arguments", "decision_invalid", "state_invalid"}
)
"""The codes of errors that are the request's fault (400); any other is the server's (500)."""


async def _tether_error(request: Request, error: TetherError) -> Response:
    status = 400 if isinstance(error, ConfigInvalid) or error.code in _BAD_REQUEST else 500
    return JSONResponse({"error": {"code": error.code, "message": error.message}}, status_code=status)
