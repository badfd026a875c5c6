"""Tool argument schemas and their validation.

Two sources, one behaviour. A Python function's signature becomes a pydantic model (arguments are coerced
the way pydantic coerces, extra fields are refused, or dropped when the tool says to ignore them); a raw JSON
Schema (an MCP tool's, say) is checked with
a Draft 2020-12 validator. Either way a bad call raises :class:`~tether.errors.InvalidArguments` with a
message that names each offending field, which the model reads and can act on.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from tether.errors import ConfigInvalid, InvalidArguments

MAX_REPORTED_ERRORS = 8
"""Validation errors listed in one message; a model needs the first few, not a wall of them."""


class ArgumentValidator(Protocol):
    """Checks a model's arguments and returns what to call the tool with."""

    parameters: dict[str, Any]
    """The JSON Schema shown to the model."""

    @property
    def context(self) -> ContextParameter | None:
        """The run context the tool's function takes first, if it takes one."""

    def validate(self, tool_name: str, arguments: dict[str, Any]) -> BoundArguments: ...


@dataclass(slots=True)
class BoundArguments:
    """Validated arguments, ready for the call: ``function(*args, **kwargs)`` (made once a call and used at once:
    not frozen, which would cost a descriptor call per field)."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]


# --- function signatures (pydantic) -------------------------------------------------------------------------


class SignatureValidator:
    """Validates arguments against a function's signature, through a pydantic model built once."""

    def __init__(
        self, tool_name: str, function: Callable[..., Any], descriptions: dict[str, str], *, ignore_extra: bool = False
    ) -> None:
        """``ignore_extra``: arguments the function does not take are dropped, not refused (the schema then
        no longer says ``additionalProperties: false``)."""
        from pydantic import ConfigDict, Field, ValidationError, create_model

        self._invalid = ValidationError
        signature = inspect.signature(function)
        hints = typing.get_type_hints(function, include_extras=True)
        self.context = context_parameter(tool_name, signature, hints)
        """The run context the function takes first (``ctx: RunContext[Deps]``), left out of the schema; ``None``:
        it takes none."""
        parameters = list(signature.parameters.items())[1 if self.context is not None else 0 :]
        fields: dict[str, Any] = {}
        self._positional: list[str] = []
        self._keyword: list[str] = []
        for index, (name, param) in enumerate(parameters):
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                stars = "*" if param.kind is param.VAR_POSITIONAL else "**"
                raise ConfigInvalid(
                    f"tool {tool_name!r}: {stars}{name} cannot be described to a model; "
                    "name each parameter, or build the tool from a JSON schema"
                )
            default = ... if param.default is param.empty else param.default
            # Fields get neutral names and the parameter name as alias, so that a parameter called ``json``
            # or ``model_config`` cannot clash with pydantic's own attributes.
            field_name = f"p{index}"
            # A description from the docstring; without one, any given in Annotated[..., Field(...)] stays.
            field = Field(default, alias=name)
            if descriptions.get(name):
                field = Field(default, alias=name, description=descriptions[name])
            fields[field_name] = (hints.get(name, Any), field)
            (self._positional if param.kind is param.POSITIONAL_ONLY else self._keyword).append(name)
        fields_of = {name: f"p{i}" for i, (name, _) in enumerate(parameters)}
        self._positional_fields = tuple(fields_of[name] for name in self._positional)
        self._keyword_fields = tuple((fields_of[name], name) for name in self._keyword)
        self._model = create_model(
            f"{tool_name}_arguments",
            __config__=ConfigDict(extra="ignore" if ignore_extra else "forbid", arbitrary_types_allowed=True),
            **fields,
        )
        self._validate = self._model.__pydantic_validator__.validate_python
        """The model's validator itself: ``model_validate`` is a Python layer over it, paid on every call."""
        self._validate_fields = _fields_validator(self._model, dict(zip(fields_of.values(), fields_of, strict=True)))
        """The same checks without the model: the arguments straight as the call's keywords (``None``: a schema
        this shortcut does not cover, and the model is used)."""
        self.parameters: dict[str, Any] = strip_titles(self._model.model_json_schema(by_alias=True))

    def validate(self, tool_name: str, arguments: dict[str, Any]) -> BoundArguments:
        try:
            if self._validate_fields is not None:
                values = self._validate_fields(arguments)[0]
                if not self._positional:
                    return BoundArguments((), values)
                return BoundArguments(tuple([values.pop(name) for name in self._positional]), values)
            model_values = self._validate(arguments).__dict__
        except self._invalid as exc:
            raise InvalidArguments(_pydantic_message(tool_name, exc)) from None
        return BoundArguments(
            tuple([model_values[field] for field in self._positional_fields]),
            {name: model_values[field] for field, name in self._keyword_fields},
        )


@dataclass(frozen=True, slots=True)
class ContextParameter:
    """A tool function's first parameter when it is annotated ``RunContext`` (or ``RunContext[Deps]``)."""

    name: str
    deps_type: Any
    """``Deps`` of ``RunContext[Deps]``; ``None`` for a bare ``RunContext``."""


def context_parameter(tool_name: str, signature: inspect.Signature, hints: dict[str, Any]) -> ContextParameter | None:
    """The function's run-context parameter, when its first parameter is one; ``ConfigInvalid`` when a later
    parameter is annotated ``RunContext`` (the context is passed first, positionally, and is never the model's
    to set)."""
    from tether.run_context import RunContext

    found = None
    for position, (name, param) in enumerate(signature.parameters.items()):
        hint = hints.get(name)
        if typing.get_origin(hint) is typing.Annotated:
            hint = typing.get_args(hint)[0]
        if hint is not RunContext and typing.get_origin(hint) is not RunContext:
            continue
        if position != 0 or param.kind not in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            raise ConfigInvalid(
                f"tool {tool_name!r}: the run context ({name}: RunContext) must be the function's first "
                "parameter, before any keyword-only marker"
            )
        arguments = typing.get_args(hint)
        found = ContextParameter(name, arguments[0] if arguments else None)
    return found


def _fields_validator(model: Any, names: dict[str, str]) -> Callable[[Any], tuple[dict[str, Any], Any, Any]] | None:
    """A validator of the model's fields alone, each field named as its parameter: what it returns is the
    arguments to call with, where the model's validator makes a model instance to be read field by field
    (a call's validation costs half as much, ``bench/instructions.py``). Same checks, same coercions, same
    defaults and the same errors: it is the model's own core schema, with only the names of its fields changed.

    ``None`` when the model's schema is not a plain model of fields (one whose types refer to each other is
    wrapped in definitions): the model itself is used then."""
    from pydantic_core import SchemaValidator

    try:
        schema = model.__pydantic_core_schema__
        if schema.get("type") != "model" or schema["schema"].get("type") != "model-fields":
            return None
        fields = dict(schema["schema"])
        fields["fields"] = {names[field]: field_schema for field, field_schema in fields["fields"].items()}
        return SchemaValidator(fields, schema.get("config")).validate_python
    except Exception:  # noqa: BLE001 - any schema the shortcut cannot take is validated by the model
        return None


def _pydantic_message(tool_name: str, exc: Any) -> str:
    lines = [f"Invalid arguments for tool {tool_name!r}:"]
    errors = exc.errors(include_url=False)
    for error in errors[:MAX_REPORTED_ERRORS]:
        where = ".".join(str(part) for part in error["loc"]) or "(arguments)"
        got = "" if error["type"] in ("missing", "extra_forbidden") else f" (got {_short(error['input'])})"
        message = "unexpected field; remove it" if error["type"] == "extra_forbidden" else error["msg"]
        if error["type"] == "missing":
            message = "required field is missing"
        lines.append(f"- {where}: {message}{got}")
    if len(errors) > MAX_REPORTED_ERRORS:
        lines.append(f"- ... and {len(errors) - MAX_REPORTED_ERRORS} more")
    return "\n".join(lines)


# --- raw JSON Schema (jsonschema, Draft 2020-12) ------------------------------------------------------------


class JsonSchemaValidator:
    """Validates arguments against a raw JSON Schema; the tool function receives them as one dict."""

    def __init__(self, tool_name: str, schema: dict[str, Any], *, ignore_extra: bool = False) -> None:
        """``ignore_extra``: arguments ``properties`` does not name are dropped before the check."""
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        if not isinstance(schema, dict):
            raise ConfigInvalid(f"tool {tool_name!r}: the parameters schema must be a JSON object")
        if schema.get("type", "object") != "object":
            raise ConfigInvalid(f"tool {tool_name!r}: the parameters schema must have type 'object'")
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise ConfigInvalid(f"tool {tool_name!r}: invalid JSON Schema: {exc.message}") from None
        self._validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
        self.context: ContextParameter | None = None  # the function receives the arguments alone
        # What the model is shown: always an object with properties, which every provider accepts.
        self.parameters: dict[str, Any] = {"type": "object", "properties": {}, **schema}
        properties = self.parameters["properties"]
        self._known = frozenset(properties) if ignore_extra and isinstance(properties, dict) else None
        """The names arguments are kept by when extra ones are ignored; ``None``: all are checked."""

    def validate(self, tool_name: str, arguments: dict[str, Any]) -> BoundArguments:
        if self._known is not None:
            arguments = {key: value for key, value in arguments.items() if key in self._known}
        errors = sorted(self._validator.iter_errors(arguments), key=lambda e: list(map(str, e.absolute_path)))
        if errors:
            lines = [f"Invalid arguments for tool {tool_name!r}:"]
            for error in errors[:MAX_REPORTED_ERRORS]:
                where = ".".join(str(part) for part in error.absolute_path) or "(arguments)"
                lines.append(f"- {where}: {error.message}")
            if len(errors) > MAX_REPORTED_ERRORS:
                lines.append(f"- ... and {len(errors) - MAX_REPORTED_ERRORS} more")
            raise InvalidArguments("\n".join(lines))
        return BoundArguments(args=(arguments,), kwargs={})


# --- helpers ------------------------------------------------------------------------------------------------

_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMAS = ("items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else")


def strip_titles(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema without the ``title`` keywords pydantic adds: tokens the model pays for and does not need.

    Walks schema positions only, so a property that is itself named ``title`` is kept.
    """
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            value = {k: strip_titles(v) if isinstance(v, dict) else v for k, v in value.items()}
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            value = [strip_titles(v) if isinstance(v, dict) else v for v in value]
        elif key in _SUBSCHEMAS and isinstance(value, dict):
            value = strip_titles(value)
        out[key] = value
    return out


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
