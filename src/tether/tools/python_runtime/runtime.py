"""PythonRuntime: the capabilities over one namespace, each call answered with an envelope.

See the package docstring for the contract.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Awaitable, Callable, Container, MutableMapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from tether.errors import ToolError
from tether.tools.base import Tool
from tether.tools.python_runtime.capabilities import ArgumentsRejected, Capability, capabilities, check_arguments
from tether.tools.python_runtime.expressions import PathRefused, check_path, evaluate, resolve_path
from tether.tools.python_runtime.guard import Captured, EvalTimeout, guarded, started_threads
from tether.tools.python_runtime.values import (
    bound,
    describe_exception,
    documentation,
    members,
    repr_or_placeholder,
    repr_text,
    short_type_name,
    type_info,
)
from tether.tools.schema import BoundArguments, ContextParameter

Envelope = dict[str, Any]
T = TypeVar("T")
RunCall = Callable[[str, dict[str, Any]], Awaitable[Envelope]]


@dataclass(frozen=True, slots=True)
class RuntimeSettings:
    """The limits of one runtime; every text past its limit is cut and marked ``truncated``."""

    max_repr: int = 2_000
    """Characters of a repr (and of an exception's message)."""
    max_doc: int = 4_000
    """Characters of a docstring."""
    max_members: int = 200
    """Names listed by ``get_dir``."""
    max_globals: int = 200
    """Variables listed by ``list_globals`` (the most recently defined)."""
    max_output: int = 4_000
    """Characters of captured stdout, and of stderr, of one call."""
    max_traceback: int = 6_000
    """Characters of a traceback (cut in the middle)."""
    eval_timeout: float = 5.0
    """Seconds the user's code may run in one call (an ``eval_expr``, a slow ``__repr__``)."""
    allow_eval: bool = True
    """False: a read-only set, with no ``eval_expr``, whose ``expr`` arguments are names or dotted paths."""


def last_exception_from_sys() -> BaseException | None:
    """The last exception the interactive interpreter reported (``sys.last_exc``, or ``sys.last_value``)."""
    error = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    return error if issubclass(type(error), BaseException) else None


class _PythonFailure(Exception):
    """The user's code (or the model's expression) raised: reported as ``python_exception``."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(type(error).__name__)
        self.error = error


class _EnvelopeArguments:
    """Shows the model a capability's schema but passes any arguments through: the runtime checks them and
    answers a bad call with its own ``invalid_args`` envelope."""

    context: ContextParameter | None = None
    """A capability takes no run context."""

    def __init__(self, parameters: dict[str, Any]) -> None:
        self.parameters = parameters

    def validate(self, tool_name: str, arguments: dict[str, Any]) -> BoundArguments:
        return BoundArguments(args=(arguments,), kwargs={})


class PythonRuntime:
    """The seven capabilities over one namespace."""

    __slots__ = ("_capabilities", "_handlers", "_hidden", "_last_exception", "names", "namespace", "settings")

    def __init__(
        self,
        namespace: MutableMapping[str, Any],
        *,
        last_exception: Callable[[], BaseException | None] = last_exception_from_sys,
        settings: RuntimeSettings = RuntimeSettings(),
        hidden: Container[str] = (),
    ) -> None:
        """``hidden``: names ``list_globals`` leaves out unless asked for all (a shell's own variables)."""
        self.namespace = namespace
        self.settings = settings
        self._last_exception = last_exception
        self._hidden = hidden
        self._capabilities = capabilities(allow_eval=settings.allow_eval)
        self.names: tuple[str, ...] = tuple(self._capabilities)
        """The capability names offered (``eval_expr`` only when evaluation is allowed)."""
        self._handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "list_globals": self._list_globals,
            "get_type": self._get_type,
            "get_repr": self._get_repr,
            "get_dir": self._get_dir,
            "get_doc": self._get_doc,
            "eval_expr": self._eval_expr,
            "get_last_exception": self._get_last_exception,
        }

    def call(self, name: str, arguments: Any) -> Envelope:
        """One capability, synchronously, on the calling thread: ``{"ok": true, "result": {...}}`` or ``{"ok":
        false, "error": {"code", "message", "details"}}``. Never raises, except ``KeyboardInterrupt``, which
        is let through so that the host can cancel."""
        try:
            capability = self._capabilities.get(name) if isinstance(name, str) else None
            if capability is None:
                return self.unknown_function(name)
            checked = check_arguments(capability, arguments)
            return {"ok": True, "result": self._handlers[capability.name](checked)}
        except ArgumentsRejected as error:
            return _failure("invalid_args", str(error), {"problems": error.problems})
        except PathRefused as error:
            return _failure("invalid_args", str(error), {"problems": [str(error)]})
        except _PythonFailure as failure:
            return self._python_exception(failure.error)
        except KeyboardInterrupt:
            raise
        except BaseException as error:  # noqa: BLE001 - a bug of ours still answers, with an envelope
            return _failure(
                "internal",
                f"the Python runtime failed: {type(error).__name__}",
                {"exc_type": type(error).__name__, "message": _safe_str(error)[: self.settings.max_repr]},
            )

    def tools(self, run_call: RunCall) -> list[Tool]:
        """The capabilities as tether Tools, each answering with its envelope as compact JSON (an error
        envelope as an error result). ``run_call(name, arguments)`` gets the envelope: the host passes a
        function that hands the call to the thread that owns the namespace and awaits it."""
        return [_as_tool(capability, run_call) for capability in self._capabilities.values()]

    # --- the capabilities -----------------------------------------------------------------------------------

    def _list_globals(self, arguments: dict[str, Any]) -> dict[str, Any]:
        include_all = bool(arguments["include_all"])
        limit = self.settings.max_globals

        def listing() -> dict[str, Any]:
            names = [
                {"name": str(name), "type_name": short_type_name(value)}
                for name, value in list(self.namespace.items())
                if include_all or self._user_name(name, value)
            ]
            shown = names[-limit:] if limit > 0 else []
            return {"globals": shown, "truncated": len(names) > len(shown), "original_len": len(names)}

        return self._run(listing)[0]

    def _get_type(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return self._on_value(arguments["expr"], type_info)

    def _get_repr(self, arguments: dict[str, Any]) -> dict[str, Any]:
        def shown(value: Any) -> dict[str, Any]:
            text = bound(repr_text(value), self.settings.max_repr)
            return {"repr": text.text, "truncated": text.truncated, "original_len": text.original_len}

        return self._on_value(arguments["expr"], shown)

    def _get_dir(self, arguments: dict[str, Any]) -> dict[str, Any]:
        include_dunder = bool(arguments["include_dunder"])
        limit = self.settings.max_members
        return self._on_value(arguments["expr"], lambda v: members(v, include_dunder=include_dunder, limit=limit))

    def _get_doc(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return self._on_value(arguments["expr"], lambda value: documentation(value, self.settings.max_doc))

    def _eval_expr(self, arguments: dict[str, Any]) -> dict[str, Any]:
        expr = arguments["expr"]
        before = set(threading.enumerate())
        value_repr, captured = self._run(lambda: repr_or_placeholder(evaluate(expr, self.namespace)))
        shown = bound(value_repr, self.settings.max_repr)
        left = started_threads(before)
        return {
            **({"threads_left_running": left} if left else {}),
            "value_repr": shown.text,
            "stdout": captured.stdout.text,
            "stderr": captured.stderr.text,
            "truncated": shown.truncated or captured.stdout.truncated or captured.stderr.truncated,
            "original_len": {
                "value_repr": shown.original_len,
                "stdout": captured.stdout.original_len,
                "stderr": captured.stderr.original_len,
            },
        }

    def _get_last_exception(self, arguments: dict[str, Any]) -> dict[str, Any]:
        error = self._run(self._last_exception)[0]
        if error is None or not issubclass(type(error), BaseException):
            return {"exception": None}
        settings = self.settings
        return {
            "exception": describe_exception(error, max_message=settings.max_repr, max_traceback=settings.max_traceback)
        }

    # --- helpers --------------------------------------------------------------------------------------------

    def _on_value(self, expr: str, show: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
        """``show`` applied to what ``expr`` names, all of it under the guard (a repr can hang too)."""
        if self.settings.allow_eval:
            return self._run(lambda: show(evaluate(expr, self.namespace)))[0]
        path = check_path(expr)  # refused before anything is looked up
        return self._run(lambda: show(resolve_path(path, self.namespace)))[0]

    def _run(self, function: Callable[[], T]) -> tuple[T, Captured]:
        """``function`` under the deadline with output captured; what it raises becomes a ``_PythonFailure``."""
        settings = self.settings
        try:
            return guarded(function, timeout=settings.eval_timeout, max_output=settings.max_output)
        except KeyboardInterrupt:
            raise
        except EvalTimeout as timeout:
            stopped = TimeoutError(
                f"the code did not finish within {settings.eval_timeout:g} s and was interrupted"
            ).with_traceback(timeout.__traceback__)
            raise _PythonFailure(stopped) from None
        except BaseException as error:  # noqa: BLE001 - SystemExit too: the session must survive exit()
            raise _PythonFailure(error) from None

    def _user_name(self, name: Any, value: Any) -> bool:
        return (
            isinstance(name, str)
            and not name.startswith("_")
            and not issubclass(type(value), ModuleType)  # not isinstance: it would run a __class__ property
            and name not in self._hidden
        )

    def unknown_function(self, name: Any) -> Envelope:
        """The envelope of a call to a function this runtime does not offer (``unknown_function``, with the
        names it does offer). Reads nothing of the namespace: any thread may ask for it."""
        shown = repr(name)[:100] if isinstance(name, str) else f"a {type(name).__name__}"
        disabled = name == "eval_expr" and not self.settings.allow_eval
        why = " (evaluation is turned off in this session)" if disabled else ""
        return _failure(
            "unknown_function", f"no function {shown}{why}; available: {', '.join(self.names)}",
            {"name": name if isinstance(name, str) else None, "available": list(self.names)},
        )  # fmt: skip

    def _python_exception(self, error: BaseException) -> Envelope:
        settings = self.settings
        details = describe_exception(error, max_message=settings.max_repr, max_traceback=settings.max_traceback)
        return _failure("python_exception", f"{details['exc_type']}: {details['message']}", details)


def _as_tool(capability: Capability, run_call: RunCall) -> Tool:
    """One capability as a Tool that gets its envelope from ``run_call``."""
    name = capability.name

    async def invoke(arguments: dict[str, Any]) -> str:
        envelope = await run_call(name, arguments)
        text = envelope_text(envelope)
        if not envelope.get("ok"):
            raise ToolError(text)
        return text

    invoke.__name__ = name
    return Tool(
        name, capability.description, invoke, _EnvelopeArguments(capability.schema()), read_only=capability.read_only
    )


def envelope_text(envelope: Envelope) -> str:
    """An envelope as the model reads it: compact JSON."""
    return json.dumps(envelope, ensure_ascii=False, separators=(",", ":"))


def _failure(code: str, message: str, details: dict[str, Any]) -> Envelope:
    return {"ok": False, "error": {"code": code, "message": message, "details": details}}


def _safe_str(error: BaseException) -> str:
    try:
        return str(error)
    except Exception:  # noqa: BLE001 - an exception whose __str__ raises
        return ""
