"""ToolRegistry: wrapping plain functions, unique names, and lookup by name in registration order."""

import pytest

from tether.errors import ConfigInvalid
from tether.tools.base import Tool, tool
from tether.tools.registry import ToolRegistry


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return path


@tool
def write_file(path: str, text: str) -> None:
    """Write a file."""


def list_dir(path: str = ".") -> list[str]:
    """List a directory."""
    return [path]


def test_plain_function_is_wrapped_into_a_tool() -> None:
    registry = ToolRegistry([list_dir])
    wrapped = registry.get("list_dir")
    assert isinstance(wrapped, Tool)
    assert wrapped.function is list_dir
    assert wrapped.description == "List a directory."
    assert wrapped.parameters["properties"] == {"path": {"type": "string", "default": "."}}


def test_tool_instances_are_kept_as_given() -> None:
    assert ToolRegistry([read_file]).get("read_file") is read_file


def test_get_of_an_unknown_name_is_none() -> None:
    assert ToolRegistry([read_file]).get("delete_file") is None


def test_duplicate_names_are_rejected_naming_the_tool() -> None:
    with pytest.raises(ConfigInvalid, match="'read_file'") as caught:
        ToolRegistry([read_file, write_file, read_file])
    assert caught.value.code == "config_invalid"


def test_a_renamed_tool_clashing_with_a_function_name_is_rejected() -> None:
    renamed = Tool.from_function(read_file.function, name="list_dir")
    with pytest.raises(ConfigInvalid, match="'list_dir'"):
        ToolRegistry([renamed, list_dir])


def test_the_same_function_under_two_names_is_allowed() -> None:
    registry = ToolRegistry([read_file, Tool.from_function(read_file.function, name="cat")])
    assert registry.names == ["read_file", "cat"]


def test_names_are_in_registration_order() -> None:
    assert ToolRegistry([write_file, list_dir, read_file]).names == ["write_file", "list_dir", "read_file"]


def test_iteration_yields_the_tools_in_registration_order() -> None:
    registry = ToolRegistry([write_file, read_file])
    assert list(registry) == [write_file, read_file]


def test_len_counts_the_tools() -> None:
    assert len(ToolRegistry([read_file, write_file, list_dir])) == 3


def test_empty_registry() -> None:
    registry = ToolRegistry()
    assert len(registry) == 0
    assert registry.names == []
    assert list(registry) == []
    assert "read_file" not in registry


def test_contains_checks_names() -> None:
    registry = ToolRegistry([read_file, list_dir])
    assert "read_file" in registry
    assert "list_dir" in registry
    assert "write_file" not in registry


def test_contains_is_false_for_non_names() -> None:
    registry = ToolRegistry([read_file])
    assert read_file not in registry
    assert None not in registry


def test_registry_accepts_any_iterable_once() -> None:
    registry = ToolRegistry(t for t in (read_file, write_file))
    assert registry.names == ["read_file", "write_file"]


def test_function_that_cannot_be_a_tool_is_rejected() -> None:
    def spread(*paths: str) -> None:
        """Star args."""

    with pytest.raises(ConfigInvalid):
        ToolRegistry([spread])
