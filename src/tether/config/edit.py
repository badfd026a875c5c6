"""Change configuration files without disturbing them: ``tether config set`` and ``tether config init``.

The contract
------------
* **Round trip.** A file is edited through tomlkit, so every byte other than the key being set (its
  value, or a new line for a new key) stays as it was: comments, blank lines, order, quoting.
* **Validate before writing.** The whole edited file is validated (merged with the files below it: the
  user's file under ``./agent.toml``) before anything is written; an invalid result raises
  :class:`~tether.errors.ConfigInvalid` naming the key and its line, and leaves the file untouched.
* **Atomic.** The file is replaced by :func:`tether.atomic.replace_file` (a crash leaves the old or the new
  file, never half of one). ``set`` changes one key and keeps no copy of the file: a ``<name>.bak`` beside a
  project's ``agent.toml`` would sit in the agent's workspace, where the agent lists it and reads it.
  ``init --force`` (and ``migrate``), which rewrite the whole file, keep the previous content as ``<name>.bak``.
* **No lost update.** Each change reads the file, edits it and writes it under the update lock
  (:func:`tether.config.lock.update_lock`), so changes made at once by threads or processes each see the
  others' keys: every key set is kept. Nothing but the file (and the backup of a whole-file rewrite) is left
  in the directory: a temporary file that a write killed mid-way left is removed by the next change.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.container import OutOfOrderTableProxy
from tomlkit.exceptions import ParseError
from tomlkit.items import AoT, Array, Comment, InlineTable, Item, Table, Whitespace
from tomlkit.toml_document import TOMLDocument

from tether.atomic import BACKUP_SUFFIX, replace_file, temporary_files
from tether.bounded import read_bounded
from tether.config.issues import Issue, dotted, fail
from tether.config.load import MAX_CONFIG_BYTES, Layer, parse_text, split_key, validate
from tether.config.lock import update_lock
from tether.config.template import default_file
from tether.errors import ConfigInvalid

NEW_FILE_MODE = 0o644


def backup_path(path: Path) -> Path:
    """Where the previous content of ``path`` is kept: ``agent.toml`` -> ``agent.toml.bak``."""
    return path.with_name(path.name + BACKUP_SUFFIX)


def _current(path: Path) -> bytes:
    """The file's bytes (none when it does not exist yet), read as configuration is read: regular and bounded."""
    try:
        return read_bounded(path, MAX_CONFIG_BYTES)
    except FileNotFoundError:
        return b""
    except OSError as error:
        raise fail([Issue("", f"cannot be read: {error.strerror}", str(path))]) from None


def set_value(
    path: Path,
    key: str,
    value: str,
    *,
    below: Sequence[Layer] = (),
    env: Mapping[str, str] | None = None,
) -> str:
    """Set dotted ``key`` to ``value`` (read as a TOML value when it is one, else as a string) in the file
    at ``path`` (created when missing), validated with the layers ``below`` it; returns the new text."""
    parts = split_key(key)
    with update_lock(path):  # read under the lock: a change made meanwhile is in what this one edits
        old = _current(path)
        parse_text(old, path)  # a broken file is reported with its line before tomlkit sees it
        newline = "\r\n" if b"\r\n" in old else "\n"
        document = tomlkit.parse(old.decode("utf-8"))
        item = value_item(value)
        item.trivia.trail = newline  # for a new key; a replaced one keeps its own line ending
        assign(document, parts, item, newline)
        text = document.as_string()
        if text and not text.endswith("\n"):
            text += newline
        if text.endswith(newline * 2) and not old.decode("utf-8").endswith(newline * 2):
            text = text.removesuffix(newline)  # the blank line a new last table ended with
        validate([*below, parse_text(text.encode("utf-8"), path)], env)
        atomic_write(path, text.encode("utf-8"), backup=False)  # one key changed: no copy of the file beside it
    return text


def init_file(path: Path, *, force: bool = False) -> None:
    """Write the commented default file at ``path``; ``FileExistsError`` if one is there and not ``force``."""
    with update_lock(path):
        if path.exists() and not force:
            raise FileExistsError(f"{path} already exists")
        atomic_write(path, default_file().encode("utf-8"))


def value_item(text: str) -> Item:
    """``text`` as a tomlkit item: a TOML value when it parses as one, else a string."""
    try:
        document = tomlkit.parse(f"value = {text}\n")
    except ParseError:
        document = None
    if document is None or list(document) != ["value"]:
        return tomlkit.item(text)
    item = document.item("value")
    assert isinstance(item, Item), "a key = value line holds an item"
    return item


def assign(document: TOMLDocument, parts: list[str], item: Item, newline: str | None = None) -> None:
    """Put ``item`` at the key path ``parts`` (a list element by its index, as a string), making the tables
    on the way; a new key goes at the end of its table's keys (see :func:`_add_key`). With ``newline``, a
    table made here ends with a blank line, so that a header after it (a new ``[runtime.limits]`` lands
    before ``[tools]``) stands apart as the file's others do; :func:`set_value` drops that line again at the
    end of the file."""
    node: Any = document
    made: list[Table] = []
    for depth, part in enumerate(parts[:-1]):
        here = dotted(parts[: depth + 1])
        if isinstance(node, AoT | Array):
            node = _element(node, part, here)
        elif part in node:
            node = node[part]
            if not isinstance(node, Table | InlineTable | AoT | TOMLDocument | OutOfOrderTableProxy):
                raise ConfigInvalid(f"{here} is a value, not a table: set {here} itself")
        else:
            remaining = len(parts) - depth - 1
            if isinstance(node, InlineTable):
                child: Table | InlineTable = tomlkit.inline_table()
            else:
                child = tomlkit.table(is_super_table=remaining > 1)
                made.append(child)
            node[part] = child
            node = node[part]
    last = parts[-1]
    if isinstance(node, AoT | Array):
        raise ConfigInvalid(f"{dotted(parts[:-1])} is a list: set one key of an element, or the whole list")
    if isinstance(node, Table) and last not in node:
        _add_key(node, last, item)
    else:
        node[last] = item
    if newline is None:
        return
    for table in made:
        if not table.is_super_table():
            table.trivia.trail = newline  # its header's line ends as the file's lines do
            table.add(Whitespace(newline))


def _add_key(table: Table, key: str, item: Item) -> None:
    """Add ``key`` after the table's last entry, before its trailing blank lines, and before a trailing
    comment block that sits right on top of the next header (such a comment belongs to that header)."""
    body = table.value.body
    end = next((i for i, (_, value) in enumerate(body) if isinstance(value, Table | AoT)), len(body))
    at = end
    if at and isinstance(body[at - 1][1], Comment):
        while at and isinstance(body[at - 1][1], Comment):
            at -= 1
    while at and isinstance(body[at - 1][1], Whitespace):
        at -= 1
    if at == len(body):
        table.append(key, item)
    else:
        table.value._insert_at(at, key, item)


def _element(node: AoT | Array, part: str, here: str) -> Any:
    if not part.isdigit():
        raise ConfigInvalid(f"{here}: a list is indexed by a number (mcp.servers.0.command)")
    index = int(part)
    if index >= len(node):
        raise ConfigInvalid(f"{here}: the list has {len(node)} elements")
    element = node[index]
    if not isinstance(element, Table | InlineTable):
        raise ConfigInvalid(f"{here} is a value, not a table")
    return element


def atomic_write(path: Path, data: bytes, *, backup: bool = True) -> None:
    """Replace ``path``'s content with ``data`` by :func:`tether.atomic.replace_file`, keeping the old content
    as ``<name>.bak``. A symbolic link is followed: its target is replaced, the link stays. The file keeps
    its mode; a new one is readable by all (``0o644``), as a configuration file is. A failure (the backup's path
    is a directory, the folder is read-only) is ``config_invalid`` naming it; the file is left as it was.

    Every caller holds the update lock (:func:`~tether.config.lock.update_lock`), so no other write of ``path``
    is under way: a temporary file of ``path`` (or of its backup) found now was left by a write that died
    mid-way (killed, power cut), and is removed."""
    path = Path(os.path.realpath(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for leftover in temporary_files(path):
            leftover.unlink(missing_ok=True)
        replace_file(path, data, new_mode=NEW_FILE_MODE, backup=backup)
    except OSError as error:  # a backup path that is a directory, a read-only folder: the file is as it was
        where = next((str(f) for f in (error.filename2, error.filename) if isinstance(f, str)), str(path))
        raise fail([Issue("", f"cannot be written ({error.strerror}: {where}); it is unchanged", str(path))]) from None
