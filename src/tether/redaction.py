"""Redaction: the one home of the rules that decide what of a run may be shown outside it.

Spans, log records, the CLI's output, error messages and ``repr``\\s all pass what they show through a
:class:`Redaction`:

* **Known keys** are masked wherever they appear (:class:`~tether.secrets.Masker`: the provider's API key,
  the values of the environment's secret-named variables, connection-string passwords, the host's
  ``secrets=``).
* **Bearer tokens** (``Authorization: Bearer ...``) and **URL passwords** (``scheme://user:password@host``)
  are masked whatever their value.
* **Secret arguments**: a tool argument whose name looks secret (``password``, ``token``, ``api_key``,
  ``secret``, ``authorization``, ... configurable) has its value replaced by ``***``, at any depth of the
  arguments. A name is read as words (``db_password``, ``clientSecret``, ``X-Api-Key``): it is secret when
  one word, or two adjacent words written together, is a secret name compared without case (``api_key``
  matches ``apiKey`` and ``X-API-KEY``). ``max_tokens`` or ``author`` are not secret.
* **Secret members in text**: the same names rule applies inside text that is not parsed, such as the raw
  arguments of a call whose JSON is broken or an error message that quotes them: ``"password": "hunter2"``
  and ``'token': 'x'`` (JSON and Python ``repr`` members) and ``password=hunter2``, ``--token=x``,
  ``?access_token=x`` (assignments, options and query parameters) have their values masked.

What the model and the session store get is not changed here: a tool must receive its real arguments, and a
session must replay what the model said. Tool *results* are masked of known keys before anything sees them
(``loop/executor.py``).

The name rules (which argument names are secret, and the other kinds of name) live in
:mod:`tether.secrets`, with the mask and the URL-password pattern.

Every pattern here runs in time linear in the text, whatever it holds (a log line may carry a tool's whole
output): a match may start only where its run of name characters starts (a look-behind refuses a start
inside the run), runs are possessive, names are bounded, and no value can run past the quote or the
separator that ends it. ``tests/test_redaction.py`` measures it with a step-counting matcher.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from tether.secrets import (
    DEFAULT_SECRET_ARGUMENTS,
    MASK,
    URL_PASSWORD,
    is_secret_argument,
    secret_argument_parts,
)

if TYPE_CHECKING:
    from tether.secrets import Masker

__all__ = [
    "BEARER",
    "DEFAULT_SECRET_ARGUMENTS",
    "MASK",
    "URL_PASSWORD",
    "Redaction",
    "default_redaction",
    "is_secret_argument",
    "mask_url_passwords",
]

BEARER = re.compile(r"(?i)(?<![A-Za-z0-9_])(?P<scheme>bearer\s++)[A-Za-z0-9._~+/=-]{8,}+")
"""A bearer token (RFC 6750's characters, at least 8 of them: "the bearer of" is prose); the scheme is kept,
the token masked."""
_MEMBER = re.compile(
    r"""(?P<head>["'](?P<name>[A-Za-z_$@][\w$@.-]{0,63}+)["']\s*+:\s*+)"""
    r"""(?P<value>"(?:[^"\\\n]|\\.)*+"?|'(?:[^'\\\n]|\\.)*+'?|[^\s,;'"{}\[\]]++)"""
)
"""A quoted name and its value, as JSON (``"password": "x"``) or a Python ``repr`` (``'password': 'x'``) write
it. A string value ends at its closing quote or, cut short (arguments the model did not finish), at the line's
end; a bare one (a number) at a separator."""
_ASSIGNMENT = re.compile(
    r"""(?<![\w.$@-])(?P<head>-{0,2}+(?P<name>[A-Za-z_][\w.-]{0,63}+)(?:[ \t]++=(?!=)[ \t]*+|=(?!=)))"""
    r"""(?P<value>"[^"\n]*+"?|'[^'\n]*+'?|[^\s&,;'"(){}\[\]<>]++)"""
)
"""``name=value``, ``--name=value``, ``?name=value&``: the value ends at a space, a separator or a quote. A space
may follow the ``=`` only when one precedes it (``password = x``): ``api_key= to Agent`` is an empty value
followed by prose, and the next word is not its value."""
_PUNCTUATION = frozenset(".:!?")
"""What ends a sentence: a bare value made only of these (``api_key=.``) is the prose's, not a secret."""
_MAX_DEPTH = 64


def mask_url_passwords(text: str) -> str:
    """``text`` with the password of every URL that has one (``scheme://user:password@host``) masked."""
    if "://" not in text:
        return text
    return URL_PASSWORD.sub(lambda found: found["lead"] + found["head"] + MASK, text)


def mask_bearer_tokens(text: str) -> str:
    """``text`` with every bearer token masked (``Bearer ***``)."""
    if "earer" not in text and "EARER" not in text:
        return text
    return BEARER.sub(lambda found: found["scheme"] + MASK, text)


class Redaction:
    """Masks known keys, bearer tokens, URL passwords and secret-named values (see the module docstring)."""

    __slots__ = ("_parts", "masker", "secret_arguments")

    def __init__(self, masker: Masker | None = None, secret_arguments: Iterable[str] = DEFAULT_SECRET_ARGUMENTS):
        if masker is None:
            from tether.secrets import Masker

            masker = Masker()
        self.masker = masker
        self.secret_arguments = tuple(secret_arguments)
        self._parts = secret_argument_parts(self.secret_arguments)

    def is_secret_argument(self, name: str) -> bool:
        """Whether an argument called ``name`` holds a secret (see the module docstring)."""
        return is_secret_argument(name, self._parts)

    def text(self, text: str) -> str:
        """``text`` with known keys, bearer tokens, URL passwords and secret-named members masked."""
        text = mask_url_passwords(mask_bearer_tokens(self.masker.mask(text)))
        if ":" in text and ('"' in text or "'" in text):
            text = _MEMBER.sub(self._member, text)
        if "=" in text:
            text = _ASSIGNMENT.sub(self._member, text)
        return text

    def _member(self, found: re.Match[str]) -> str:
        if not self.is_secret_argument(found["name"]):
            return found[0]
        value = found["value"]
        if value in ('""', "''") or not set(value) - _PUNCTUATION:
            return found[0]  # an empty value hides nothing, and showing it says the value is missing
        quote = value[0] if value[0] in "\"'" else ""
        closed = quote if len(value) > 1 and value.endswith(quote) else ""
        return f"{found['head']}{quote}{MASK}{closed}"

    def arguments(self, arguments: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """A copy of a tool call's arguments fit to show: secret-named values hidden, the rest masked as text."""
        if arguments is None:
            return None
        shown = self.value(dict(arguments), 0)
        assert isinstance(shown, dict)
        return shown

    def value(self, value: Any, depth: int = 0) -> Any:
        """``value`` (JSON-like data) with secret-named members hidden and its strings masked as text."""
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

    def hide_values(self, text: str, arguments: Mapping[str, Any] | None) -> str:
        """``text`` (a message about a call, such as a validation error quoting its input) with the values of
        the call's secret-named arguments masked, as well as what :meth:`text` masks."""
        values = sorted(set(self._secret_values(arguments, 0)), key=len, reverse=True)
        for value in values:
            text = text.replace(value, MASK)
        return self.text(text)

    def _secret_values(self, value: Any, depth: int, secret: bool = False) -> Iterator[str]:
        """The scalar values under secret-named members, as text; at least three characters (shorter ones
        would hide ordinary words of the message)."""
        if depth >= _MAX_DEPTH:
            return
        if isinstance(value, Mapping):
            for key, item in value.items():
                yield from self._secret_values(item, depth + 1, secret or self.is_secret_argument(str(key)))
        elif isinstance(value, list | tuple):
            for item in value:
                yield from self._secret_values(item, depth + 1, secret)
        elif secret and value is not None and len(shown := str(value)) >= 3:
            yield shown

    def __repr__(self) -> str:
        return f"Redaction({self.masker!r}, {len(self._parts)} secret argument names)"


@functools.cache
def default_redaction() -> Redaction:
    """The rules without known keys: what a ``repr`` or a stored transcript's Markdown can apply, knowing no
    agent (the default secret argument names, bearer tokens, URL passwords)."""
    return Redaction()
