"""The docs' runnable examples: every fenced block opened with ```` ```python run ```` in ``docs/*.md`` runs to its
end (each asserts what it shows) in a fresh interpreter, as a reader would paste it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
RUNNABLE = re.compile(r"^```python run\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def runnable_examples() -> list[tuple[str, str]]:
    """``(page:line, code)`` of every runnable block of the docs."""
    found = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text()
        for match in RUNNABLE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{page.name}:{line}", match.group(1)))
    return found


def test_the_docs_have_runnable_examples() -> None:
    assert any(where.startswith("tools.md:") for where, _ in runnable_examples())


@pytest.mark.parametrize(("where", "code"), runnable_examples(), ids=[w for w, _ in runnable_examples()])
def test_a_runnable_example_of_the_docs_runs(where: str, code: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"{where}:\n{done.stderr}"
