"""tether's stored format (``tether.durable.formats``): values by field name, so a type that gains a field reads
its old values right; what cannot be read is ``format_unsupported``, saying why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from tether.durable.formats import FORMAT, StoredError, decode, encode
from tether.errors import FormatUnsupported, RateLimited
from tether.events import RunResult
from tether.limits import StopReason
from tether.messages import Message, Text, ToolCall, ToolResult
from tether.usage import Usage

SHAPE_V1 = """
import msgspec

class Result(msgspec.Struct, frozen=True):
    text: str
    stop_reason: str
    degraded: bool = False
    detail: str = ""
"""
SHAPE_V2 = """
import msgspec

class Result(msgspec.Struct, frozen=True):
    text: str
    stop_reason: str
    turns: int = 0
    degraded: bool = False
    answer_kind: str = "plain"
    detail: str = ""
"""


def run_python(tmp_path: Path, code: str) -> str:
    """``code``'s output, run by a process of its own with ``tmp_path`` (where ``shape.py`` is) on its path."""
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), src])}
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def test_a_struct_that_gains_fields_reads_its_old_values_by_name(tmp_path: Path) -> None:
    """The defect: a value stored by position read ``degraded`` from the field added before it. Written by one
    process with the old shape, read by another with fields added before and between the old ones."""
    (tmp_path / "shape.py").write_text(SHAPE_V1)
    stored = run_python(
        tmp_path,
        "from shape import Result; from tether.durable.formats import encode; "
        "print(encode(Result('the model answered', 'complete', degraded=True, detail='cut short')))",
    )
    (tmp_path / "shape.py").write_text(SHAPE_V2)
    read = run_python(
        tmp_path,
        f"from tether.durable.formats import decode; print(repr(decode({stored.strip()!r})))",
    )
    assert read.strip() == (
        "Result(text='the model answered', stop_reason='complete', turns=0, degraded=True, answer_kind='plain', "
        "detail='cut short')"
    )


def a_result() -> RunResult[object]:
    call = ToolCall(id="c1", name="add", arguments={"a": 1, "$b": [2]})
    messages = (
        Message.user("add"),
        Message("assistant", (Text("adding"), call)),
        Message("tool", (ToolResult(call_id="c1", name="add", content="3"),)),
    )
    return RunResult(
        text="3",
        stop_reason=StopReason.ERROR,
        messages=messages,
        usage=Usage(input_tokens=7, requests=1),
        degraded=True,
        error=RateLimited("slow down", status=429, retry_after=2.5),
        output={"$kept": (1, b"\x00\xff"), "when": {1, 2}},
    )


def test_a_run_result_reads_back_whole_with_its_error_as_its_own_type() -> None:
    result = a_result()
    back = decode(encode(result))
    assert msgspec.structs.replace(back, error=None) == msgspec.structs.replace(result, error=None)
    assert type(back.error) is RateLimited
    assert (back.error.code, back.error.message, back.error.status, back.error.retry_after) == (
        "rate_limited",
        "slow down",
        429,
        2.5,
    )
    assert back.stop_reason is StopReason.ERROR


def test_unknown_fields_are_ignored_and_missing_ones_take_their_defaults() -> None:
    stored = json.loads(encode(a_result()))
    fields = stored["value"]["fields"]
    del fields["degraded"], fields["turn_records"]
    fields["added_by_a_newer_tether"] = 1
    back = decode(json.dumps(stored))
    assert (back.degraded, back.turn_records, back.text) == (False, (), "3")


def test_a_newer_format_version_is_refused_saying_why() -> None:
    stored = json.loads(encode("x"))
    stored["tether_format"] = FORMAT + 1
    with pytest.raises(FormatUnsupported, match=f"format version {FORMAT + 1} by a newer tether") as raised:
        decode(json.dumps(stored))
    assert raised.value.code == "format_unsupported"


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ({"$struct": "tether.events:Gone", "fields": {}}, "tether.events:Gone, which this code no longer has"),
        ({"$struct": "tether.events:RunResult", "fields": {"text": "x"}}, "no value for its field 'stop_reason'"),
        ({"$struct": "json:dumps", "fields": {}}, "which is not a struct here"),
        ({"$later": 1}, "of kind '\\$later'"),
    ],
)
def test_a_value_that_cannot_be_read_says_why(value: object, why: str) -> None:
    with pytest.raises(FormatUnsupported, match=why):
        decode(json.dumps({"tether_format": 1, "value": value}))


def test_text_that_is_no_stored_value_is_format_unsupported() -> None:
    for text in ('{"tether_format": 1', '{"other": 1}', "not base64 of a pickle"):
        with pytest.raises(FormatUnsupported):
            decode(text)


def test_an_error_whose_type_is_gone_reads_as_its_type_name_and_message() -> None:
    stored = {"$error": "gone.module:Boom", "args": ["it broke"], "attributes": {}}
    error = decode(json.dumps({"tether_format": 1, "value": stored}))
    assert type(error) is StoredError
    assert (error.type_name, error.message) == ("gone.module.Boom", "it broke")
    assert str(error) == "gone.module.Boom: it broke"


def test_an_error_attribute_that_cannot_be_kept_is_kept_as_its_text() -> None:
    import threading

    error = ValueError("locked")
    error.lock = threading.Lock()  # type: ignore[attr-defined]
    back = decode(encode(error))
    assert type(back) is ValueError
    assert back.args == ("locked",)
    assert getattr(back, "lock").startswith("<unlocked _thread.lock")  # noqa: B009 - an attribute set above


def test_a_value_of_a_type_the_format_does_not_keep_is_refused_when_written() -> None:
    with pytest.raises(TypeError, match="cannot store a value of type builtins:object"):
        encode({"x": object()})


def test_the_stored_text_names_fields_and_holds_no_pickle() -> None:
    text = encode(a_result())
    assert text.startswith('{"tether_format":1,')
    assert '"degraded":true' in text
    assert '"stop_reason":{"$enum":"tether.limits:StopReason","value":"error"}' in text
    assert "gASV" not in text  # no base64 pickle inside


def test_the_listing_reads_a_value_of_a_newer_format_as_unknown_rather_than_failing() -> None:
    """``tether runs list`` of an older tether on a database a newer one wrote: the run is listed, its prompt
    and result left empty, instead of the listing failing."""
    from tether.durable.formats import NAME
    from tether.durable.store import _value

    newer = json.dumps({"tether_format": FORMAT + 1, "value": {"args": ["a prompt"]}})
    assert _value(newer, NAME) is None
    assert _value(encode({"args": ("a prompt",)}), NAME) == {"args": ("a prompt",)}
