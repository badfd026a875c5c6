"""``tether config migrate``: rewrite a file of the older layout in tether's, as loading already reads it.

The contract
------------
* **The same configuration.** Keys move as :data:`~tether.config.older.RENAMES` says, values converted as
  loading converts them (milliseconds to seconds), so the new file loads, with no notice, to the configuration
  the old one loaded to.
* **Valid before, valid after, or nothing written.** The file is validated as it is (a problem is named by the
  older key and its line) and the result again before writing; either failing raises
  :class:`~tether.errors.ConfigInvalid` and leaves the file untouched.
* **Disturb nothing else.** The file is rewritten through tomlkit: other keys, comments, blank lines and order
  stay. A moved key keeps its comments: a key renamed within its table stays on its line; one moving to
  another table is added at the end of that table's keys, with the comment on its line and the comment lines
  right above it. An older table left empty (``[llm]``, ``[policy]``) goes, its other comments staying where
  it was.
* **Atomic, with a backup**, as ``tether config set`` writes (:func:`~tether.config.edit.atomic_write`): the
  previous file is kept as ``<name>.bak``.
* **Idempotent.** A file with no key of the older layout is left alone.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.container import Container, OutOfOrderTableProxy
from tomlkit.items import AoT, Comment, InlineTable, Item, Null, Table, Trivia
from tomlkit.toml_document import TOMLDocument

from tether.bounded import read_bounded
from tether.config.edit import assign, atomic_write
from tether.config.issues import Issue, dotted, fail
from tether.config.load import MAX_CONFIG_BYTES, Layer, parse_text, validate
from tether.config.lock import update_lock
from tether.config.older import OLDER_SECTIONS, Move, unchanged


@dataclass(frozen=True, slots=True)
class Migration:
    """What migrating a file did."""

    path: Path
    moves: tuple[Move, ...]
    """The keys moved, in the order of the table; empty: the file was already in tether's layout."""
    text: str
    """The file's text now."""

    def lines(self) -> list[str]:
        """``runtime.turn_timeout_ms -> runtime.limits.run_timeout (90000 ms -> 90.0 s)``, one per key moved."""
        described = []
        for move in self.moves:
            line = f"{dotted(move.old)} -> {dotted(move.new)}"
            if move.written != move.value:
                line += f" ({move.written!r} -> {move.value!r}, {move.rename.unit})"
            described.append(line)
        return described


def migrate_file(path: Path, *, below: Sequence[Layer] = (), env: Mapping[str, str] | None = None) -> Migration:
    """Rewrite the file at ``path`` in tether's layout (see the module docstring), validated with the layers
    ``below`` it; a missing file, or one that is invalid before or after, raises ``ConfigInvalid``. The file is
    read and written under the update lock, as ``tether config set`` changes it."""
    with update_lock(path, create=False):
        return _migrate(path, below, env)


def _migrate(path: Path, below: Sequence[Layer], env: Mapping[str, str] | None) -> Migration:
    try:
        raw = read_bounded(path, MAX_CONFIG_BYTES)
    except FileNotFoundError:
        raise fail([Issue("", "no such file", str(path))]) from None
    except OSError as error:
        raise fail([Issue("", f"cannot be read: {error.strerror}", str(path))]) from None
    layer = parse_text(raw, path)
    text = raw.decode("utf-8")
    validate([*below, layer], env)
    if not layer.moves:
        return Migration(path, (), text)
    new_text = rewrite(text, layer.moves)
    new_layer = parse_text(new_text.encode("utf-8"), path)
    validate([*below, new_layer], env)
    atomic_write(path, new_text.encode("utf-8"))
    return Migration(path, tuple(layer.moves), new_text)


def rewrite(text: str, moves: Sequence[Move]) -> str:
    """``text`` with each of ``moves`` made (see the module docstring)."""
    document = tomlkit.parse(text)
    newline = "\r\n" if "\r\n" in text else "\n"
    for move in moves:
        _move(document, move, newline)
    for section in OLDER_SECTIONS:
        _drop_if_empty(document, section, newline)
    return _tidy(document.as_string(), text, newline)


_BLANK_RUN = re.compile(r"\n{3,}")


def _tidy(new: str, old: str, newline: str) -> str:
    """The line ends of ``old`` throughout (tomlkit writes new headers with ``\n``), and no more blank lines in
    a row than ``old`` has, or at its end; kept only if it reads as the same TOML."""
    tidy = new.replace("\r\n", "\n")
    if "\n\n\n" not in old.replace("\r\n", "\n"):
        tidy = _BLANK_RUN.sub("\n\n", tidy)
    if not old.replace("\r\n", "\n").endswith("\n\n"):
        tidy = tidy.rstrip("\n") + "\n" if tidy.endswith("\n") else tidy
    if newline == "\r\n":
        tidy = tidy.replace("\n", "\r\n")
    try:
        same = tomllib.loads(tidy) == tomllib.loads(new)
    except tomllib.TOMLDecodeError:
        same = False
    return tidy if same else new


def _move_between_pieces(document: TOMLDocument, holder: OutOfOrderTableProxy, move: Move) -> None:
    """A move out of a table written in pieces: tomlkit reads and deletes its keys through a proxy, with no
    place to keep a comment by; the value goes to its new key."""
    key = str(move.old[-1])
    old = holder[key]
    assert isinstance(old, Item), f"a key holds an item, not {type(old).__name__}"
    item = old if move.rename.convert is unchanged else _converted(old, move.value)
    del holder[key]
    assign(document, [str(part) for part in move.new], item)


def _container(node: Any) -> Container:
    if isinstance(node, Container):
        return node
    assert isinstance(node, Table | InlineTable), f"a table holds the key, not {type(node).__name__}"
    return node.value


def _move(document: TOMLDocument, move: Move, newline: str) -> None:
    holder: Any = document
    for part in move.old[:-1]:
        holder = holder[part]
    if isinstance(holder, OutOfOrderTableProxy):  # a table written in pieces (``[a.b]`` before ``[a]``, ``a.x =``)
        _move_between_pieces(document, holder, move)
        return
    container = _container(holder)
    key, new_key = str(move.old[-1]), str(move.new[-1])
    old = container.item(key)
    assert isinstance(old, Item)
    item = old if move.rename.convert is unchanged else _converted(old, move.value)
    if move.old[:-1] == move.new[:-1]:
        container._replace(key, new_key, item)  # in place: same line, same comment
        return
    above = _comments_above(container, key)
    container.remove(key)
    if "\n" not in item.trivia.trail:
        item.trivia.trail = newline  # it was the file's last line, with no line end
    item.trivia.indent = above  # rendered before the key: the comment lines go with it
    assign(document, [str(part) for part in move.new], item)


def _comments_above(container: Container, key: str) -> str:
    """The comment lines right above ``key`` (no blank line between), taken out of ``container``."""
    body = container.body
    index = next(i for i, (k, _) in enumerate(body) if k is not None and k.key == key)
    start = index
    while start > 0 and body[start - 1][0] is None and isinstance(body[start - 1][1], Comment):
        start -= 1
    text = "".join(item.as_string() for _, item in body[start:index])
    body[start:index] = [(None, Null())] * (index - start)  # same length: the keys' indexes stay right
    return text


def _converted(old: Item, value: Any) -> Item:
    """``value`` as an item that keeps ``old``'s comment."""
    item: Item = tomlkit.item(value)
    item.trivia.comment_ws = old.trivia.comment_ws
    item.trivia.comment = old.trivia.comment
    item.trivia.trail = old.trivia.trail
    return item


def _drop_if_empty(document: TOMLDocument, section: str, newline: str) -> None:
    """Remove the older table ``section`` once its keys have moved; its comments stay where it was."""
    if section not in document:
        return
    table = document.item(section)
    if isinstance(table, AoT) or (isinstance(table, Table | InlineTable) and len(table) > 0):
        return  # keys are left: validation has refused the file already
    index = next(i for i, (key, _) in enumerate(document.body) if key is not None and key.key == section)
    kept = ""
    if isinstance(table, Table):
        if table.trivia.comment:
            kept += table.trivia.comment + newline
        kept += "".join(item.as_string() for key, item in table.value.body if key is None)
    document.remove(section)
    if kept.strip():  # in the table's place, as one item (its comment lines and the blank lines among them)
        text = kept.removesuffix(newline) if kept.endswith(newline) else kept
        document.body[index] = (None, Comment(Trivia(indent="", comment=text, trail=newline)))
