"""docs/conformance.md stays honest: every requirement row names tests that exist, or states a deliberate
difference, and no row is left unfilled.

A row is a line of a table whose header is ``| ID | Requirement | How tether meets it | Test |``. Its test cell
holds test references in backticks (``tests/path.py::test_name`` or ``tests/path.py::Class::test_name``), or
``—`` when the how cell opens with ``**Difference:**`` and says why. A reference resolves when the file exists
and defines that function (at module level, or in that class)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "conformance.md"
HEADER = ["ID", "Requirement", "How tether meets it", "Test"]
DOCUMENTS = ("000", "001", "002", "003", "004")
"""The five design documents; each has its section of the page."""
REFERENCE = re.compile(r"`(tests/[\w/]+\.py)::([\w:]+)`")
DIFFERENCE = "**Difference:**"
UNFILLED = "PENDING("


@dataclass(frozen=True)
class Row:
    line: int
    section: str
    cells: list[str]

    @property
    def id(self) -> str:
        return self.cells[0].strip("` ")

    @property
    def how(self) -> str:
        return self.cells[2]

    @property
    def tests(self) -> str:
        return self.cells[3]


def cells_of(line: str) -> list[str]:
    """The cells of a Markdown table line (``\\|`` is a pipe inside a cell)."""
    inner = line.strip()[1:-1]
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", inner)]


def rows(text: str) -> list[Row]:
    """Every requirement row of the page, with its line and the section (``## 000 ...``) it is in."""
    found: list[Row] = []
    section = ""
    in_table = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("## "):
            section = line[3:].split()[0]
            in_table = False
        elif line.startswith("|"):
            cells = cells_of(line)
            if cells == HEADER:
                in_table = True
            elif in_table and not set(line.replace("|", "").strip()) <= set("-: "):
                found.append(Row(number, section, cells))
        else:
            in_table = False
    return found


@cache
def definitions(path: str) -> frozenset[str]:
    """The test functions a file defines: ``name`` at module level, ``Class::name`` in a class."""
    tree = ast.parse((ROOT / path).read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.update(
                f"{node.name}::{item.name}"
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            )
    return frozenset(names)


def problems(text: str) -> list[str]:
    """What is wrong with the page, one line per problem (an empty list: the page is honest)."""
    found: list[str] = []
    seen: dict[str, int] = {}
    all_rows = rows(text)
    for row in all_rows:
        where = f"line {row.line} ({row.id})"
        if len(row.cells) != len(HEADER):
            found.append(f"{where}: {len(row.cells)} cells, not {len(HEADER)}")
            continue
        if row.id in seen:
            found.append(f"{where}: the ID is used on line {seen[row.id]} too")
        seen[row.id] = row.line
        if any(UNFILLED in cell for cell in row.cells):
            found.append(f"{where}: still {UNFILLED}...)")
            continue
        if not row.cells[1]:
            found.append(f"{where}: no requirement")
        references = REFERENCE.findall(row.tests)
        if not references and not row.how.startswith(DIFFERENCE):
            found.append(f"{where}: neither a test reference nor a stated difference")
        if row.how.startswith(DIFFERENCE) and len(row.how) < len(DIFFERENCE) + 20:
            found.append(f"{where}: the difference does not say why")
        for path, name in references:
            if not (ROOT / path).is_file():
                found.append(f"{where}: {path} does not exist")
            elif name not in definitions(path):
                found.append(f"{where}: {path} defines no {name}")
        if not references and row.tests not in ("—", "-", ""):
            found.append(f"{where}: the test cell is neither references nor '—': {row.tests!r}")
    sections = {row.section for row in all_rows}
    found += [f"no section for document {document}" for document in DOCUMENTS if document not in sections]
    return found


def test_every_row_of_the_conformance_page_is_proved_by_a_test_or_states_a_difference() -> None:
    assert PAGE.is_file()
    assert problems(PAGE.read_text()) == []


def test_the_page_covers_each_documents_test_scenarios_by_their_ids() -> None:
    ids = {row.id for row in rows(PAGE.read_text())}
    assert {f"TC-{n:02d}" for n in range(1, 11)} <= ids
    assert {f"000-S{n:02d}" for n in range(1, 14)} <= ids
    assert {f"002-I{n:02d}" for n in range(1, 11)} <= ids


GOOD = f"""\
## 000 A document

| ID | Requirement | How tether meets it | Test |
|---|---|---|---|
| 000-R01 | It runs. | Yes. | `tests/conformance/test_page.py::test_the_checker_catches_every_kind_of_dishonest_row` |
| 000-R02 | It flies. | {DIFFERENCE} it walks, since flying is out of scope for a loop. | — |
"""


@pytest.mark.parametrize(
    ("row", "complaint"),
    [
        ("| 000-R03 | It swims. | It does. | — |", "neither a test reference nor a stated difference"),
        ("| 000-R03 | It swims. | PENDING(swim) | — |", "still PENDING("),
        (
            "| 000-R03 | It swims. | It does. | `tests/conformance/test_page.py::test_nothing` |",
            "defines no test_nothing",
        ),
        ("| 000-R03 | It swims. | It does. | `tests/nowhere.py::test_x` |", "tests/nowhere.py does not exist"),
        ("| 000-R01 | It swims. | It does. | `tests/conformance/test_page.py::rows` |", "the ID is used on line"),
        (f"| 000-R03 | It swims. | {DIFFERENCE} no. | — |", "the difference does not say why"),
        ("| 000-R03 | It swims. | It does. |", "3 cells, not 4"),
        ("| 000-R03 | It swims. | It does. | see the tests |", "neither a test reference"),
    ],
)
def test_the_checker_catches_every_kind_of_dishonest_row(row: str, complaint: str) -> None:
    assert [p for p in problems(GOOD) if "no section" not in p] == []
    assert any(complaint in p for p in problems(GOOD + row + "\n")), problems(GOOD + row + "\n")
