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


README = DOCS.parent / "README.md"


def readme_agent_block() -> str:
    """The README's "An agent in twenty lines" example, as it is written there."""
    text = README.read_text()
    section = text[text.index("## An agent in twenty lines") :]
    match = RUNNABLE_README.search(section)
    assert match is not None, "the README's twenty-line example is a ```python block"
    return match.group(1)


RUNNABLE_README = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def test_the_readmes_twenty_line_agent_runs_and_both_its_runs_complete(tmp_path: Path) -> None:
    """The example run verbatim, then its two results checked: the follow-up is answered by the script too
    (a script that ran out would end it with ``error``)."""
    checks = (
        "\nassert result.stop_reason == 'complete', (result.stop_reason, result.detail)"
        "\nassert follow_up.stop_reason == 'complete', (follow_up.stop_reason, follow_up.detail)"
        "\nmodel.assert_consumed()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", readme_agent_block() + checks],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()
    assert printed[0].startswith("5 complete Usage(")
    assert printed[1] == "20 complete"
