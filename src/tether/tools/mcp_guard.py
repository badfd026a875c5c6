"""The guard between tether and an MCP stdio server: the server dies with the host, even a SIGKILLed one.

Run as ``python -I -S mcp_guard.py HOST_PID -- COMMAND [ARGS...]`` (standard library only, so it starts in a
few milliseconds). The MCP SDK starts the guard in a session and process group of its own; the guard starts
the server as its child with the same stdin, stdout and stderr, so the MCP traffic flows straight between
the host and the server, and then only waits.

What it guarantees:

* the host dies (any way, SIGKILL included): on Linux the kernel sends the guard SIGTERM (``prctl``
  ``PR_SET_PDEATHSIG``); elsewhere the guard notices within half a second that its parent changed. It
  passes SIGTERM on to the server and, if the server is still there two seconds later, SIGKILLs the whole
  process group: the server and whatever it started in its group;
* the guard itself is SIGKILLed: on Linux the server gets SIGKILL from the kernel (its own death signal);
* the server exits (the host closed its stdin, or it crashed): the guard SIGKILLs what is left of the
  process group (the server's own children) and goes.

A process that leaves the group on purpose (``setsid``, a daemon) is out of reach. The death signal fires
when the *thread* that started the guard ends, so the host must start servers from a thread that lives as
long as they do (an event loop's thread does).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

GRACE_SECONDS = 2
"""How long the server has to exit after SIGTERM before its process group is SIGKILLed."""

_PR_SET_PDEATHSIG = 1
_LINUX = sys.platform.startswith("linux")


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: mcp_guard.py HOST_PID -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    host = int(argv[1])
    command = argv[3:]
    if os.getpgrp() != os.getpid():
        os.setpgid(0, 0)  # the group we kill at the end must be ours alone, never the host's
    server: subprocess.Popen[bytes] | None = None

    def on_term(signum: int, _frame: Any) -> None:
        if server is None:
            os._exit(128 + signum)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        server.send_signal(signal.SIGTERM)
        signal.alarm(GRACE_SECONDS)

    def on_alarm(_signum: int, _frame: Any) -> None:
        os.killpg(0, signal.SIGKILL)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    signal.signal(signal.SIGALRM, on_alarm)
    if not _watch_host(host):
        return 1
    try:
        server = subprocess.Popen(command, preexec_fn=_die_with(os.getpid()) if _LINUX else None)
    except OSError as exc:
        print(f"tether: cannot start the MCP server {command[0]!r}: {exc}", file=sys.stderr)
        return 127
    _release_stdio()
    server.wait()
    os.killpg(0, signal.SIGKILL)  # the server's leftovers; this ends the guard too
    return 0  # pragma: no cover - not reached


def _watch_host(host: int) -> bool:
    """Arrange to get SIGTERM when the host dies; False if it has died already."""
    if _LINUX:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    else:
        threading.Thread(target=_poll_parent, args=(host,), daemon=True).start()
    return os.getppid() == host


def _poll_parent(host: int) -> None:
    while os.getppid() == host:
        time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGTERM)


def _die_with(guard: int) -> Any:
    """What the server runs before exec: SIGKILL when the guard dies (and exit if it is dead already)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def preexec() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != guard:
            os._exit(1)

    return preexec


def _release_stdio() -> None:
    """Let go of the guard's copies of the pipes: only the server holds the host's stdin and stdout."""
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
