"""Configuration that cannot hang or traceback: whatever a file, a variable or a value holds, loading ends
with a configuration or a ``config_invalid`` error naming the key and the line, and its work is linear.

Work is measured deterministically, never by the clock: regular expressions by the steps of a backtracking
matcher that runs the same parsed patterns (``regex_steps``; checked against ``re`` here), line counting by
the characters ``str.count`` is asked to read, and the loader by how many problems it describes and how many
Python calls it makes. A linear piece of work grows about ten times when its input does; the bounds below
allow twice that, and the quadratic patterns this package used to have grow a hundred times.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.config.helpers import Dirs
from tests.config.regex_steps import Counting, Tally, spans, steps
from tether.cli import exits
from tether.config.issues import MAX_ISSUES
from tether.config.positions import DEPTH_LIMIT, key_lines
from tether.errors import ConfigInvalid

issues, load, positions, redact, schema = (
    importlib.import_module(f"tether.config.{name}") for name in ("issues", "load", "positions", "redact", "schema")
)

PATTERNS: dict[str, re.Pattern[str]] = {
    f"{module.__name__.rsplit('.', 1)[-1]}.{name}": value
    for module in (redact, positions, load, issues, schema)
    for name, value in vars(module).items()
    if isinstance(value, re.Pattern)
} | {f"positions._TRIPLE_END[{key}]": value for key, value in positions._TRIPLE_END.items()}
"""Every regular expression of the configuration package."""

ANCHORED = ["redact._QUERY_NAME", "redact._QUERY_VALUE", "positions._BARE", "positions._BASIC"]
FULL = ["redact._OPTION", "schema.ENV_NAME", "schema.SERVER_ID", "issues._BARE_KEY"]
MODES = dict.fromkeys(FULL, "fullmatch") | dict.fromkeys([*ANCHORED, 'positions._TRIPLE_END["""]'], "match")
"""How patterns used only anchored are called: ``fullmatch``, or ``match`` at the position the code reached
(each call reads on from where the last ended); every other is measured finding every match, as ``sub``."""

HOSTILE = st.sampled_from(
    [*"eyJ_-.?&=:/@ aAk1s#b\"'\\[]{}\n\t$", "eyJ", "sk-", "://", "bearer ", "key", "x" * 8, "1" * 8, "${A}", '"""']
)
units = st.lists(HOSTILE, min_size=1, max_size=5).map("".join)

OLD_PATTERNS = {
    "key-like JWT": (re.compile(r"(?<![A-Za-z0-9])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), "eyJ_", "search"),
    "URL password": (re.compile(r"[a-z][a-z0-9+.-]*://[^/@:\s]*:[^/@\s]+(?=@)"), "a", "scan"),
    "query parameter": (re.compile(r"[?&]([^=&#\s]+)=([^&#\s]*)"), "?", "scan"),
}
"""What ``redact`` matched with before, against the input that makes each backtrack."""


def measured(pattern: re.Pattern[str], name: str, text: str) -> int:
    return steps(pattern, text, MODES.get(name, "scan"))


# --- the measure ----------------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(text=st.lists(HOSTILE, max_size=12).map("".join))
def test_the_step_measure_finds_exactly_what_re_finds_for_every_pattern(text: str) -> None:
    for name, pattern in PATTERNS.items():
        assert spans(pattern, text) == [m.span() for m in pattern.finditer(text)], name


@pytest.mark.parametrize(("pattern", "unit", "mode"), OLD_PATTERNS.values(), ids=OLD_PATTERNS.keys())
def test_the_step_measure_shows_the_old_redaction_patterns_quadratic(
    pattern: re.Pattern[str], unit: str, mode: str
) -> None:
    small, large = steps(pattern, unit * 15, mode), steps(pattern, unit * 150, mode)

    assert large > 50 * small


# --- regular expressions ---------------------------------------------------------------------------------------


@settings(max_examples=15, deadline=None)
@given(unit=units)
def test_every_pattern_of_the_configuration_is_linear_in_its_input(unit: str) -> None:
    for name, pattern in PATTERNS.items():
        small, large = measured(pattern, name, unit * 10), measured(pattern, name, unit * 100)
        assert large <= 20 * small + 200, f"{name} on {unit!r}: {small} -> {large} steps"


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Tally:
    """Every pattern ``redact`` uses, swapped for one that counts its steps into the returned tally."""
    tally = Tally()
    for name, value in vars(redact).items():
        if isinstance(value, re.Pattern):
            monkeypatch.setattr(redact, name, Counting(value, tally))
    return tally


def redaction_steps(tally: Tally, value: str) -> int:
    before = tally.steps
    redact.Redactor(["a-secret-value"]).text(value, name="X-Note")
    redact.Redactor().data({"headers": {"Authorization": value}, "url": value}, named=False)
    return tally.steps - before


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(unit=units)
def test_redacting_a_value_is_linear_in_its_length_whatever_it_holds(counted: Tally, unit: str) -> None:
    small, large = redaction_steps(counted, unit * 10), redaction_steps(counted, unit * 100)

    assert large <= 20 * small + 200, f"{unit!r}: {small} -> {large} steps"


@pytest.mark.parametrize(
    "value",
    ["eyJ_" * 50, "?" * 200, "a" * 200, "a://:" * 50, "bearer " * 30, "-" * 200, "${A" * 60, "x_eyJ" * 40],
    ids=["jwt-runs", "query-marks", "scheme-run", "schemes", "bearers", "dashes", "references", "inner-jwt"],
)
def test_the_inputs_that_made_redaction_backtrack_now_take_linear_work(counted: Tally, value: str) -> None:
    small, large = redaction_steps(counted, value), redaction_steps(counted, value * 10)

    assert large <= 20 * small


def test_redaction_still_hides_what_it_hid() -> None:
    redactor = redact.Redactor()

    assert redactor.text("x_eyJhbGciOiJIUz.eyJzdWIiOi") == redact.HIDDEN
    assert redactor.text("https://u:p4ss@host/x?api_key=abc&page=2") == "https://u:***@host/x?api_key=***&page=2"
    assert redactor.text("1abc://u:pw@h") == "1abc://u:***@h"
    assert redactor.text("??token=abc&x=1") == "??token=***&x=1"
    assert redactor.text("see ?a?auth=1 and ?page=3") == "see ?a?auth=*** and ?page=3"


# --- line numbers ----------------------------------------------------------------------------------------------


class CountingText(str):
    """A text that tallies how many characters ``count`` is asked to read."""

    read = 0

    def count(self, sub: str, start: Any = None, end: Any = None) -> int:
        first = 0 if start is None else start
        last = len(self) if end is None else end
        CountingText.read += max(0, last - first)
        return super().count(sub, first, last)


@pytest.mark.parametrize("keys", [1_000, 10_000])
def test_finding_the_line_of_every_key_reads_the_text_once(keys: int) -> None:
    text = CountingText("[runtime]\n" + "".join(f"k{i} = 1\n" for i in range(keys)))
    CountingText.read = 0

    lines = key_lines(text)

    assert lines[("runtime", f"k{keys - 1}")] == keys + 1
    assert CountingText.read <= len(text)


# --- nesting ---------------------------------------------------------------------------------------------------

NESTINGS: dict[str, Callable[[int], str]] = {
    "arrays": lambda n: "x = " + "[" * n + "]" * n + "\n",
    "inline-tables": lambda n: "x = " + "{a = " * n + "1" + "}" * n + "\n",
    "mixed": lambda n: "x = " + "[{a = " * (n // 2) + "1" + "}]" * (n // 2) + "\n",
    "header": lambda n: "[" + ".".join(["a"] * n) + "]\nb = 1\n",
    "dotted-key": lambda n: ".".join(['"q"'] * n) + " = 1\n",
    "headers-then-keys": lambda n: "[" + ".".join(["a"] * (n // 2)) + "]\n" + ".".join(["b"] * (n - n // 2)) + " = 1\n",
}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(sorted(NESTINGS)), depth=st.integers(DEPTH_LIMIT + 2, 5_000), lead=st.integers(0, 3))
def test_a_file_nested_too_deep_is_config_invalid_naming_the_line(dirs: Dirs, kind: str, depth: int, lead: int) -> None:
    dirs.agent_toml.write_text("# comment\n" * lead + NESTINGS[kind](depth))

    with pytest.raises(ConfigInvalid) as raised:
        dirs.load()

    (issue,) = raised.value.details["issues"]
    assert issue["origin"] == str(dirs.agent_toml)
    assert issue["line"] is not None
    assert issue["line"] <= lead + 2
    assert f"more than {DEPTH_LIMIT} levels deep" in issue["message"]
    assert len(raised.value.message) < 1_000


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(sorted(NESTINGS)), depth=st.integers(2, DEPTH_LIMIT - 2))
def test_nesting_within_the_limit_is_judged_by_the_schema(dirs: Dirs, kind: str, depth: int) -> None:
    dirs.agent_toml.write_text(NESTINGS[kind](depth))

    with pytest.raises(ConfigInvalid, match="unknown key"):
        dirs.load()


def test_a_header_nested_too_deep_names_its_key(dirs: Dirs) -> None:
    dirs.agent_toml.write_text("[runtime]\nmodel = 'openai:x'\n[providers" + ".p" * 40 + "]\nx = 1\n")

    with pytest.raises(ConfigInvalid) as raised:
        dirs.load()

    (issue,) = raised.value.details["issues"]
    assert issue["key"].startswith("providers.p.p.p")
    assert issue["line"] == 3


def test_an_environment_variable_nested_too_deep_is_named(dirs: Dirs) -> None:
    name = "TETHER_RUNTIME" + "__X" * (DEPTH_LIMIT + 5)

    with pytest.raises(ConfigInvalid) as raised:
        dirs.load(env={**dirs.env, name: "1", "TETHER_TOOLS__DENY": "[" * 5_000})

    assert f"environment variable {name}" in raised.value.message
    assert "levels deep" in raised.value.message


def test_a_deeply_nested_environment_value_is_taken_as_a_string(dirs: Dirs) -> None:
    with pytest.raises(ConfigInvalid) as raised:
        dirs.load(env={**dirs.env, "TETHER_TOOLS__DENY": "[" * 5_000 + "]" * 5_000})

    assert 'tools.deny: must be a list, not "[[[[' in raised.value.message
    assert "(10000 characters)" in raised.value.message


# --- many problems and long values ---------------------------------------------------------------------------


@pytest.fixture
def describe_calls(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    calls: list[object] = []
    real = issues.describe

    def counting(error: Any, redactor: Any) -> Any:
        calls.append(error)
        return real(error, redactor)

    monkeypatch.setattr(issues, "describe", counting)
    return calls


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(count=st.integers(1, 3_000), section=st.sampled_from(["", "[runtime]\n", "[runtime.limits]\n"]))
def test_any_number_of_unknown_keys_reports_the_first_twenty_in_file_order_and_counts_the_rest(
    dirs: Dirs, describe_calls: list[object], count: int, section: str
) -> None:
    describe_calls.clear()
    dirs.agent_toml.write_text(section + "".join(f"unknown_{i} = 1\n" for i in range(count)))

    with pytest.raises(ConfigInvalid) as raised:
        dirs.load()

    listed = raised.value.details["issues"]
    first_line = 1 + section.count("\n")
    assert [issue["line"] for issue in listed] == list(range(first_line, first_line + min(count, MAX_ISSUES)))
    assert raised.value.details["more"] == max(0, count - MAX_ISSUES)
    assert (f"and {count - MAX_ISSUES} more problem" in raised.value.message) == (count > MAX_ISSUES)
    assert len(describe_calls) == min(count, MAX_ISSUES)


def python_calls(action: Callable[[], object]) -> int:
    """How many Python functions run during ``action`` (a deterministic count, unlike time)."""
    calls = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        calls += event == "call"

    sys.setprofile(profile)
    try:
        action()
    except ConfigInvalid:
        pass
    finally:
        sys.setprofile(None)
    return calls


def test_the_work_of_loading_grows_linearly_with_the_number_of_unknown_keys(dirs: Dirs) -> None:
    def load_with(keys: int) -> int:
        dirs.agent_toml.write_text("[runtime]\n" + "".join(f"k{i} = {i}\n" for i in range(keys)))
        return python_calls(dirs.load)

    small, large = load_with(300), load_with(3_000)

    assert large <= 20 * small


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(unit=units.filter(lambda u: "\n" not in u and '"' not in u and "\\" not in u), length=st.integers(1, 200_000))
def test_a_long_invalid_value_is_config_invalid_naming_key_and_line_in_a_short_message(
    dirs: Dirs, unit: str, length: int
) -> None:
    value = (unit * (length // len(unit) + 1))[:length]
    dirs.agent_toml.write_text(f'[runtime]\nmodel = "openai:x"\n\n[tools]\nmode = "{value}"\n')

    with pytest.raises(ConfigInvalid) as raised:
        dirs.load()

    (issue,) = raised.value.details["issues"]
    assert (issue["key"], issue["line"]) == ("tools.mode", 5)
    assert len(raised.value.message) < 600


def test_a_long_unknown_key_is_named_by_its_start(dirs: Dirs) -> None:
    dirs.agent_toml.write_text(f"[runtime]\n{'k' * 100_000} = 1\n")

    with pytest.raises(ConfigInvalid) as raised:
        dirs.load()

    assert "(100000 characters)" in raised.value.message
    assert len(raised.value.message) < 600


# --- the command line --------------------------------------------------------------------------------------------

HOSTILE_FILES = {
    "nested-arrays": "x = " + "[" * 100_000 + "]" * 100_000 + "\n",
    "nested-tables": "[" + ".".join(["a"] * 50_000) + "]\n",
    "unknown-keys": "".join(f"k{i} = 1\n" for i in range(50_000)),
    "long-value": '[tools]\nmode = "' + "eyJ_" * 100_000 + '"\n',
}


@pytest.mark.parametrize("content", HOSTILE_FILES.values(), ids=HOSTILE_FILES.keys())
def test_tether_config_show_on_a_hostile_file_exits_with_a_message_and_no_traceback(
    tmp_path: Path, content: str
) -> None:
    (tmp_path / "agent.toml").write_text(content)
    tether = str(Path(sys.executable).with_name("tether"))

    done = subprocess.run(
        [tether, "config", "show"],
        cwd=tmp_path,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(str(load.__file__)).parents[2])},
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode == exits.CONFIG, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{tmp_path / 'agent.toml'} line " in done.stderr
    assert len(done.stderr) < 20 * 300
    assert done.stdout == ""


def python_lines(action: Callable[[], object]) -> int:
    """How many lines of Python run during ``action``: like :func:`python_calls`, and it also sees a loop."""
    lines = 0

    def trace(frame: Any, event: str, arg: Any) -> Any:
        nonlocal lines
        lines += event == "line"
        return trace

    sys.settrace(trace)
    try:
        action()
    except ConfigInvalid:
        pass
    finally:
        sys.settrace(None)
    return lines


def test_the_work_of_loading_grows_linearly_with_the_number_of_older_keys(dirs: Dirs) -> None:
    def load_with(servers: int) -> int:
        older = '[[mcp.servers]]\nid = "s{}"\ncommand = "x"\ntool_timeout_ms = "soon"\n'
        dirs.agent_toml.write_text("".join(older.format(i) for i in range(servers)))
        return python_lines(dirs.load)

    small, large = load_with(150), load_with(1_500)

    assert large <= 20 * small
