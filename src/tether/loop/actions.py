"""JSON action mode: tool use for models that cannot call tools natively.

The contract
------------
* The system prompt gets a section stating the protocol and every tool with its argument schema. The model
  answers each turn with exactly one JSON object, an *action*:
  ``{"type": "answer", "text": ...}``, ``{"type": "tool_call", "name": ..., "arguments": {...}}`` or
  ``{"type": "ask_user", "question": ...}``. The answer comes first, and is called an answer: named
  ``final``, a 135M model wrote ``tool`` after ``{"type": "`` for most questions, ``read(path='Paris')`` for
  the capital of France; named ``answer``, it answers what it can (the type a model writes is read as the
  ``final`` action either way, and ``"final"`` is still read, as it was written before).
* When the provider can constrain its output to a JSON Schema (``ModelInfo.supports_json_schema``: the local
  model through llama.cpp's grammar, OpenAI-compatible servers whose profile says so), the answer is generated
  under :func:`action_schema`: the union of ``answer``, ``ask_user`` and one ``tool_call`` variant per tool
  with that tool's own argument schema, so a small model cannot name an unknown tool or mistype arguments.
* The answer is read tolerantly (code fences and prose around the object are skipped) but validated strictly;
  an answer that is not one valid action is rejected like any unusable answer: one corrective retry, then the
  run stops as ``invalid_response``. A ``tool_call`` whose arguments nest deeper than
  ``MAX_ARGUMENT_DEPTH`` is kept without them and answered ``invalid_arguments``, as in native mode; an
  answer too deep to read at all is rejected.
* The transcript is the same as in native mode: a ``tool_call`` action is stored as a ``ToolCall`` and its
  results as a ``tool`` message, so the history can be continued by any provider. Only what the model is
  sent changes (:func:`as_text`): calls become the JSON it wrote, results become user messages it can read.
* An answer (the ``final`` action) ends the run with its text; ``ask_user`` ends it with
  ``StopReason.ASK_USER`` and the question as the text. Guards, events and sessions are those of native
  mode. A run with a typed output (``output.py``) asks for ``{"type": "final", "output": {...}}`` instead,
  ``output`` under the output's schema, and the answer's text is that JSON, read and validated as a typed
  output is.
* When only an answer is possible (the tools-off call after a limit, the answer asked for after a repeated
  call, or a run whose tool choice is ``"none"``), the prompt and the schema allow ``final`` alone, and any
  text is the answer: a ``final`` action is unwrapped, anything else that is not a ``tool_call`` action is
  taken as written. A model that cannot follow the protocol still gets its answer through.
* A tool choice that requires a call (``"required"``, or a forced tool) is asked for in the system prompt,
  and the schema then allows only ``tool_call`` actions (of that tool). Without a schema the prompt is all
  there is: an answer the model gives anyway is taken, as a provider's would be.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec.structs import replace

from tether.loop.accumulator import AccumulatedTurn
from tether.loop.arguments import MAX_ARGUMENT_DEPTH, bounded_raw, nests_deeper
from tether.messages import Message, Text, ToolCall, ToolResult
from tether.providers.base import ForceTool, Request, ToolChoice, ToolDefinition

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)
FINAL_REQUEST = "Give your final answer now."
"""The request of the tools-off call that ends a run stopped by a limit, in JSON action mode."""
ANSWER = "answer"
"""The type of the action that answers (the ``final`` action), as the prompt and the schema name it."""
FINAL_LINE = (
    '{"type": "answer", "text": "..."} to answer the user, the text being your answer. When you can answer '
    "without a tool (a question of knowledge, a greeting, a translation), answer at once;"
)
TYPED_CALL_LINE = '{"type": "tool_call", "name": "<tool>", "arguments": {...}} to call a tool and see its result;'
CALL_LINE = (
    '{"type": "tool_call", "name": "<tool>", "arguments": {...}} to call a tool, only when the answer needs '
    "what it gives (a file's content, a command's output, an exact calculation), and see its result;"
)


class CallAction(msgspec.Struct, frozen=True, gc=False):
    name: str
    arguments: dict[str, Any]


class FinalAction(msgspec.Struct, frozen=True, gc=False):
    text: str


class AskAction(msgspec.Struct, frozen=True, gc=False):
    question: str


Action = CallAction | FinalAction | AskAction


class ActionError(ValueError):
    """The answer is not one valid action; the message says why, for the model's correction."""


def action_schema(
    tools: Sequence[ToolDefinition],
    *,
    final_only: bool = False,
    calls_only: bool = False,
    output: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON Schema of one action: ``final``, ``ask_user`` and one ``tool_call`` variant per tool; or, when
    only an answer is possible, ``final`` alone; or, when a call is required, the ``tool_call`` variants alone.
    ``output``: the schema of a typed output, which ``final`` then carries as ``output`` instead of a text."""
    if output is not None:
        body = {key: value for key, value in output.items() if key != "$defs"}
        final = _object({"type": {"const": "final"}, "output": body})  # see _typed_prompt
        if "$defs" in output:
            final["$defs"] = output["$defs"]
    else:
        final = _object({"type": {"const": ANSWER}, "text": {"type": "string"}})
    if final_only:
        return {"anyOf": [final]}
    variants = [] if calls_only else [final, _object({"type": {"const": "ask_user"}, "question": {"type": "string"}})]
    for tool in tools:
        arguments = {"type": "object", "properties": {}, **tool.parameters}
        variants.append(_object({"type": {"const": "tool_call"}, "name": {"const": tool.name}, "arguments": arguments}))
    # anyOf rather than oneOf: the variants exclude each other by their "type" already, and anyOf is what
    # every constrained decoder accepts (OpenAI's structured outputs, vLLM, llama.cpp).
    return {"anyOf": variants}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def system_prompt(
    system: str | None,
    tools: Sequence[ToolDefinition],
    *,
    final_only: bool = False,
    must_call: ToolChoice = "auto",
    output: dict[str, Any] | None = None,
) -> str:
    """The system prompt with the protocol and the tools appended; ``must_call`` (``"required"`` or a forced
    tool) adds that this answer must be a call (to that tool); ``output``, a typed output's schema, that the final
    answer is an object under it."""
    if output is not None:
        return _typed_prompt(system, tools, final_only=final_only, must_call=must_call, output=output)
    if final_only:
        # no placeholder such as "<your answer>" in the example: a small model copies it as its answer
        protocol = (
            'Reply with exactly one JSON object and nothing else: {"type": "answer", "text": "..."}, the text '
            "being your answer."
        )
        return f"{system}\n\n{protocol}" if system else protocol
    # The answer first, and said to be the choice whenever no tool is needed: a small model asked "What is
    # the capital of France?" otherwise calls the first tool it was shown (read(path='Paris')) again and again.
    lines = [
        "Reply with exactly one JSON object and nothing else. It is one of:",
        FINAL_LINE,
        '{"type": "ask_user", "question": "<question>"} to ask the user for something you need.',
    ]
    if tools:
        lines.insert(2, CALL_LINE)
        lines.append("Tools:")
        for tool in tools:
            schema = json.dumps(tool.parameters.get("properties", {}), ensure_ascii=False, separators=(", ", ": "))
            lines.append(f"- {tool.name}: {tool.description or '(no description)'} Arguments: {schema}")
        lines.append("Once a tool result answers the question, reply with a final answer that uses it.")
    if isinstance(must_call, ForceTool):
        lines.append(f"Now you must call the tool {must_call.name}: reply with a tool_call action that names it.")
    elif must_call == "required":
        lines.append("Now you must call a tool: reply with a tool_call action.")
    protocol = "\n".join(lines)
    return f"{system}\n\n{protocol}" if system else protocol


def _typed_prompt(
    system: str | None,
    tools: Sequence[ToolDefinition],
    *,
    final_only: bool,
    must_call: ToolChoice,
    output: dict[str, Any],
) -> str:
    """:func:`system_prompt` for a run with a typed output: ``final`` carries ``output``, an object under its
    schema."""
    schema = json.dumps(output, ensure_ascii=False, separators=(", ", ": "))
    if final_only:
        protocol = (
            'Reply with exactly one JSON object and nothing else: {"type": "final", "output": {...}}, "output" '
            f"being your answer as an object matching this JSON Schema: {schema}"
        )
        return f"{system}\n\n{protocol}" if system else protocol
    # A typed output is mostly work on the tools' results (a sum calculated, a file's facts extracted): the
    # calls come first and the answer is the "final" action, as before answers came first (the embedded model,
    # shown an "answer" first, writes {"sum": 17} for 17+25 instead of calculating).
    base = system_prompt(system, tools, must_call=must_call).replace(
        f"{FINAL_LINE}\n{CALL_LINE}", f"{TYPED_CALL_LINE}\n{FINAL_LINE}"
    )
    return base.replace(
        FINAL_LINE,
        '{"type": "final", "output": {...}} to give your final answer, "output" being an object that matches '
        f"this JSON Schema: {schema};",
    )


def read_action(text: str) -> Action:
    """The action in a model's answer; raises :class:`ActionError` saying what is wrong."""
    data = _first_object(text)
    kind = data.get("type")
    if kind == "tool_call":
        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise ActionError('a "tool_call" action needs a "name" string')
        arguments = data.get("arguments", {})
        if not isinstance(arguments, dict):
            raise ActionError('the "arguments" of a "tool_call" action must be a JSON object')
        return CallAction(name, arguments)
    if kind in (ANSWER, "final"):
        if "output" in data:  # a typed output: its JSON is the answer's text, validated as the output
            return FinalAction(json.dumps(data["output"], ensure_ascii=False))
        if not isinstance(data.get("text"), str):
            raise ActionError(f'the "{kind}" action needs a "text" string')
        return FinalAction(data["text"])
    if kind == "ask_user":
        if not isinstance(data.get("question"), str):
            raise ActionError('an "ask_user" action needs a "question" string')
        return AskAction(data["question"])
    raise ActionError(f'"type" must be "answer", "tool_call" or "ask_user", not {kind!r}')


def _first_object(text: str) -> dict[str, Any]:
    """The first JSON object in ``text``: inside a code fence if there is one, after any prose."""
    fenced = _FENCE.search(text)
    source = fenced.group(1) if fenced else text
    decoder = json.JSONDecoder(strict=False)  # a raw line break in a string: llama.cpp's JSON grammar allows it
    for start in (i for i, char in enumerate(source) if char == "{"):
        try:
            value, _ = decoder.raw_decode(source, start)
        except ValueError:
            continue
        except RecursionError:
            raise ActionError(
                f"the JSON object in the answer is nested too deeply to read; arguments may nest at most "
                f"{MAX_ARGUMENT_DEPTH} levels"
            ) from None
        if isinstance(value, dict):
            return value
    if not source.strip():
        raise ActionError("the answer was empty")
    raise ActionError("no complete JSON object was found in the answer")


_CUT_FINAL = re.compile(r'\A\s*(?:```(?:json)?\s*)?\{\s*"type"\s*:\s*"(?:answer|final)"\s*,\s*"text"\s*:\s*"')
_UNESCAPED_QUOTE = re.compile(r'(?<!\\)(?:\\\\)*"')


def cut_final_text(text: str) -> str | None:
    """The text of a ``final`` action cut off before its end (the output limit came first), or ``None``
    when ``text`` does not begin like one: the answer written so far is the answer, not its JSON wrapping."""
    opening = _CUT_FINAL.match(text)
    if opening is None:
        return None
    body = text[opening.end() :]
    end = _UNESCAPED_QUOTE.search(body)
    body = body[: end.end() - 1] if end else body
    for trim in range(min(len(body), 6) + 1):  # an escape cut in the middle (\u00) is dropped
        try:
            decoded: str = json.loads(f'"{body[: len(body) - trim]}"', strict=False)
        except ValueError:
            continue
        return decoded.strip() or None
    return None


def as_text(messages: Sequence[Message]) -> tuple[Message, ...]:
    """The conversation as a model without native tools reads it: calls as the JSON actions it wrote,
    results as user messages."""
    out: list[Message] = []
    for message in messages:
        calls = message.tool_calls
        results = message.tool_results
        if calls:
            parts: list[Text] = [Text(_action_json(call)) for call in calls]
            out.append(Message("assistant", tuple(parts)))
        elif results:
            out.append(Message.user("\n\n".join(_result_text(result) for result in results)))
        else:
            out.append(message)
    return tuple(out)


def _action_json(call: ToolCall) -> str:
    action = {"type": "tool_call", "name": call.name, "arguments": call.arguments or {}}
    return json.dumps(action, ensure_ascii=False)


def _result_text(result: ToolResult) -> str:
    if result.is_error:
        return f"Tool {result.name} failed: {result.content}"
    return f"Tool {result.name} returned: {result.content}"


@dataclass(slots=True)
class Interpreted:
    """A turn read as an action: the turn as the transcript keeps it, or why it cannot be used (the loop's own,
    made once a call and never changed: not frozen, which would cost a descriptor call per field)."""

    turn: AccumulatedTurn
    problem: str | None = None
    shown: str | None = None
    """Text for the host to see (the answer or the question): the raw JSON is not streamed in this mode."""
    asks_user: bool = False


class ActionProtocol:
    """Builds the requests of a run in JSON action mode and reads its answers as actions."""

    __slots__ = ("_call_id", "_output", "_system", "_tools", "_use_schema", "_variants")

    def __init__(
        self,
        system: str | None,
        tools: tuple[ToolDefinition, ...],
        *,
        use_schema: bool,
        call_id: Callable[[], str] | None = None,
        output: dict[str, Any] | None = None,
    ) -> None:
        self._system = system
        self._output = output
        """A typed output's schema: ``final`` carries it (``None``: a text)."""
        self._call_id = call_id or _random_call_id
        """Makes the id of each call read from an action (the run's: the same on every execution of a durable
        run)."""
        self._tools = tools
        self._use_schema = use_schema
        self._variants: dict[ToolChoice, tuple[str, dict[str, Any]]] = {}
        """System prompt and action schema per tool choice, made once each."""

    def request(
        self,
        history: tuple[Message, ...],
        extra: Message | None,
        *,
        final: bool,
        ask: Message | None = None,
        choice: ToolChoice = "auto",
        **options: Any,
    ) -> Request:
        """A request without native tools: the protocol in the system prompt, the history as text, and the
        action schema when the provider can constrain its output to one; ``choice`` is the request's tool
        choice (``"none"``: a final answer alone; ``"required"`` or a forced tool: a call).

        The last call after a limit or a repeated turn (``final``) asks for the answer in a few words: a small
        model tends to copy a longer instruction into its answer. ``ask`` replaces that request (a compaction's
        summary). It keeps the system prompt of the run's other turns (only the schema allows ``final`` alone), so
        that a model that keeps what it last read (the embedded one) reuses the prompt and the history as they
        are, and evaluates only the request. ``ask`` is also the request to go on with an answer cut at the output
        limit (``continuation.py``).
        """
        if final:
            extra = ask or Message.user(FINAL_REQUEST)
            prompt, schema = self._variant("auto")[0], self._variant("none")[1]
        else:
            prompt, schema = self._variant(choice)
        messages = as_text(history) + ((extra,) if extra is not None else ())
        return Request(messages=messages, system=prompt, json_schema=schema if self._use_schema else None, **options)

    def _variant(self, choice: ToolChoice) -> tuple[str, dict[str, Any]]:
        made = self._variants.get(choice)
        if made is None:
            tools, system = self._tools, self._system
            if isinstance(choice, ForceTool):
                tools = tuple(tool for tool in tools if tool.name == choice.name)
            output = self._output
            if choice == "none":
                made = (
                    system_prompt(system, tools, final_only=True, output=output),
                    action_schema(tools, final_only=True, output=output),
                )
            elif choice == "auto":
                made = system_prompt(system, tools, output=output), action_schema(tools, output=output)
            else:
                made = (
                    system_prompt(system, self._tools, must_call=choice, output=output),
                    action_schema(tools, calls_only=True, output=output),
                )
            self._variants[choice] = made
        return made

    def interpret(self, turn: AccumulatedTurn, *, final: bool = False, continuing: bool = False) -> Interpreted:
        """``turn`` with its text read as an action (a tool call becomes a ``ToolCall`` part); when only an
        answer is possible (``final``), text that is no action is the answer as written. A ``final`` action cut
        off by the output limit is the answer written so far (the loop then asks the model to go on with it);
        ``continuing``: this is more of such an answer, whose text that is no action is kept exactly, its first
        space included."""
        try:
            action: Action = read_action(turn.text)
        except ActionError as error:
            cut = cut_final_text(turn.text)  # a final action the output limit cut is an answer cut there
            if not final and (cut is None or turn.finish_reason != "length"):
                return Interpreted(turn, problem=f"the answer was not one valid JSON action: {error}")
            action = FinalAction(cut or (turn.text if continuing else turn.text.strip()))
        kept = tuple(part for part in turn.message.parts if type(part) is not Text)
        if isinstance(action, CallAction):
            if final:
                return Interpreted(turn, problem="a tool call was asked for when only a final answer is possible")
            call_id = self._call_id()
            if nests_deeper(action.arguments, MAX_ARGUMENT_DEPTH):  # answered invalid_arguments, like native calls
                call = ToolCall(call_id, action.name, None, bounded_raw(turn.text))
            else:
                arguments = json.dumps(action.arguments, ensure_ascii=False)
                call = ToolCall(call_id, action.name, action.arguments, arguments)
            message = Message("assistant", (*kept, call))
            return Interpreted(replace(turn, message=message, tool_calls=(call,)))
        text = action.text if isinstance(action, FinalAction) else action.question
        message = Message("assistant", (*kept, Text(text)))
        return Interpreted(replace(turn, message=message), shown=text, asks_user=isinstance(action, AskAction))


def _random_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"
