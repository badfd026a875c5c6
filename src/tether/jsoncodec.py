"""JSON on the hot path: ``orjson`` when it is installed (``pip install tether[speed]``), the standard library's
``json`` otherwise, with the standard library's results either way.

Every request body, every streamed chunk and every tool call's arguments go through here, so the codec is
worth a faster parser; but a different parser must not change what a run sees. The contract:

* :func:`loads` returns what ``json.loads`` returns, and raises what it raises. ``orjson`` reads the common
  case; whatever it refuses (``NaN`` and ``Infinity``, numbers too large for a double, escaped lone
  surrogates, text nested deeper than 1,024 levels, bytes that are not UTF-8, a byte-order mark, any invalid
  JSON) is read again by ``json``, so the value, or the exception class and its message, are the standard
  library's. ``orjson`` reads an integer past 64 bits as a float: text with a run of 19 digits or more is
  read by ``json`` too, so such integers stay exact.
* :func:`dumps` and :func:`dumps_bytes` return ``json.dumps(value, ensure_ascii=False,
  separators=(",", ":"))`` (as text, or as UTF-8). What ``orjson`` refuses (integers past 64 bits, keys that
  are not strings, lone surrogates, nesting deeper than 254 levels, cycles, types it does not know, float
  subclasses) goes to ``json``, which writes it or raises as it always did. ``orjson`` writes ``NaN`` and
  infinities as ``null`` where ``json`` writes ``NaN`` and ``Infinity``: output that holds a ``null`` is
  checked for non-finite floats (unless the caller of :func:`dumps_bytes` vouches that it has none) and, when
  it has one, written by ``json``. Dataclasses and datetimes, which ``json`` refuses, are refused here too
  (enums and UUIDs, which ``orjson`` writes as their values, are the one difference: ``json`` would raise
  ``TypeError``). Floats may be spelt differently (``1e-7`` against ``1e-07``): the same number, read back.

``orjson`` is imported at the first call, never at ``import tether``. ``TETHER_JSON=stdlib`` in the environment,
or :func:`use` (for tests and benchmarks), keeps to the standard library.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any, Literal

Backend = Literal["orjson", "stdlib"]

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""One encoder for every call: ``json.dumps`` with options builds a new one each time (it checks for cycles,
unlike :func:`stdlib_encoder`'s, because :func:`dumps` promises ``json``'s error for them)."""

_orjson: ModuleType | None = None
_resolved = False
_options = 0

_DIGIT_RUNS = bytes(ord("0") if chr(byte).isdigit() and byte < 128 else ord(" ") for byte in range(256))
"""Maps ASCII digits to ``0`` and every other byte to a space: a run of digits becomes a run of ``0``s."""
_LONG_NUMBER = b"0" * 19
"""The shortest run of digits that may be an integer past 64 bits (``orjson`` would read it as a float)."""


def use(backend: Backend | None) -> None:
    """Force a backend (``"stdlib"``, or ``"orjson"``, which must then be installed), or with ``None`` go back
    to the default: ``orjson`` when installed, unless ``TETHER_JSON=stdlib``."""
    global _orjson, _resolved, _options
    _orjson = None
    if backend == "orjson" or (backend is None and os.environ.get("TETHER_JSON", "").lower() != "stdlib"):
        try:
            import orjson
        except ImportError:
            if backend == "orjson":
                raise
        else:
            _orjson = orjson
            _options = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
    _resolved = True


def backend() -> Backend:
    """The backend in use (resolving the default on first call)."""
    if not _resolved:
        use(None)
    return "orjson" if _orjson is not None else "stdlib"


def loads(data: str | bytes | bytearray) -> Any:
    """``json.loads(data)``, read by ``orjson`` when it can be (see the module docstring)."""
    fast = _orjson if _resolved else _load()
    if fast is not None:
        try:
            value = fast.loads(data)
        except ValueError:  # orjson.JSONDecodeError; json decides what the text is, and raises its own error
            pass
        else:
            if len(data) < len(_LONG_NUMBER):
                return value
            raw = data.encode() if isinstance(data, str) else bytes(data)
            if _LONG_NUMBER not in raw.translate(_DIGIT_RUNS):
                return value
    return json.loads(data)


def dumps(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, separators=(",", ":"))``, written by ``orjson`` when it can be."""
    fast = _orjson if _resolved else _load()
    if fast is not None:
        encoded = _fast_dumps(fast, value)
        if encoded is not None:
            return encoded.decode()
    return _ENCODER.encode(value)


def dumps_bytes(value: Any, *, finite: bool = False) -> bytes:
    """:func:`dumps` as UTF-8 (a lone surrogate raises ``UnicodeEncodeError``, as ``str.encode`` does).

    ``finite=True`` is the caller's word that ``value`` holds no float that is not finite (it built the value
    of text and ``None``): a ``null`` in ``orjson``'s text is then not looked into.

    The bytes are a copy exactly their size: the ones ``orjson`` returns keep the whole buffer it wrote into
    (4 KB for a short value, about 8 KB for 3 KB of JSON), and what is returned here is kept: a request body
    while it is in flight, a message's JSON for every later request of its run."""
    fast = _orjson if _resolved else _load()
    if fast is not None:
        encoded = _fast_dumps(fast, value, finite)
        if encoded is not None:
            return memoryview(encoded).tobytes()
    return _ENCODER.encode(value).encode()


def _fast_dumps(fast: ModuleType, value: Any, finite: bool = False) -> bytes | None:
    """``orjson``'s text, or ``None`` where it would differ from ``json``'s or it refuses the value."""
    try:
        encoded: bytes = fast.dumps(value, option=_options)
    except TypeError:  # orjson.JSONEncodeError
        return None
    if not finite and b"null" in encoded and _has_non_finite(value):
        return None
    return encoded


def _has_non_finite(value: Any) -> bool:
    """Whether a float that is not finite is anywhere in ``value`` (already known to be JSON ``orjson`` wrote,
    so acyclic and at most 254 levels deep).

    Every request body with a ``null`` in it comes here (an assistant message with tool calls and no text has
    ``"content": null``), so the walk tests exact types first, the common ones first: strings and ``None`` cost
    one test each, and ``isinstance`` is asked only of the subclasses of ``dict``, ``list`` and ``tuple`` that
    ``orjson`` also writes. Half the cost of asking ``isinstance`` of everything.
    """
    stack = [value]
    pop, push = stack.pop, stack.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind is str or item is None:
            continue
        if kind is dict:
            push(item.values())
        elif kind is list or kind is tuple:
            push(item)
        elif kind is float:
            if not _isfinite(item):
                return True
        elif isinstance(item, dict):
            push(item.values())
        elif isinstance(item, list | tuple):
            push(item)
    return False


_isfinite = math.isfinite


def stdlib_encoder(
    *,
    ensure_ascii: bool = True,
    separators: tuple[str, str] = (", ", ": "),
    sort_keys: bool = False,
    default: Callable[[Any], Any] | None = None,
) -> Callable[[Any], str]:
    """``json.JSONEncoder(ensure_ascii=..., separators=..., sort_keys=..., default=...).encode``, with the
    standard library's output, for text that must be ``json``'s whatever the backend (a tool's output as the
    model reads it, the canonical form of a call's arguments).

    ``JSONEncoder.encode`` makes a C encoder and a dict of the containers it is in on every call; this one makes
    the C encoder once. It does not check for cycles: a value that holds itself raises ``RecursionError`` (an
    ``Exception``, as the ``ValueError`` ``json`` raises for it is) instead of looping.
    """
    encoder = json.JSONEncoder(
        ensure_ascii=ensure_ascii, separators=separators, sort_keys=sort_keys, default=default, check_circular=False
    )
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # an interpreter without the C accelerator
        return encoder.encode
    string = json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    iterencode = make(
        None, encoder.default, string, None, separators[1], separators[0], sort_keys, False, True
    )  # fmt: skip
    join = "".join

    def encode(value: Any) -> str:
        if type(value) is str:
            return string(value)
        return join(iterencode(value, 0))

    return encode


def _load() -> ModuleType | None:
    use(None)
    return _orjson
