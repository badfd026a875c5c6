"""Plain-text tables whose columns line up on a terminal, whatever the characters in their cells.

Widths are measured in terminal cells (``rich.cells.cell_len``), not in characters: a CJK character or an emoji
takes two cells, a combining mark none, so padding by ``len`` would push every later column out of line.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len

GAP = "  "
"""What separates two columns."""


def pad(text: str, width: int) -> str:
    """``text`` followed by spaces up to ``width`` terminal cells (``str.ljust`` counts characters instead)."""
    return text + " " * max(0, width - cell_len(text))


def aligned(rows: Sequence[Sequence[str]], *, indent: str = "", free_last: bool = False) -> list[str]:
    """One line per row, each column as wide as its widest cell, trailing spaces dropped. ``free_last``: the
    last column is not padded nor counted (free text such as a title or a description)."""
    if not rows:
        return []
    fixed = len(rows[0]) - (1 if free_last else 0)
    widths = [max(cell_len(row[i]) for row in rows) for i in range(fixed)]
    return [
        (
            indent
            + GAP.join([*(pad(cell, width) for cell, width in zip(row[:fixed], widths, strict=True)), *row[fixed:]])
        ).rstrip()
        for row in rows
    ]
