"""API keys given as references, resolved when a provider is built: so no key has to sit in a file or the environment.

An API key (``Agent(..., api_key=...)``, ``[providers.NAME] api_key`` in agent.toml) may be a *reference*:

* ``env:NAME``: the environment variable ``NAME``.
* ``file:PATH``: the file's text, one trailing newline removed (``~`` is expanded). A file that the group or
  others may read is refused (``secret_unavailable``): a key in a file every local user can read is not a
  secret, and ``chmod 600 PATH`` is the fix. (Not checked on Windows, which has no such mode bits.)
* ``cmd:COMMAND``: the standard output of ``COMMAND`` (``pass show openai``, ``op read op://vault/openai/key``),
  surrounding whitespace removed. The command is split like a shell would (``shlex``) but run without one, with
  its standard input closed, and killed after :data:`COMMAND_TIMEOUT` seconds. A command that fails names
  itself and its exit status, never its output: a password manager may print the key with its error.
* ``keyring:SERVICE/USER``: the OS keyring's entry for ``SERVICE`` and ``USER`` (the last ``/`` separates
  them), through the ``keyring`` package (``pip install 'tether[keyring]'``), imported on first use.
* ``literal:TEXT``: ``TEXT`` itself, for a key that happens to begin with one of these prefixes.

Anything else is a literal key, as before. A reference that cannot be resolved raises
:class:`SecretUnavailable` (code ``secret_unavailable``) naming the reference and why, never a value.

A reference is resolved when the provider that uses it is built (``Agent(...)``, or the command line before a
run), never while a configuration is read or shown: not later, at the first request, because the key must join
the masker an agent builds for its runs before anything could echo it. Each reference is resolved once per
process (cached: a command that asks for a passphrase asks once), and every resolved value joins the known keys
(:func:`resolved_values`, read by :func:`tether.secrets.known_secrets`), so telemetry, logs, error messages and
sessions mask it like a key read from the environment.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
from pathlib import Path
from typing import ClassVar

from tether.errors import ConfigInvalid, ErrorCode

__all__ = [
    "COMMAND_TIMEOUT",
    "PREFIXES",
    "SecretUnavailable",
    "describe",
    "forget",
    "is_reference",
    "resolve_secret",
    "resolved_values",
]

PREFIXES = ("env:", "file:", "cmd:", "keyring:", "literal:")
"""What a reference begins with; any other value is a literal key."""

COMMAND_TIMEOUT = 30.0
"""Seconds a ``cmd:`` command may take (a password manager may wait for a passphrase or a touch)."""

_lock = threading.Lock()
_cache: dict[str, str] = {}
_resolved: set[str] = set()


class SecretUnavailable(ConfigInvalid):
    """A key reference could not be resolved: a variable not set, a file missing or readable by others, a command
    that failed or timed out, no keyring entry. The message names the reference, never a value."""

    code: ClassVar[ErrorCode] = "secret_unavailable"


def is_reference(value: str) -> bool:
    """Whether ``value`` is a reference rather than a key (it begins with one of :data:`PREFIXES`)."""
    return value.startswith(PREFIXES)


def describe(value: str) -> str:
    """Where a key comes from, for ``tether doctor`` and messages: the reference's kind and target, never a value."""
    kind, _, target = value.partition(":")
    if not is_reference(value) or kind == "literal":
        return "a key given as it is"
    what = {"env": "the environment variable", "file": "the file", "cmd": "the command", "keyring": "the keyring entry"}
    return f"{what[kind]} {target!r}"


def resolved_values() -> frozenset[str]:
    """Every value a reference resolved to in this process: keys the masker hides."""
    with _lock:
        return frozenset(_resolved)


def resolve_secret(value: str) -> str:
    """The key ``value`` stands for: resolved the first time (see the module docstring), then from the cache."""
    if not is_reference(value):
        return value
    with _lock:
        cached = _cache.get(value)
    if cached is not None:
        return cached
    kind, _, target = value.partition(":")
    if kind == "literal":
        return target
    resolved = _RESOLVERS[kind](target)
    if not resolved:
        raise SecretUnavailable(f"the API key {value!r} is empty: {describe(value)} gave no text")
    with _lock:
        _cache[value] = resolved
        _resolved.add(resolved)
    return resolved


def forget() -> None:
    """Drop the cache (the values stay masked): the next use resolves each reference again."""
    with _lock:
        _cache.clear()


def _from_env(name: str) -> str:
    found = os.environ.get(name)
    if not found:
        raise SecretUnavailable(f"the API key 'env:{name}' is not available: {name} is not set")
    return found


def _from_file(path: str) -> str:
    file = Path(path).expanduser()
    try:
        mode = file.stat().st_mode
        if sys.platform != "win32" and mode & 0o077:
            raise SecretUnavailable(
                f"the API key 'file:{path}' is refused: the file may be read by others "
                f"(mode {mode & 0o777:o}); run chmod 600 {shlex.quote(str(file))}"
            )
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise SecretUnavailable(f"the API key 'file:{path}' cannot be read: {reason}") from None
    return text.removesuffix("\n").removesuffix("\r")


def _from_command(command: str) -> str:
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise SecretUnavailable(f"the API key 'cmd:{command}' is not a command: {exc}") from None
    if not argv:
        raise SecretUnavailable("the API key 'cmd:' names no command")
    try:
        done = subprocess.run(  # the user's own command, without a shell
            argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=COMMAND_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        raise SecretUnavailable(
            f"the API key 'cmd:{command}' is not available: the command took over {COMMAND_TIMEOUT:g} s"
        ) from None
    except OSError as exc:
        raise SecretUnavailable(
            f"the API key 'cmd:{command}' is not available: {argv[0]!r} cannot be run ({exc.strerror})"
        ) from None
    if done.returncode != 0:  # its output is never shown: it may hold the key
        raise SecretUnavailable(
            f"the API key 'cmd:{command}' is not available: the command exited with status {done.returncode}"
        )
    return done.stdout.decode("utf-8", errors="replace").strip()


def _from_keyring(target: str) -> str:
    service, slash, user = target.rpartition("/")
    if not (slash and service and user):
        raise SecretUnavailable(f"the API key 'keyring:{target}' must be keyring:SERVICE/USER")
    try:
        import keyring
        from keyring.errors import KeyringError
    except ImportError:
        raise SecretUnavailable(
            f"the API key 'keyring:{target}' needs the keyring package: pip install 'tether[keyring]'"
        ) from None
    try:
        found = keyring.get_password(service, user)
    except KeyringError as exc:
        raise SecretUnavailable(
            f"the API key 'keyring:{target}' is not available: the keyring failed ({type(exc).__name__})"
        ) from None
    if not found:
        raise SecretUnavailable(
            f"the API key 'keyring:{target}' is not available: the keyring has no entry for {user!r} in {service!r}"
        )
    return found


_RESOLVERS = {"env": _from_env, "file": _from_file, "cmd": _from_command, "keyring": _from_keyring}
