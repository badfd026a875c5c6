"""Known keys: which names hold secrets, which values are keys, and a masker that hides them.

The contract
------------
* **Secret names**, one home for three kinds of name, each with its own function here, of different breadth
  on purpose:

  - *environment variables* (:func:`is_secret_name`). A name is secret when it is a known credential
    variable (:data:`KNOWN_SECRET_VARIABLES`: every provider's key variable, from
    :mod:`tether.keys`, and other well-known ones); when it contains ``API_KEY``, ``APIKEY``,
    ``ACCESS_KEY``, ``PRIVATE_KEY``, ``SECRET``, ``PASSWORD``, ``PASSWD``, ``PASSPHRASE`` or ``CREDENTIAL``;
    when it is ``KEY`` or ends with ``_KEY``, ``_PAT``, ``_PASS``, ``_PWD``, ``_DSN`` or ``_COOKIE``; or when
    ``TOKEN`` (``TOKENS``) is one of its words or its end (``GITHUB_TOKEN``, ``HF_TOKEN``, ``AUTHTOKEN``).
    Case does not matter. ``TOKENIZERS_PARALLELISM``, ``PWD``, ``OLDPWD``, ``SSH_AUTH_SOCK`` or
    ``KEYBOARD_LAYOUT`` are not secret: a variable named so holds a credential, but ``PWD`` is a directory.
  - *tool arguments* (:func:`is_secret_argument`): whole words, so that ``key``, ``tokens`` or ``author``,
    ordinary argument names, stay visible. A name is read as words (``db_password``, ``clientSecret``,
    ``X-Api-Key``): it is secret when one word, or two adjacent words written together, is a secret name
    (:data:`DEFAULT_SECRET_ARGUMENTS`, or the host's) compared without case or separators.
  - *configured settings*: headers, MCP ``env`` entries, ``--option=value`` and query parameters
    (:func:`is_secret_setting`): any name *containing* ``auth``, ``key``, ``token``, ``secret``, ``passw``,
    ``cookie``, ``credential`` or ``signature`` (``X-Goog-Api-Key``, ``Proxy-Authorization``), since
    ``config show`` prints a file a user may paste anywhere and must rather hide a harmless header than
    print a credential.
* **Connection strings.** A variable whose value is a URL with a password (``DATABASE_URL=postgres://user:
  pw@host/db``, ``HTTPS_PROXY=http://user:pw@proxy``) holds a secret whatever its name: the whole value and
  the password are both known keys.
* **Known keys** (:func:`known_secrets`): the values of secret-named variables and connection strings, every
  key a reference (``cmd:``, ``file:``, ``keyring:``...) resolved to (:mod:`tether.secret_refs`), plus whatever
  the caller adds (an agent adds its provider's key, whatever its source, and the values its host passes). Only
  values of at least :data:`MIN_SECRET_LENGTH` characters count: a shorter value (``true``, ``4096``) would hide
  ordinary words.
* **Masking** (:class:`Masker`): every occurrence of a known key in a text becomes ``***``, in one pass of
  one compiled alternation, longest keys first (a key that contains another is hidden whole). A key is also found
  as JSON writes it inside a string (quotes and backslashes escaped) and percent-encoded, as a URL carries it.
  A masker never shows its keys: its ``repr`` counts them.

This module knows *which names and values* are secret, and holds the mask and the URL-password pattern;
:mod:`tether.redaction` and :mod:`tether.config.redact` find *where in a text or a configuration* a
secret sits, with these rules.

Masking is a net, not a vault: a tool can still encode a key in a way no rule anticipates (base64, split
across lines). What it catches is the common case: ``env``, a config file, an error message quoting a URL.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Iterable, Mapping
from urllib.parse import quote, unquote

from tether.keys import ALL_KEY_VARIABLES
from tether.secret_refs import resolved_values

__all__ = [
    "DEFAULT_SECRET_ARGUMENTS",
    "KNOWN_SECRET_VARIABLES",
    "MASK",
    "MIN_SECRET_LENGTH",
    "URL_PASSWORD",
    "Masker",
    "connection_password",
    "is_secret_argument",
    "is_secret_name",
    "is_secret_setting",
    "known_secrets",
    "secret_argument_parts",
    "secret_values",
]

MASK = "***"
"""What a hidden value is replaced with, everywhere."""

URL_PASSWORD = re.compile(
    r"(?i)(?<![a-z0-9+.-])(?P<lead>[0-9+.-]*+)(?P<head>[a-z][a-z0-9+.-]*+://[^/@:\s]*+:)(?P<password>[^/@\s]++)(?=@)"
)
"""The password of a URL. Read from the start of the scheme's run of characters (``lead`` is what comes
before its first letter), so that a long run that is no scheme is read once, not once per character."""

MIN_SECRET_LENGTH = 8
"""Characters a value needs to be masked; shorter ones are too likely to be ordinary words or numbers."""

KNOWN_SECRET_VARIABLES = ALL_KEY_VARIABLES | frozenset({
    "ANTHROPIC_AUTH_TOKEN", "ZHIPUAI_API_KEY", "MISTRAL_API_KEY", "GROQ_API_KEY",
    "OPENROUTER_API_KEY", "XAI_API_KEY", "TOGETHER_API_KEY", "FIREWORKS_API_KEY", "COHERE_API_KEY",
    "AZURE_OPENAI_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS", "GITHUB_TOKEN", "GH_TOKEN", "PGPASSWORD",
    "SENTRY_DSN", "NPM_TOKEN", "PYPI_TOKEN", "TWINE_PASSWORD", "MYSQL_PWD",
})  # fmt: skip
"""Credential variables that are secret whatever the patterns say: every provider's key variable
(:data:`tether.keys.ALL_KEY_VARIABLES`) and other well-known ones."""

_SECRET_PARTS = re.compile(r"API_?KEY|ACCESS_KEY|PRIVATE_KEY|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL")
_SECRET_ENDS = re.compile(r"_(?:KEY|PAT|PASS|PWD|DSN|COOKIE)$|^KEY$|TOKENS?$|(?:^|_)TOKENS?_")
_MAX_PATTERNS = 64
"""Compiled patterns a masker keeps, one per set of keys found together in a text."""


def is_secret_name(name: str) -> bool:
    """Whether an environment variable called ``name`` holds a credential (see the module docstring)."""
    upper = name.upper()
    return upper in KNOWN_SECRET_VARIABLES or bool(_SECRET_PARTS.search(upper) or _SECRET_ENDS.search(upper))


# --- names ------------------------------------------------------------------------------------------------

DEFAULT_SECRET_ARGUMENTS: tuple[str, ...] = (
    "password", "passwd", "pwd", "passphrase", "token", "api_key", "secret", "authorization", "credential",
    "credentials", "private_key", "access_key", "session_key", "cookie", "bearer",
)  # fmt: skip
"""Argument names whose values are hidden, matched as words: ``db_password``, ``GITHUB_TOKEN``, ``apiKey``
and ``clientSecret`` are secret."""

_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_SEPARATORS = str.maketrans("", "", "-_ .")
_MAX_NAME = 200
"""Characters of a name read to decide whether it is secret."""


def secret_argument_parts(names: Iterable[str]) -> frozenset[str]:
    """``names`` as :func:`is_secret_argument` compares them: separators dropped, lower case."""
    return frozenset(normal for name in names if (normal := name.translate(_SEPARATORS).lower()))


_DEFAULT_PARTS = secret_argument_parts(DEFAULT_SECRET_ARGUMENTS)


def is_secret_argument(name: str, parts: frozenset[str] = _DEFAULT_PARTS) -> bool:
    """Whether a tool argument called ``name`` holds a secret: one of its words, or two adjacent words written
    together, is in ``parts`` (:func:`secret_argument_parts` of the secret names; the defaults unless given)."""
    words = [word.lower() for word in _WORDS.findall(name[:_MAX_NAME])]
    if any(word in parts for word in words):
        return True
    return any(first + second in parts for first, second in itertools.pairwise(words))


SECRET_SETTING = re.compile(r"(?i)(auth|key|token|secret|passw|cookie|credential|signature)")
"""What in a configured header, ``env`` entry, option or query parameter name makes its value secret."""


def is_secret_setting(name: str, start: int = 0, end: int | None = None) -> bool:
    """Whether a configured header, ``env`` entry, ``--option`` or query parameter called ``name`` (or its
    part ``name[start:end]``) holds a secret: its name contains one of :data:`SECRET_SETTING`'s words."""
    return SECRET_SETTING.search(name, start, len(name) if end is None else end) is not None


def connection_password(value: str) -> str | None:
    """The password of the first URL in ``value`` that has one (``scheme://user:password@host``), decoded."""
    found = URL_PASSWORD.search(value)
    return unquote(found["password"]) if found else None


def secret_values(environ: Mapping[str, str]) -> frozenset[str]:
    """The values in ``environ`` that are keys: secret-named variables, provider key variables, connection
    strings with a password (the whole value and the password). Short values are left out."""
    values: set[str] = set()
    for name, value in environ.items():
        if not value:
            continue
        if is_secret_name(name):
            values.add(value)
        if (password := connection_password(value)) is not None:
            values.update((value, password))
    return frozenset(v for v in values if len(v) >= MIN_SECRET_LENGTH)


def known_secrets(environ: Mapping[str, str] | None = None, *, extra: Iterable[str | None] = ()) -> frozenset[str]:
    """:func:`secret_values` of ``environ`` (the process environment by default), plus every key a reference
    resolved to in this process (:func:`tether.secret_refs.resolved_values`), plus ``extra``."""
    values = set(secret_values(os.environ if environ is None else environ))
    values.update(v for v in resolved_values() if len(v) >= MIN_SECRET_LENGTH)
    values.update(v for v in extra if v and len(v) >= MIN_SECRET_LENGTH)
    return frozenset(values)


class Masker:
    """Replaces every known key in a text with ``***`` (see the module docstring). Immutable; cheap to call."""

    __slots__ = ("_forms", "_patterns", "_values")

    def __init__(self, values: Iterable[str] = ()) -> None:
        kept = frozenset(v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_LENGTH)
        forms: set[str] = set()
        for value in kept:
            forms.add(value)
            forms.add(json.dumps(value, ensure_ascii=False)[1:-1])
            forms.add(json.dumps(value)[1:-1])
            forms.add(quote(value, safe=""))
        self._values = kept
        self._forms = tuple(sorted(forms, key=lambda form: (-len(form), form)))
        self._patterns: dict[tuple[str, ...], re.Pattern[str]] = {}

    def mask(self, text: str) -> str:
        """``text`` with every known key replaced by ``***``.

        Each form is first looked for with ``in`` (a fast substring search in C): most texts hold no key and
        cost only that. When some are there, one pattern of those forms, longest first, replaces them all in
        one pass (patterns are compiled once per set of forms found).
        """
        for form in self._forms:  # a plain loop first: the common case finds none, and pays for no generator
            if form in text:
                break
        else:
            return text
        present = tuple(form for form in self._forms if form in text)
        pattern = self._patterns.get(present)
        if pattern is None:
            pattern = re.compile("|".join(map(re.escape, present)))
            if len(self._patterns) < _MAX_PATTERNS:
                self._patterns[present] = pattern
        return pattern.sub(MASK, text)

    def held_back(self, text: str) -> int:
        """How many characters at the end of ``text`` could be the start of a known key: what a stream of text
        (an answer as it is written) keeps back until its next piece says whether a key follows."""
        longest = 0
        for form in self._forms:
            for size in range(min(len(form) - 1, len(text)), longest, -1):
                if text.endswith(form[:size]):
                    longest = size
                    break
        return longest

    def with_values(self, values: Iterable[str]) -> Masker:
        """A masker that also hides ``values``."""
        return Masker(self._values | frozenset(values))

    def __contains__(self, value: object) -> bool:
        return value in self._values

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Masker({len(self._values)} known keys)"

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None, *, extra: Iterable[str | None] = ()) -> Masker:
        """A masker for :func:`known_secrets`: the environment's keys plus ``extra``."""
        return cls(known_secrets(environ, extra=extra))


_MASKED_LINKS = 64
"""Exceptions of a chain (``__cause__``, ``__context__``, an exception group's members) whose texts are masked."""


def mask_exception_in_place(exc: BaseException, masker: Masker) -> None:
    """Mask known keys in ``exc`` and every exception linked to it (``__cause__``, ``__context__``, an exception
    group's members, up to :data:`_MASKED_LINKS`): their ``args``, their ``__notes__``, and a tether error's
    ``message``, ``provider_message`` and string ``details``. A provider may quote the key back in an error body or
    an error event, and a tool's exception may carry it anywhere in its chain; ``logger.exception`` and the CLI
    print the whole chain."""
    if not len(masker):
        return
    for link in chain_links(exc):
        _mask_one(link, masker)


def chain_links(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions linked to it, each once, nearest first (at most :data:`_MASKED_LINKS`)."""
    seen: dict[int, BaseException] = {}
    waiting: list[BaseException] = [exc]
    while waiting and len(seen) < _MASKED_LINKS:
        link = waiting.pop(0)
        if id(link) in seen:
            continue
        seen[id(link)] = link
        waiting += [e for e in (link.__cause__, link.__context__) if e is not None]
        if isinstance(link, BaseExceptionGroup):
            waiting += list(link.exceptions)
    return list(seen.values())


def _mask_one(link: BaseException, masker: Masker) -> None:
    """Mask one exception's texts in place (what cannot be set is left: callers check what is left)."""
    try:
        link.args = tuple(masker.mask(a) if isinstance(a, str) else a for a in link.args)
        for name in ("message", "provider_message"):
            value = getattr(link, name, None)
            if isinstance(value, str):
                setattr(link, name, masker.mask(value))
        details = getattr(link, "details", None)
        if isinstance(details, dict):
            for key, value in details.items():
                if isinstance(value, str):
                    details[key] = masker.mask(value)
        notes = getattr(link, "__notes__", None)
        if isinstance(notes, list):
            link.__notes__ = [masker.mask(note) if isinstance(note, str) else note for note in notes]
    except Exception:  # noqa: BLE001 - attributes that cannot be set
        pass
