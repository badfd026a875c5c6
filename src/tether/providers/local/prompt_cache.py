"""The embedded model's evaluated prompt kept on disk, so that a new process starts where an earlier one stopped.

Every ``tether run`` on ``local:`` is a new process, and a new process used to evaluate the whole first prompt
(the action protocol's system prompt and the tool definitions: 195 tokens for the quick start, 0.7 s on two
cores) before its first token, the same tokens every time. llama.cpp can hand out its context (the KV cache of
the tokens evaluated) and take it back, as its own CLI's ``--prompt-cache`` does. This module keeps such
snapshots: after a generation that had to evaluate a long prompt from scratch, the context right after that
prompt is written to the cache; the first generation of a newly loaded model takes the snapshot sharing the
longest prefix with its prompt and evaluates only what follows (llama-cpp-python's own prefix reuse does the
rest). The usage says so as it does within a process: reused tokens are ``cache_read_tokens``.

The contract
------------
* **Keyed by what makes a snapshot valid**: the model file (path, size, modification time), the context size
  and the llama.cpp build. Another model, a changed file or an upgraded llama-cpp-python never sees it.
* **Whole or ignored.** Snapshots are written whole (``tether.atomic.create_file``) and read back only when
  their header, length and SHA-256 check out; anything else is deleted and the prompt evaluated as if there were
  no cache. A cache that cannot be read or written (a read-only home, a full disk) costs nothing but its speed:
  a warning in the log, never a failed generation.
* **Small.** At most ``MAX_ENTRIES`` snapshots per model and none over ``MAX_ENTRY_BYTES`` (4.5 MB for the
  bundled model's 195-token prompt); the oldest go first. Writing happens on a thread of its own, after the
  tokens the snapshot holds were evaluated, so a generation does not wait for the disk.
* **Where**: ``$TETHER_CACHE_DIR/local-prompts`` (else ``$XDG_CACHE_HOME/tether``, else ``~/.cache/tether``),
  or the folder ``LocalProvider(prompt_cache=...)`` names; ``prompt_cache=False`` turns it off.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tether._logging import get_logger
from tether.atomic import create_file

logger = get_logger(__name__)

MAGIC = b"tether-prompt-state 1\n"
"""The first line of every snapshot: the format and its version."""
SUFFIX = ".prompt"
MAX_ENTRIES = 4
MAX_ENTRY_BYTES = 256 * 1024 * 1024
MAX_HEADER_BYTES = 4 * 1024 * 1024
"""A header (the token list) longer than this is not a snapshot this module wrote."""
MIN_REUSED_TOKENS = 32
"""A snapshot sharing fewer tokens with the prompt is not worth loading (the chat template's opening alone)."""
MIN_SAVED_TOKENS = 64
"""A prompt shorter than this is evaluated faster than a snapshot is read."""


def default_directory() -> Path:
    """Where snapshots go unless the provider names a folder (see the module docstring)."""
    if base := os.environ.get("TETHER_CACHE_DIR"):
        return Path(base).expanduser() / "local-prompts"
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return root / "tether" / "local-prompts"


def model_key(model_path: Path, n_ctx: int, build: str) -> str:
    """The name of a model's folder in the cache: a digest of everything a snapshot's validity depends on."""
    stat = model_path.stat()
    identity = f"{model_path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\0{n_ctx}\0{build}"
    return hashlib.sha256(identity.encode()).hexdigest()[:24]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A context as llama.cpp handed it out (``state``) and the tokens it holds, in order."""

    tokens: tuple[int, ...]
    state: bytes


class PromptCache:
    """One model's snapshots, in one folder."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._writing: list[threading.Thread] = []

    def best(self, tokens: Sequence[int]) -> Snapshot | None:
        """The snapshot sharing the longest prefix with ``tokens`` (at least ``MIN_REUSED_TOKENS``), if any."""
        best_path, best_shared = None, MIN_REUSED_TOKENS - 1
        for path in self._entries():
            header = self._header(path)
            if header is None:
                continue
            shared = common_prefix(header[0], tokens)
            if shared > best_shared:
                best_path, best_shared = path, shared
        return None if best_path is None else self._read(best_path)

    def save_later(self, snapshot: Snapshot) -> None:
        """Write ``snapshot`` on a thread of its own (the process waits for it at exit: it is not a daemon)."""
        writer = threading.Thread(target=self.save, args=(snapshot,), name="tether-prompt-cache")
        self._writing = [thread for thread in self._writing if thread.is_alive()] + [writer]
        writer.start()

    def wait(self) -> None:
        """Wait for the snapshots being written."""
        for thread in self._writing:
            thread.join()

    def save(self, snapshot: Snapshot) -> None:
        """Write ``snapshot`` (kept as it is when the same tokens are there already) and drop the oldest beyond
        ``MAX_ENTRIES``. Failures are logged, never raised: a cache that cannot be written only costs speed."""
        if len(snapshot.state) > MAX_ENTRY_BYTES or len(snapshot.tokens) < MIN_SAVED_TOKENS:
            return
        name = hashlib.sha256(json.dumps(snapshot.tokens).encode()).hexdigest()[:24] + SUFFIX
        header = json.dumps(
            {"tokens": snapshot.tokens, "bytes": len(snapshot.state), "sha256": _digest(snapshot.state)}
        )
        path = self.directory / name
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            if path.exists():  # the same tokens: the same snapshot
                os.utime(path)  # the newest now
            else:
                create_file(path, MAGIC + header.encode() + b"\n" + snapshot.state, mode=0o600)
            for old in sorted(self._entries(), key=_age, reverse=True)[MAX_ENTRIES:]:
                old.unlink(missing_ok=True)
        except OSError as error:
            logger.warning("the local model's prompt cache in %s could not be written: %s", self.directory, error)

    def _entries(self) -> list[Path]:
        try:
            return [path for path in self.directory.iterdir() if path.name.endswith(SUFFIX)]
        except OSError:
            return []

    def _header(self, path: Path) -> tuple[list[int], int, str] | None:
        """An entry's tokens, state length and digest; ``None`` (and the entry deleted) when it is not one."""
        try:
            with path.open("rb") as file:
                if file.read(len(MAGIC)) != MAGIC:
                    raise ValueError("not a prompt snapshot")
                line = file.readline(MAX_HEADER_BYTES)
            header = json.loads(line)
            tokens, size, digest = header["tokens"], header["bytes"], header["sha256"]
            if not (isinstance(tokens, list) and all(type(token) is int for token in tokens)):
                raise ValueError("its tokens are not a list of integers")
            if type(size) is not int or not isinstance(digest, str):
                raise ValueError("its length or digest is missing")
            if not 0 < size <= MAX_ENTRY_BYTES:
                raise ValueError(f"its state would be {size} bytes")
            return tokens, size, digest
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as error:
            self._discard(path, error)
            return None

    def _read(self, path: Path) -> Snapshot | None:
        header = self._header(path)
        if header is None:
            return None
        tokens, size, digest = header
        try:
            with path.open("rb") as file:
                file.readline(MAX_HEADER_BYTES)  # the magic line
                file.readline(MAX_HEADER_BYTES)
                state = file.read(size + 1)
        except OSError as error:
            self._discard(path, error)
            return None
        if len(state) != size or _digest(state) != digest:
            self._discard(path, ValueError("its state is not the one its header describes"))
            return None
        return Snapshot(tuple(tokens), state)

    def _discard(self, path: Path, why: BaseException) -> None:
        logger.warning("the local model's prompt cache: %s is unusable (%s); removed", path.name, why)
        with contextlib.suppress(OSError):
            path.unlink()


def common_prefix(first: Sequence[int], second: Sequence[int]) -> int:
    """How many tokens two sequences share from their start."""
    shared = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        shared += 1
    return shared


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _age(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0
