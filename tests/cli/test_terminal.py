"""The terminal layer's type-ahead: what was typed before a question is taken out of a real terminal's (a pseudo-
terminal's) input queue, a line still being typed included, so that the answer read next is typed after it."""

from __future__ import annotations

import os
import select
import termios
from collections.abc import Iterator

import pytest

from tether.cli.terminal import TypeAhead, typed_ahead


@pytest.fixture
def terminal() -> Iterator[tuple[int, int]]:
    """A pseudo-terminal in its line mode: ``(master, slave)``; keys are written to the master."""
    master, slave = os.openpty()
    yield master, slave
    os.close(master)
    os.close(slave)


def queued(fd: int) -> bool:
    """Whether something is ready to be read from ``fd`` now."""
    return bool(select.select([fd], [], [], 0)[0])


def echoed(master: int, text: bytes) -> None:
    """Wait until the terminal has echoed ``text``: it has then taken the keys into its input queue."""
    seen = b""
    while text not in seen:
        seen += os.read(master, 1024)


def test_whole_lines_and_a_line_being_typed_are_taken_and_nothing_is_left(terminal: tuple[int, int]) -> None:
    master, slave = terminal
    os.write(master, b"yes\nhalf a li")
    echoed(master, b"half a li")
    assert typed_ahead(slave) == "yes\nhalf a li"
    assert not queued(slave), "nothing is left for the question's answer to be read from"
    os.write(master, b"n\n")
    echoed(master, b"n")
    assert os.read(slave, 100) == b"n\n", "the answer typed after the question is read as it was typed"


def test_the_terminal_is_left_in_the_mode_it_was_in(terminal: tuple[int, int]) -> None:
    master, slave = terminal
    before = termios.tcgetattr(slave)
    os.write(master, b"abc")
    echoed(master, b"abc")
    typed_ahead(slave)
    assert termios.tcgetattr(slave) == before


def test_nothing_typed_is_nothing_taken_and_a_file_is_no_terminal(terminal: tuple[int, int]) -> None:
    _, slave = terminal
    assert typed_ahead(slave) == ""
    read, write = os.pipe()
    os.write(write, b"y\n")
    assert typed_ahead(read) == "", "not a terminal: left alone"
    assert os.read(read, 10) == b"y\n"
    os.close(read)
    os.close(write)


def test_kept_text_is_taken_once_without_its_last_line_break() -> None:
    kept = TypeAhead()
    kept.keep("first\n")
    kept.keep("second\n")
    assert kept.take() == "first\nsecond"
    assert kept.take() == ""
