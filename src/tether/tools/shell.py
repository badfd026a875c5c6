"""The ``bash`` tool: one shell command in the workspace root, bounded in time and output.

The contract, before the code:

- **A process group per command.** The command runs as ``/bin/bash -c COMMAND`` (behind ``bwrap ... --``
  when sandboxed) in a new session (``start_new_session=True``), so it and everything it starts share one
  process group, led by the shell (or by ``bwrap``, whose sandbox init stays in the group until the last
  process of the sandbox is gone).
- **Nothing outlives the call.** However the call ends -- the command finished, its own timeout passed, or
  the awaiting task was cancelled (tether's ``tool_timeout``, a run timeout, ``handle.cancel()``) -- the whole
  group gets ``SIGTERM``, then ``SIGKILL`` for whatever is left after a grace period, before the coroutine
  returns or re-raises. Background jobs (``cmd &``) therefore stop with the command (unsandboxed, after up
  to ``DRAIN_SECONDS`` for the output they still hold; sandboxed, at once). Unsandboxed, a process that
  leaves the group on purpose (``setsid``) is not followed; sandboxed, it dies with the sandbox. On Linux
  "left" means running: the group is read from ``/proc`` so that zombies, which a container's PID 1 may
  never reap, do not make every stop wait out the grace period.
- **The tool's own timeout comes first.** It kills the group and answers the model with a ``tool_timeout``
  error carrying the output so far. The ``Tool``'s timeout is set above it (plus the grace periods), so
  the executor's timeout is only a backstop; if it fires anyway, the cancellation kills the group too.
- **Bounded output.** stdout and stderr are captured separately, each up to ``max_output_bytes``: the head
  and the tail are kept and the middle is replaced by ``[... N bytes elided ...]``. The exit code is always
  reported; a non-zero exit is a normal result (the model reads it), not an error, except 126 and 127: the
  command never ran (not executable, not found), and the call fails (``tool_failed``).
- **Confined when it can be.** By default (``sandbox="auto"``) the command runs inside a bubblewrap sandbox
  when ``bwrap`` is usable here: it sees the workspace (read-write), the system (read-only) and nothing else
  of the host -- no home directory, no other files, no host processes, no network unless ``network=True``
  -- and, in the sandbox's own PID namespace, everything it starts dies with it, ``setsid`` and double forks
  included. :mod:`tether.tools.sandbox` holds that contract; ``sandbox="required"`` refuses to run without
  it (``permission_denied``), ``sandbox="off"`` never confines.
- **An allowlisted environment.** The command gets only the variables a shell needs (``PATH``, ``HOME``,
  ``LANG``, ``LC_*``, ``TERM``, ...; :data:`tether.tools.sandbox.SHELL_VARIABLES`) and those named in
  ``pass_env``, plus ``env``: no key, token, DSN or ``DATABASE_URL`` reaches it, whatever its name.
  stdin is ``/dev/null``.

Not closed without the sandbox: the command can read and write whatever tether's user can, use the network,
and a process that leaves the group on purpose (``setsid``) is not followed. In any case a cancellation that
lands while the subprocess is being spawned kills the shell only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from tether.errors import ConfigInvalid, ToolError, ToolTimeout
from tether.secrets import Masker
from tether.tools.base import Tool
from tether.tools.sandbox import DEFAULT_BWRAP, PROBE_TIMEOUT, Sandbox, SandboxMode
from tether.tools.workspace import Access, Workspace

__all__ = ["TOOL_ACCESS", "BashTool", "CommandOutcome", "bash_tool", "run_command"]

TOOL_ACCESS: Mapping[str, Access] = MappingProxyType({"bash": "write"})
"""``bash`` can change anything, so it counts as a write tool."""

BASH = "/bin/bash"
DEFAULT_TIMEOUT = 120.0
"""Seconds a command may run when the model does not ask for less."""
DEFAULT_MAX_TIMEOUT = 600.0
"""The most the model may ask for."""
DEFAULT_MAX_OUTPUT_BYTES = 30_000
"""Bytes kept of each of stdout and stderr (half from the head, half from the tail)."""
DEFAULT_KILL_GRACE = 2.0
"""Seconds between ``SIGTERM`` and ``SIGKILL``."""
DRAIN_SECONDS = 0.5
"""After the shell exits, how long to wait for the rest of its output before stopping its background jobs."""
_BACKSTOP_SLACK = 5.0

# --- output capture --------------------------------------------------------------------------------------------


MASK_MARGIN = 1024
"""Bytes kept beyond each cut of a long output, so that a key lying across a cut is whole when it is masked."""


class HeadTail:
    """Keeps the first and the last bytes of a stream, up to ``limit`` in all, and counts the rest.

    Each end keeps :data:`MASK_MARGIN` bytes more than it shows: :meth:`text` masks known keys first and cuts
    after, so a key that the cut would split is masked whole rather than shown but for its last characters. The
    tail is the stream's last bytes, the head's included: a key across the head's kept end is whole in the tail."""

    __slots__ = ("head", "head_limit", "tail", "tail_limit", "total")

    def __init__(self, limit: int) -> None:
        self.tail_limit = limit // 2
        self.head_limit = limit - self.tail_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit + MASK_MARGIN - len(self.head)
        if room > 0:
            self.head += data[:room]
        keep = self.tail_limit + MASK_MARGIN if self.tail_limit else 0
        if keep:  # the tail overlaps the head: a key across the head's end is whole in one of them
            self.tail += data[-keep:]
            if len(self.tail) > keep:
                del self.tail[: len(self.tail) - keep]

    @property
    def elided(self) -> int:
        """Bytes not shown between the head and the tail."""
        return max(0, self.total - self.head_limit - self.tail_limit)

    def text(self, mask: Callable[[str], str] | None = None) -> str:
        """What was kept, known keys masked (``mask``) before the cut: the whole stream, or its head, a line
        saying how much was elided, and its tail."""
        show = mask or _unmasked
        if not self.elided:
            rest = self.total - len(self.head)
            whole = self.head + self.tail[len(self.tail) - rest :] if rest > 0 else self.head
            return show(whole.decode("utf-8", "replace"))
        head = show(self.head.decode("utf-8", "replace"))[: self.head_limit]
        tail = show(self.tail.decode("utf-8", "replace"))
        tail = tail[len(tail) - self.tail_limit :] if self.tail_limit else ""
        before = "" if head.endswith("\n") else "\n"
        return f"{head}{before}[... {self.elided} bytes elided ...]\n{tail}"


def _unmasked(text: str) -> str:
    return text


class _Capture(asyncio.Protocol):
    """Reads one pipe into a :class:`HeadTail`; ``closed`` resolves when the pipe is closed."""

    def __init__(self, limit: int) -> None:
        self.buffer = HeadTail(limit)
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def itself(self) -> _Capture:
        """The protocol factory ``connect_read_pipe`` wants: this very instance."""
        return self

    def data_received(self, data: bytes) -> None:
        self.buffer.feed(data)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


# --- running a command -----------------------------------------------------------------------------------------


NOT_RUN = {126: "exit code 126: not executable", 127: "exit code 127: command not found"}
"""Exit codes bash gives when the command never ran: the call failed (``tool_failed``), which the model and the
run's record show as a failure. A model that writes a file name as a command (``bash(command='hello.txt')``)
has not done anything, and must not read it as done."""


@dataclass(frozen=True, slots=True)
class CommandOutcome:
    """What a command did: its exit status (``None`` when killed by the timeout) and its output."""

    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool

    def render(self) -> str:
        """The outcome as the model reads it: the exit status, then the output."""
        if self.returncode is not None and self.returncode < 0:
            status = f"killed by signal {_signal_name(-self.returncode)}"
        else:
            status = f"exit code {self.returncode}"
        return f"{status}\n{self.output()}"

    def output(self) -> str:
        """Each non-empty stream under its name, or ``(no output)``."""
        streams = (("stdout", self.stdout), ("stderr", self.stderr))
        parts = [f"--- {name} ---\n{text.removesuffix(chr(10))}" for name, text in streams if text]
        return "\n".join(parts) or "(no output)"


async def run_command(
    command: str,
    *,
    cwd: str | os.PathLike[str],
    env: Mapping[str, str],
    timeout: float,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    kill_grace: float = DEFAULT_KILL_GRACE,
    prefix: Sequence[str] = (),
    mask: Callable[[str], str] | None = None,
) -> CommandOutcome:
    """Run ``command`` with ``/bin/bash -c`` in its own process group, killed as the module docstring says.

    ``prefix`` goes before ``/bin/bash`` on the command line: the sandbox's ``bwrap ... --``. ``mask`` masks
    known keys in the output before it is cut to its limit (:class:`HeadTail`).
    """
    loop = asyncio.get_running_loop()
    captures = (_Capture(max_output_bytes), _Capture(max_output_bytes))
    pipes = [os.pipe(), os.pipe()]
    readers = [os.fdopen(read_end, "rb", buffering=0) for read_end, _ in pipes]
    transports: list[asyncio.BaseTransport] = []
    try:
        try:
            process = await asyncio.create_subprocess_exec(
                *prefix, BASH, "-c", command, cwd=cwd, env=dict(env), stdin=asyncio.subprocess.DEVNULL,
                stdout=pipes[0][1], stderr=pipes[1][1], start_new_session=True,
            )  # fmt: skip
        finally:
            for _, write_end in pipes:
                os.close(write_end)
        try:
            for capture, reader in zip(captures, readers, strict=True):
                pipe_transport, _ = await loop.connect_read_pipe(capture.itself, reader)
                transports.append(pipe_transport)
            timed_out = await _wait(process, captures, timeout)
        finally:
            await _stop_group(process.pid, kill_grace)
            if process.returncode is None:  # not reached through its group: still our unreaped child
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
            await process.wait()
            await _settle(captures, DRAIN_SECONDS)
    finally:
        for transport in transports:
            transport.close()
        for reader in readers[len(transports) :]:
            reader.close()
    return CommandOutcome(
        returncode=None if timed_out else process.returncode,
        stdout=captures[0].buffer.text(mask),
        stderr=captures[1].buffer.text(mask),
        timed_out=timed_out,
    )


async def _wait(process: asyncio.subprocess.Process, captures: tuple[_Capture, ...], timeout: float) -> bool:
    """Wait for the shell to exit and its output to end; ``True`` when the timeout passed first."""
    scope = asyncio.timeout(timeout)
    try:
        async with scope:
            await process.wait()
            await _settle(captures, DRAIN_SECONDS)  # background jobs may hold the pipes open
    except TimeoutError:
        if scope.expired():
            return True
        raise
    return False


async def _settle(captures: tuple[_Capture, ...], seconds: float) -> None:
    """Wait up to ``seconds`` for every pipe to close."""
    pending = [capture.closed for capture in captures if not capture.closed.done()]
    if pending:
        await asyncio.wait(pending, timeout=seconds)


async def _stop_group(pgid: int, grace: float) -> None:
    """``SIGTERM`` the process group, wait up to ``grace`` for it to go, then ``SIGKILL`` what is left.

    Runs to the end even when cancelled again: ``SIGKILL`` is sent from a ``finally``.
    """
    if not _group_alive(pgid):
        return
    _signal_group(pgid, signal.SIGTERM)
    try:
        await _until_gone(pgid, grace)
    finally:
        if _group_alive(pgid):
            _signal_group(pgid, signal.SIGKILL)
            await _until_gone(pgid, grace)


async def _until_gone(pgid: int, seconds: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    delay = 0.002
    while _group_alive(pgid) and loop.time() < deadline:
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group is still running (zombies, which nobody may reap, do not count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # the group id now belongs to someone else's processes
    if not sys.platform.startswith("linux"):
        return True
    return any(state not in "ZX" for state in _group_states(pgid))


def _group_states(pgid: int) -> list[str]:
    """The state letters of the processes of group ``pgid``, read from ``/proc``."""
    states: list[str] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return ["?"]
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as file:
                fields = file.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and int(fields[2]) == pgid:
            states.append(fields[0].decode())
    return states


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


# --- the tool --------------------------------------------------------------------------------------------------


def bash_tool(
    workspace: Workspace,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    max_timeout: float = DEFAULT_MAX_TIMEOUT,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    kill_grace: float = DEFAULT_KILL_GRACE,
    scrub_env: bool = True,
    pass_env: Collection[str] = (),
    env: Mapping[str, str] | None = None,
    sandbox: SandboxMode = "auto",
    network: bool = False,
    bwrap: str = DEFAULT_BWRAP,
    read_only_paths: Collection[str] = (),
    masker: Masker | None = None,
) -> BashTool:
    """The ``bash`` tool: runs a command in ``workspace.root`` (see the module docstring).

    Args:
        workspace: Where commands run.
        timeout: Seconds a command may run unless the model asks for another value.
        max_timeout: The most the model may ask for; larger requests are lowered to it.
        max_output_bytes: Bytes kept of each of stdout and stderr.
        kill_grace: Seconds between ``SIGTERM`` and ``SIGKILL`` when the group is stopped.
        scrub_env: Give the command only the allowlisted environment; ``False`` passes tether's whole one.
        pass_env: Names of more variables the command gets from tether's environment.
        env: Variables set for every command (after the allowlist).
        sandbox: ``"auto"`` (confine when bubblewrap is usable), ``"required"`` or ``"off"``.
        network: Let sandboxed commands use the network.
        bwrap: The bubblewrap program, a name on ``PATH`` or a path.
        read_only_paths: More host paths a sandboxed command may read (absolute).
        masker: Keys masked in the output before it is cut to its limit, so that a key across the cut is masked
            whole (an agent masks every result again, but after the cut only part of such a key is left to see);
            give the agent's keys, ``Masker.from_environment()`` at least. ``None``: no masking here.
    """
    _check_settings(timeout=timeout, max_timeout=max_timeout, kill_grace=kill_grace, max_output=max_output_bytes)
    confinement = Sandbox(sandbox, network=network, bwrap=bwrap, read_only_paths=tuple(read_only_paths))
    default_timeout = min(timeout, max_timeout)
    extra = dict(env or {})
    passed = tuple(pass_env)
    mask = masker.mask if masker is not None and len(masker) else None

    async def bash(command: str, timeout: float | None = None) -> str:
        """Run a bash command in the workspace root.

        Args:
            command: The command line, run with bash -c.
            timeout: Seconds to allow; the default when not given.
        """
        if not command.strip():
            raise ToolError("The command is empty.")
        if timeout is not None and not timeout > 0:
            raise ToolError(f"timeout must be a number of seconds > 0, not {timeout!r}.")
        seconds = default_timeout if timeout is None else min(timeout, max_timeout)
        bwrap_path = await confinement.bwrap_for()
        environ = confinement.environment(
            os.environ, sandboxed=bwrap_path is not None, pass_env=passed, extra=extra, allowlist=scrub_env
        )
        prefix = confinement.prefix(bwrap_path, workspace=workspace.root) if bwrap_path else ()
        outcome = await run_command(
            command, cwd=workspace.root, env=environ, timeout=seconds, max_output_bytes=max_output_bytes,
            kill_grace=kill_grace, prefix=prefix, mask=mask,
        )  # fmt: skip
        if outcome.timed_out:
            raise ToolTimeout(
                f"The command did not finish within {seconds:g} s; it was stopped, with every process it "
                f"started. Output until then:\n{outcome.output()}"
            )
        if outcome.returncode in NOT_RUN:
            raise ToolError(f"The command could not run ({NOT_RUN[outcome.returncode]}): {outcome.render()}")
        return outcome.render()

    def remake(paths: tuple[str, ...]) -> BashTool:
        return bash_tool(
            workspace, timeout=timeout, max_timeout=max_timeout, max_output_bytes=max_output_bytes,
            kill_grace=kill_grace, scrub_env=scrub_env, pass_env=passed, env=extra, sandbox=sandbox, network=network,
            bwrap=bwrap, read_only_paths=paths, masker=masker,
        )  # fmt: skip

    description = _description(default_timeout, max_timeout, max_output_bytes, confinement)
    backstop = max_timeout + 2 * kill_grace + DRAIN_SECONDS * 2 + _BACKSTOP_SLACK + PROBE_TIMEOUT
    made = BashTool.from_function(bash, description=description, timeout=backstop)
    made.read_only_paths = confinement.read_only_paths
    made._remake = remake
    return made


class BashTool(Tool):
    """The tool :func:`bash_tool` makes: a ``Tool`` that knows the host paths its sandbox shows read-only, and
    can be made again showing more (an agent with skills shows their folders: ``SkillSet.equip``)."""

    __slots__ = ("_remake", "read_only_paths")

    read_only_paths: tuple[str, ...]
    """The host paths a sandboxed command may read (``bash_tool(read_only_paths=...)``)."""
    _remake: Callable[[tuple[str, ...]], BashTool]

    def reading(self, paths: Collection[str]) -> BashTool:
        """This tool, made again with ``paths`` (absolute) readable in its sandbox too; itself when it reads
        them all already. This one is left as it is, for the agents it was given to."""
        more = tuple(dict.fromkeys(path for path in paths if path not in self.read_only_paths))
        return self._remake((*self.read_only_paths, *more)) if more else self


def _check_settings(*, timeout: float, max_timeout: float, kill_grace: float, max_output: int) -> None:
    if not os.access(BASH, os.X_OK):
        raise ConfigInvalid(f"the bash tool needs {BASH}, which is missing or not executable")
    for label, value in (("timeout", timeout), ("max_timeout", max_timeout), ("kill_grace", kill_grace)):
        if not value > 0:
            raise ConfigInvalid(f"bash tool: {label} must be > 0 seconds, not {value!r}")
    if max_output < 2:
        raise ConfigInvalid(f"bash tool: max_output_bytes must be >= 2, not {max_output!r}")


def _description(default_timeout: float, max_timeout: float, max_output_bytes: int, sandbox: Sandbox) -> str:
    """What the model reads about the tool."""
    text = (
        "Run a bash command (bash -c) in the workspace root and get its exit code, stdout and stderr. "
        f"The command may run {default_timeout:g} s (pass `timeout` for up to {max_timeout:g} s); then it is "
        "stopped with every process it started and the call fails with tool_timeout. Background jobs "
        "(cmd &) are stopped when the command ends. stdin is empty: do not run interactive programs. "
        f"Each of stdout and stderr keeps {max_output_bytes} bytes: the start and the end, with the middle "
        "replaced by '[... N bytes elided ...]'; redirect to a file and read it to see more. "
        "A non-zero exit code is reported, not raised, except 126 and 127 (the command is not executable or "
        "was not found), which fail the call. The environment holds only basic variables (PATH, "
        "LANG, ...)."
    )
    if sandbox.mode != "off":
        text += (
            " The command may run in a sandbox: then only the workspace and the system's programs are there, "
            "/tmp and $HOME are private and emptied after each command, "
            + ("and the network can be used." if sandbox.network else "and there is no network.")
        )
    return text
