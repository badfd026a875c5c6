"""Tools: a name, a description, an argument schema and something to call.

``@tool`` turns a typed, documented Python function (sync or async) into a :class:`Tool`; its schema comes
from the signature and its descriptions from the docstring. :meth:`Tool.from_schema` wraps a raw JSON Schema
and a callable that takes the arguments as one dict, which is how tools from elsewhere (MCP) arrive.

A function whose first parameter is annotated ``RunContext[Deps]`` is called with the run's context first
(``tether.run_context``): that parameter is not in the schema, so the model neither sees nor sets it.

A tool ends the run by raising (or returning) :class:`Done`; it sends the model a plain error message by
raising :class:`~tether.errors.ToolError`. Any other exception becomes an error result naming its type.
:func:`render_output` turns any return value into the text the model reads, or says why it cannot.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Literal, Protocol, Self, TypedDict, TypeVar, Unpack, overload

import msgspec

from tether.errors import ConfigInvalid, ToolError
from tether.messages import Attachment, JsonObject, ToolResult
from tether.run_context import Done, RunContext
from tether.tools.docstrings import parse_docstring
from tether.tools.schema import ArgumentValidator, JsonSchemaValidator, SignatureValidator
from tether.tools.threads import run_in_tool_thread

__all__ = ["Done", "Tool", "ToolResult", "ToolServer", "tool"]

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SURROGATE = re.compile("[\ud800-\udfff]")
F = TypeVar("F", bound=Callable[..., Any])


class ToolServer(Protocol):
    """A server a tool is served by (an MCP server's connection): what ``Agent.health()`` checks for the tools
    that name it. ``name`` says which server; :meth:`check` asks it for something real (its tool list) and
    returns what it found in a few words, or raises a ``TetherError`` saying why it cannot."""

    @property
    def name(self) -> str: ...

    async def check(self) -> str: ...


class ToolOptions(TypedDict, total=False):
    """How a tool may be run; every ``Tool`` constructor takes these as keywords."""

    concurrent: bool
    """Safe to run at the same time as other concurrent calls of the same turn (default False)."""
    timeout: float | None
    """Seconds; overrides ``Limits.tool_timeout`` for this tool."""
    read_only: bool
    """Only looks, never changes anything: offered in read-only mode (default False)."""
    max_output: int | None
    """Characters of output the model gets before the middle is cut; overrides the agent's limit."""
    repeatable: bool
    """The same call can give a new result (a clock, a job's status): never answered from an earlier turn."""
    idempotent: bool
    """Safe to run twice (default True). In a durable run (``tether.durable``) a call interrupted by a crash
    runs again on recovery; a tool with ``idempotent=False`` (charging a card, sending an email) is answered
    instead with an error result saying the call may or may not have happened."""
    raw_arguments: bool
    """Arguments from the model that are not a JSON object are passed, as text, as the tool's one required
    ``str`` parameter, instead of being answered ``invalid_arguments`` (default False)."""
    server: ToolServer | None
    """The server that serves the tool, when it has one (MCP): ``Agent.health()`` checks each such server once."""
    extra_arguments: Literal["refuse", "ignore"]
    """Arguments the model sends that the tool does not take. ``"refuse"`` (the default): the call is answered
    ``invalid_arguments`` naming each one, so a model that misspelled an optional parameter learns it and asks
    again, where ignoring it would run the call with the default it meant to change. ``"ignore"``: they are
    dropped and the call runs (for a model that adds fields of its own making: ``reason``, ``thought``)."""
    approval: bool
    """A call needs a person's approval before it runs (default False): asked inline through the agent's
    ``approve=`` callback when it has one, else the run pauses with the call pending (``Agent.resume``)."""
    external: bool
    """The call's result comes from outside (default False): the function's signature and docstring give the
    schema, its body never runs; the run pauses with the call pending until a decision brings its result."""


class Tool:
    """Something the model can call. Calling the ``Tool`` itself calls the wrapped function directly."""

    nests: ClassVar[bool] = False
    """The tool runs an agent of its own (``agent.as_tool()``, ``tether.team``): a run that offers it relays the
    agent's events while it runs, and in a durable run its provider and tool calls are the run's steps, so the
    call itself is not made a step (``loop/nesting.py``)."""

    __slots__ = (
        "_validator",
        "approval",
        "concurrent",
        "description",
        "external",
        "extra_arguments",
        "function",
        "idempotent",
        "is_async",
        "max_output",
        "name",
        "raw_parameter",
        "read_only",
        "repeatable",
        "server",
        "timeout",
    )  # fmt: skip

    def __init__(
        self,
        name: str,
        description: str,
        function: Callable[..., Any],
        validator: ArgumentValidator,
        **options: Unpack[ToolOptions],
    ) -> None:
        timeout = options.get("timeout")
        max_output = options.get("max_output")
        if not _NAME.fullmatch(name):
            raise ConfigInvalid(f"tool name {name!r} must be 1-64 letters, digits, '_' or '-'")
        if timeout is not None and not timeout > 0:
            raise ConfigInvalid(f"tool {name!r}: timeout must be > 0 seconds, not {timeout!r}")
        if max_output is not None and max_output < 100:
            raise ConfigInvalid(f"tool {name!r}: max_output must be at least 100 characters, not {max_output!r}")
        if inspect.isasyncgenfunction(function) or inspect.isgeneratorfunction(function):
            raise ConfigInvalid(f"tool {name!r}: a generator cannot be a tool; return the whole result")
        self.name = name
        self.description = description
        self.function = function
        self.is_async = inspect.iscoroutinefunction(function)
        self.concurrent = options.get("concurrent", False)
        self.timeout = timeout
        self.read_only = options.get("read_only", False)
        self.max_output = max_output
        self.repeatable = options.get("repeatable", False)
        self.idempotent = options.get("idempotent", True)
        self.server = options.get("server")
        self.approval = options.get("approval", False)
        """Each call waits for a person's approval (``ToolOptions.approval``)."""
        self.external = options.get("external", False)
        """Each call's result comes from outside; the function never runs (``ToolOptions.external``)."""
        self.extra_arguments = extra_arguments(name, options)
        """What becomes of arguments the tool does not take (``ToolOptions.extra_arguments``): the validator
        was made to match."""
        self._validator = validator
        self.raw_parameter = _raw_parameter(name, validator.parameters) if options.get("raw_arguments") else None
        """The parameter that receives arguments that are not a JSON object (``raw_arguments=True``), else None."""

    @classmethod
    def from_function(
        cls,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        **options: Unpack[ToolOptions],
    ) -> Self:
        """A tool from a typed function; descriptions come from its docstring unless given."""
        # The raw docstring: inspect.getdoc's cleaning would flatten one that opens with its Args section.
        doc = parse_docstring(getattr(function, "__doc__", None) or inspect.getdoc(function))
        tool_name = name if name is not None else getattr(function, "__name__", None)
        if tool_name is None:
            raise ConfigInvalid(f"{function!r} has no __name__: pass name= to make it a tool")
        ignore = extra_arguments(tool_name, options) == "ignore"
        validator = SignatureValidator(tool_name, function, doc.params, ignore_extra=ignore)
        return cls(
            tool_name, description if description is not None else doc.description, function, validator, **options
        )

    @classmethod
    def from_schema(
        cls,
        name: str,
        description: str,
        parameters: JsonObject,
        function: Callable[[JsonObject], Any],
        **options: Unpack[ToolOptions],
    ) -> Tool:
        """A tool from a raw JSON Schema; ``function`` receives the validated arguments as one dict. With
        ``extra_arguments="ignore"``, arguments the schema's ``properties`` do not name are dropped before the
        check (whatever its ``additionalProperties`` says) and the function never sees them."""
        ignore = extra_arguments(name, options) == "ignore"
        return cls(name, description, function, JsonSchemaValidator(name, parameters, ignore_extra=ignore), **options)

    @property
    def parameters(self) -> JsonObject:
        """The JSON Schema of the arguments, as shown to the model."""
        return self._validator.parameters

    def raw_call(self, text: str) -> JsonObject | None:
        """The arguments for model arguments ``text`` that are not a JSON object, when this tool takes them
        (``raw_arguments=True``): ``text`` as its one required string parameter (a JSON string's value, when
        ``text`` is one), else ``None``."""
        if self.raw_parameter is None:
            return None
        try:
            value = msgspec.json.decode(text)
        except (ValueError, RecursionError):  # not JSON (or too deep to read): the text as it is
            value = text
        return {self.raw_parameter: value if isinstance(value, str) else text}

    @property
    def takes_context(self) -> bool:
        """The function's first parameter is a ``RunContext``: each call is handed the run's."""
        return self._validator.context is not None

    @property
    def deps_type(self) -> Any:
        """``Deps`` of the function's ``ctx: RunContext[Deps]`` (``None``: no context, or an untyped one)."""
        context = self._validator.context
        return context.deps_type if context is not None else None

    def bind(self, arguments: JsonObject, context: RunContext[Any] | None = None) -> Callable[[], Awaitable[Any]]:
        """Validate ``arguments`` and return the call, ready to await; raises ``InvalidArguments``. A tool that
        :attr:`takes_context` is called with ``context`` first.

        A synchronous function is run on a tool thread (``tools/threads.py``), never on the event loop.
        """
        bound = self._validator.validate(self.name, arguments)
        if self._validator.context is not None:
            call = functools.partial(self.function, context, *bound.args, **bound.kwargs)
        else:
            call = functools.partial(self.function, *bound.args, **bound.kwargs)  # one object, called in C
        if self.is_async:
            return call
        return functools.partial(run_in_tool_thread, call)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r}, concurrent={self.concurrent}, timeout={self.timeout})"


@overload
def tool(function: F, /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None, **options: Unpack[ToolOptions]
) -> Callable[[F], Tool]: ...
def tool(
    function: F | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    **options: Unpack[ToolOptions],
) -> Tool | Callable[[F], Tool]:
    """Make a function a tool: ``@tool``, or ``@tool(name=..., concurrent=True, timeout=5, read_only=True)``."""

    def wrap(fn: F) -> Tool:
        return Tool.from_function(fn, name=name, description=description, **options)

    return wrap(function) if function is not None else wrap


def extra_arguments(name: str, options: ToolOptions) -> Literal["refuse", "ignore"]:
    """The tool's ``extra_arguments`` option, checked: ``ConfigInvalid`` for anything but its two words."""
    value = options.get("extra_arguments", "refuse")
    if value not in ("refuse", "ignore"):
        raise ConfigInvalid(f"tool {name!r}: extra_arguments must be 'refuse' or 'ignore', not {value!r}")
    return value


def _raw_parameter(name: str, parameters: JsonObject) -> str:
    """The one required string parameter of a tool taking raw arguments; ``ConfigInvalid`` if it has not
    exactly one (the text needs one unambiguous place to go, and the call must be valid with it alone)."""
    required = parameters.get("required") or []
    properties = parameters.get("properties") or {}
    schema = properties.get(required[0]) if len(required) == 1 else None
    if isinstance(schema, dict) and schema.get("type") == "string":
        return str(required[0])
    found = ", ".join(map(str, required)) or "none"
    raise ConfigInvalid(
        f"tool {name!r}: raw_arguments=True needs exactly one required parameter, of type str, to receive the "
        f"text (required parameters: {found})"
    )


def render_output(value: Any) -> str:
    """A tool's return value as the text the model reads: strings as they are, anything else as JSON, and what
    JSON cannot hold (a self-referencing list, an arbitrary object) as its ``repr``.

    The text is always storable and sendable: lone surrogates (a file name that was not UTF-8) become U+FFFD.
    A value that neither JSON nor ``repr`` can render (an integer past Python's digit limit, nesting deeper
    than the interpreter's recursion limit, a ``__repr__`` that raises) raises :class:`ToolError` naming the
    value's type and why, which the model reads as a ``tool_failed`` result.
    """
    if isinstance(value, str):
        return utf8_safe(str.__str__(value))  # a str subclass becomes a plain str: its methods are not trusted
    if value is None:
        return "(no output)"
    try:
        if type(value) is int:  # as JSON writes it (digits only, nothing to repair), without the encoder's work
            return int.__repr__(value)
        return utf8_safe(_OUTPUT_ENCODER(value))
    except Exception as error:  # noqa: BLE001 - JSON could not hold it; repr may
        failure = error
    try:
        text = repr(value)
        if not isinstance(text, str):  # pragma: no cover - the interpreter refuses a __repr__ returning bytes
            raise TypeError("__repr__ did not return a string")
        return utf8_safe(str.__str__(text))
    except Exception as error:  # noqa: BLE001 - reported to the model as the tool's failure
        raise ToolError(
            f"The tool returned a value of type {_type_name(value)} that cannot be shown as text "
            f"(as JSON: {_reason(failure)}; as repr: {_reason(error)}). Return a string or plain JSON data."
        ) from None


def with_attachments(value: Any, reads: frozenset[str] | None = None) -> tuple[str, tuple[Attachment, ...]] | None:
    """A tool's return value that holds attachments (an :class:`~tether.messages.Attachment`, or a list or tuple of
    them and other values) as the text the model reads (the other values, rendered, a line each) and the
    attachments; ``None`` when it holds none. An attachment whose kind the model does not read (``reads``: its
    ``ModelInfo.input_kinds``) becomes a line of text saying so, never a silent drop."""
    items = [value] if type(value) is Attachment else list(value) if isinstance(value, list | tuple) else None
    if items is None or not any(type(item) is Attachment for item in items):
        return None
    lines: list[str] = []
    attachments: list[Attachment] = []
    for item in items:
        if type(item) is not Attachment:
            lines.append(render_output(item))
        elif reads is None or item.category in reads:
            attachments.append(item)
        else:
            lines.append(f"[{item!r}: not shown, the model cannot read {item.category}s]")
    return "\n".join(lines) or f"({len(attachments)} attached)", tuple(attachments)


def utf8_safe(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD, so that it encodes as UTF-8 (to a file, a database,
    an HTTP body); ``text`` itself when it already does, which is the common case and costs one encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def _type_name(value: Any) -> str:
    try:
        return type(value).__qualname__
    except Exception:  # noqa: BLE001 - a hostile metaclass
        return "value"


def _reason(error: BaseException) -> str:
    try:
        detail = str(error)
    except Exception:  # noqa: BLE001 - an exception whose __str__ raises
        detail = ""
    name = type(error).__name__
    return f"{name}: {detail[:200]}" if detail else name


def _to_jsonable(value: Any) -> Any:
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value)


def _output_encoder() -> Callable[[Any], str]:
    """``json.dumps(value, ensure_ascii=False, default=_to_jsonable)`` without building an encoder per result: the
    text the model reads of a value is the standard library's (``", "`` and ``": "`` between items, as people
    write JSON), which ``msgspec`` does not write. It does not check for cycles: a value that holds itself
    raises ``RecursionError`` and is shown by its ``repr``."""
    encoder = json.JSONEncoder(ensure_ascii=False, default=_to_jsonable, check_circular=False)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # an interpreter without the C accelerator
        return encoder.encode
    iterencode = make(None, encoder.default, json.encoder.encode_basestring, None, ": ", ", ", False, False, True)

    def encode(value: Any) -> str:
        return "".join(iterencode(value, 0))

    return encode


_OUTPUT_ENCODER = _output_encoder()
