"""Redaction: the one place that decides what of a run may be shown outside it.

Spans, log records, the CLI's output, error messages and ``repr``s all pass what they show through a
:class:`Redaction`:

* **Known keys** are masked wherever they appear (:class:`~tether.secrets.Masker`: the provider's API key,
  the values of the environment's secret-named variables, connection-string passwords, the host's
  ``secrets=``).
* **Bearer tokens** (``Authorization: Bearer ...``) are masked whatever their value.
* **Secret arguments**: a tool argument whose name looks secret (``password``, ``token``, ``api_key``,
  ``secret``, ``authorization``, ... configurable) has its value replaced by ``***``, at any depth of the
  arguments. A name is read as words (``db_password``, ``clientSecret``, ``X-Api-Key``): it is secret when
  one word, or two adjacent words written together, is a secret name compared without case (``api_key``
  matches ``apiKey`` and ``X-API-KEY``). ``max_tokens`` or ``author`` are not secret.

What the model and the session store get is not changed here: a tool must receive its real arguments, and a
session must replay what the model said. Tool *results* are masked of known keys before anything sees them
(``loop/executor.py``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from typing import Any

from tether.secrets import MASK, Masker

DEFAULT_SECRET_ARGUMENTS: tuple[str, ...] = (
    "password", "passwd", "pwd", "passphrase", "token", "api_key", "secret", "authorization", "credential",
    "credentials", "private_key", "access_key", "session_key", "cookie", "bearer",
)  # fmt: skip
"""Argument names whose values are hidden, matched as words: ``db_password``, ``GITHUB_TOKEN``, ``apiKey``
and ``clientSecret`` are secret."""

_BEARER = re.compile(r"(?i)(\bbearer\s++)[A-Za-z0-9._~+/=-]++")
_SEPARATORS = str.maketrans("", "", "-_ .")
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_MAX_DEPTH = 64


class Redaction:
    """Masks known keys, bearer tokens and secret-named arguments (see the module docstring)."""

    __slots__ = ("_parts", "masker", "secret_arguments")

    def __init__(self, masker: Masker | None = None, secret_arguments: Iterable[str] = DEFAULT_SECRET_ARGUMENTS):
        self.masker = masker if masker is not None else Masker()
        self.secret_arguments = tuple(secret_arguments)
        self._parts = frozenset(normal for name in self.secret_arguments if (normal := _normal(name)))

    def is_secret_argument(self, name: str) -> bool:
        """Whether an argument called ``name`` holds a secret (see the module docstring)."""
        words = [word.lower() for word in _WORDS.findall(name[:200])]
        parts = self._parts
        if any(word in parts for word in words):
            return True
        return any(first + second in parts for first, second in itertools.pairwise(words))

    def text(self, text: str) -> str:
        """``text`` with known keys and bearer tokens masked."""
        text = self.masker.mask(text)
        if "earer" in text or "EARER" in text:
            text = _BEARER.sub(lambda match: match[1] + MASK, text)
        return text

    def arguments(self, arguments: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """A copy of a tool call's arguments fit to show: secret-named values hidden, known keys masked."""
        if arguments is None:
            return None
        shown = self.value(dict(arguments), 0)
        assert isinstance(shown, dict)
        return shown

    def value(self, value: Any, depth: int = 0) -> Any:
        """``value`` (JSON-like data) with secret-named members hidden and known keys masked in its strings."""
        if isinstance(value, str):
            return self.text(value)
        if depth >= _MAX_DEPTH:
            return MASK
        if isinstance(value, Mapping):
            return {
                key: MASK if isinstance(key, str) and self.is_secret_argument(key) else self.value(item, depth + 1)
                for key, item in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.value(item, depth + 1) for item in value]
        return value

    def __repr__(self) -> str:
        return f"Redaction({self.masker!r}, {len(self._parts)} secret argument names)"


def _normal(name: str) -> str:
    return name.translate(_SEPARATORS).lower()
