"""The docs site: ``mkdocs build --strict`` passes (no broken link or anchor, no page left out of the navigation,
no docstring mkdocstrings cannot read), and its API reference covers every public name and nothing internal."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
API = ROOT / "docs" / "api"
# Each public face and its page of the API reference.
FACES = {
    "tether": "tether.md",
    "tether.providers": "providers.md",
    "tether.tools": "tools.md",
    "tether.sessions": "sessions.md",
    "tether.durable": "durable.md",
    "tether.testing": "testing.md",
    "tether.testing.store_conformance": "testing.md",
    "tether.telemetry": "telemetry.md",
    "tether.config": "config.md",
    "tether.skills": "skills.md",
    "tether.serve": "serve.md",
}
DIRECTIVE = re.compile(r"^::: ([\w.]+)$", re.MULTILINE)
EXTERNAL = re.compile(r"<(?:link|script)[^>]+(?:href|src)=\"https?://")


def test_the_docs_site_builds_with_no_warning(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-q",
            "-f",
            str(ROOT / "mkdocs.yml"),
            "-d",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr
    agent = (tmp_path / "api" / "tether" / "index.html").read_text()
    assert 'id="tether.Agent"' in agent, "the API reference is generated from the docstrings"
    assert "<code>Telemetry</code>" in agent, "a docstring's :class:`~tether.telemetry.Telemetry` shows as code"
    assert ":class:" not in agent
    for page in tmp_path.rglob("*.html"):
        assert not EXTERNAL.search(page.read_text()), f"{page}: reading the site fetches nothing (fonts, scripts)"


@pytest.mark.parametrize(("face", "page"), FACES.items())
def test_the_api_reference_documents_every_public_name_of_a_face(face: str, page: str) -> None:
    documented = DIRECTIVE.findall((API / page).read_text())
    faces = [other for other, its_page in FACES.items() if its_page == page]
    assert all(name.rsplit(".", 1)[0] in faces for name in documented), "a page documents its faces' names only"
    names = {name.rsplit(".", 1)[1] for name in documented if name.rsplit(".", 1)[0] == face}
    assert names == set(importlib.import_module(face).__all__)


def test_the_api_reference_has_a_page_for_every_face() -> None:
    assert sorted(path.name for path in API.glob("*.md")) == sorted(set(FACES.values()))
