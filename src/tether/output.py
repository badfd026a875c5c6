"""Typed output: what a run gives as ``result.output`` when an output type is asked for (docs/output.md).

An output type is a pydantic model, a dataclass, a ``TypedDict``, a primitive, a ``list[...]`` or ``dict[...]``,
a union of several (each its own choice), a function whose typed parameters are the output (its return value
is the result; it may be async), or an :class:`OutputSchema` (a raw JSON Schema, whose output is the JSON value).
``str`` is plain text, the default: no output machinery at all.

:class:`OutputSpec` is what the loop reads of one: its *choices*, each an object schema (a type whose schema is
not an object, a primitive or a list, is wrapped as ``{"result": ...}``), and their validation. The loop asks for
it in one of three ways (``loop/outputs.py``): as output tools the model calls (``tool``), as the provider's
JSON Schema output (``native``), or as the schema in the instructions with JSON mode (``prompted``). The same
validation reads every way: the arguments of an output call, or the JSON in an answer's text.

Validation is pydantic's (a ``TypeAdapter`` per choice, made once per spec), or ``jsonschema``'s for an
:class:`OutputSchema`. What fails is an :class:`OutputInvalid` whose lines name each field, which the model is
sent to try again. An output validator (``@agent.output_validator``) may raise :class:`ModelRetry` for the same.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Union

from tether.errors import ConfigInvalid
from tether.events import OutputT
from tether.messages import JsonObject

__all__ = [
    "OUTPUT_TOOL",
    "ModelRetry",
    "OutputChoice",
    "OutputInvalid",
    "OutputSchema",
    "OutputSpec",
    "OutputT",
    "OutputType",
    "read_json_answer",
    "strict_schema",
]

OUTPUT_TOOL = "final_result"
"""The output tool's name; a union's choices are ``final_result_<Member>``."""
MAX_REPORTED = 8
"""Validation errors sent back in one correction."""


class ModelRetry(Exception):
    """Raise from an output validator to send the model ``message`` and ask again (an output retry)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class OutputInvalid(ValueError):
    """An output failed its validation; ``errors`` says why, one line each, for the model and the result."""

    def __init__(self, errors: Sequence[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = tuple(errors)


class OutputSchema:
    """A raw JSON Schema as the output type: the output is the JSON value the model gave, checked against it
    (``tether run --schema``)."""

    __slots__ = ("description", "name", "schema")

    def __init__(self, schema: JsonObject, *, name: str = "result", description: str | None = None) -> None:
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        if not isinstance(schema, dict):
            raise ConfigInvalid(f"an output schema must be a JSON object, not {type(schema).__name__}")
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as error:
            raise ConfigInvalid(f"the output schema is not a valid JSON Schema: {error.message}") from None
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
            raise ConfigInvalid(f"an output schema's name must be 1-64 letters, digits, '_' or '-', not {name!r}")
        self.schema = schema
        self.name = name
        self.description = description

    def __repr__(self) -> str:
        return f"OutputSchema({self.schema!r}, name={self.name!r})"

    if TYPE_CHECKING:  # for a type checker, an output schema gives what a function of no arguments returning JSON would

        def __call__(self) -> JsonObject: ...


OutputType = (
    type[OutputT] | Callable[..., Awaitable[OutputT]] | Callable[..., OutputT] | Sequence[Any] | types.UnionType
)
"""What ``output_type=`` takes (an ``OutputSchema`` is, for a type checker, a function giving a JSON object). A type
checker reads the output's type off a class, a function or a schema; for a union or an async function, annotate
the agent: ``agent: Agent[None, A | B] = Agent(..., output_type=[A, B])``."""


class OutputChoice:
    """One way the output may be given: a name (its output tool's), an object schema and its validation."""

    __slots__ = ("_check", "description", "function", "name", "schema", "wrapped")

    def __init__(
        self,
        name: str,
        description: str,
        schema: JsonObject,
        check: Callable[[Any], Any],
        *,
        wrapped: bool,
        function: Callable[..., Any] | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.schema = schema
        """The object the model writes: the output tool's arguments, or the JSON of a native answer."""
        self._check = check
        self.wrapped = wrapped
        """The output is the object's ``result`` (a type whose own schema is not an object)."""
        self.function = function
        """An output function: called with the checked arguments; what it returns is the output."""

    def check(self, data: Any) -> Any:
        """The output ``data`` (parsed JSON: the arguments of a call, or an answer's JSON) stands for; raises
        :class:`OutputInvalid`. An output function's arguments, not yet its result (:meth:`OutputSpec.value`)."""
        if not isinstance(data, dict):
            raise OutputInvalid([f"(output): expected a JSON object, got {_kind(data)}"])
        if self.wrapped:
            if set(data) != {"result"}:
                extra = sorted(set(data) - {"result"})
                raise OutputInvalid([f"{extra[0]}: unexpected field; remove it" if extra else "result: required"])
            data = data["result"]
        return self._check(data)


class OutputSpec:
    """A run's typed output: its choices and how each is checked (see the module docstring)."""

    __slots__ = ("_adapter", "choices", "native_name", "native_schema", "output_type", "strict")

    def __init__(self, output_type: Any) -> None:
        self.output_type = output_type
        members = _members(output_type)
        names = [OUTPUT_TOOL] if len(members) == 1 else [f"{OUTPUT_TOOL}_{_member_name(m)}" for m in members]
        if len(set(names)) != len(names):
            raise ConfigInvalid(f"the output type's members need distinct names: {', '.join(names)}")
        self.choices = tuple(_choice(name, member) for name, member in zip(names, members, strict=True))
        if len(self.choices) == 1:
            only = self.choices[0]
            self.native_name, self.native_schema = _native_name(output_type), only.schema
        else:
            members = [dict(_unwrapped(choice)) for choice in self.choices]
            defs: JsonObject = {}
            for member in members:  # one $defs at the root, where every member's references point
                defs.update(member.pop("$defs", {}))
            union: JsonObject = {"anyOf": members}
            self.native_name, self.native_schema = "result", _object({"result": {**union, "$defs": defs}})
        self.strict = strict_schema(self.native_schema)
        self._adapter: Any = _adapter(members[0]) if len(members) == 1 else None
        """The type's validator, for partial outputs (``None``: a function, a raw schema or a union)."""
        """The native schema as a strict one (every property required, no other), or ``None`` when the type has
        optional or free-form fields: strict where the schema allows it, otherwise checked here alone."""

    @classmethod
    def of(cls, output_type: Any) -> OutputSpec | None:
        """The spec of ``output_type``; ``None`` for ``str`` (plain text)."""
        if output_type is str or output_type is None:
            return None
        return cls(output_type)

    def choice(self, name: str) -> OutputChoice | None:
        return next((c for c in self.choices if c.name == name), None)

    def check_answer(self, text: str) -> tuple[OutputChoice, Any]:
        """The output in an answer's text (the JSON of a native or prompted answer), read tolerantly (a code
        fence or prose around it), and the choice it fits; raises :class:`OutputInvalid`."""
        data = read_json_answer(text)
        if len(self.choices) == 1:
            return self.choices[0], self.choices[0].check(data)
        if not isinstance(data, dict) or set(data) != {"result"}:
            raise OutputInvalid(['(output): expected a JSON object with one field, "result"'])
        errors: list[str] = []
        for choice in self.choices:
            try:
                return choice, choice.check(data if choice.wrapped else data["result"])
            except OutputInvalid as invalid:
                errors.extend(f"as {choice.name[len(OUTPUT_TOOL) + 1 :]}: {line}" for line in invalid.errors[:3])
        raise OutputInvalid(errors)

    async def value(self, choice: OutputChoice, checked: Any) -> Any:
        """The output of ``choice`` once ``checked``: an output function's result (awaited, when it is async),
        else ``checked`` itself. What the function raises propagates; :class:`ModelRetry` asks again."""
        if choice.function is None:
            return checked
        args, kwargs = checked
        result = choice.function(*args, **kwargs)
        return await result if inspect.isawaitable(result) else result

    def partial(self, data: Any) -> Any:
        """The output ``data`` (an incomplete answer's JSON, parsed so far) already stands for, validated as far
        as it goes (pydantic's partial mode: a string cut short passes); ``None`` when it does not pass yet, for a
        union, a function or a raw schema."""
        if len(self.choices) != 1 or self._adapter is None:
            return None
        if self.choices[0].wrapped:
            if not isinstance(data, dict) or "result" not in data:
                return None
            data = data["result"]
        try:
            return self._adapter.validate_python(data, experimental_allow_partial="trailing-strings")
        except Exception:  # noqa: BLE001 - not yet: a required field is still to come
            return None

    def prompt(self) -> str:
        """The instructions of the ``prompted`` mode: answer with JSON matching the schema, and nothing else."""
        schema = json.dumps(self.native_schema, ensure_ascii=False, separators=(", ", ": "))
        return (
            "Give your final answer as one JSON object matching this JSON Schema, and nothing else (no prose, no "
            f"code fence):\n{schema}"
        )

    def __repr__(self) -> str:
        return f"OutputSpec({_type_name(self.output_type)})"


# --- choices ------------------------------------------------------------------------------------------------


def _members(output_type: Any) -> list[Any]:
    """The choices of an output type: a union's members (``A | B``, ``Union[A, B]``, a list of types), else
    the type itself."""
    if isinstance(output_type, list | tuple):
        members = list(output_type)
    elif typing.get_origin(output_type) in (Union, types.UnionType):
        members = [m for m in typing.get_args(output_type) if m is not type(None)]
    else:
        return [output_type]
    if not members:
        raise ConfigInvalid("an output type union needs at least one member")
    if str in members:
        raise ConfigInvalid("str cannot be a member of an output union: text is the output without one")
    return members


def _choice(name: str, member: Any) -> OutputChoice:
    if isinstance(member, OutputSchema):
        return _schema_choice(name, member)
    if _is_function(member):
        return _function_choice(name, member)
    return _type_choice(name, member)


def _type_choice(name: str, member: Any) -> OutputChoice:
    from pydantic import TypeAdapter, ValidationError

    try:
        adapter: TypeAdapter[Any] = TypeAdapter(member)
        schema = adapter.json_schema()
    except Exception as error:  # noqa: BLE001 - pydantic's word for a type it cannot describe
        raise ConfigInvalid(f"output type {_type_name(member)} cannot be described as JSON: {error}") from None
    schema = _without_titles(schema)
    description = schema.pop("description", None) or f"Give the final answer: {_type_name(member)}."
    wrapped = not _is_object(schema)
    validate = adapter.validate_python

    def check(data: Any) -> Any:
        try:
            return validate(data)
        except ValidationError as error:
            raise OutputInvalid(_pydantic_errors(error, prefix="result" if wrapped else "")) from None

    return OutputChoice(name, description, _object({"result": schema}) if wrapped else schema, check, wrapped=wrapped)


def _function_choice(name: str, function: Callable[..., Any]) -> OutputChoice:
    from tether.tools.docstrings import parse_docstring
    from tether.tools.schema import SignatureValidator

    doc = parse_docstring(inspect.getdoc(function))
    validator = SignatureValidator(name, function, doc.params)
    if validator.context is not None:
        raise ConfigInvalid(f"output function {function.__name__!r} cannot take a RunContext")

    def check(data: Any) -> Any:
        from tether.errors import InvalidArguments

        try:
            bound = validator.validate(name, data)
        except InvalidArguments as error:
            raise OutputInvalid(error.message.splitlines()[1:] or [error.message]) from None
        return bound.args, bound.kwargs

    description = doc.description or f"Give the final answer by calling {function.__name__}."
    return OutputChoice(name, description, validator.parameters, check, wrapped=False, function=function)


def _schema_choice(name: str, output: OutputSchema) -> OutputChoice:
    from jsonschema import Draft202012Validator

    schema = output.schema
    wrapped = not _is_object(schema)
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)

    def check(data: Any) -> Any:
        errors = sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
        if errors:
            lines = []
            for error in errors[:MAX_REPORTED]:
                path = ".".join(str(p) for p in error.absolute_path)
                where = ".".join(filter(None, ["result" if wrapped else "", path])) or "(output)"
                lines.append(f"{where}: {error.message}")
            raise OutputInvalid(lines)
        return data

    description = output.description or "Give the final answer."
    return OutputChoice(name, description, _object({"result": schema}) if wrapped else schema, check, wrapped=wrapped)


def _adapter(member: Any) -> Any:
    if isinstance(member, OutputSchema) or _is_function(member):
        return None
    from pydantic import TypeAdapter

    return TypeAdapter(member)


def _is_function(member: Any) -> bool:
    return inspect.isfunction(member) or inspect.ismethod(member)


def _is_object(schema: JsonObject) -> bool:
    """An object schema with named properties, as a tool's parameters must be (a ``$ref`` to one counts)."""
    if schema.get("type") == "object" and "properties" in schema:
        return True
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and len(schema) <= 2:
        target = schema.get("$defs", {}).get(ref.removeprefix("#/$defs/"), {})
        return isinstance(target, dict) and target.get("type") == "object"
    return False


def _object(properties: JsonObject) -> JsonObject:
    """An object schema of ``properties``, all required."""
    defs: JsonObject = {}
    for value in properties.values():
        defs.update(value.pop("$defs", {}) if isinstance(value, dict) else {})
    schema: JsonObject = {"type": "object", "properties": properties, "required": list(properties)}
    return {**schema, "$defs": defs} if defs else schema


def _unwrapped(choice: OutputChoice) -> JsonObject:
    return choice.schema["properties"]["result"] if choice.wrapped else choice.schema


def _native_name(output_type: Any) -> str:
    name = getattr(output_type, "name", None) if isinstance(output_type, OutputSchema) else None
    name = name or getattr(output_type, "__name__", None) or "result"
    return re.sub(r"[^A-Za-z0-9_-]", "_", str(name))[:64] or "result"


def _member_name(member: Any) -> str:
    if isinstance(member, OutputSchema):
        return member.name
    origin = typing.get_origin(member)
    name = getattr(origin or member, "__name__", None) or "value"
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)[: 64 - len(OUTPUT_TOOL) - 1]


def _type_name(output_type: Any) -> str:
    if isinstance(output_type, type):
        return output_type.__qualname__
    return str(output_type).replace("typing.", "")


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def _pydantic_errors(error: Any, *, prefix: str) -> list[str]:
    lines = []
    for item in error.errors(include_url=False)[:MAX_REPORTED]:
        where = ".".join(filter(None, [prefix, *(str(part) for part in item["loc"])])) or "(output)"
        message = "required field is missing" if item["type"] == "missing" else item["msg"]
        got = "" if item["type"] in ("missing", "extra_forbidden") else f" (got {json.dumps(item['input'])[:60]})"
        lines.append(f"{where}: {message}{got}")
    return lines


def _without_titles(schema: JsonObject) -> JsonObject:
    from tether.tools.schema import strip_titles

    return strip_titles(schema)


# --- reading and strictness ---------------------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def read_json_answer(text: str) -> Any:
    """The JSON value an answer gives: the whole text, or the one in its code fence, or the first object or
    array in it (a model that wraps its JSON in prose); raises :class:`OutputInvalid` when there is none."""
    stripped = text.strip()
    fenced = _FENCE.search(stripped)
    candidates = [fenced.group(1).strip()] if fenced else []
    candidates.append(stripped)
    for candidate in candidates:
        try:
            return json.loads(candidate, strict=False)  # raw line breaks in strings, as constrained decoders allow
        except (ValueError, RecursionError):
            continue
    decoder = json.JSONDecoder(strict=False)
    for start in (i for i, char in enumerate(stripped) if char in "{["):
        try:
            return decoder.raw_decode(stripped, start)[0]
        except (ValueError, RecursionError):
            continue
    if not stripped:
        raise OutputInvalid(["(output): the answer was empty; give the output as JSON"])
    raise OutputInvalid(["(output): the answer is not JSON; give the output as one JSON object and nothing else"])


_STRICT_UNSUPPORTED = frozenset({"patternProperties", "propertyNames", "minProperties", "maxProperties", "if"})


def strict_schema(schema: JsonObject) -> JsonObject | None:
    """``schema`` as a strict structured-output schema (OpenAI's ``strict: true``: every object closed with
    ``additionalProperties: false`` and all its properties required), or ``None`` when it cannot be without
    changing its meaning (an optional property, a free-form object, a keyword strict mode refuses)."""

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        if _STRICT_UNSUPPORTED & node.keys():
            raise _NotStrict
        out = {key: walk(value) for key, value in node.items()}
        if node.get("type") == "object" or "properties" in node:
            properties = node.get("properties", {})
            extra = node.get("additionalProperties")
            if not properties or (extra not in (None, False)) or set(node.get("required", [])) != set(properties):
                raise _NotStrict
            out["additionalProperties"] = False
        return out

    try:
        return typing.cast(JsonObject, walk(schema))
    except _NotStrict:
        return None


class _NotStrict(Exception):
    pass


OutputValidator = Callable[..., Any]
"""An output validator: ``(output)`` or ``(ctx, output)``, sync or async, returning the output to keep; it may
raise :class:`ModelRetry` to ask the model again."""
