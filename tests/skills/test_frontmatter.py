"""A SKILL.md's front matter, read by tether's own strict reader: what YAML gives for the front matter skills
write (checked against PyYAML itself), and a refusal naming the line for what the reader does not take."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.skills.frontmatter import FrontMatterError, split

SAMPLES = [
    "name: pdf-tools\ndescription: Extract text. Use when\n  working with PDFs.\nlicense: Apache-2.0\n",
    'name: a\ndescription: >\n  folded one\n  two\n\n  three\nmetadata:\n  author: me\n  version: "1.0"\n',
    "name: a\ndescription: |-\n  line one\n  line two\nallowed-tools:\n- Read\n- 'Bash(git:*)'\n",
    'name: a\ndescription: "with \\"escapes\\" \\u00e9 \\x41 and\n  continued"\nallowed-tools: [Read, "Bash(x)"]\n',
    "name: a # a comment\ndescription: 'it''s'\nmetadata: {a: b, c: 'd'}\n# a comment\n\n"
    "allowed-tools: Bash(jq:*) Read\n",
    "name: a\ndescription: |\n  keep\n\n    indented\nlicense: MIT\n",
    "name: a\ndescription: >-\n  x\n    indented\n  y\n",
    "name: a\nmetadata:\n    k: v\n    k2: 1.0\nallowed-tools:\n  - a\n  - b\ncompatibility: ~\n",
    "name: a\ndescription: |+\n  kept\n\n",
    "name: 'single\n  over lines'\ndescription: null\nlicense:\n",
    "name: a\ndescription:\n  On the next line,\n  and the one after.\nlicense:\n  'MIT'\n",
]


def as_text(value: Any) -> Any:
    """PyYAML's value with every scalar as text, as the format's fields are."""
    if isinstance(value, dict):
        return {str(key): as_text(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_text(item) for item in value]
    return None if value is None else str(value)


@pytest.mark.parametrize("text", SAMPLES)
def test_the_front_matter_reads_as_yaml_reads_it(text: str) -> None:
    parsed = split(f"---\n{text}---\n# Body\n")

    assert parsed is not None
    fields, body = parsed
    assert fields == as_text(yaml.safe_load(text))
    assert body == "# Body\n"


def test_a_file_that_does_not_open_with_three_dashes_has_no_front_matter() -> None:
    assert split("# Title\n---\nname: a\n---\n") is None
    assert split("") is None


def test_windows_line_ends_and_a_byte_order_mark_are_read() -> None:
    parsed = split("\ufeff---\r\nname: a\r\ndescription: b\r\n---\r\nbody")

    assert parsed == ({"name": "a", "description": "b"}, "body")


def test_a_colon_in_a_plain_value_is_kept_as_clients_are_advised() -> None:
    parsed = split("---\ndescription: Use it when: the user asks\n---\n")

    assert parsed is not None
    assert parsed[0] == {"description": "Use it when: the user asks"}


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ("---\nname: a\n", 3, "no closing '---'"),
        ("---\nname: a\nname: b\n---\n", 3, "given twice"),
        ("---\nname: a\njust words\n---\n", 3, "not a 'key: value' entry"),
        ("---\nname: &x a\n---\n", 2, "anchors, aliases and tags"),
        ("---\nname: !!str a\n---\n", 2, "anchors, aliases and tags"),
        ("---\nname: `a`\n---\n", 2, "must be quoted"),
        ('---\nname: "a\n---\n', 2, "not closed"),
        ('---\nname: "a" b\n---\n', 2, "text after the closing"),
        ('---\nname: "\\q"\n---\n', 2, "unknown escape"),
        ("---\ntools: [a, [b]]\n---\n", 2, "inside a list or mapping"),
        ("---\ntools: [a, b\n---\n", 2, "not closed on its line"),
        ("---\nmetadata:\n  a: b\n    c: d\n---\n", 4, "must line up"),
        ("---\nmetadata:\n  a:\n    b: c\n---\n", 3, "has no value"),
        ("---\ntools:\n  - [a]\n---\n", 3, "must be text"),
        ("---\n  name: a\n---\n", 2, "an indented line"),
    ],
)
def test_what_the_reader_does_not_take_is_refused_naming_the_line(text: str, line: int, says: str) -> None:
    with pytest.raises(FrontMatterError) as raised:
        split(text)

    assert raised.value.line == line
    assert says in raised.value.message


@settings(max_examples=400, deadline=None)
@given(st.lists(st.text(alphabet="ab: -#'\"\\[]{},|>+~&\t\nu0", max_size=30), max_size=8))
def test_any_text_is_read_or_refused_with_a_line_never_another_error(lines: list[str]) -> None:
    text = "---\n" + "\n".join(lines) + "\n---\n"
    line = 0
    try:
        split(text)
    except FrontMatterError as error:
        line = error.line
    assert 0 <= line <= text.count("\n") + 1
