"""Is an agent ready to run? One check per part it depends on, each bounded, none raising.

The contract, before the code:

* **The checks.** ``provider``: the model's API reached and its key accepted, by a request that spends no
  token (``GET {base_url}/models``: ``OverHttp.reach``; a provider with no ``reach`` of its own, one running
  in this process, is skipped). ``mcp:<id>``: each server whose tools the agent has, asked for its tool list
  (``ToolServer.check``: a real ``tools/list``). ``store``: the session store, when the agent has one, made to
  write a probe session, read it back and delete it.
* **Each ends as a** :class:`HealthCheck`: ``ok``, ``failed`` or ``skipped``, how long it took, and when it
  failed a stable code of :mod:`tether.errors` (the ``TetherError``'s own; for anything else the check's:
  ``transport`` for a provider or a server, ``store_unavailable`` for a store), with a detail and a hint for
  people. Detail and hint are masked of every known key (the agent's ``secrets``).
* **Bounded.** Each check runs under its own timeout; past it, it fails with ``timeout``. The checks run at
  once: a report takes as long as its slowest check.
* **Never raises** for a check that failed: every exception becomes that check's failure. Only cancellation
  of the caller goes through.
* **Leaves nothing behind.** The probe session has a fresh id (``tether-health-<hex>``) and is deleted whether
  or not reading it back worked; a probe cut short by its timeout is still deleted once its write ends, in
  the background (:func:`settle` waits for that). A store that was never used has its file or directory
  created, as its first run would.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import msgspec

from tether.errors import ErrorCode, TetherError
from tether.messages import user_message
from tether.secrets import Masker

if TYPE_CHECKING:
    from tether.providers.base import Provider
    from tether.sessions.base import SessionStore
    from tether.tools.base import Tool, ToolServer

__all__ = [
    "DEFAULT_TIMEOUT",
    "HealthCheck",
    "HealthReport",
    "Reachable",
    "Skip",
    "Status",
    "health_of",
    "provider_check",
    "run_check",
    "server_check",
    "settle",
    "store_check",
]

Status = Literal["ok", "failed", "skipped"]

DEFAULT_TIMEOUT = 10.0
"""Seconds each check may take unless told otherwise."""

PROBE_PREFIX = "tether-health-"
"""The start of a probe session's id: a session so named found in a store is a probe a crash left there."""


class HealthCheck(msgspec.Struct, frozen=True, kw_only=True):
    """One part checked: its verdict, how long the check took, and why when it failed."""

    name: str
    """``provider``, ``mcp:<server id>``, ``store`` (and, for ``tether doctor``, its own checks)."""
    status: Status
    duration_ms: float
    detail: str = ""
    """What was found, or what went wrong; masked of every known key."""
    code: ErrorCode | None = None
    """The stable code of the failure (:mod:`tether.errors`); ``None`` unless ``status`` is ``failed``."""
    hint: str = ""
    """What to do about a failure, when something can be said."""

    @property
    def ok(self) -> bool:
        """Not failed (a skipped check is not a failure)."""
        return self.status != "failed"


class HealthReport(msgspec.Struct, frozen=True):
    """Every check of an agent (or of ``tether doctor``), in a stable order."""

    checks: tuple[HealthCheck, ...]

    @property
    def ok(self) -> bool:
        """No check failed."""
        return all(check.ok for check in self.checks)

    @property
    def failed(self) -> tuple[HealthCheck, ...]:
        return tuple(check for check in self.checks if check.status == "failed")

    def get(self, name: str) -> HealthCheck | None:
        """The check named ``name``, if there is one."""
        return next((check for check in self.checks if check.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``{"ok": ..., "checks": [{"name": ..., "status": ..., ...}, ...]}``."""
        return {"ok": self.ok, "checks": [msgspec.to_builtins(check) for check in self.checks]}


class Skip(Exception):
    """Raised by a check that does not apply (its message says why): the check is ``skipped``."""


@runtime_checkable
class Reachable(Protocol):
    """A provider that can be reached without spending a token (every provider over HTTP: ``OverHttp``)."""

    def reach(self, timeout: float) -> Awaitable[str]: ...


Check = Callable[[], Awaitable[str]]
"""A check's work: what it found, in a few words; raises to fail, :class:`Skip` to be skipped."""

HINTS: dict[str, dict[str, str]] = {  # what to do, by check and code
    "provider": {
        "auth_failed": "check the API key: its variable (tether models lists them) or api_key=",
        "transport": "is the server running, and is base_url right? (tether probe URL tells)",
        "timeout": "the API did not answer in time: a slow network, a proxy, or a server still starting",
        "bad_request": "check base_url: it usually ends in /v1",
        "provider_unavailable": "the provider is down or overloaded; try again later",
    },
    "mcp": {
        "transport": "the server is down or closed the connection: its next call starts it again",
        "timeout": "the server did not answer in time; a larger connect_timeout gives it longer",
    },
    "store": {
        "store_unavailable": "the store cannot be written: check the permissions and free space where it is",
        "timeout": "the store is locked or slow: another process may hold it",
    },
}


async def run_check(
    name: str, check: Check, *, timeout: float, masker: Masker, code: ErrorCode, hints: dict[str, str] | None = None
) -> HealthCheck:
    """Run ``check`` under ``timeout`` seconds and say how it went; never raises but for cancellation.

    A ``TetherError`` fails with its own code, a timeout with ``timeout``, anything else with ``code``."""
    started = time.perf_counter()
    failure: ErrorCode
    try:
        async with asyncio.timeout(timeout):
            detail = await check()
    except Skip as skip:
        return _check(name, "skipped", started, str(skip), masker)
    except TetherError as error:
        failure, detail = error.code, error.message
    except TimeoutError:
        failure, detail = "timeout", f"no answer within {timeout:g} s"
    except Exception as error:  # noqa: BLE001 - a check that fails is reported, never raised
        failure, detail = code, f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    else:
        return _check(name, "ok", started, detail, masker)
    hint = (hints or {}).get(failure, "")
    return _check(name, "failed", started, detail, masker, code=failure, hint=hint)


def _check(
    name: str, status: Status, started: float, detail: str, masker: Masker, code: ErrorCode | None = None,
    hint: str = "",
) -> HealthCheck:  # fmt: skip
    elapsed = round((time.perf_counter() - started) * 1000, 1)
    return HealthCheck(
        name=name, status=status, duration_ms=elapsed, detail=masker.mask(detail), code=code, hint=masker.mask(hint)
    )


# --- the parts ------------------------------------------------------------------------------------------------


def provider_check(provider: Provider, timeout: float) -> Check:
    """The model's API reached (``Reachable.reach``); skipped for a provider with nothing to reach."""

    async def check() -> str:
        if not isinstance(provider, Reachable):
            raise Skip(f"{provider.info.model_string} runs without a network API to reach")
        return await provider.reach(timeout)

    return check


def server_check(server: ToolServer) -> Check:
    """A tool server (an MCP server) asked for something real."""
    return server.check


_cleanups: set[asyncio.Task[Any]] = set()
"""Probes whose check was cut short, still to be deleted (:func:`settle`)."""


def store_check(store: SessionStore) -> Check:
    """A probe session written, read back and deleted; the delete is made even when the check is cut short."""

    async def check() -> str:
        task = asyncio.ensure_future(_probe(store, PROBE_PREFIX + secrets.token_hex(8)))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            _cleanups.add(task)
            task.add_done_callback(_cleanups.discard)
            raise

    return check


async def _probe(store: SessionStore, session_id: str) -> str:
    from tether.errors import SessionInvalid
    from tether.sessions.base import Session

    probe = Session.new(id=session_id, title="health check", messages=(user_message("health check"),))
    await store.save(probe)
    try:
        loaded = await store.load(session_id)
    finally:
        await store.delete(session_id)
    if loaded.messages != probe.messages:
        raise SessionInvalid(f"{type(store).__name__} read back a probe session other than the one it wrote")
    return f"a probe session written, read back and deleted ({type(store).__name__})"


async def settle(timeout: float = DEFAULT_TIMEOUT) -> None:
    """Wait (at most ``timeout`` seconds) for the probes of checks cut short to be deleted: before the event
    loop that ran them closes (``Agent.health_sync`` does)."""
    if _cleanups:
        await asyncio.wait(set(_cleanups), timeout=timeout)


# --- an agent's -----------------------------------------------------------------------------------------------


async def health_of(
    provider: Provider,
    tools: Iterable[Tool],
    store: SessionStore | None,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    masker: Masker | None = None,
) -> HealthReport:
    """The report of an agent's parts (see the module docstring): ``provider``, each ``mcp:<id>`` in the order
    of its tools, ``store``."""
    if not timeout > 0:
        from tether.errors import ConfigInvalid

        raise ConfigInvalid(f"a health check's timeout must be > 0 seconds, not {timeout!r}")
    masker = masker if masker is not None else Masker()
    servers: dict[int, ToolServer] = {}
    for tool in tools:
        if tool.server is not None:
            servers.setdefault(id(tool.server), tool.server)
    checks = [run_check("provider", provider_check(provider, timeout), timeout=timeout, masker=masker,
                        code="transport", hints=HINTS["provider"])]  # fmt: skip
    checks += [
        run_check(f"mcp:{server.name}", server_check(server), timeout=timeout, masker=masker, code="transport",
                  hints=HINTS["mcp"])
        for server in servers.values()
    ]  # fmt: skip
    checks.append(run_check("store", _store_or_skip(store), timeout=timeout, masker=masker,
                            code="store_unavailable", hints=HINTS["store"]))  # fmt: skip
    return HealthReport(tuple(await asyncio.gather(*checks)))


def _store_or_skip(store: SessionStore | None) -> Check:
    if store is not None:
        return store_check(store)

    async def skipped() -> str:
        raise Skip("the agent has no session store (Agent(store=...))")

    return skipped
