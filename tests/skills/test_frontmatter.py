"""A SKILL.md's front matter, read by PyYAML: every value the text written, the colon leniency clients are
advised to have, and a refusal naming the line for malformed YAML, anchors, aliases, tags and keys given twice."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.skills.frontmatter import MAX_DEPTH, MAX_QUOTED, FrontMatterError, split


def fields(front: str) -> dict[str, object]:
    parsed = split(f"---\n{front}---\n# Body\n")
    assert parsed is not None
    assert parsed[1] == "# Body\n"
    return parsed[0]


def test_yaml_is_read_and_every_scalar_is_the_text_written() -> None:
    front = (
        "name: pdf-tools\ndescription: >\n  Extract text.\n  Use for PDFs.\nversion: 1.0\nreleased: 2025-01-01\n"
        "user-invocable: yes\ncount: 010\nlicense:\ncompatibility: ~\nmetadata:\n  author: me\n  version: 2.10\n"
        "allowed-tools: [Read, 'Bash(git:*)']\n"
    )

    assert fields(front) == {
        "name": "pdf-tools",
        "description": "Extract text. Use for PDFs.\n",
        "version": "1.0",
        "released": "2025-01-01",
        "user-invocable": "yes",
        "count": "010",
        "license": None,
        "compatibility": None,
        "metadata": {"author": "me", "version": "2.10"},
        "allowed-tools": ["Read", "Bash(git:*)"],
    }


def test_a_file_that_does_not_open_with_three_dashes_has_no_front_matter() -> None:
    assert split("# Title\n---\nname: a\n---\n") is None
    assert split("") is None
    assert split("---\n---\nbody") == ({}, "body")


def test_windows_line_ends_and_a_byte_order_mark_are_read() -> None:
    parsed = split("\ufeff---\r\nname: a\r\ndescription: b\r\n---\r\nbody")

    assert parsed == ({"name": "a", "description": "b"}, "body")


@pytest.mark.parametrize(
    ("front", "expected"),
    [
        ("description: Use it when: the user asks\n", {"description": "Use it when: the user asks"}),
        ("description: Note:\n", {"description": "Note:"}),
        ("description: It's: fine # a comment\n", {"description": "It's: fine"}),
        (
            "description: Use when: asked,\n  or when: told\nname: a\n",
            {"description": "Use when: asked, or when: told", "name": "a"},
        ),
        ("metadata:\n  author: Ann: and Bo\n", {"metadata": {"author": "Ann: and Bo"}}),
    ],
)
def test_a_colon_in_a_plain_value_is_kept_as_clients_are_advised(front: str, expected: dict[str, object]) -> None:
    assert fields(front) == expected


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ("---\nname: a\n", 3, "no closing '---'"),
        ("---\nname: a\nname: b\n---\n", 3, "'name' is given twice"),
        ("---\nname: &x a\nother: *x\n---\n", 2, "anchors, aliases and tags"),
        ("---\nname: *x\n---\n", 2, "anchors, aliases and tags"),
        ("---\nname: !!str a\n---\n", 2, "anchors, aliases and tags"),
        ("---\nname: !!python/object:os.system a\n---\n", 2, "anchors, aliases and tags"),
        ("---\nname: `a`\n---\n", 2, "cannot start any token"),
        ('---\nname: a\ndescription: "open\n---\n', 3, "quoted scalar"),
        ("---\nmetadata:\n  a: b\n    c: d\n---\n", 4, "mapping values are not allowed"),
        ("---\nname: a\njust words\n---\n", 4, "could not find expected ':'"),
        ("---\n- a\n- b\n---\n", 2, "must be 'key: value' lines"),
        ("---\n~: a\n---\n", 2, "a key must be text"),
        ("---\nx: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "\n---\n", 2, "nested deeper"),
    ],
)
def test_what_is_not_read_is_refused_naming_the_line(text: str, line: int, says: str) -> None:
    with pytest.raises(FrontMatterError) as raised:
        split(text)

    assert raised.value.line == line
    assert says in raised.value.message


def test_the_leniency_quotes_a_bounded_number_of_lines() -> None:
    many = "".join(f"k{number}: a: b\n" for number in range(MAX_QUOTED + 1))

    assert len(fields("".join(f"k{number}: a: b\n" for number in range(MAX_QUOTED)))) == MAX_QUOTED
    with pytest.raises(FrontMatterError, match="quote the values that hold ': '") as raised:
        split(f"---\n{many}---\n")
    assert raised.value.line == MAX_QUOTED + 2


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="ab: -#'\"\\[]{},|>+~&*!\t\nu0", max_size=30), max_size=8))
def test_any_text_is_read_or_refused_with_a_line_never_another_error(lines: list[str]) -> None:
    text = "---\n" + "\n".join(lines) + "\n---\n"
    line = 0
    try:
        split(text)
    except FrontMatterError as error:
        line = error.line
    assert 0 <= line <= text.count("\n") + 1


def test_yaml_is_imported_when_a_skill_md_is_first_read_not_before() -> None:
    code = (
        "import sys; from tether.skills import Skills, SkillInvalid; import tether.skills.folder; "
        "before = 'yaml' in sys.modules; from tether.skills.frontmatter import split; "
        "split('---\\nname: a\\n---\\n'); print(before, 'yaml' in sys.modules)"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)

    assert completed.stdout.split() == ["False", "True"]
