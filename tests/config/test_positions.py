"""Key paths map to the lines they are written on, whatever TOML spans lines before them."""

from __future__ import annotations

import tomllib

from tether.config.positions import key_lines, line_of

TRICKY = '''\
# a comment with key = "value" in it
title = """
[not.a.table]
fake = 1
"""
literal = \'\'\'
also = "not a key"
\'\'\'
list = [
  "a", # comment ]
  { inner = 1 },
]

[runtime] # trailing
"quoted.key" = 1
limits.max_turns = 3
'single' = "it's \\" fine"

[[mcp.servers]]
id = "a"

[mcp.servers.env]
TOKEN = "${T}"

[[mcp.servers]]
id = "b"
  command = "x"
[ providers . "my.box" ]
base_url = "http://h/v1"
'''


def test_every_key_is_found_on_its_own_line() -> None:
    assert tomllib.loads(TRICKY)  # the scanner is only ever given valid TOML
    lines = key_lines(TRICKY)

    assert lines[("title",)] == 2
    assert lines[("literal",)] == 6
    assert lines[("list",)] == 9
    assert lines[("runtime",)] == 14
    assert lines[("runtime", "quoted.key")] == 15
    assert lines[("runtime", "limits")] == 16
    assert lines[("runtime", "limits", "max_turns")] == 16
    assert lines[("runtime", "single")] == 17
    assert lines[("mcp", "servers", 0)] == 19
    assert lines[("mcp", "servers", 0, "id")] == 20
    assert lines[("mcp", "servers", 0, "env", "TOKEN")] == 23
    assert lines[("mcp", "servers", 1, "id")] == 26
    assert lines[("mcp", "servers", 1, "command")] == 27
    assert lines[("providers", "my.box", "base_url")] == 29


def test_nothing_inside_strings_or_values_is_taken_for_a_key() -> None:
    lines = key_lines(TRICKY)

    assert ("not", "a", "table") not in lines
    assert ("fake",) not in lines
    assert ("also",) not in lines
    assert ("inner",) not in lines


def test_a_location_not_written_in_the_file_falls_back_to_its_nearest_written_parent() -> None:
    lines = key_lines(TRICKY)

    assert line_of(lines, ("mcp", "servers", 1, "url")) == 25
    assert line_of(lines, ("list", 1, "inner")) == 9
    assert line_of(lines, ("session", "store")) is None
