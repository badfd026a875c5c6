"""Reading provider JSON that may not have the shape the API reference promises.

The contract, before the code:

* **A wrong shape is ``invalid_response``, never a crash.** A field that holds a string where an object
  belongs, a number where a list belongs, or ``null`` where text belongs is the server's fault, so it is
  reported as :class:`~tether.errors.InvalidResponse` naming the field, and the run ends (or retries) with
  that code. The accessors below check what a decoder is about to use; :func:`decoded` is the net under
  every decoder call, turning any ``TypeError``/``AttributeError``/... a decoder still hits into the same
  typed error, so no provider answer can end a run with a raw exception.
* **Absent is not wrong.** A missing optional field (or ``null``) reads as empty: an API that adds or leaves
  out a field must not break old clients.
* **Counts are forgiving.** Usage counts are information, not control: a count that is negative, fractional,
  a string or a boolean is read as the non-negative integer it can honestly stand for (``0`` when none), so
  that a broken counter never reaches a session file or a budget check.
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Callable
from typing import Any, TypeVar

from tether.errors import InvalidResponse

T = TypeVar("T")

_SHAPE_ERRORS = (AttributeError, TypeError, KeyError, IndexError, ValueError, RecursionError)
"""What decoding code raises when the JSON it reads has an unexpected shape."""

_SHORT = reprlib.Repr()
"""How a wrong value is quoted in an error message: a few levels, a few items, a short string."""
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother, _SHORT.maxlist, _SHORT.maxdict = 3, 100, 100, 4, 4


def malformed(provider: str, what: str, value: Any) -> InvalidResponse:
    """The error for ``what`` (a field's path, e.g. ``choices[0].delta``) holding ``value``."""
    shown = _SHORT.repr(value)  # bounded in depth and length: the value may be nested thousands deep
    return InvalidResponse(
        f"{provider} sent a malformed answer: {what} is {type(value).__name__} {shown}",
        details={"field": what},
    )


def as_object(value: Any, provider: str, what: str) -> dict[str, Any]:
    """``value`` as a JSON object; ``None`` reads as ``{}``."""
    if value is None:
        return {}
    if type(value) is not dict:
        raise malformed(provider, what, value)
    return value


def as_list(value: Any, provider: str, what: str) -> list[Any]:
    """``value`` as a JSON array; ``None`` reads as ``[]``."""
    if value is None:
        return []
    if type(value) is not list:
        raise malformed(provider, what, value)
    return value


def as_text(value: Any, provider: str, what: str) -> str:
    """``value`` as a string; ``None`` reads as ``""``."""
    if value is None:
        return ""
    if type(value) is not str:
        raise malformed(provider, what, value)
    return value


def as_count(value: Any) -> int:
    """A token count as a non-negative integer (see the module docstring)."""
    if type(value) is int:
        return value if value > 0 else 0
    if type(value) is float and math.isfinite(value) and value > 0:
        return int(value)
    if type(value) is str:
        try:
            number = float(value)
        except ValueError:
            return 0
        return int(number) if math.isfinite(number) and number > 0 else 0
    return 0


def decoded(decode: Callable[[Any], T], data: Any, provider: str) -> T:
    """``decode(data)``, with any error a wrong shape causes in it reported as ``invalid_response``."""
    try:
        return decode(data)
    except _SHAPE_ERRORS as error:
        raise InvalidResponse(
            f"{provider} sent a malformed answer: {type(error).__name__}: {str(error)[:200]}",
            details={"exception": type(error).__name__},
        ) from error


def anchored_entries(
    provider_data: Any, origin: str, list_key: str, item_key: str
) -> list[tuple[int, int, dict[str, Any]]]:
    """``(parts, chars, item)`` for each ``{"anchor": [parts, chars], item_key: {...}}`` entry kept under
    ``provider_data[list_key]`` by the provider named ``origin``: content a provider needs back, with the
    place it sat in its turn. Stored data is read like the wire: an entry of another shape (a hand-edited
    session) is left out rather than sent."""
    if type(provider_data) is not dict or provider_data.get("origin") != origin:
        return []
    entries = provider_data.get(list_key)
    kept: list[tuple[int, int, dict[str, Any]]] = []
    for entry in entries if type(entries) is list else ():
        anchor = entry.get("anchor") if type(entry) is dict else None
        item = entry.get(item_key) if type(entry) is dict else None
        if (
            type(item) is dict
            and isinstance(anchor, list | tuple)
            and len(anchor) == 2
            and all(type(n) is int and n >= 0 for n in anchor)
        ):
            kept.append((anchor[0], anchor[1], dict(item)))
    return kept
