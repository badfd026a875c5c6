"""The files of ``tether batch``: the prompts it reads and the results it writes.

Contract:

* The prompts file is JSON Lines: each non-blank line is a JSON string (the prompt) or an object
  ``{"prompt": "...", "id": ...}`` (``id`` optional: a string or an integer). An item's id is its ``id``, else
  its line number (``"line-7"``). A line that is not such a value, an empty prompt, or an id given twice is a
  ``ConfigInvalid`` naming the line; nothing is run then.
* An item's workflow id comes from the prompts file's resolved path and the item's id (for a numbered line,
  also its prompt): the same file run again gives the same ids, so a run that had finished is not run again,
  and a line whose prompt changed is a new run.
* The results file is JSON Lines too, one object per finished item (:func:`result_line`), each written whole
  with one ``write`` and flushed. :func:`finished_ids` reads it back; a last line cut short (the process was
  killed while writing it) is dropped from the file, so that the item is written again, whole.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import msgspec

from tether.bounded import read_bounded
from tether.errors import ConfigInvalid
from tether.events import RunResult
from tether.redaction import Redaction, default_redaction


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One prompt of the batch: its id (given, or ``line-N``), the prompt, and the run's workflow id."""

    id: str
    prompt: str
    workflow_id: str


MAX_PROMPTS_BYTES = 256 * 1024 * 1024
"""The largest prompts file read."""


def read_prompts(path: Path) -> list[BatchItem]:
    """The items of the prompts file at ``path``, in order (see the module docstring)."""
    try:
        lines = json_lines(read_bounded(path, MAX_PROMPTS_BYTES).decode("utf-8"))
    except UnicodeDecodeError as error:
        raise ConfigInvalid(f"{path}: not UTF-8 text (byte {error.start})") from None
    except OSError as error:
        raise ConfigInvalid(f"{path}: cannot be read ({error.strerror})") from None
    file_key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    items: list[BatchItem] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        item_id, prompt = _parse_line(path, number, line)
        if item_id in seen:
            raise ConfigInvalid(f"{path}:{number}: id {item_id!r} was already given on line {seen[item_id]}")
        seen[item_id] = number
        key = item_id if not item_id.startswith("line-") else f"{item_id}\n{prompt}"
        digest = hashlib.sha256(key.encode()).hexdigest()[:20]
        items.append(BatchItem(item_id, prompt, f"batch-{file_key}-{digest}"))
    if not items:
        raise ConfigInvalid(f"{path}: no prompts in it")
    return items


def _parse_line(path: Path, number: int, line: str) -> tuple[str, str]:
    where = f"{path}:{number}"
    try:
        value = json.loads(line)
    except json.JSONDecodeError as error:
        raise ConfigInvalid(f"{where}: not JSON ({error.msg}); a line is a JSON string or an object") from None
    except RecursionError:
        raise ConfigInvalid(f"{where}: JSON nested too deeply to read; a line is a JSON string or an object") from None
    item_id: object = None
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"prompt", "id"})
        if unknown:
            raise ConfigInvalid(f"{where}: unknown key {unknown[0]!r} (a line has 'prompt' and, optionally, 'id')")
        item_id, value = value.get("id"), value.get("prompt")
    if not isinstance(value, str) or not value.strip():
        raise ConfigInvalid(f"{where}: the prompt must be a non-empty string")
    if item_id is None:
        return f"line-{number}", value
    if isinstance(item_id, bool) or not isinstance(item_id, str | int) or not str(item_id).strip():
        raise ConfigInvalid(f"{where}: 'id' must be a non-empty string or an integer")
    if str(item_id).startswith("line-"):
        raise ConfigInvalid(f"{where}: 'id' must not start with 'line-' (those name lines without an id)")
    return str(item_id), value


RUN_MARK = "run:"
"""How :func:`finished_ids` names a finished run's workflow id beside the items' ids."""


def is_finished(item: BatchItem, done: set[str]) -> bool:
    """Whether ``item`` has a result among ``done`` (:func:`finished_ids`): by its run, which a line without an
    id changes with its prompt (an edited line is a new run); or, for an item with an id of its own, by that
    id (the prompts file may have moved)."""
    return RUN_MARK + item.workflow_id in done or (not item.id.startswith("line-") and item.id in done)


def finished_ids(path: Path) -> set[str]:
    """The ids of the items the results file at ``path`` already holds, and their runs (``run:`` and the workflow
    id; see :func:`is_finished`); none when it does not exist. Drops a last line cut short, so that appending
    starts on a line of its own."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return set()
    except OSError as error:
        raise ConfigInvalid(f"{path}: cannot be read ({error.strerror})") from None
    cut = data.rfind(b"\n") + 1  # a last line cut short (a crash mid-write) is dropped, once the rest is checked
    done: set[str] = set()
    for number, line in enumerate(json_lines(data[:cut].decode("utf-8", errors="replace")), start=1):
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            raise ConfigInvalid(f"{path}:{number}: not a result line; is it a results file of tether batch?") from None
        if not isinstance(record, dict) or not isinstance(record.get("id"), str):
            raise ConfigInvalid(f"{path}:{number}: a result line without an 'id'")
        done.add(record["id"])
        if isinstance(record.get("run_id"), str):
            done.add(RUN_MARK + record["run_id"])
    if cut < len(data):
        with path.open("r+b") as file:
            file.truncate(cut)
    return done


def json_lines(text: str) -> list[str]:
    """The lines of a JSON Lines text: split at line feeds only (``str.splitlines`` also splits at U+2028,
    U+2029, U+0085 and others, which a JSON string may hold raw), a carriage return before one dropped."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def result_line(item: BatchItem, result: RunResult, redaction: Redaction | None = None) -> dict[str, Any]:
    """The result of ``item`` as the results file keeps it: id, text, stop_reason, usage, cost, error (``null``
    when the run answered), its run id (the workflow id); messages pass through ``redaction``."""
    redaction = redaction or default_redaction()
    usage = msgspec.structs.asdict(result.usage) | {"total_tokens": result.usage.total_tokens}
    cost = None if result.cost is None else {"total_usd": result.cost.total_usd}
    error = None
    if result.stop_reason not in ("complete", "done_tool", "ask_user"):
        error = {
            "code": getattr(result.error, "code", None) or str(result.stop_reason),
            "message": redaction.text(result.detail or str(result.stop_reason)),
        }
    return {
        "id": item.id,
        "text": redaction.text(result.text),
        "stop_reason": str(result.stop_reason),
        "usage": usage,
        "cost": cost,
        "error": error,
        "run_id": item.workflow_id,
    }


def append_line(file: IO[bytes], record: dict[str, Any]) -> None:
    """Write ``record`` as one line with one ``write``, flushed to the operating system."""
    file.write((json.dumps(record, ensure_ascii=False) + "\n").encode())
    file.flush()
    os.fsync(file.fileno())
