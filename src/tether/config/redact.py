"""Keep secrets out of what ``tether config show`` and configuration errors print.

A value is hidden when any of these holds:

* it contains the value of an environment variable that holds a key: every ``api_key_env`` the
  configuration names, the providers' own key variables, and any variable whose name says it is a secret
  (``*_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``, ...), wherever it shows up;
* it is a header, an MCP ``env`` entry, a URL query parameter or a ``--option=value`` whose name says it is a secret
  (``Authorization``, ``X-Api-Key``, ``GITHUB_TOKEN``, ``?key=``), unless it holds nothing but ``${VAR}``
  references (a reference names a variable; it is not the secret);
* it looks like a key: a known key prefix (``sk-``, ``ghp_``, ``AIza``, ...), ``Bearer ...``, a JWT, or a
  long run of letters and digits;
* it is the password of a URL (``https://user:password@host``).

Every pattern here runs in time linear in the value, whatever it holds: a value comes from a file, the
environment or a server, and a pattern that backtracks (``eyJ_eyJ_eyJ_…``, ``????…``, ``aaaa…`` against a
URL's scheme) would take minutes on a long one. So a match may start only where its leading run of
characters starts (a lookbehind refuses a start inside the run), runs that a fixed character must follow
are possessive, a key's tail is matched to the length that makes it a key and no further (only whether it
matches matters), and query parameters are found in one pass (:func:`_hide_query_secrets`).

The name rules live in :mod:`tether.secrets` with the mask and the URL password pattern: a header, ``env``
entry, option or query parameter is secret when its name *contains* ``auth``, ``key``, ``token``, ...
(:func:`tether.secrets.is_secret_setting`), broader than the rule for tool arguments; and a value that merely
looks like a key is hidden whole. ``config show`` prints a file a user may paste anywhere: it would rather
hide a harmless header than print a credential.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from tether import secrets
from tether.secrets import MASK, URL_PASSWORD, is_secret_setting

HIDDEN = MASK

_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*+\}")
_SCHEME = re.compile(r"(?i)^\s*+(bearer|basic|token)\s++")
_KEY_LIKE = re.compile(
    r"(?x)(?<![A-Za-z0-9])(?:"
    r"(sk|pk|rk)[-_][A-Za-z0-9_-]{8}"
    r"|(ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{16}|github_pat_[A-Za-z0-9_]{16}"
    r"|AIza[A-Za-z0-9_-]{20}|AKIA[A-Z0-9]{16}|xox[abprs]-[A-Za-z0-9-]{8}|hf_[A-Za-z0-9]{16}"
    r"|glpat-[A-Za-z0-9_-]{16}|(?<![_-])(?>[A-Za-z0-9_-]*?(?<![A-Za-z0-9])eyJ)[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8}"
    r"|(?i:bearer)\s++\S{8}"
    r")"
)
"""Searched only (never substituted), so each tail stops at the length that makes a key. A JWT may start
inside a run (``x_eyJ…``); its branch reads the run from its start to the first ``eyJ`` that may begin one
(atomically: every later one shares the run's end, so it can only do worse)."""
_LONG_TOKEN = re.compile(r"(?<![A-Za-z0-9_\-+=])[A-Za-z0-9_\-+=]{32,}+")
_URL_PASSWORD = URL_PASSWORD
"""The shared pattern (``redaction.py``), named here so that the hostile tests count its steps."""
_OPTION = re.compile(r"(?P<head>--?(?P<name>[A-Za-z0-9_-]++)=)(?P<value>.+)", re.DOTALL)
_QUERY_START = re.compile(r"[?&]")
_QUERY_NAME = re.compile(r"[^=&#\s]*+")
_QUERY_VALUE = re.compile(r"[^&#\s]*+")


def secret_values(env: Mapping[str, str], key_env_names: Iterable[str]) -> frozenset[str]:
    """The values in ``env`` that must never be printed: the keys :mod:`tether.secrets` knows (its one rule
    for secret-named variables, the providers' key variables, connection-string passwords), and the values of
    the key variables the configuration names. ``TETHER_*`` variables are settings, judged as values."""
    named = {value for name in key_env_names if (value := env.get(name)) and len(value) >= 4}
    settings_aside = {name: value for name, value in env.items() if not name.startswith("TETHER_")}
    return frozenset(named) | secrets.secret_values(settings_aside)


def looks_like_key(text: str) -> bool:
    """Whether ``text`` looks like a credential (see the module docstring); ``${VAR}`` references aside."""
    bare = _REFERENCE.sub("", text)
    if _KEY_LIKE.search(bare):
        return True
    return any(re.search(r"[A-Za-z]", token) and re.search(r"[0-9]", token) for token in _LONG_TOKEN.findall(bare))


def only_references(text: str) -> bool:
    """Whether ``text`` holds no literal secret: nothing but ``${VAR}`` references and an auth scheme."""
    return not _SCHEME.sub("", _REFERENCE.sub("", text)).strip()


class Redactor:
    """Hides secrets in configuration values (see the module docstring)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def text(self, value: str, *, name: str | None = None) -> str:
        """``value`` as it may be printed; ``name`` is the header or variable it belongs to, if any."""
        if name is not None and is_secret_setting(name) and not only_references(value):
            return HIDDEN
        if looks_like_key(value):
            return HIDDEN
        option = _OPTION.fullmatch(value)
        if option and is_secret_setting(option["name"]) and not only_references(option["value"]):
            return option["head"] + HIDDEN
        for secret in self.secrets:
            if secret == value or (len(secret) >= 8 and secret in value):
                return HIDDEN
        value = _URL_PASSWORD.sub(lambda m: m["lead"] + m["head"] + HIDDEN, value)
        return _hide_query_secrets(value)

    def data(self, value: Any, *, name: str | None = None, named: bool = False) -> Any:
        """A copy of ``value`` (plain dicts, lists, scalars) with every secret hidden.

        ``named``: ``value`` is a table whose keys are names of headers or variables (so they are judged).
        """
        if isinstance(value, str):
            return self.text(value, name=name)
        if isinstance(value, list):
            return [self.data(item, name=name) for item in value]
        if isinstance(value, dict):
            return {
                key: self.data(item, name=key if named else None, named=key in _NAMED_TABLES)
                for key, item in value.items()
            }
        return value


def _hide_query_secrets(value: str) -> str:
    r"""``value`` with the value of every ``?name=value`` or ``&name=value`` whose name is a secret's hidden.

    What ``re.sub`` of ``[?&]([^=&#\s]+)=([^&#\s]*)`` would find, in one pass: when a name's run of
    characters does not end in ``=``, no ``?`` inside that run starts a parameter either, so the search goes
    on after the run instead of retrying inside it (which made ``????…`` quadratic).
    """
    parts: list[str] = []
    done = i = 0
    while (start := _QUERY_START.search(value, i)) is not None:
        name_start = start.end()
        name_end = _run_end(_QUERY_NAME, value, name_start)
        if name_end == name_start or not value.startswith("=", name_end):
            i = name_end
            continue
        value_end = _run_end(_QUERY_VALUE, value, name_end + 1)
        if is_secret_setting(value, name_start, name_end):
            parts += (value[done : name_end + 1], HIDDEN)
            done = value_end
        i = value_end
    parts.append(value[done:])
    return "".join(parts)


def _run_end(run: re.Pattern[str], value: str, start: int) -> int:
    """Where the run of ``run``'s characters that starts at ``start`` ends."""
    match = run.match(value, start)
    return start if match is None else match.end()


_NAMED_TABLES = frozenset({"headers", "env"})
"""Tables of the configuration whose keys name headers or environment variables."""
