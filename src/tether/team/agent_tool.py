"""An agent as a tool: ``agent.as_tool(name=..., description=..., input_type=...)``.

A call of the tool runs the agent (a *sub-run*) as part of the calling run, which shares with it what
``loop/nesting.py`` says (its side of it). The contract:

* **Input.** Plain text by default: one ``input`` argument, the sub-run's prompt. With ``input_type=`` (a pydantic
  model, a dataclass, a ``TypedDict``) the model fills its fields, and the sub-run's prompt is the value as JSON.
* **Context.** The sub-run is given the calling run's ``deps`` (checked against the agent's ``deps_type``).
* **One budget.** The sub-run's limits are its agent's, each lowered to what the calling run has left when it
  starts: ``max_cost_usd``, ``max_tool_calls`` (none left: the sub-run may only answer, tools off) and the calling
  run's deadline (``run_timeout``). What it used is added to the calling run when it ends: the calling run's
  ``result.usage`` and ``result.cost`` include it, its tool calls count against the calling run's
  ``max_tool_calls``, and its turn records are the call's ``ToolCallRecord.turn_records``. Under a budget the
  agent's price must be known (``price=``): a sub-run whose cost cannot be counted is refused.
* **How it ends** decides the call's result:

  - ``complete`` or ``done_tool``, not degraded: its output is the result (a typed output as JSON, else its text);
  - ``budget`` or ``cancelled``: the calling run stops too, now, with the same reason (the call's result is an
    error saying why): a budget spent below is spent above, whatever the calling model would make of it;
  - any other stop (``error``, ``timeout``, ``max_turns``, ``max_tool_calls``, ``consecutive_errors``,
    ``invalid_response``, ``invalid_output``, ``ask_user``), or an answer still degraded (cut at the output
    limit): an error result (``tool_failed``) saying how it stopped and what it said last. A sub-agent's failure
    reaches the calling model as a failure, never as a confident answer. So does a sub-run that cannot start;
  - ``paused`` (a call of the sub-agent needs an approval no one there can give, or is external): an error result
    naming the calls. A sub-run cannot pause its calling run: give the sub-agent an ``approve=`` callback, or
    offer those tools to the calling agent, whose run can pause (``tether.paused``).

* **Cancelling.** When the call is cancelled (the calling run cancelled or past its deadline, the call past its
  ``timeout``), the sub-run is told so through its own interrupter and ends ``cancelled``, with a valid
  transcript and what it used counted; the call's cancellation then goes on as the calling run's
  (``loop/interrupts.py``). The sub-run runs in a task of its own, so each run cancels only its own waits.
* **Events and spans.** The sub-run's events reach the calling run's stream and sinks as
  ``SubAgentEvent``\\ s (``path``: the tools' names, outermost first); its ``invoke_agent`` span is a child of the
  call's ``execute_tool`` span (``telemetry/otel.py``).
* **Handoffs and guardrails.** A sub-run of an agent that has them goes through the relay (``relay.py``) as
  any run of it does: an input guardrail that blocks is an error result naming it, a handoff's target answers
  the call (under the same lowered limits) and its ``HandoffTaken`` is relayed as the others are.
* **Durable runs.** The sub-run's provider and tool calls are steps of the calling run's workflow, named after
  the call (``agent:{tool}:{call_id}/model:...``), so a crash inside it is recovered without repeating a finished
  step; the call itself is not a step.

Outside a run (the tool's function called by hand, or by an executor that runs no agents) the agent simply runs,
with its own limits, and nothing is shared.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Unpack

from tether.errors import ConfigInvalid, InvalidArguments, ToolError
from tether.events import RunEvent, RunResult, SubAgentEvent
from tether.limits import Limits, StopReason
from tether.loop.engine import Run
from tether.loop.interrupts import Interrupt, Interrupter
from tether.loop.nesting import NestedSteps, Nesting
from tether.loop.progress import RunProgress
from tether.loop.spec import RunSpec
from tether.run_context import RunContext, check_deps
from tether.tools.base import Tool, ToolOptions
from tether.tools.schema import BoundArguments, ContextParameter, strip_titles

if TYPE_CHECKING:
    from tether.loop.choice import ToolChoiceOption
    from tether.loop.sinks import EventSink
    from tether.messages import ToolCall
    from tether.team.guardrails import Guardrail
    from tether.team.handoffs import Handoff
    from tether.team.relay import Member, Relay

__all__ = ["PROPAGATED", "AgentTool", "agent_tool", "shared_limits"]

PROPAGATED = frozenset({StopReason.BUDGET, StopReason.CANCELLED})
"""The stops of a sub-run that stop the calling run too; any other failure is an error result."""
ANSWERED = frozenset({StopReason.COMPLETE, StopReason.DONE_TOOL})
"""The stops of a sub-run whose output (unless degraded) is the call's result."""
_LEAST_SECONDS = 0.001
"""The deadline a sub-run gets when the calling run's has passed (its own alarm is about to stop it)."""


class Delegate(Protocol):
    """What a tool needs of the agent it runs (an ``Agent``): its runs' spec, deps checks and sinks."""

    @property
    def _deps_checks(self) -> Sequence[tuple[Any, str]]: ...
    @property
    def _sinks(self) -> tuple[EventSink, ...]: ...
    @property
    def _handoffs(self) -> tuple[Handoff, ...]: ...
    @property
    def _input_guardrails(self) -> tuple[Guardrail, ...]: ...
    @property
    def _output_guardrails(self) -> tuple[Guardrail, ...]: ...

    def _team_member(self, spec: RunSpec | None = None) -> Member: ...

    def _run_spec(
        self, tool_choice: ToolChoiceOption | None, instructions: str | None = None, output_type: Any = None
    ) -> RunSpec: ...


class AgentTool(Tool):
    """A tool that runs an agent (see the module docstring); ``agent.as_tool()`` makes one."""

    nests: ClassVar[bool] = True
    __slots__ = ("agent",)

    agent: Delegate
    """The agent a call runs."""


def agent_tool(
    agent: Delegate,
    *,
    name: str,
    description: str | None = None,
    input_type: type[Any] | None = None,
    **options: Unpack[ToolOptions],
) -> AgentTool:
    """``agent`` as a tool named ``name`` (see the module docstring). ``description`` is what the calling model
    reads of it (by default, that it asks the agent); ``input_type`` the type of its input (``None``: text)."""
    validator = _InputValidator(name, input_type)
    description = description if description is not None else f"Ask the {name} agent; it answers with its result."

    async def run_agent(ctx: RunContext[Any] | None, value: Any) -> Any:
        return await _sub_run(made, ctx, validator.prompt(value))

    made = AgentTool(name, description, run_agent, validator, **options)
    made.agent = agent
    return made


class _InputValidator:
    """The arguments of an agent's tool: ``{"input": text}``, or the fields of its ``input_type``."""

    def __init__(self, tool_name: str, input_type: type[Any] | None) -> None:
        self.context: ContextParameter | None = ContextParameter("ctx", None)
        self._adapter: Any = None
        if input_type is None or input_type is str:
            self.parameters: dict[str, Any] = {
                "type": "object",
                "properties": {"input": {"type": "string", "description": "What to ask the agent."}},
                "required": ["input"],
                "additionalProperties": False,
            }
            return
        from pydantic import TypeAdapter

        try:
            self._adapter = TypeAdapter(input_type)
            schema = strip_titles(self._adapter.json_schema())
        except Exception as error:  # noqa: BLE001 - pydantic's own errors, said in tether's terms
            raise ConfigInvalid(f"tool {tool_name!r}: input_type {input_type!r} has no JSON Schema: {error}") from None
        if schema.get("type") != "object":
            raise ConfigInvalid(
                f"tool {tool_name!r}: input_type must have fields (a pydantic model, a dataclass or a TypedDict), "
                f"not {input_type!r}"
            )
        self.parameters = schema

    def validate(self, tool_name: str, arguments: dict[str, Any]) -> BoundArguments:
        if self._adapter is None:
            text = arguments.get("input")
            if not isinstance(text, str) or set(arguments) != {"input"}:
                raise InvalidArguments(f"Invalid arguments for tool {tool_name!r}: give one string, 'input'.")
            return BoundArguments((text,), {})
        from pydantic import ValidationError

        try:
            return BoundArguments((self._adapter.validate_python(arguments),), {})
        except ValidationError as error:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(arguments)'}: {e['msg']}" for e in error.errors())
            raise InvalidArguments(f"Invalid arguments for tool {tool_name!r}: {problems}") from None

    def prompt(self, value: Any) -> str:
        """The sub-run's prompt for a validated input."""
        if self._adapter is None:
            return str(value)
        return str(self._adapter.dump_json(value).decode())


async def _sub_run(tool: AgentTool, ctx: RunContext[Any] | None, prompt: str) -> Any:
    """Run ``tool``'s agent on ``prompt`` as part of the run ``ctx`` serves; the call's result (see the module
    docstring)."""
    view = ctx._view if ctx is not None else None
    nesting = view.nesting if isinstance(view, RunProgress) else None
    call = ctx.tool_call if ctx is not None else None
    run, interrupter = _opened(tool, ctx, prompt, nesting, call)
    result = await _driven(run, interrupter, tool.name, call, nesting)
    if result.stop_reason in ANSWERED and not result.degraded:
        return result.output
    if result.stop_reason in PROPAGATED and nesting is not None:
        nesting.stop(Interrupt(result.stop_reason, f"the agent {tool.name!r} stopped: {result.detail}"))
    raise ToolError(_failure(tool.name, result))


def _opened(
    tool: AgentTool, ctx: RunContext[Any] | None, prompt: str, nesting: Nesting | None, call: ToolCall | None
) -> tuple[Run | Relay, Interrupter]:
    """The sub-run, made (not started): the agent's spec under what the calling run has left; through the relay
    (``relay.py``) when the agent has handoffs or guardrails, its later legs under the same limits."""
    agent, deps = tool.agent, ctx.deps if ctx is not None else None
    for expected, where in agent._deps_checks:
        check_deps(deps, expected, where)
    steps = None
    bound: Callable[[RunSpec], RunSpec] | None = None
    spec = agent._run_spec(None)
    if nesting is not None and call is not None:
        cost_left, calls_left = nesting.cost_left(), nesting.calls_left()
        if cost_left is not None and spec.price is None:
            raise ConfigInvalid(
                f"the agent {tool.name!r} runs under a budget (max_cost_usd) but its model's price is unknown: "
                "give it price=Price(...)"
            )
        if cost_left is not None and cost_left <= 0:
            nesting.stop(Interrupt(StopReason.BUDGET, "the budget was spent before the agent could start"))
            raise ToolError(f"The agent {tool.name!r} was not run: the budget is spent.")
        seconds_left = nesting.seconds_left()

        def lowered(spec: RunSpec) -> RunSpec:
            return replace(spec, limits=shared_limits(spec.limits, cost_left, calls_left, seconds_left))

        bound = lowered
        spec = bound(agent._run_spec("none") if calls_left == 0 else spec)  # no tool call left: it may only answer
        if nesting.steps is not None:
            steps = NestedSteps(nesting.steps, tool.name, call.id)
    interrupter = Interrupter()
    if not (agent._handoffs or agent._input_guardrails or agent._output_guardrails):
        return Run(spec, prompt, (), interrupter, agent._sinks, steps=steps, deps=deps), interrupter
    if steps is not None and agent._handoffs:
        raise ConfigInvalid("a durable run cannot hand off to another agent yet: run it without handoffs")
    from tether.team.relay import Relay

    relay = Relay(agent._team_member(spec), prompt, (), interrupter, agent._sinks, steps=steps, deps=deps, bound=bound)
    return relay, interrupter


def shared_limits(own: Limits, cost_left: float | None, calls_left: int | None, seconds_left: float | None) -> Limits:
    """``own`` limits, each no looser than what the calling run has left (``None``: it has no such limit)."""
    changes: dict[str, Any] = {}
    if cost_left is not None:
        changes["max_cost_usd"] = cost_left if own.max_cost_usd is None else min(own.max_cost_usd, cost_left)
    if calls_left:
        changes["max_tool_calls"] = calls_left if own.max_tool_calls is None else min(own.max_tool_calls, calls_left)
    if seconds_left is not None:
        seconds_left = max(seconds_left, _LEAST_SECONDS)
        changes["run_timeout"] = seconds_left if own.run_timeout is None else min(own.run_timeout, seconds_left)
    return replace(own, **changes) if changes else own


async def _driven(
    run: Run | Relay, interrupter: Interrupter, name: str, call: ToolCall | None, nesting: Nesting | None
) -> RunResult[Any]:
    """The sub-run, driven to its end in a task of its own, its events relayed; what it used counted. A
    cancellation of the call is passed on to it, and raised again once it has ended."""
    call_id = call.id if call is not None else ""
    relay = nesting.relay if nesting is not None else None

    async def drive() -> RunResult[Any]:
        events = run.events()
        try:
            async for event in events:
                if relay is not None:
                    relay(_tagged(name, call_id, event))
        finally:
            await events.aclose()
        assert run.result is not None, "a run always ends with a result"
        return run.result

    task = asyncio.get_running_loop().create_task(drive())
    try:
        result = await asyncio.shield(task)
    except asyncio.CancelledError:
        pending = nesting.interrupter.pending if nesting is not None else None
        why = Interrupt(StopReason.CANCELLED, f"the call of the agent {name!r} was cancelled")
        interrupter.request(Interrupt(pending.reason, pending.detail) if pending is not None else why)
        try:
            result = await task
        except BaseException:
            task.cancel()
            raise
        _count(nesting, call_id, run, result)
        raise
    _count(nesting, call_id, run, result)
    return result


def _count(nesting: Nesting | None, call_id: str, run: Run | Relay, result: RunResult[Any]) -> None:
    if nesting is not None:
        tool_calls = run.guard.tool_calls if isinstance(run, Run) else run.tool_calls
        nesting.ended(call_id, result.usage, result.cost, tool_calls, result.turn_records)


def _tagged(name: str, call_id: str, event: RunEvent) -> SubAgentEvent:
    """``event`` of the sub-run as the calling run relays it: its path starts with this tool."""
    if type(event) is SubAgentEvent:
        return SubAgentEvent((name, *event.path), (call_id, *event.call_ids), event.event)
    return SubAgentEvent((name,), (call_id,), event)


def _failure(name: str, result: RunResult[Any]) -> str:
    """The error the calling model reads of a sub-run that did not answer."""
    how = f"{result.stop_reason}, degraded" if result.stop_reason in ANSWERED else str(result.stop_reason)
    said = result.text.strip()
    message = f"The agent {name!r} did not finish its task ({how}: {result.detail})."
    if result.stop_reason is StopReason.ASK_USER:
        return f"{message} It asks: {said}"
    if result.stop_reason is StopReason.PAUSED:
        names = ", ".join(dict.fromkeys(call.tool for call in result.pending))
        return (
            f"{message} Its calls of {names} wait for a decision from outside, and an agent run as a tool cannot "
            "pause for one: those calls were not run."
        )
    return f"{message} What it said last: {said}" if said else message
