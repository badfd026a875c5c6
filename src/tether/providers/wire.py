"""Reading provider JSON that may not have the shape the API reference promises.

The contract, before the code:

* **A wrong shape is ``invalid_response``, never a crash.** A field that holds a string where an object
  belongs, a number where a list belongs, or ``null`` where text belongs is the server's fault, so it is
  reported as :class:`~tether.errors.InvalidResponse` naming the field, and the run ends (or retries) with
  that code. Each protocol declares its wire shapes as small msgspec Structs, and :class:`Shape` reads
  an answer into them, from its JSON text (the HTTP layer's) or from parsed JSON, with one typed, cached
  decoder per shape: a value of the wrong type at any depth is an ``InvalidResponse`` naming its path
  (:func:`wrong_shape`). :func:`decoded` is the net under every decoder call, turning any
  ``TypeError``/``AttributeError``/... a decoder still hits into the same typed error, so no provider answer
  can end a run with a raw exception.
* **Absent is not wrong.** A missing optional field (or ``null``) reads as empty: an API that adds or leaves
  out a field must not break old clients.
* **Counts are forgiving.** Usage counts are information, not control: a count that is negative, fractional,
  a string or a boolean is read as the non-negative integer it can honestly stand for (``0`` when none), so
  that a broken counter never reaches a session file or a budget check.
"""

from __future__ import annotations

import math
import re
import reprlib
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

import msgspec

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


class Shape(Generic[T]):
    """One wire shape (a ``msgspec.Struct`` type) read from an answer's JSON, typed; a wrong value is an
    ``InvalidResponse`` naming its path (:func:`wrong_shape`), ``what`` naming the whole (``the chunk``)."""

    __slots__ = ("_decoder", "_renames", "_type", "what")

    def __init__(self, kind: type[T], what: str, renames: Mapping[str, str] | None = None) -> None:
        """``renames``: a field's name as an error names it, where it differs from the wire's."""
        self._type = kind
        self._decoder = msgspec.json.Decoder(kind)
        self._renames = renames or {}
        self.what = what

    def of_text(
        self, text: str | bytes, provider: str, prefix: str | Callable[[Any], str] = "", source: str = "an event"
    ) -> T:
        """The shape of JSON text (``source``: what the text is, for the error when it is not JSON); ``prefix``
        goes before a wrong value's path (the event it is in)."""
        try:
            return self._decoder.decode(text)
        except msgspec.ValidationError as error:
            raise self._wrong(provider, error, lambda: msgspec.json.decode(text), prefix) from None
        except msgspec.DecodeError:
            shown = text if isinstance(text, str) else text.decode(errors="replace")
            raise InvalidResponse(f"{provider} sent {source} that is not JSON: {shown[:200]!r}") from None

    def of(self, data: Any, provider: str, prefix: str | Callable[[Any], str] = "") -> T:
        """The shape of parsed JSON (see :meth:`of_text`)."""
        try:
            return msgspec.convert(data, self._type)
        except msgspec.ValidationError as error:
            raise self._wrong(provider, error, lambda: data, prefix) from None

    def _wrong(
        self,
        provider: str,
        error: msgspec.ValidationError,
        value: Callable[[], Any],
        prefix: str | Callable[[Any], str],
    ) -> InvalidResponse:
        """The error for a wrong value; a ``prefix`` that is a function is given the JSON to name it from."""
        if callable(prefix):
            prefix = prefix(value())
        return wrong_shape(provider, error, value, self.what, prefix, self._renames)


_PLACE = re.compile(r"\.([^.\[]+)|\[(\d+)\]")
"""One step of a msgspec path after its ``$``: ``.name`` or ``[index]``."""
_MISSING = re.compile(r"Object missing required field `(.+)`")


def wrong_shape(
    provider: str,
    error: msgspec.ValidationError,
    value: Callable[[], Any],
    what: str,
    prefix: str = "",
    renames: Mapping[str, str] | None = None,
) -> InvalidResponse:
    """The ``InvalidResponse`` for a value msgspec refused, naming its path (``choices[0].delta``, after
    ``prefix``; a field named as ``renames`` says) and quoting it briefly; ``value()`` gives the JSON it was
    read from."""
    message, _, path = str(error).rpartition(" - at `")
    if not message:
        message, path = str(error), "$"
    steps: list[str | int] = [name or int(index) for name, index in _PLACE.findall(path.rstrip("`")[1:])]
    if missing := _MISSING.fullmatch(message):
        steps.append(missing[1])
    names = renames or {}
    where = "".join(f"[{s}]" if isinstance(s, int) else f".{names.get(s, s)}" for s in steps).lstrip(".")
    where = f"{prefix}.{where}" if prefix and where else prefix or where or what
    found = _at(value(), steps)
    if found is _NOWHERE:
        return InvalidResponse(f"{provider} sent a malformed answer: {where}: {message}", details={"field": where})
    return malformed(provider, where, found)


_NOWHERE = object()


def _at(value: Any, steps: list[str | int]) -> Any:
    """The value at ``steps`` in parsed JSON, or :data:`_NOWHERE`."""
    for step in steps:
        at_index = isinstance(step, int) and type(value) is list and step < len(value)
        if at_index or (isinstance(step, str) and type(value) is dict and step in value):
            value = value[step]
        else:
            return _NOWHERE
    return value
