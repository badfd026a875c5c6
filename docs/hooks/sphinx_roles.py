"""A MkDocs hook: the API reference shows a docstring's Sphinx roles (``:class:`~tether.x.Name```, which the
docstrings keep for readers of the source and for ``help()``) as code, ``Name``, instead of as ``:class:Name``."""

from __future__ import annotations

import re
from typing import Any

ROLE = re.compile(r":(?:class|func|meth|attr|data|mod|exc|obj):<code>(~?)([\w.]+)</code>")


def shown(match: re.Match[str]) -> str:
    """``~a.b.Name`` is shown as ``Name``, as Sphinx does; any other target as written."""
    short, target = match.groups()
    return f"<code>{target.rsplit('.', 1)[-1] if short else target}</code>"


def on_page_content(html: str, **kwargs: Any) -> str:
    return ROLE.sub(shown, html)
