"""The rules of ``redaction.py``: what text masking hides and keeps (which names are secret is
``tests/test_secrets.py``),
and that every pattern does work linear in its input, whatever the input holds.

Linearity is measured as ``tests/config`` measures it, by the steps of a backtracking matcher that runs the
same parsed patterns (``tests.config.regex_steps``), never by the clock; and a 100,000-character hostile text
is masked as a plain run (a quadratic pattern would hang the suite there).
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.config.regex_steps import spans, steps
from tether import redaction as redact
from tether import secrets
from tether.redaction import MASK, Redaction
from tether.secrets import Masker, connection_password

PATTERNS = {
    f"{module.__name__}.{name}": value
    for module in (redact, secrets)
    for name, value in vars(module).items()
    if isinstance(value, re.Pattern)
}
"""The patterns of redaction and of the secret-name rules it uses."""


def test_the_secret_names_are_configurable() -> None:
    redaction = Redaction(secret_arguments=("pin", "otp_code"))

    assert redaction.is_secret_argument("card_pin")
    assert redaction.is_secret_argument("otpCode")
    assert not redaction.is_secret_argument("password"), "the configured names replace the defaults"
    assert redaction.arguments({"pin": "1234", "password": "shown"}) == {"pin": MASK, "password": "shown"}


# --- arguments ------------------------------------------------------------------------------------------------------


def test_secret_named_arguments_are_hidden_at_any_depth_and_strings_masked_as_text() -> None:
    redaction = Redaction(Masker(["sk-known-0123456789"]))
    arguments = {
        "user": "ann",
        "password": "hunter2",
        "nested": {"apiKey": 12345, "list": [{"token": ["a", "b"]}, "keep"]},
        "command": "curl -H 'Authorization: Bearer abc.def.ghi' https://u:pw@h/x?access_token=zz&page=2",
        "note": "the key is sk-known-0123456789",
    }

    shown = redaction.arguments(arguments)

    assert shown == {
        "user": "ann",
        "password": MASK,
        "nested": {"apiKey": MASK, "list": [{"token": MASK}, "keep"]},
        "command": "curl -H 'Authorization: Bearer ***' https://u:***@h/x?access_token=***&page=2",
        "note": "the key is ***",
    }
    assert arguments["password"] == "hunter2", "the call's own arguments are not changed"
    assert redaction.arguments(None) is None


def test_arguments_nested_past_the_depth_limit_are_hidden() -> None:
    deep: dict[str, object] = {"value": "x"}
    for _ in range(200):
        deep = {"inner": deep}

    shown = Redaction().arguments(deep)

    assert "x" not in repr(shown)


# --- text ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ('{"user": "ann", "password": "hunter2"}', '{"user": "ann", "password": "***"}'),
        ('{"password":"hun\\"ter2", "x": 1}', '{"password":"***", "x": 1}'),
        ('{"user": "ann", "password": "hunter2', '{"user": "ann", "password": "***'),
        ("{'db_password': 'hunter2', 'n': 3}", "{'db_password': '***', 'n': 3}"),
        ('{"pin": 1234, "token": 98765}', '{"pin": 1234, "token": ***}'),
        ("login password=hunter2 user=ann", "login password=*** user=ann"),
        ("tool --token=abc123 --verbose", "tool --token=*** --verbose"),
        ("run -api-key=abc", "run -api-key=***"),
        ('export SECRET_KEY="a b c"', 'export SECRET_KEY="***"'),
        ("GET /x?access_token=abc&page=2", "GET /x?access_token=***&page=2"),
        ("password = hunter2", "password = ***"),
        ("Authorization: Bearer eyJhbGci.eyJzdWIi.sig", "Authorization: Bearer ***"),
        ("postgres://app:pw-1234@db/app", "postgres://app:***@db/app"),
        ("HTTPS://u:p@host", "HTTPS://u:***@host"),
    ],
)
def test_text_masks_secrets_wherever_they_sit(text: str, shown: str) -> None:
    assert Redaction().text(text) == shown


@pytest.mark.parametrize(
    "text",
    [
        '{"user": "ann", "max_tokens": 100, "path": "a=b"}',
        "max_tokens=100 tokens=3 author=ann key=value",
        "if a == b and token == c",
        "plain prose about passwords and tokens, no values",
        "https://example.com/path?page=2",
        "the bearer of bad news",
        "",
    ],
)
def test_text_without_secrets_is_unchanged(text: str) -> None:
    assert Redaction().text(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "set ANTHROPIC_API_KEY, or pass api_key= to Agent",
        "api_key= to Agent",
        "api_key=\ttab then words",
        "password=",
        "token=, user=ann",
        "missing api_key=.",
        "is it api_key=?",
        'api_key="" was empty',
        "api_key='' was empty",
        '{"api_key": "", "user": "ann"}',
        "{'password': '', 'n': 1}",
        "--token= --verbose",
        "(secret=)",
    ],
)
def test_an_empty_secret_value_leaves_the_following_text_alone(text: str) -> None:
    """A secret-named key with no value hides nothing: the word after it is prose, not its value."""
    assert Redaction().text(text) == text


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("api_key=sk-live-123 to Agent", "api_key=*** to Agent"),
        ("password = hunter2 then", "password = *** then"),
        ("password =hunter2", "password =***"),
        ('api_key="x" next', 'api_key="***" next'),
        ('{"api_key": "k", "user": "ann"}', '{"api_key": "***", "user": "ann"}'),
        ("token=a. then", "token=*** then"),
    ],
)
def test_a_secret_next_to_an_empty_one_is_still_masked(text: str, shown: str) -> None:
    assert Redaction().text(text) == shown


def test_masking_twice_changes_nothing_more() -> None:
    redaction = Redaction(Masker(["sk-known-0123456789"]))
    text = '{"password": "x"} token=y Bearer z https://u:p@h sk-known-0123456789'

    once = redaction.text(text)

    assert redaction.text(once) == once
    assert "sk-known" not in once


def test_hide_values_masks_a_secret_argument_quoted_in_a_message() -> None:
    message = "- password: String should have at most 4 characters (got 'hunter2')\n- user: ok (got 'ann')"

    shown = Redaction().hide_values(message, {"user": "ann", "password": "hunter2", "pin": {"token": 7}})

    assert "hunter2" not in shown
    assert "(got 'ann')" in shown, "values of ordinary arguments stay"


def test_connection_passwords_are_read_with_the_shared_pattern() -> None:
    assert connection_password("redis://:hunter2hunter2@cache:6379/0") == "hunter2hunter2"
    assert connection_password("x 1abc://u:p%40ss@h") == "p@ss"
    assert connection_password("no url here") is None


# --- linear work ---------------------------------------------------------------------------------------------------

HOSTILE = st.sampled_from(
    [*"\"'\\:=-_.?&@/ \n\t{}[],aA1$", '"a":', "'a':", "--a=", "bearer ", "://", "a:b@", '"password": "', "x" * 8]
)
units = st.lists(HOSTILE, min_size=1, max_size=5).map("".join)


@settings(max_examples=40, deadline=None)
@given(text=st.lists(HOSTILE, max_size=12).map("".join))
def test_the_step_measure_finds_what_re_finds_for_every_pattern(text: str) -> None:
    for name, pattern in PATTERNS.items():
        assert spans(pattern, text) == [m.span() for m in pattern.finditer(text)], name


@settings(max_examples=40, deadline=None)
@given(unit=units)
def test_every_pattern_is_linear_in_its_input(unit: str) -> None:
    for name, pattern in PATTERNS.items():
        small, large = steps(pattern, unit * 10), steps(pattern, unit * 100)
        assert large <= 20 * small + 200, f"{name} on {unit!r}: {small} -> {large} steps"


@pytest.mark.parametrize(
    "unit",
    ['"a":"', "'a':'", '"a":x', "a=", "--", "-a" * 40 + "=", "bearer ", "a://:", '"\\"', "a" * 70, '"' + "a" * 70],
)
def test_the_inputs_that_would_make_a_pattern_backtrack_take_linear_work(unit: str) -> None:
    for name, pattern in PATTERNS.items():
        small, large = steps(pattern, unit * 10), steps(pattern, unit * 100)
        assert large <= 20 * small + 200, f"{name} on {unit!r}: {small} -> {large} steps"


@pytest.mark.parametrize(
    "unit", ['"password": "', '{"a":', "password=", "bearer ", "a://u:", "x" * 64 + "=", "'a':x", "\\"]
)
def test_a_100k_hostile_text_is_masked_in_one_pass(unit: str) -> None:
    text = unit * (100_000 // len(unit) + 1)

    shown = Redaction(Masker(["sk-known-0123456789"])).text(text)

    assert isinstance(shown, str)
