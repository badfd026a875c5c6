"""Python values as bounded, JSON-ready text: reprs, type names, members, docs and exceptions.

Every text that grows with the value is cut to a limit and reported with its ``truncated`` flag and its
``original_len``, so the model knows when it saw only part. These functions run the value's own code
(``__repr__``, ``__dir__``, ``__doc__``) and let its exceptions through for the caller to report, except
where a placeholder is the better answer: the type name in a listing, the repr of a value an evaluation
produced, the text of an exception being described. Type names are read from the type's own slots, so a
hostile metaclass cannot run code through them.
"""

from __future__ import annotations

import code
import inspect
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from tether.tools.base import utf8_safe

MAX_MEMBER_NAME = 200
"""Characters of one name in a ``dir()`` listing; a ``__dir__`` may return anything."""

_OURS = str(Path(__file__).resolve().parent)
_CONSOLES = frozenset({code.__file__, str(Path(code.__file__).resolve())})
"""Python's interactive console (``code.InteractiveInterpreter.runcode``): its frame runs the user's line but
is not shown with the line's traceback, so it is no more part of what the user saw than tether's own."""
_TYPE_NAME = type.__dict__["__name__"]
_TYPE_QUALNAME = type.__dict__["__qualname__"]
_TYPE_MODULE = type.__dict__["__module__"]


@dataclass(frozen=True, slots=True)
class Bounded:
    """A text cut to its limit: what is shown, whether it was cut, and its length before."""

    text: str
    truncated: bool
    original_len: int


def bound(text: str, limit: int) -> Bounded:
    """``text``'s first ``limit`` characters (a repr, a doc, an output: their start says the most)."""
    if len(text) <= limit:
        return Bounded(text, False, len(text))
    return Bounded(text[:limit], True, len(text))


def bound_middle(text: str, limit: int) -> Bounded:
    """``text`` cut in the middle to at most ``limit`` characters, with a line saying how much went: a
    traceback's first frames say where it started and its last lines what failed."""
    if len(text) <= limit:
        return Bounded(text, False, len(text))
    marker = f"\n... ({len(text) - limit} characters not shown) ...\n"
    room = max(limit - len(marker), 0)
    head = room // 3
    tail = room - head
    shown = text[:head] + marker + (text[len(text) - tail :] if tail else "")
    return Bounded(shown[:limit], True, len(text))


def plain(text: Any) -> str:
    """A ``str`` (a subclass's methods are not trusted) that encodes as UTF-8."""
    return utf8_safe(str.__str__(text))


def repr_text(value: Any) -> str:
    """``repr(value)``; raises what the value's ``__repr__`` raises."""
    return plain(repr(value))


def repr_or_placeholder(value: Any) -> str:
    """``repr(value)``, or a placeholder naming the failure when the repr raises."""
    try:
        return repr_text(value)
    except Exception as error:  # noqa: BLE001 - the value exists; say why it cannot be shown
        return f"<{qualified_name(type(value))} object; repr() raised {short_error(error)}>"


def type_info(value: Any) -> dict[str, str]:
    """The type of ``value``: ``{"name", "module", "qualified"}`` (``qualified`` is importable-looking:
    ``collections.OrderedDict``; builtins go by their plain name)."""
    cls = type(value)
    return {"name": _slot(_TYPE_NAME, cls), "module": _module(cls), "qualified": qualified_name(cls)}


def qualified_name(cls: type) -> str:
    """``module.QualName`` of a class, or the bare qualname for builtins and types without a module."""
    module = _module(cls)
    name = _slot(_TYPE_QUALNAME, cls)
    return name if module in ("builtins", "") else f"{module}.{name}"


def short_type_name(value: Any) -> str:
    """The qualname of ``value``'s type, as a listing shows it."""
    return _slot(_TYPE_QUALNAME, type(value))


def members(value: Any, *, include_dunder: bool, limit: int) -> dict[str, Any]:
    """``dir(value)`` as ``{"members", "truncated", "original_len"}`` (``original_len`` counts names),
    without ``__dunder__`` names unless asked; raises what the value's ``__dir__`` raises."""
    names = [_member_name(name) for name in dir(value)]
    if not include_dunder:
        names = [name for name in names if not is_dunder(name)]
    return {"members": names[:limit], "truncated": len(names) > limit, "original_len": len(names)}


def documentation(value: Any, limit: int) -> dict[str, Any]:
    """The cleaned docstring of ``value`` (its class's, for an instance) as ``{"doc", "truncated",
    "original_len"}``; ``doc`` is ``None`` when there is none. Raises what reading ``__doc__`` raises."""
    doc = inspect.getdoc(value)
    if not isinstance(doc, str):
        return {"doc": None, "truncated": False, "original_len": 0}
    text = bound(plain(doc), limit)
    return {"doc": text.text, "truncated": text.truncated, "original_len": text.original_len}


def describe_exception(error: BaseException, *, max_message: int, max_traceback: int) -> dict[str, Any]:
    """An exception as ``{"exc_type", "message", "traceback", "truncated", "original_len"}``: the traceback
    as Python prints it (chained exceptions included, tether's own frames left out), both texts bounded;
    ``original_len`` gives each text's length before it was cut."""
    message = bound(_message(error), max_message)
    trace = bound_middle(_traceback(error), max_traceback)
    return {
        "exc_type": qualified_name(type(error)),
        "message": message.text,
        "traceback": trace.text,
        "truncated": message.truncated or trace.truncated,
        "original_len": {"message": message.original_len, "traceback": trace.original_len},
    }


def short_error(error: BaseException) -> str:
    """``Type: message`` of an exception, short, never raising."""
    name = qualified_name(type(error))
    detail = _message(error)
    return f"{name}: {detail[:200]}" if detail else name


def is_dunder(name: str) -> bool:
    """``__name__``-shaped: Python's own protocol names."""
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def own_frames_dropped(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` without tether's own frames at its ends: those that called the user's code (the console's that
    ran the line among them: the traceback is the one the console printed), and the one that raised into it
    (a timeout) or on its behalf (``repr()`` of a value whose C code raised)."""
    entries: list[TracebackType] = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    first, last = 0, len(entries)
    while first < last and (_ours(entries[first]) or entries[first].tb_frame.f_code.co_filename in _CONSOLES):
        first += 1
    while last > first and _ours(entries[last - 1]):
        last -= 1
    rebuilt: TracebackType | None = None
    for entry in reversed(entries[first:last]):
        rebuilt = TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return rebuilt


def _ours(entry: TracebackType) -> bool:
    return entry.tb_frame.f_code.co_filename.startswith(_OURS)


def _traceback(error: BaseException) -> str:
    try:
        lines = traceback.TracebackException(
            type(error), error, own_frames_dropped(error.__traceback__), compact=True
        ).format()
        return plain("".join(lines))
    except Exception as failure:  # noqa: BLE001 - formatting is best effort; the type and message remain
        return f"{short_error(error)}\n(the traceback could not be formatted: {type(failure).__name__})\n"


def _message(error: BaseException) -> str:
    try:
        return plain(str(error))
    except Exception:  # noqa: BLE001 - an exception whose __str__ raises
        return "<str() of the exception failed>"


def _member_name(name: Any) -> str:
    text = plain(name) if isinstance(name, str) else repr_or_placeholder(name)
    return text if len(text) <= MAX_MEMBER_NAME else text[:MAX_MEMBER_NAME] + "..."


def _module(cls: type) -> str:
    try:
        module = _TYPE_MODULE.__get__(cls, type)
    except Exception:  # noqa: BLE001 - a type whose __module__ entry is missing or odd
        return ""
    return plain(module) if isinstance(module, str) else ""


def _slot(descriptor: Any, cls: type) -> str:
    try:
        return plain(descriptor.__get__(cls, type))
    except Exception:  # noqa: BLE001 - a broken type still gets a name
        return "?"
