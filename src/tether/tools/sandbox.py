"""Where a ``bash`` command runs: inside bubblewrap (``bwrap``) when it can, and with which environment.

The contract, before the code:

- **What the command sees.** With the sandbox on, each command runs in its own ``bwrap`` sandbox, built
  afresh for the call: the workspace read-write at its own path (and the working directory); the system
  read-only (``/usr``, ``/bin``, ``/sbin``, ``/lib*``, and from ``/etc`` only what programs need to run:
  users and groups, the dynamic linker's cache, locales, time zone, certificates, name resolution,
  ``alternatives``, shells' profiles -- see :data:`ETC_ENTRIES`); any extra ``read_only_paths``; a new
  ``/proc`` that lists the sandbox's own processes only; a minimal ``/dev``; a private, empty ``/tmp`` (and
  ``/var/tmp``) that is gone when the call ends. Everything else -- the home directory, other users' files,
  the rest of ``/etc`` (``shadow``, ``pip.conf``, ``npmrc``, private keys), the host's processes -- does not
  exist there. The root of the sandbox is a scratch ``tmpfs``: writes outside the workspace land there and
  vanish with it.
- **No network** unless ``network=True``: the sandbox gets its own network namespace, with nothing but a
  loopback interface of its own (the host's ``127.0.0.1`` services are unreachable too).
- **Nothing outlives the call.** The sandbox has its own PID namespace whose init is ``bwrap``'s; when the
  command's shell exits, or ``bwrap`` is killed (timeout, cancellation -- ``--die-with-parent``), that init
  dies and the kernel kills every process left in the namespace, those that ``setsid``, double-forked or
  ``nohup``-ed their way out of the process group included. The init stays in the command's process group
  until the last of them is gone, so :mod:`tether.tools.shell` waiting for the group waits for them all.
- **No privileges.** Every capability is dropped (``--cap-drop ALL``), even when tether runs as root, and the
  sandbox has its own user, IPC, UTS (hostname) and cgroup namespaces when the kernel allows them.
- **An allowlisted environment**, sandbox or not: only what a shell needs (:data:`SHELL_VARIABLES`, the locale
  categories when their values are locales, :data:`LOCALE_VARIABLES`) and the names in ``pass_env``; everything
  else -- keys, tokens, ``DATABASE_URL``, DSNs -- is left out whatever its name. In the sandbox ``HOME`` is
  ``/tmp/home`` and ``TMPDIR`` is ``/tmp`` (both private); unsandboxed they keep the host's values.
- **Modes.** ``"auto"`` (the default) sandboxes when ``bwrap`` is usable and otherwise runs unconfined,
  saying so once per process (a warning on the ``tether.tools.sandbox`` logger, which the command line
  prints on stderr). ``"required"`` refuses to run a command without the sandbox: the call fails with
  ``permission_denied`` and a message saying how to get it. ``"off"`` never sandboxes.
- **Usable means it works here.** ``bwrap`` may be missing, or installed but blocked (a container's seccomp
  policy, unprivileged user namespaces disabled). The first command of a process probes it by starting a
  real sandbox with the same options; the answer is cached for the process.

Not closed: the sandbox shares the host's kernel (a kernel exploit escapes it), it limits neither CPU nor
memory nor disk use in the workspace, and with ``network=True`` the host's loopback services are reachable.
"""

from __future__ import annotations

import asyncio
import functools
import glob
import os
import re
import shutil
import subprocess
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from tether._logging import get_logger
from tether.errors import ConfigInvalid, PermissionDenied

__all__ = [
    "DEFAULT_BWRAP",
    "ETC_ENTRIES",
    "SHELL_VARIABLES",
    "Sandbox",
    "SandboxMode",
    "bwrap_problem",
    "shell_environment",
]

log = get_logger("tether.tools.sandbox")

SandboxMode = Literal["auto", "required", "off"]
"""``"auto"``: sandbox when ``bwrap`` is usable; ``"required"``: refuse to run without it; ``"off"``: never."""
SANDBOX_MODES: tuple[str, ...] = get_args(SandboxMode)

DEFAULT_BWRAP = "bwrap"
"""The ``bwrap`` program: a name looked up on ``PATH``, or a path."""

SANDBOX_HOME = "/tmp/home"
"""``HOME`` inside the sandbox: private, empty at the start of each call."""

SHELL_VARIABLES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "COLORTERM", "NO_COLOR", "TZ", "TMPDIR", "LANG",
    "LANGUAGE",
})  # fmt: skip
"""The variables a command gets from tether's environment (with the locale categories), besides ``pass_env``."""

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Mounted read-only (or recreated as the symlinks they are, on merged-``/usr`` systems)."""

ETC_ENTRIES = (
    "alternatives", "bash.bashrc", "ca-certificates", "ca-certificates.conf", "crypto-policies",
    "debian_version", "fonts", "gai.conf", "group", "host.conf", "hosts", "inputrc", "java-*",
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "locale.alias", "locale.conf", "localtime", "magic",
    "magic.mime", "mime.types", "mtab", "networks", "nsswitch.conf", "os-release", "passwd", "perl", "pki",
    "profile", "profile.d", "protocols", "python3", "python3.*", "redhat-release", "resolv.conf", "services",
    "shells", "ssl", "terminfo", "timezone", "vim", "xdg",
)  # fmt: skip
"""What of ``/etc`` the sandbox sees (glob patterns, read-only): what programs need to start, resolve names,
check certificates and format dates, and nothing that commonly holds a credential."""

ETC_MASKED = ("/etc/ssl/private", "/etc/pki/tls/private")
"""Directories under a visible ``/etc`` entry that are hidden again (an empty ``tmpfs`` over them)."""

PROBE_TIMEOUT = 10.0
"""Seconds the probe sandbox may take to start and run ``true``."""

INSTALL_HINT = (
    "install bubblewrap (apt-get install bubblewrap, dnf install bubblewrap, apk add bubblewrap, pacman -S bubblewrap)"
)

_probed: dict[tuple[str, bool], str | None] = {}
_warned: set[str] = set()


LOCALE_VARIABLES = frozenset(
    {
        "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "LC_TIME", "LC_COLLATE", "LC_MONETARY", "LC_MESSAGES", "LC_PAPER",
        "LC_NAME", "LC_ADDRESS", "LC_TELEPHONE", "LC_MEASUREMENT", "LC_IDENTIFICATION",
    }
)  # fmt: skip
"""The locale categories a command gets, each only when its value is a locale (:data:`LOCALE`): another
``LC_*`` name, or a value that is not a locale (a key someone keeps there), is left out."""
LOCALE = re.compile(r"(C|POSIX|[A-Za-z]{2,8}([_-][A-Za-z0-9]{2,8})?)(\.[A-Za-z0-9-]{1,20})?(@[A-Za-z0-9]{1,20})?")
"""What a locale looks like: ``C``, ``POSIX``, ``en_US``, ``en_US.UTF-8``, ``de_DE@euro``, ``C.UTF-8``."""


def shell_environment(
    environ: Mapping[str, str],
    *,
    pass_env: Collection[str] = (),
    extra: Mapping[str, str] | None = None,
    overrides: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The variables of ``environ`` a shell needs (:data:`SHELL_VARIABLES`, :data:`LOCALE_VARIABLES`) and those named in
    ``pass_env``, then ``overrides`` (the sandbox's ``HOME``, ...), then ``extra`` (the caller's own)."""
    keep = set(pass_env)
    env = {
        name: value
        for name, value in environ.items()
        if name in SHELL_VARIABLES or name in keep or (name in LOCALE_VARIABLES and LOCALE.fullmatch(value))
    }
    env.update(overrides or {})
    env.update(extra or {})
    return env


def bwrap_problem(bwrap: str = DEFAULT_BWRAP, *, network: bool = False) -> str | None:
    """Why ``bwrap`` cannot sandbox a command here, or ``None`` when it can; probed once per process.

    Blocking (it starts a process): call it from a thread, as :meth:`Sandbox.bwrap_for` does.
    """
    key = (bwrap, network)
    if key not in _probed:
        _probed[key] = _probe(bwrap, network)
    return _probed[key]


def _probe(bwrap: str, network: bool) -> str | None:
    executable = _locate(bwrap)
    if executable is None:
        where = f"at {bwrap}" if os.sep in bwrap else "on PATH"
        return f"bubblewrap ({bwrap}) was not found {where}"
    argv = [executable, *sandbox_arguments(network=network, workspace=None), "--", "/bin/sh", "-c", "exit 0"]
    try:
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT, check=False, env={}
        )
    except subprocess.TimeoutExpired:
        return f"{executable} did not start a sandbox within {PROBE_TIMEOUT:g} s"
    except OSError as error:
        return f"{executable} cannot be run: {error.strerror or error}"
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        reason = said[-1] if said else f"exit code {done.returncode}"
        return f"{executable} is installed but cannot create a sandbox here ({reason})"
    return None


def _locate(bwrap: str) -> str | None:
    if os.sep in bwrap:
        return bwrap if os.path.isfile(bwrap) and os.access(bwrap, os.X_OK) else None
    return shutil.which(bwrap)


def sandbox_arguments(*, network: bool, workspace: Path | None, read_only_paths: Collection[str] = ()) -> list[str]:
    """``bwrap``'s options for one command (the module docstring says what they make visible)."""
    args = ["--unshare-all", *(["--share-net"] if network else []), "--die-with-parent", "--cap-drop", "ALL"]
    args += ["--hostname", "sandbox", *_system_arguments()]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--dir", SANDBOX_HOME]
    for path in read_only_paths:
        args += ["--ro-bind-try", path, path]
    if workspace is not None:
        args += ["--bind", str(workspace), str(workspace), "--chdir", str(workspace)]
    return args


@functools.cache
def _system_arguments() -> tuple[str, ...]:
    """The read-only system: computed once per process (the directories and ``/etc`` are looked at once)."""
    args: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return (*args, *_etc_arguments())


def _etc_arguments() -> list[str]:
    args: list[str] = []
    bound: list[str] = []
    for pattern in ETC_ENTRIES:
        for path in sorted(glob.glob(os.path.join("/etc", pattern))):
            if os.path.islink(path) and _shown(os.path.realpath(path)):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.exists(path):
                args += ["--ro-bind", path, path]
                bound.append(path)
    for path in ETC_MASKED:
        if os.path.isdir(path) and any(path.startswith(parent + "/") for parent in bound):
            args += ["--tmpfs", path]
    return args


def _shown(target: str) -> bool:
    """Whether a symlink's target is visible in the sandbox anyway, so the link can stay a link."""
    return target.startswith(("/usr/", "/proc/")) or target in ("/usr", "/proc")


@dataclass(frozen=True, slots=True)
class Sandbox:
    """How the ``bash`` tool confines its commands (the module docstring has the whole contract)."""

    mode: SandboxMode = "auto"
    """``"auto"``, ``"required"`` or ``"off"``."""
    network: bool = False
    """Let commands use the network (the host's own, loopback included)."""
    bwrap: str = DEFAULT_BWRAP
    """The ``bwrap`` program: a name looked up on ``PATH``, or a path."""
    read_only_paths: tuple[str, ...] = ()
    """More host paths visible read-only (absolute; those that do not exist are skipped)."""

    def __post_init__(self) -> None:
        if self.mode not in SANDBOX_MODES:
            choices = ", ".join(repr(mode) for mode in SANDBOX_MODES)
            raise ConfigInvalid(f"bash tool: sandbox must be one of {choices}, not {self.mode!r}")
        if not isinstance(self.network, bool):
            raise ConfigInvalid(f"bash tool: network must be true or false, not {self.network!r}")
        if not self.bwrap.strip():
            raise ConfigInvalid("bash tool: bwrap must name the bubblewrap program or its path, not ''")
        for path in self.read_only_paths:
            if not os.path.isabs(path):
                raise ConfigInvalid(f"bash tool: read_only_paths must be absolute paths, not {path!r}")

    async def bwrap_for(self) -> str | None:
        """The ``bwrap`` executable to run the next command with, or ``None`` to run it unconfined.

        Raises ``PermissionDenied`` when the mode is ``"required"`` and ``bwrap`` is not usable; warns once
        per process when it is ``"auto"`` and ``bwrap`` is not usable.
        """
        if self.mode == "off":
            return None
        key = (self.bwrap, self.network)
        problem = _probed[key] if key in _probed else await asyncio.to_thread(self._probe)
        if problem is None:
            return _locate(self.bwrap)
        if self.mode == "required":
            raise PermissionDenied(
                f'bash runs only in a sandbox (tools.bash.sandbox = "required"), and {problem}: {INSTALL_HINT}, '
                'or set tools.bash.sandbox (bash_tool(sandbox=...)) to "auto" or "off".'
            )
        if self.bwrap not in _warned:
            _warned.add(self.bwrap)
            log.warning(
                'tether: bash commands run without a sandbox: %s; to confine them, %s (tools.bash.sandbox = "off" '
                "runs them unconfined without this notice)",
                problem,
                INSTALL_HINT,
            )
        return None

    def _probe(self) -> str | None:
        return bwrap_problem(self.bwrap, network=self.network)

    def prefix(self, bwrap: str, *, workspace: Path) -> list[str]:
        """What goes before a command line to run it with ``bwrap`` in a sandbox around ``workspace``."""
        options = sandbox_arguments(network=self.network, workspace=workspace, read_only_paths=self.read_only_paths)
        return [bwrap, *options, "--"]

    def environment(
        self,
        environ: Mapping[str, str],
        *,
        sandboxed: bool,
        pass_env: Collection[str],
        extra: Mapping[str, str],
        allowlist: bool = True,
    ) -> dict[str, str]:
        """The command's environment: :func:`shell_environment` (all of ``environ`` without ``allowlist``),
        with ``SHELL`` and, in the sandbox, its private ``HOME`` and ``TMPDIR``, then ``extra``."""
        overrides = {"SHELL": "/bin/bash"}
        if sandboxed:
            overrides |= {"HOME": SANDBOX_HOME, "TMPDIR": "/tmp"}
        if not allowlist:
            return {**environ, **overrides, **extra}
        return shell_environment(environ, pass_env=pass_env, extra=extra, overrides=overrides)
