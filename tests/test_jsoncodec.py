"""The JSON codec gives the standard library's results with ``orjson`` and without it: every test here runs on
both backends (``orjson`` is in the dev extra; the fallback is forced with ``jsoncodec.use("stdlib")``)."""

from __future__ import annotations

import datetime
import json
import math
import os
import subprocess
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether import jsoncodec
from tether.errors import InvalidResponse
from tether.loop.accumulator import MAX_ARGUMENT_DEPTH, TOO_DEEP_MARK, arguments_problem, read_arguments
from tether.providers.body import parse_json
from tether.providers.http import parse_event_json

SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture(params=["orjson", "stdlib"], autouse=True)
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    jsoncodec.use(request.param)
    yield request.param
    jsoncodec.use(None)


def stdlib_dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def outcome(call: Callable[[], Any]) -> tuple[str, str]:
    """What a call gave: the repr of its value (``nan`` and big ints spelt exactly, types visible), or the class
    and message of what it raised."""
    try:
        return "value", repr(call())
    except (ValueError, TypeError, RecursionError) as error:
        return type(error).__name__, str(error)


def test_the_backend_in_use_is_the_one_asked_for(backend: str) -> None:
    assert jsoncodec.backend() == backend
    # the two writers spell a large float differently: proof that each test below ran on the backend it names
    assert jsoncodec.dumps(1e-7) == ("1e-7" if backend == "orjson" else "1e-07")


def test_tether_json_stdlib_in_the_environment_keeps_to_the_standard_library(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_JSON", "stdlib")
    jsoncodec.use(None)
    assert jsoncodec.backend() == "stdlib"
    monkeypatch.delenv("TETHER_JSON")
    jsoncodec.use(None)
    assert jsoncodec.backend() == "orjson"


def test_orjson_is_not_imported_with_tether() -> None:
    code = "import sys, tether, tether.providers.openai_chat; print('orjson' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip() == "False"


LOADS_CASES = [
    '{"b":1,"a":[true,false,null],"c":{"d":"é😀"}}',
    '{"a":1,"a":2}',  # duplicate keys: the last one wins
    '{"b":1,"a":2,"b":3}',  # ... at the place of the first
    "NaN",
    "[Infinity,-Infinity]",
    "1e400",
    "-1e400",
    "1e-400",
    "-0",
    "-0.0",
    "0.1",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775809",
    '{"id":123456789012345678901234567890}',
    '"1234567890123456789012345"',
    '"\\ud800"',
    '"\\udc00x"',
    '"\\ud83d\\ude00"',
    '"\\u0000\\u2028"',
    " \t\n[1]\r\n",
    "\ufeff[1]",
    "",
    "01",
    "[1,]",
    '{"a":1}x',
    '"a\tb"',
    "tru",
    "[" * 900 + "]" * 900,
    "[" * 1100 + "]" * 1100,
]


@pytest.mark.parametrize("text", LOADS_CASES)
def test_loads_reads_text_as_json_loads_does(text: str) -> None:
    assert outcome(lambda: jsoncodec.loads(text)) == outcome(lambda: json.loads(text))


@pytest.mark.parametrize(
    "data",
    [
        b'{"a":"\xc3\xa9"}',
        b"\xef\xbb\xbf[1]",  # a byte-order mark
        b'{"a":"\xff"}',  # not UTF-8
        b'"\xed\xa0\x80"',  # an encoded surrogate
        '{"a":1}'.encode("utf-16"),
        b"[12345678901234567890123]",
        bytearray(b'{"a":[1,2]}'),
    ],
)
def test_loads_reads_bytes_as_json_loads_does(data: bytes) -> None:
    assert outcome(lambda: jsoncodec.loads(data)) == outcome(lambda: json.loads(data))


def test_a_string_with_a_lone_surrogate_is_read_as_json_loads_reads_it() -> None:
    text = '{"a":"\udc80"}'
    assert jsoncodec.loads(text) == json.loads(text) == {"a": "\udc80"}


def test_integers_past_64_bits_stay_exact() -> None:
    value = jsoncodec.loads('{"n":-123456789012345678901234567890,"m":[18446744073709551616]}')
    assert value == {"n": -123456789012345678901234567890, "m": [18446744073709551616]}
    assert type(value["m"][0]) is int


def test_key_order_is_kept() -> None:
    assert list(jsoncodec.loads('{"z":1,"a":2,"m":3}')) == ["z", "a", "m"]
    assert jsoncodec.dumps({"z": 1, "a": 2, "m": 3}) == '{"z":1,"a":2,"m":3}'


@dataclass
class Point:
    x: int


class Text(str):
    pass


class Count(int):
    pass


class Mapping(dict[str, Any]):
    pass


class SubList(list[Any]):
    pass


class Ratio(float):
    pass


def _cycle() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


DUMPS_CASES: list[Any] = [
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "function": {"arguments": "{}"}}]},
    {"a": float("nan")},
    [None, [float("inf")], {"b": -math.inf}],
    ("text", None, (1, ("deep", float("nan")))),
    {"sub": Mapping({"inner": SubList([None, Text("t"), -math.inf])})},
    {"sub": Mapping({"inner": SubList([None, Text("t"), 2.5])})},
    {"a": None, "b": 1.5},
    2**64,
    -(2**63) - 1,
    {"n": [2**100]},
    {1: "int key", None: "none key", False: "bool key", 2.5: "float key"},
    {"text": 'é😀\u2028\u2029\x00\x1f\x7f"\\/\n\t'},
    {"lone": "\udc80"},
    ("a", ("tuple",)),
    {Text("sub"): Text("class"), "n": Count(3)},
    Ratio(0.5),
    Point(1),
    datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
    datetime.date(2026, 1, 1),
    {1j},
    _cycle(),
    [[[]]],
]


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize("value", [*DUMPS_CASES, nested(254), nested(300)])
def test_dumps_writes_what_json_dumps_writes(value: Any) -> None:
    assert outcome(lambda: jsoncodec.dumps(value)) == outcome(lambda: stdlib_dumps(value))


@pytest.mark.parametrize("value", DUMPS_CASES)
def test_dumps_bytes_is_dumps_in_utf8(value: Any) -> None:
    assert outcome(lambda: jsoncodec.dumps_bytes(value)) == outcome(lambda: stdlib_dumps(value).encode())


def test_bytes_kept_hold_no_more_memory_than_their_length() -> None:
    """A request body and every message's JSON are kept (in flight, in the encoding cache): ``orjson``'s own
    bytes would hold the 4 KB buffer it wrote into for each of these 60-byte values."""
    tracemalloc.start()
    try:
        values = [{"role": "tool", "tool_call_id": f"call_{n}", "content": "5"} for n in range(200)]
        before = tracemalloc.get_traced_memory()[0]
        kept = [jsoncodec.dumps_bytes(value) for value in values]
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(kept[0]) < 70
    assert held < 200 * 150, f"{held / 200:.0f} bytes a value"


def test_a_lone_surrogate_cannot_be_sent_as_utf8() -> None:
    with pytest.raises(UnicodeEncodeError):
        jsoncodec.dumps_bytes({"a": "\udc80"})


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_dumps_matches_json_dumps_on_any_value_without_floats(value: Any) -> None:
    assert outcome(lambda: jsoncodec.dumps(value)) == outcome(lambda: stdlib_dumps(value))
    assert outcome(lambda: jsoncodec.loads(stdlib_dumps(value))) == outcome(lambda: json.loads(stdlib_dumps(value)))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(), max_size=6))
def test_floats_read_back_as_the_same_numbers(floats: list[float]) -> None:
    text = jsoncodec.dumps(floats)
    assert repr(json.loads(text)) == repr(floats)
    assert repr(jsoncodec.loads(text)) == repr(floats)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet='{}[]",:0123456789.eE+-tnrufalsINfiy \\u\t\n', max_size=30))
def test_loads_accepts_and_refuses_what_json_loads_does(text: str) -> None:
    assert outcome(lambda: jsoncodec.loads(text)) == outcome(lambda: json.loads(text))


def test_tool_call_arguments_keep_their_meaning() -> None:
    assert read_arguments('{"id": 123456789012345678901234, "x": NaN}')[0] == {
        "id": 123456789012345678901234,
        "x": pytest.approx(float("nan"), nan_ok=True),
    }
    deep = '{"a":' + "[" * 1200 + "]" * 1200 + "}"
    assert read_arguments(deep) == (None, deep[:1000] + TOO_DEEP_MARK)  # beyond the recursion limit: bounded
    too_deep = '{"a":' + "[" * MAX_ARGUMENT_DEPTH + "]" * MAX_ARGUMENT_DEPTH + "}"
    assert read_arguments(too_deep)[0] is None
    bad = '{"a": 1,}'
    assert arguments_problem(bad) == f"they are not valid JSON ({_json_error(bad)})"


def _json_error(text: str) -> str:
    try:
        json.loads(text)
    except ValueError as error:
        return str(error)
    raise AssertionError("valid JSON")


def test_providers_refuse_what_is_not_json_with_invalid_response() -> None:
    with pytest.raises(InvalidResponse, match="not JSON"):
        parse_event_json('{"choices":[}', "openai")
    with pytest.raises(InvalidResponse, match="not UTF-8"):
        parse_json(b'{"a":"\xff"}', "openai")
    assert parse_json(b'\xef\xbb\xbf{"a":1e400}', "openai") == {"a": math.inf}


@pytest.mark.parametrize(
    ("body", "offset", "bad"),
    [
        (b'{"a":"\xff"}', 6, b'\xff"}'),
        (b'\xef\xbb\xbf{"a":"\xff"}', 9, b'\xff"}'),  # after a byte-order mark: the offset in the body as sent
        (bytearray(b'["caf\xe9"]'), 5, b'\xe9"]'),
    ],
)
def test_a_body_that_is_not_utf8_names_the_offset_and_bytes_it_failed_at(body: bytes, offset: int, bad: bytes) -> None:
    with pytest.raises(InvalidResponse, match="not UTF-8") as caught:
        parse_json(body, "openai")
    assert caught.value.details["offset"] == offset
    assert f"at byte {offset}: {bad!r}" in str(caught.value)


def test_a_body_with_a_byte_order_mark_is_read_without_it() -> None:
    assert parse_json(bytearray(b'\xef\xbb\xbf{"a":"\xc3\xa9"}'), "openai") == {"a": "\u00e9"}
    with pytest.raises(InvalidResponse, match="not JSON"):  # one mark is allowed; a second is text before the JSON
        parse_json(b"\xef\xbb\xbf\xef\xbb\xbf[]", "openai")


ENCODER_OPTIONS: list[dict[str, Any]] = [
    {"ensure_ascii": True, "separators": (", ", ": ")},
    {"ensure_ascii": False, "separators": (", ", ": ")},
    {"ensure_ascii": True, "separators": (",", ":"), "sort_keys": True, "default": str},
    {"ensure_ascii": False, "separators": (",", ":"), "default": repr},
]


@pytest.mark.parametrize("options", ENCODER_OPTIONS)
@pytest.mark.parametrize("value", DUMPS_CASES)
def test_stdlib_encoder_writes_what_json_encoder_writes(options: dict[str, Any], value: Any) -> None:
    """The encoder made once gives ``JSONEncoder(...).encode``'s text or error for the same options (a value that
    holds itself aside: see the next test)."""
    if _holds_itself(value):
        return
    made = jsoncodec.stdlib_encoder(**options)
    assert outcome(lambda: made(value)) == outcome(lambda: json.JSONEncoder(**options).encode(value))


@settings(max_examples=200, deadline=None)
@given(JSON_VALUES)
def test_stdlib_encoder_matches_json_encoder_on_any_value(value: Any) -> None:
    for options in ENCODER_OPTIONS:
        made = jsoncodec.stdlib_encoder(**options)
        assert made(value) == json.JSONEncoder(**options).encode(value)


def test_stdlib_encoder_refuses_a_value_that_holds_itself_with_an_exception() -> None:
    """It checks no cycles, so one ends in ``RecursionError`` (an ``Exception``, where ``json`` raises
    ``ValueError``): callers that fall back on an exception still do, and nothing loops."""
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(RecursionError):
        jsoncodec.stdlib_encoder()(loop)
    assert jsoncodec.stdlib_encoder()([1, "é"]) == json.JSONEncoder().encode([1, "é"])  # usable again after


def _holds_itself(value: Any, seen: frozenset[int] = frozenset()) -> bool:
    if id(value) in seen:
        return True
    if isinstance(value, dict):
        return any(_holds_itself(item, seen | {id(value)}) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_holds_itself(item, seen | {id(value)}) for item in value)
    return False
