"""The CLI's tables line up on a terminal with wide characters (CJK, emoji): widths are counted in cells."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from rich.cells import cell_len

from tether.cli.render import shorten
from tether.cli.table import aligned, pad
from tether.cli.transcript import summary_table
from tether.sessions import SessionSummary

WIDE = [
    ("ID", "MODEL", "TITLE"),
    ("s-1", "openai:gpt-4o", "plain"),
    ("s-漢字", "本地:模型", "日本語のタイトル"),
    ("s-🙂🚀", "x", "emoji 🎉"),
    ("é́", "combining", "ok"),
]


def column_starts(line: str, cells: tuple[str, ...]) -> list[int]:
    """The terminal cell at which each cell's text begins on ``line``."""
    starts, offset = [], 0
    for cell in cells:
        index = line.index(cell, offset)
        starts.append(cell_len(line[:index]))
        offset = index + len(cell)
    return starts


@pytest.mark.parametrize("free_last", [False, True])
def test_columns_start_at_the_same_cell_on_every_line(free_last: bool) -> None:
    lines = aligned(WIDE, indent="  ", free_last=free_last)
    starts = [column_starts(line, row) for line, row in zip(lines, WIDE, strict=True)]
    assert all(s == starts[0] for s in starts), starts
    assert starts[0][0] == 2


def test_padded_lines_have_the_same_width_in_cells() -> None:
    rows = [(*row, "|") for row in WIDE]  # a last column of one cell: every line is then padded in full
    widths = {cell_len(line) for line in aligned(rows)}
    assert len(widths) == 1


def test_pad_counts_cells_not_characters() -> None:
    assert pad("漢字", 6) == "漢字  "
    assert pad("abc", 2) == "abc"


def test_the_sessions_table_lines_up_with_wide_titles_and_models() -> None:
    when = datetime(2026, 1, 2, 3, 4, tzinfo=UTC)
    summaries = [
        SessionSummary("20260102-aaaa", "ascii title", "openai:gpt-4o", when, when, 3),
        SessionSummary("20260102-bbbb", "中文标题", "模型:漢字🙂", when, when, 12),
    ]
    lines = summary_table(summaries).splitlines()
    rows = [
        (s.id, f"{s.updated_at.astimezone():%Y-%m-%d %H:%M}", str(s.message_count), s.model, s.title) for s in summaries
    ]
    starts = [column_starts(line, row) for line, row in zip(lines[1:], rows, strict=True)]
    assert starts[0] == starts[1]
    assert column_starts(lines[0], ("ID", "UPDATED", "MSGS", "MODEL", "TITLE")) == starts[0]


@pytest.mark.parametrize("text", ["漢字" * 40, "🙂" * 40, "mixed 漢字 and text " * 5])
def test_shorten_cuts_to_terminal_cells(text: str) -> None:
    short = shorten(text, 21)
    assert short.endswith("…")
    assert 19 <= cell_len(short) <= 21


def test_shorten_leaves_text_that_fits() -> None:
    assert shorten("漢字", 4) == "漢字"
