"""Who may use a served agent, and how much of the server one request may take.

The contract:

- **Bind.** The server binds 127.0.0.1 unless told otherwise; any other host needs a token or an
  ``authenticate`` hook, else :func:`check_bind` refuses to start with ``ConfigInvalid`` (a server reachable from
  the network and open to anyone is never started by accident). An app mounted in another server checks the
  address it was reached on, per request: without a token, a request to a non-loopback address is refused (403).
- **Identity.** ``Authorization: Bearer <token>`` on every API request (the page keeps the token it was given
  in ``sessionStorage``). A missing or wrong token is 401; the comparison takes the same time whatever the token.
  An ``authenticate(request)`` hook (sync or async) may replace the token: it returns the caller's identity (any
  string), or ``None`` for 401.
- **Ownership.** What a caller makes belongs to a hash of its identity (:attr:`Caller.owner`): a session's id
  starts with it, so ownership survives a restart with any session store; a run records it. Another caller's
  session or run is answered 404, as if it did not exist. Without a token (loopback only) every caller is the
  same local owner and sees every session of the store.
- **Size.** A request body passes ``max_request_bytes`` (20 MB by default): 413, decided from
  ``Content-Length`` before anything is read, or while a chunked body is read, never after reading it whole.
- **Concurrency.** More runs in flight than ``max_concurrent_runs``: 429 (``serve/runs.py`` counts them).
- **CORS** is off unless origins are given (``cors_origins``); then only those origins, with the
  ``Authorization`` header.
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import ipaddress
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tether.errors import ConfigInvalid

if TYPE_CHECKING:
    from starlette.requests import Request

__all__ = [
    "DEFAULT_MAX_REQUEST_BYTES",
    "Access",
    "ApiError",
    "Authenticate",
    "Caller",
    "check_bind",
    "is_loopback",
    "read_body",
]

DEFAULT_MAX_REQUEST_BYTES = 20 * 1024 * 1024
"""The largest request body a server reads by default: a few attachments."""

LOCAL_OWNER = "local"
"""The owner of everything on a server without a token: the one user of this machine."""

Authenticate = Callable[["Request"], "str | Awaitable[str | None] | None"]
"""A hook that names the caller of a request (any string), or ``None`` to refuse it (401)."""


class ApiError(Exception):
    """An API request refused: its HTTP status and a stable code, answered as
    ``{"error": {"code": ..., "message": ...}}``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sent a request: ``owner`` is the hash of its identity that its sessions and runs are kept under."""

    owner: str
    local: bool = False
    """A server without a token: one user, who owns every session."""

    def owns_session(self, session_id: str) -> bool:
        return self.local or session_id.startswith(self.owner + "-")


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, *, token: str | None, authenticate: Authenticate | None = None) -> None:
    """Refuse (``ConfigInvalid``) to serve on a host beyond this machine without a token or a hook, and an empty
    token anywhere. ``tether serve`` and ``tether mcp serve`` alike."""
    if token is not None and not token.strip():
        raise ConfigInvalid("the token is empty: give a long random one (e.g. from: openssl rand -hex 32)")
    if not is_loopback(host) and not token and authenticate is None:
        raise ConfigInvalid(
            f"refusing to serve on {host} without a token: anyone who reaches it could run the agent; "
            "give --token (or TETHER_SERVE_TOKEN), or bind 127.0.0.1"
        )


def _owner_of(identity: str) -> str:
    return "u" + hashlib.sha256(identity.encode()).hexdigest()[:15]


class Access:
    """The server's door: who a request is from (:meth:`caller`), or why it is refused."""

    __slots__ = ("_authenticate", "_token")

    def __init__(self, token: str | None, authenticate: Authenticate | None) -> None:
        if token is not None and (not isinstance(token, str) or len(token) < 8):
            raise ConfigInvalid("the server's token must be a string of at least 8 characters")
        self._token = token
        self._authenticate = authenticate

    @property
    def open(self) -> bool:
        """No token and no hook: loopback only, one owner."""
        return self._token is None and self._authenticate is None

    async def caller(self, request: Request) -> Caller:
        """The caller of ``request``; ``ApiError`` 401 for a missing or wrong token, 403 for an open server
        reached on an address beyond this machine."""
        if self.open:
            server = request.scope.get("server")
            if server and server[0] and not is_loopback(str(server[0])):
                raise ApiError(403, "forbidden", "this server has no token and answers on this machine only")
            return Caller(LOCAL_OWNER, local=True)
        if self._authenticate is not None:
            named: Any = self._authenticate(request)
            if inspect.isawaitable(named):
                named = await named
            if named is None:
                raise ApiError(401, "unauthorized", "not signed in: the server refused the credentials")
            return Caller(_owner_of(str(named)))
        assert self._token is not None
        given = _bearer(request.headers.get("authorization", ""))
        if given is None or not hmac.compare_digest(given.encode(), self._token.encode()):
            raise ApiError(401, "unauthorized", "a valid token is needed: Authorization: Bearer <token>")
        return Caller(_owner_of(self._token))


def _bearer(header: str) -> str | None:
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


async def read_body(request: Request, limit: int) -> bytes:
    """The request's body, at most ``limit`` bytes; ``ApiError`` 413 as soon as it is known to be larger
    (its ``Content-Length``, or the bytes read so far of a chunked body), without reading the rest."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise ApiError(400, "request_invalid", "Content-Length is not a number") from None
        if size > limit:
            raise ApiError(413, "request_too_large", f"the request is {size} bytes; this server takes {limit}")
    chunks: list[bytes] = []
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise ApiError(413, "request_too_large", f"the request passes {limit} bytes, the most this server takes")
        chunks.append(chunk)
    return b"".join(chunks)
