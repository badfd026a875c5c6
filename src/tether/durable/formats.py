"""How durable values are stored: versioned, field-named JSON, readable after the code that wrote them changed.

Why: the workflow database keeps a run's inputs, each step's result and the run's ``RunResult`` for as long as
the run may be read or recovered, across deploys. The engine's default (a pickle) stores a msgspec Struct by
the position of its fields, so adding a field to ``RunResult`` silently shifted every old value into the wrong
field. Here every value is stored as JSON that names its fields and its type::

    {"tether_format": 1, "value": {"$struct": "tether.events:RunResult", "fields": {"text": "...", ...}}}

Contract (format version :data:`FORMAT`):

* JSON's own values are stored as they are (a list as a list, a dict of string keys none starting with
  ``$`` as an object); every other value is an object whose one ``$`` key names its kind: ``$tuple``,
  ``$dict`` (pairs), ``$bytes`` (base64), ``$set``, ``$frozenset``, ``$datetime``, ``$date`` (ISO 8601),
  ``$float`` (``nan``, ``inf``, ``-inf``), ``$enum`` (type and value), ``$struct`` and ``$dataclass`` (type
  and fields by name), ``$model`` (a pydantic model: type and its JSON dump) and ``$error`` (an exception:
  type, ``args`` and its attributes, each as its text where it cannot be kept; never its traceback).
* Reading a struct, dataclass or model ignores fields its type no longer has and gives the fields it gained
  their defaults; a field without a default and without a stored value, a type that no longer exists, a kind
  or a format version this code does not know raise :class:`~tether.errors.FormatUnsupported` saying which.
  An exception whose type no longer exists reads as a :class:`StoredError` (its type name and message).
* A value of any other type cannot be stored: ``TypeError`` naming the type, when it is written.
* Text that is not a JSON object is read as the engine's older format (a base64 pickle), so rows written
  before this format still read.

This module imports no engine: the engine-free reader (:mod:`tether.durable.store`) uses it as the engine
does (``dbos_launch`` hands it to DBOS as its serializer, named :data:`NAME`).
"""

from __future__ import annotations

import base64
import dataclasses
import math
import pickle
import sys
from datetime import date, datetime
from enum import Enum
from functools import cache
from importlib import import_module
from typing import Any

import msgspec

from tether.errors import FormatUnsupported

FORMAT = 1
"""The format version this code writes; it reads every version up to it."""
NAME = "tether_json"
"""The name the workflow database records beside each value written in this format."""

_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder()


class StoredError(Exception):
    """An exception read back whose type no longer exists in this process: its type's name and its message."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.message = message


def encode(value: Any) -> str:
    """``value`` as stored (see the module docstring); ``TypeError`` for a value of a type it cannot keep."""
    return _ENCODER.encode({"tether_format": FORMAT, "value": _out(value)}).decode()


def decode(text: str) -> Any:
    """The value ``text`` stores (see the module docstring); ``FormatUnsupported`` when it cannot be read."""
    if not text.startswith("{"):
        return _legacy(text)
    try:
        stored = _DECODER.decode(text)
    except msgspec.DecodeError as error:
        raise FormatUnsupported(f"a stored value is not valid JSON ({error})") from None
    if not isinstance(stored, dict) or "tether_format" not in stored or "value" not in stored:
        raise FormatUnsupported("a stored value is not one of tether's: it has no 'tether_format' and 'value'")
    version = stored["tether_format"]
    if type(version) is not int or version < 1:
        raise FormatUnsupported(f"a stored value has format version {version!r}, which no tether writes")
    if version > FORMAT:
        raise FormatUnsupported(
            f"a stored value was written in format version {version} by a newer tether; this one reads versions "
            f"up to {FORMAT}: upgrade tether in this process to read it",
            details={"version": version, "supported": FORMAT},
        )
    return _in(stored["value"])


def _legacy(text: str) -> Any:
    try:
        return pickle.loads(base64.b64decode(text))  # the engine's own older rows, which it unpickled too
    except Exception as error:  # noqa: BLE001 - whatever the pickle says, the value cannot be read
        raise FormatUnsupported(f"a stored value is neither tether's JSON nor a readable pickle ({error})") from None


# --- writing --------------------------------------------------------------------------------------------------


def _type_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _out(value: Any) -> Any:
    kind = type(value)
    if value is None or kind is str or kind is int or kind is bool:
        return value
    if kind is float:
        return value if math.isfinite(value) else {"$float": repr(value)}
    if kind is tuple:
        return {"$tuple": [_out(item) for item in value]}
    if kind is list:
        return [_out(item) for item in value]
    if kind is dict:
        if all(type(key) is str and not key.startswith("$") for key in value):
            return {key: _out(item) for key, item in value.items()}
        return {"$dict": [[_out(key), _out(item)] for key, item in value.items()]}
    if isinstance(value, msgspec.Struct):
        if kind in _plain_structs():
            return {"$json": _type_name(kind), "value": msgspec.to_builtins(value)}
        fields = {name: _out(getattr(value, name)) for name in kind.__struct_fields__}
        return {"$struct": _type_name(kind), "fields": fields}
    return _out_other(value, kind)


def _out_other(value: Any, kind: type) -> Any:
    if isinstance(value, Enum):
        return {"$enum": _type_name(kind), "value": _out(value.value)}
    if isinstance(value, BaseException):
        return _out_error(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {field.name: _out(getattr(value, field.name)) for field in dataclasses.fields(value)}
        return {"$dataclass": _type_name(kind), "fields": fields}
    if kind is bytes or kind is bytearray:
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    if kind is set or kind is frozenset:
        return {f"${kind.__name__}": [_out(item) for item in value]}
    if kind is datetime:
        return {"$datetime": value.isoformat()}
    if kind is date:
        return {"$date": value.isoformat()}
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and isinstance(value, pydantic.BaseModel):
        return {"$model": _type_name(kind), "fields": value.model_dump(mode="json")}
    for plain in (str, int, float):  # a subclass of a plain type that is none of the above: its plain value
        if isinstance(value, plain):
            return _out(plain(value))
    raise TypeError(f"a durable run cannot store a value of type {_type_name(kind)}: {value!r:.80}")


def _out_error(error: BaseException) -> dict[str, Any]:
    """An exception as what can be kept of it: its type, its ``args`` (or its message) and its attributes."""
    try:
        args = _out(list(error.args))
    except (TypeError, RecursionError):
        args = [str(error)]
    attributes: dict[str, Any] = {}
    for name, item in getattr(error, "__dict__", {}).items():
        try:
            attributes[name] = _out(item)
        except (TypeError, RecursionError):
            attributes[name] = str(item)  # what cannot be kept is kept as its text
    return {"$error": _type_name(type(error)), "args": args, "attributes": attributes}


# --- reading --------------------------------------------------------------------------------------------------


def _in(value: Any) -> Any:
    kind = type(value)
    if kind is list:
        return [_in(item) for item in value]
    if kind is not dict:
        return value
    for key in value:
        if key.startswith("$"):
            return _in_tagged(key, value)
    return {key: _in(item) for key, item in value.items()}


def _in_tagged(tag: str, value: dict[str, Any]) -> Any:
    body = value[tag]
    if tag == "$tuple":
        return tuple(_in(item) for item in body)
    if tag == "$json":
        return _in_plain(body, value.get("value"))
    if tag == "$struct":
        return _construct(_class(body, "struct"), body, _fields(body, "struct"), value.get("fields", {}))
    if tag == "$dataclass":
        return _construct(_class(body, "dataclass"), body, _fields(body, "dataclass"), value.get("fields", {}))
    if tag == "$enum":
        return _class(body, "enum")(_in(value.get("value")))
    if tag == "$error":
        return _in_error(body, value)
    if tag == "$dict":
        return {_in(key): _in(item) for key, item in body}
    if tag == "$model":
        return _class(body, "model").model_validate(value.get("fields", {}))
    if tag == "$bytes":
        return base64.b64decode(body)
    if tag == "$set" or tag == "$frozenset":
        return (set if tag == "$set" else frozenset)(_in(item) for item in body)
    if tag == "$datetime":
        return datetime.fromisoformat(body)
    if tag == "$date":
        return date.fromisoformat(body)
    if tag == "$float":
        return float(body)
    raise FormatUnsupported(
        f"a stored value is of kind {tag!r}, which this tether does not know (a newer one wrote it?)"
    )


def _in_plain(name: str, value: Any) -> Any:
    try:
        return msgspec.convert(value, _class(name, "struct"))
    except msgspec.ValidationError as error:
        raise FormatUnsupported(f"a stored {name} cannot be read: {error}") from None


def _construct(cls: type, name: str, fields: tuple[tuple[str, bool], ...], stored: dict[str, Any]) -> Any:
    """``cls`` made of the ``stored`` fields it still has; the fields it gained take their defaults."""
    arguments: dict[str, Any] = {}
    for field, required in fields:
        if field in stored:
            arguments[field] = _in(stored[field])
        elif required:
            raise FormatUnsupported(
                f"a stored {name} has no value for its field {field!r}, which has no default: it was written "
                "before the field was added; give the field a default to read it"
            )
    try:
        return cls(**arguments)
    except Exception as error:  # noqa: BLE001 - a type's own check refusing an old value: say which
        raise FormatUnsupported(f"a stored {name} cannot be made again: {error}") from None


def _in_error(name: str, value: dict[str, Any]) -> BaseException:
    args = tuple(_in(value.get("args", [])))
    attributes = _in(value.get("attributes", {}))
    try:
        cls = _class(name, "error")
    except FormatUnsupported:
        message = attributes.get("message") if isinstance(attributes.get("message"), str) else None
        return StoredError(name.replace(":", "."), message or (str(args[0]) if len(args) == 1 else str(args)))
    error: BaseException = cls.__new__(cls, *args)  # as pickle makes one: without running its __init__
    error.args = args
    if hasattr(error, "__dict__"):
        error.__dict__.update(attributes)
    return error


_KINDS: dict[str, Any] = {
    "struct": lambda cls: isinstance(cls, type) and issubclass(cls, msgspec.Struct),
    "dataclass": lambda cls: isinstance(cls, type) and dataclasses.is_dataclass(cls),
    "enum": lambda cls: isinstance(cls, type) and issubclass(cls, Enum),
    "error": lambda cls: isinstance(cls, type) and issubclass(cls, BaseException),
    "model": lambda cls: isinstance(cls, type) and hasattr(cls, "model_validate"),
}


@cache
def _plain_structs() -> frozenset[type]:
    """The structs whose fields hold only what msgspec's JSON keeps by itself (the conversation, usage and
    records: the bulk of a run's values), stored as msgspec writes them and read back by their types."""
    from tether.events import ToolCallRecord, TurnRecord
    from tether.loop.accumulator import AccumulatedTurn
    from tether.messages import Attachment, Message, Text, Thinking, ToolCall, ToolResult
    from tether.usage import Cost, Usage

    conversation = (Message, Text, Thinking, ToolCall, ToolResult, Attachment)
    return frozenset((*conversation, Usage, Cost, TurnRecord, ToolCallRecord, AccumulatedTurn))


@cache
def _fields(name: str, kind: str) -> tuple[tuple[str, bool], ...]:
    """The fields a type is made with, by name, each with whether it must be given (it has no default). Read
    from the type itself, not its annotations, which may name types imported for a type checker only."""
    cls = _class(name, kind)
    if kind == "struct":
        names: tuple[str, ...] = cls.__struct_fields__
        required = len(names) - len(cls.__struct_defaults__)
        return tuple((field, index < required) for index, field in enumerate(names))
    return tuple(
        (field.name, field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING)
        for field in dataclasses.fields(cls)
        if field.init
    )


@cache
def _class(name: Any, kind: str) -> Any:
    """The type ``module:qualified.name`` names, if it is of ``kind``; ``FormatUnsupported`` saying why not."""
    if not isinstance(name, str) or ":" not in name:
        raise FormatUnsupported(f"a stored {kind} names its type as {name!r}, not 'module:name'")
    module_name, _, qualified = name.partition(":")
    try:
        found: Any = import_module(module_name)
        for part in qualified.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        raise FormatUnsupported(f"a stored {kind} is of type {name}, which this code no longer has") from None
    if not _KINDS[kind](found):
        raise FormatUnsupported(f"a stored {kind} names {name}, which is not a {kind} here")
    return found
