"""What a valid MCP server entry is (tether.tools.mcp_spec): one set of rules for ``MCPServerConfig``,
``[[mcp.servers]]`` in agent.toml and ``MCPTools``, with the same messages everywhere."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from tether.config.load import parse_text, validate
from tether.config.schema import Config
from tether.errors import ConfigInvalid
from tether.tools.mcp import MCPTools
from tether.tools.mcp_spec import MCPServerConfig, duplicate_ids, id_problem, server_problems, timeout_problem


def load_config(path: Path) -> Config:
    """``path`` validated on its own (no user or project files around it)."""
    return validate([parse_text(path.read_bytes(), path)], {})


def test_a_config_keeps_its_values_and_freezes_its_lists() -> None:
    config = MCPServerConfig("fs", command="npx", args=["-y", "server"], env={"A": "1"})
    assert config.args == ("-y", "server")
    assert config.tool_timeout == 300.0, "a slow server gets minutes, not seconds"
    assert (config.transport, config.prefix) == ("stdio", False)
    with pytest.raises(AttributeError):
        config.command = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"id": "my server", "command": "x"}, "id must be 1-32 letters"),
        ({"id": "a" * 33, "command": "x"}, "id must be 1-32 letters"),
        ({"id": "s"}, "command is required for transport 'stdio'"),
        ({"id": "s", "command": ""}, "command is required for transport 'stdio'"),
        ({"id": "s", "command": "x", "url": "http://h/mcp"}, "url is only for transport 'http'"),
        ({"id": "s", "command": "x", "headers": {"A": "b"}}, "headers is only for transport 'http'"),
        ({"id": "s", "transport": "http"}, "url is required for transport 'http'"),
        ({"id": "s", "transport": "http", "url": "ftp://h"}, "url must be an http:// or https:// URL"),
        ({"id": "s", "transport": "http", "url": "http://h/mcp", "command": "x"}, "command is only for transport"),
        ({"id": "s", "transport": "http", "url": "http://h/mcp", "env": {"A": "1"}}, "env is only for transport"),
        ({"id": "s", "transport": "http", "url": "http://h/mcp", "args": ["-v"]}, "args is only for transport"),
        ({"id": "s", "transport": "sse", "url": "http://h"}, "transport must be 'stdio' or 'http'"),
        ({"id": "s", "command": "x", "args": "--flag"}, "args must be a list"),
        ({"id": "s", "command": "x", "tool_timeout": 0}, "tool_timeout must be a number > 0"),
        ({"id": "s", "command": "x", "tool_timeout": math.inf}, "tool_timeout must be a number > 0"),
        ({"id": "s", "command": "x", "tool_timeout": True}, "tool_timeout must be a number > 0"),
        ({"id": "s", "command": "x", "connect_timeout": -1}, "connect_timeout must be a number > 0"),
    ],
)
def test_an_invalid_config_is_refused_naming_the_server_and_the_setting(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigInvalid, match=f"MCP server {options['id']!r}: .*{message}"):
        MCPServerConfig(**options)


def test_every_problem_of_an_entry_is_reported_at_once() -> None:
    with pytest.raises(ConfigInvalid) as caught:
        MCPServerConfig("bad id", transport="http", command="x", tool_timeout=0)
    message = caught.value.message
    for part in ("id must be", "url is required", "command is only for transport 'stdio'", "tool_timeout must be"):
        assert part in message


def test_an_http_server_takes_a_url_and_headers() -> None:
    config = MCPServerConfig("web", transport="http", url="https://h/mcp", headers={"Authorization": "${T}"})
    assert config.headers == {"Authorization": "${T}"}


def test_two_servers_may_not_share_an_id() -> None:
    with pytest.raises(ConfigInvalid, match=r"servers\[2\]: 'a' is already the id of servers\[0\]"):
        MCPTools(
            [MCPServerConfig("a", command="x"), MCPServerConfig("b", command="y"), MCPServerConfig("a", command="z")]
        )


def test_duplicate_ids_names_each_later_server_and_the_first_one() -> None:
    assert duplicate_ids(["a", "b", "a", "b", "a"]) == [
        (2, "'a' is already the id of servers[0]"),
        (3, "'b' is already the id of servers[1]"),
        (4, "'a' is already the id of servers[0]"),
    ]


def test_the_rules_answer_none_for_valid_values() -> None:
    assert id_problem("fs_1-a") is None
    assert timeout_problem(0.5) is None
    assert server_problems("stdio", {"command": "npx", "args": ["-y"], "env": {}}) == []
    assert server_problems("http", {"url": "http://127.0.0.1:1/mcp", "headers": {}}) == []


@pytest.mark.parametrize(
    ("entry", "key", "message"),
    [
        ('id = "my server"\ncommand = "x"', "id", "must be 1-32 letters"),
        ('id = "s"', "command", "is required for transport 'stdio'"),
        ('id = "s"\ncommand = "x"\nurl = "http://h/mcp"', "url", "is only for transport 'http'"),
        ('id = "s"\ntransport = "http"', "url", "is required for transport 'http'"),
        ('id = "s"\ntransport = "http"\nurl = "ftp://h"', "url", "must be an http:// or https:// URL"),
        ('id = "s"\ntransport = "http"\nurl = "http://h"\nargs = []', "args", "is only for transport 'stdio'"),
        ('id = "s"\ncommand = "x"\ntool_timeout = 0', "tool_timeout", "must be a number > 0"),
        ('id = "s"\ncommand = "x"\ntool_timeout = true', "tool_timeout", "must be a number > 0"),
    ],
)
def test_the_config_file_applies_the_same_rules_naming_the_key(
    entry: str, key: str, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(f"[[mcp.servers]]\n{entry}\n")
    with pytest.raises(ConfigInvalid) as caught:
        load_config(path)
    assert f"mcp.servers[0].{key}: {message}" in str(caught.value)


def test_the_config_file_refuses_a_second_server_with_the_same_id(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text('[[mcp.servers]]\nid = "a"\ncommand = "x"\n\n[[mcp.servers]]\nid = "a"\ncommand = "y"\n')
    with pytest.raises(ConfigInvalid, match=r"mcp.servers\[1\].id: 'a' is already the id of servers\[0\]"):
        load_config(path)


def test_the_config_file_switches_a_servers_tool_timeout_off(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text('[[mcp.servers]]\nid = "a"\ncommand = "x"\ntool_timeout = "off"\n')
    assert load_config(path).mcp.servers[0].tool_timeout is None
