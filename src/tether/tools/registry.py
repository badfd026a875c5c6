"""ToolRegistry: the tools a run offers, looked up by name."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from tether.errors import ConfigInvalid
from tether.tools.base import Tool


class ToolRegistry:
    """The tools of a run, by name. Plain functions are wrapped with ``Tool.from_function``."""

    __slots__ = ("_tools",)

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools:
            tool = item if isinstance(item, Tool) else Tool.from_function(item)
            if tool.name in self._tools:
                raise ConfigInvalid(f"two tools are named {tool.name!r}; tool names must be unique")
            self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def is_repeatable(self, name: str) -> bool:
        """Whether the tool ``name`` may be called again with the same arguments (``@tool(repeatable=True)``)."""
        tool = self._tools.get(name)
        return tool is not None and tool.repeatable

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools
