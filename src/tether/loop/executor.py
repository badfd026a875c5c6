"""ToolExecutor: one turn's tool calls, validated, run under their timeouts, answered in the model's order.

Each call goes: look up -> validate -> run with a timeout -> ``ToolResult``. Every failure that is the
model's fault becomes an error result the model reads (``tool_not_found`` lists the tools that exist, in
words the host may choose with ``Agent(unknown_tool=...)``: an assistant answers in its own envelope;
``invalid_arguments`` names the fields; ``tool_failed`` gives the exception's type and message;
``tool_timeout`` says how long it waited) and never an exception out of the loop.

Calls run one after the other by default, which keeps side effects in the order the model asked for.
Consecutive calls of tools marked ``concurrent=True`` (or all calls, with ``concurrent_tools=True``) run
together in a ``TaskGroup``, at most ``max_concurrency`` at a time; their events and results still come in
the model's order. A tool that raises or returns :class:`~tether.tools.base.Done` ends the run: the calls
after it are not run and get a ``cancelled`` result saying why.

Before a call runs, :class:`~tether.tools.permissions.Permissions` may refuse it (the mode, the deny list, the
host's hook or the user asked through it): the model gets a ``permission_denied`` result. A call that waits on a
decision from outside (an approval no one here can give, an external tool's) is deferred instead: it is not run,
gets no event, and stays in ``ToolBatch.pending`` for the run to pause on (``pausing.py``); the hook and the
approver are asked before a group's calls are announced (:meth:`ToolExecutor.permit`). After it ran, an
output longer than the cache's threshold is kept whole in the run's
:class:`~tether.tools.output_cache.OutputCache` and the model gets its preview (head, tail and a reference
it can read the rest by; never longer than the tool's ``max_output`` either). Without a cache, or for an
output too long even to keep, the limit (the tool's ``max_output``, else the agent's) is the last line of
defence: the output is cut in the middle, head and tail kept, with a marker saying how much was cut. Either
way a tool cannot flood the model's context. Only what a tool returned or raised is kept: the executor's
own answers (refusals, a ``Done`` message) are only cut, and so are the reader's results.

Results are recorded in a :class:`ToolBatch` as each call finishes, so that when the run is cancelled midway
the loop knows which calls completed and writes synthetic ``cancelled`` results only for the others.

A tool cannot take the loop down. Whatever it raises, sync or async, becomes a ``tool_failed`` result:
``SystemExit``, ``KeyboardInterrupt``, ``GeneratorExit`` and any other ``BaseException`` it raises itself
included, and a ``CancelledError`` nobody asked for (the task was not being cancelled). A real cancellation
(the run's interrupt, the host cancelling the task, a tool timeout) is never taken for a failure: it goes on
as ``loop/interrupts.py`` says. A return value that cannot be rendered as text is a ``tool_failed`` result
saying why (:func:`~tether.tools.base.render_output`), and so is an argument validator that crashes.

:meth:`ToolExecutor._keep` is the one place a result is recorded, and so the one place it is made safe before
any event, session or request sees it: text that cannot be encoded as UTF-8 is repaired, every known key is
masked (:class:`~tether.secrets.Masker`: ``***``), in the result and in the message of the exception kept
with it, and the output is kept and previewed, or cut to its limit (so what the cache keeps is masked too).

Arguments that are not a JSON object are answered ``invalid_arguments``, unless the tool takes them as text
(``@tool(raw_arguments=True)``: its one required string parameter receives them; arguments cut for nesting
too deep are still refused).

Error messages the executor writes about a call's arguments (``invalid_arguments``: the raw text that is not
JSON, or a validator's complaint quoting a value) go to the model, and also to events, logs and the CLI: they
quote the arguments redacted (:class:`~tether.redaction.Redaction`): the values of secret-named
arguments are ``***``. The model wrote them and loses nothing it needs to fix the call.
"""

from __future__ import annotations

import asyncio
import pickle
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from msgspec.structs import replace

from tether.alarms import Deadline
from tether.errors import InvalidArguments, TetherError, ToolError, ToolNotFound
from tether.events import ToolCallStarted, ToolResultReceived
from tether.loop.arguments import TOO_DEEP_MARK, arguments_problem
from tether.loop.interrupts import Interrupter
from tether.loop.records import tool_record
from tether.loop.repeats import Repeat, Verdict, repeated_result
from tether.loop.steps import INTERRUPTED, ToolOutcome, at_most_once
from tether.loop.tool_answers import (
    clip,
    denied_result,
    describe_exception,
    error_result,
    failure_result,
    timeout_result,
)
from tether.messages import JsonObject, ToolCall, ToolResult, cancelled_result
from tether.paused import PendingCall
from tether.secrets import Masker, chain_links, mask_exception_in_place
from tether.tools.base import Done, Tool, render_output, utf8_safe, with_attachments
from tether.tools.permissions import Deferred, Permissions
from tether.tools.registry import ToolRegistry
from tether.tools.threads import RaisedInThread

if TYPE_CHECKING:
    from tether.events import SubAgentEvent
    from tether.loop.steps import StepRunner
    from tether.redaction import Redaction
    from tether.run_context import RunContext
    from tether.telemetry.observer import RunObserver
    from tether.tools.output_cache import OutputCache

UnknownTool = Callable[[ToolCall, Sequence[str]], str]
"""What the model reads of a call to a tool that is not offered (``Agent(unknown_tool=...)``), made of the call
and the names of the tools offered; the result stays an error with the code ``tool_not_found``."""
MAX_ECHOED_ARGUMENTS = 200
"""Characters of unparseable arguments quoted back to the model."""
DEFAULT_MAX_OUTPUT = 30_000
"""Characters of a tool's output the model gets before the middle is cut (about 8,000 tokens)."""


class ToolBatch:
    """The calls of one turn and what has become of them so far (a plain class: one is made every tool turn,
    and a dataclass's ``__init__`` with its default factories costs twice as much)."""

    __slots__ = (
        "approved", "calls", "done", "done_by", "durations", "exceptions", "pending", "reported", "results", "started",
        "verdicts",
    )  # fmt: skip

    def __init__(
        self, calls: Sequence[ToolCall], verdicts: Sequence[Verdict], approved: frozenset[str] = frozenset()
    ) -> None:
        self.calls = calls
        self.approved = approved
        """Calls a person approved already (a resumed run's): run without asking again."""
        self.pending: dict[str, PendingCall] = {}
        """Calls deferred for a decision from outside the run (``loop/pausing.py``): not run, no events."""
        self.verdicts = verdicts
        """Per call, from the guard and the output judge: ``None`` to run it, a :class:`Repeat`, why it may not
        run, or its result already."""
        self.results: dict[str, ToolResult] = {}
        self.exceptions: dict[str, BaseException] = {}
        self.started: list[str] = []
        """Calls whose ``ToolCallStarted`` was emitted."""
        self.reported: set[str] = set()
        """Calls whose ``ToolResultReceived`` was emitted."""
        self.durations: dict[str, float] = {}
        """How long each call that ran took, in milliseconds."""
        self.done: Done | None = None
        self.done_by = ""

    def __repr__(self) -> str:
        return f"ToolBatch({len(self.calls)} calls, {len(self.results)} answered)"

    def ordered_results(self, why_missing: str) -> list[ToolResult]:
        """Every call's result in the model's order; a call without one gets a ``cancelled`` result."""
        return [self.results.get(call.id) or cancelled_result(call, why_missing) for call in self.calls]


@dataclass(slots=True)
class _Plan:
    """A call made ready to run, or already answered (refused, unknown tool, invalid arguments)."""

    call: ToolCall
    tool: Tool | None = None
    invoke: Callable[[], Awaitable[Any]] | None = None
    answer: ToolResult | None = None
    arguments: JsonObject | None = None


class Contexts(Protocol):
    """What makes a tool call's run context (the run's ``RunProgress``)."""

    def context(self, call: ToolCall) -> RunContext[Any]: ...


class ToolExecutor:
    """Runs tool calls for one run (see the module docstring)."""

    __slots__ = (
        "_redaction", "approvals", "asking", "concurrent_tools", "contexts", "interrupter", "masker",
        "max_concurrency", "max_output", "observer", "outputs", "permissions", "reads", "registry", "steps", "timeout",
        "unknown_tool",
    )  # fmt: skip

    def __init__(
        self,
        registry: ToolRegistry,
        interrupter: Interrupter,
        *,
        timeout: float | None,
        concurrent_tools: bool = False,
        max_concurrency: int = 8,
        permissions: Permissions | None = None,
        max_output: int | None = DEFAULT_MAX_OUTPUT,
        masker: Masker | None = None,
        observer: RunObserver | None = None,
        redaction: Redaction | None = None,
        outputs: OutputCache | None = None,
        steps: StepRunner | None = None,
        contexts: Contexts | None = None,
        reads: frozenset[str] | None = None,
        unknown_tool: UnknownTool | None = None,
    ) -> None:
        self.registry = registry
        self.approvals = any(tool.approval for tool in registry)  # the output reader, added later, asks for none
        self.asking = self.approvals or (permissions is not None and permissions.can_use_tool is not None)
        """Whether anyone may be asked about a call (:meth:`asks`): else the loop does not even ask that."""
        self.unknown_tool = unknown_tool
        """Words the host chose for a call to a tool that is not offered; ``None``: the executor's own."""
        self.reads = reads
        """What the model reads of what tools return (``ModelInfo.input_kinds``); ``None``: every kind."""
        self.contexts = contexts
        """Makes the context a tool that takes one is called with (``loop/progress.py``); ``None``: it gets ``None``."""
        self.steps = steps
        """Runs each call as a durable step (``loop/steps.py``); ``None``: directly."""
        self.outputs = outputs
        """Where long outputs are kept whole and previewed; ``None``: they are cut to ``max_output``."""
        self.observer = observer
        """Told of every call's start and result (``tether.telemetry``); ``None``: nobody watches."""
        self.masker = masker if masker is not None else Masker()
        """Known keys, masked in every result (none by default here; an agent passes its own)."""
        self._redaction = redaction
        self.interrupter = interrupter
        self.timeout = timeout
        self.concurrent_tools = concurrent_tools
        self.max_concurrency = max_concurrency
        self.permissions = permissions or Permissions()
        self.max_output = max_output

    async def run(self, batch: ToolBatch, turn: int) -> AsyncGenerator[ToolCallStarted | ToolResultReceived, None]:
        """Run ``batch``, yielding each call's start and result events in the model's order.

        The loop drives the same steps itself (``Run._turns``), so that a turn's tool events pass through
        no generator of their own: :meth:`groups`, then per group :meth:`asks` and :meth:`permit`, :meth:`starting`,
        :meth:`settle` and :meth:`reporting`."""
        for group in self.groups(batch):
            if self.asking and self.asks(batch, group):
                await self.permit(batch, group)
            for started in self.starting(batch, group, turn):
                yield started
            await self.settle(batch, group)
            for reported in self.reporting(batch, group, turn):
                yield reported

    def groups(self, batch: ToolBatch) -> list[list[_Plan]]:
        """The batch's calls made ready (looked up, validated, or already answered), in the groups they run in:
        consecutive concurrent calls together, every other call alone."""
        verdicts = batch.verdicts
        answered = batch.results  # a resumed run's calls that ran before its pause: nothing to do
        plans = [
            self._plan(call, verdicts[position], batch)
            for position, call in enumerate(batch.calls)
            if not answered or call.id not in answered
        ]
        if len(plans) == 1:
            return [plans]
        return self._groups(plans)

    def starting(self, batch: ToolBatch, group: list[_Plan], turn: int) -> list[ToolCallStarted]:
        """The ``ToolCallStarted`` of each call of ``group`` but the deferred, recorded as announced (and told the
        observer). Once a tool has ended the run, a deferred call is answered ``cancelled`` like the others."""
        observer = self.observer
        events = []
        for plan in group:
            if batch.pending and plan.call.id in batch.pending:
                if batch.done is None:
                    continue
                del batch.pending[plan.call.id]
            batch.started.append(plan.call.id)
            if observer is not None:
                observer.tool_started(plan.call, turn)
            events.append(ToolCallStarted(plan.call, turn))
        return events

    async def settle(self, batch: ToolBatch, group: list[_Plan]) -> SubAgentEvent | None:
        """Give every call of ``group`` its result: asked about and run, or, once a tool has ended the run,
        answered ``cancelled``. ``None``: the executor of a run that runs agents as tools (``nesting.py``) hands
        on their events instead, one a call, until it has settled the group."""
        if batch.done is not None:
            why = f"the run ended when tool {batch.done_by!r} finished"
            for plan in group:
                self._keep(batch, plan.call, cancelled_result(plan.call, why))
            return None
        await self._run_group(batch, group)
        return None

    def asks(self, batch: ToolBatch, group: list[_Plan]) -> bool:
        """Whether someone is to be asked about a call of ``group`` before it is announced (:meth:`permit`): the
        permission hook, or the approver of a tool marked ``approval=True``. A plain call, no coroutine."""
        if batch.done is not None:
            return False
        return self.permissions.can_use_tool is not None or (self.approvals and any(_asks(plan) for plan in group))

    async def permit(self, batch: ToolBatch, group: list[_Plan]) -> None:
        """Ask the permission hook and the approver about the calls of ``group`` (when :meth:`asks`), before
        :meth:`starting` announces them: a refusal answers a call, a
        :class:`~tether.tools.permissions.Deferred` defers it."""
        await self._permit(batch, group)

    def reporting(self, batch: ToolBatch, group: list[_Plan], turn: int) -> list[ToolResultReceived]:
        """The ``ToolResultReceived`` of each call of ``group``, recorded as reported."""
        events = []
        for plan in group:
            call_id = plan.call.id
            if call_id in batch.pending:
                continue
            batch.reported.add(call_id)
            events.append(ToolResultReceived(batch.results[call_id], turn, batch.exceptions.get(call_id)))
        return events

    def _plan(self, call: ToolCall, verdict: Verdict, batch: ToolBatch) -> _Plan:
        if isinstance(verdict, ToolResult):
            return _Plan(call, answer=verdict)
        if isinstance(verdict, Repeat):
            return _Plan(call, answer=repeated_result(call, verdict))
        if verdict is not None:
            return _Plan(call, answer=ToolResult(call.id, call.name, verdict, True, "permission_denied"))
        tool = self.registry.get(call.name)
        if tool is None:
            return _Plan(call, answer=self._not_found(call))
        if (refusal := self.permissions.refusal(tool)) is not None:
            return _Plan(call, answer=denied_result(call, refusal))
        arguments = call.arguments
        if arguments is None:
            raw = call.raw_arguments or ""
            arguments = None if raw.endswith(TOO_DEEP_MARK) else tool.raw_call(raw)  # raw_arguments=True tools
            if arguments is None:
                return _Plan(call, answer=error_result(call, self._unreadable(call.name, raw)))
        try:
            context = self.contexts.context(call) if tool.takes_context and self.contexts is not None else None
            invoke = tool.bind(arguments, context)
        except InvalidArguments as error:
            shown = InvalidArguments(self.redaction.hide_values(error.message, arguments), details=error.details)
            return _Plan(call, answer=error_result(call, shown))
        except BaseException as error:  # noqa: BLE001 - a validator that crashes is the tool's failure, not the run's
            why = self.redaction.hide_values(describe_exception(error), arguments)
            crash = ToolError(f"Tool {call.name!r} failed while checking its arguments: {why}")
            return _Plan(call, answer=error_result(call, crash))
        if tool.external and call.id not in batch.approved:
            reason = tool.description or f"the result of {tool.name!r} comes from outside the run"
            batch.pending[call.id] = PendingCall.of(call.id, call.name, arguments, reason, "external")
            return _Plan(call, arguments=arguments)
        return _Plan(call, tool=tool, invoke=invoke, arguments=arguments)

    def _not_found(self, call: ToolCall) -> ToolResult:
        """The answer to a call of a tool that is not offered: the host's words (``unknown_tool``), else a
        message naming the tools there are. A host function that fails gets the executor's message instead."""
        offered = [t.name for t in self.registry if self.permissions.offers(t)]
        if self.unknown_tool is not None:
            try:
                return ToolResult(call.id, call.name, self.unknown_tool(call, offered), True, ToolNotFound.code)
            except Exception:  # noqa: BLE001 - the host's words failed: the model still gets an answer
                pass
        error = ToolNotFound(f"Unknown tool {call.name!r}. Available tools: {', '.join(offered) or 'none'}.")
        return error_result(call, error)

    def _unreadable(self, name: str, raw: str) -> InvalidArguments:
        """The error for arguments that are not a JSON object, quoting them (redacted, shortened)."""
        quoted = self.redaction.text(raw)
        quoted = quoted if len(quoted) <= MAX_ECHOED_ARGUMENTS else quoted[:MAX_ECHOED_ARGUMENTS] + "..."
        return InvalidArguments(
            f"Invalid arguments for tool {name!r}: {arguments_problem(raw)} ({quoted!r}). "
            "Send the arguments as one JSON object matching the tool's schema."
        )

    @property
    def redaction(self) -> Redaction:
        """What the executor's own messages may quote of a call's arguments (the agent's, else the default
        rules with this executor's known keys); made only when a message needs it."""
        if self._redaction is None:
            from tether.redaction import Redaction

            self._redaction = Redaction(self.masker)
        return self._redaction

    async def _permit(self, batch: ToolBatch, group: list[_Plan]) -> None:
        """Ask the permission hook about each runnable call of ``group`` not approved already, in order; a
        refusal answers it, a deferral leaves it pending.

        Asking may wait for a person, so the wait is interruptible like any other.
        """
        interrupter, permissions = self.interrupter, self.permissions
        for plan in group:
            if plan.call.id in batch.pending and permissions.can_use_tool is not None:  # external: only a Deny counts
                if (refused := await interrupter.wait(permissions.refused(plan.call))) is not None:
                    del batch.pending[plan.call.id]
                    plan.answer = denied_result(plan.call, refused)
                continue
            if plan.invoke is None or plan.call.id in batch.approved:
                continue
            reason = await interrupter.wait(self.permissions.decide(plan.call, plan.tool))
            if isinstance(reason, Deferred):
                call, arguments = plan.call, plan.arguments if plan.arguments is not None else {}
                batch.pending[call.id] = PendingCall.of(call.id, call.name, arguments, reason.reason, "approval")
                plan.invoke, plan.tool = None, None
            elif reason is not None:
                plan.invoke, plan.tool, plan.answer = None, None, denied_result(plan.call, reason)

    def _groups(self, plans: list[_Plan]) -> list[list[_Plan]]:
        """Consecutive concurrent calls together; every other call alone."""
        groups: list[list[_Plan]] = []
        for plan in plans:
            if self._concurrent(plan) and groups and self._concurrent(groups[-1][-1]):
                groups[-1].append(plan)
            else:
                groups.append([plan])
        return groups

    def _concurrent(self, plan: _Plan) -> bool:
        return plan.tool is not None and (self.concurrent_tools or plan.tool.concurrent)

    async def _run_group(self, batch: ToolBatch, group: list[_Plan]) -> None:
        waiting = [plan for plan in group if plan.invoke is not None]
        for plan in group:
            if plan.answer is not None:
                self._keep(batch, plan.call, plan.answer)
        if not waiting:
            return
        if len(waiting) == 1:  # awaited directly, and recorded after: one coroutine fewer a call
            plan = waiting[0]
            outcome = await self.interrupter.wait(self._outcome(plan) if self.steps is None else self._step(plan))
            self._record(batch, plan, outcome)
        else:
            await self.interrupter.wait(self._execute_together(batch, waiting))

    async def _execute_together(self, batch: ToolBatch, plans: list[_Plan]) -> None:
        slots = asyncio.Semaphore(self.max_concurrency)

        async def execute(plan: _Plan) -> None:
            async with slots:
                await self._execute(batch, plan)

        async with asyncio.TaskGroup() as group:
            for plan in plans:
                group.create_task(execute(plan))

    async def _execute(self, batch: ToolBatch, plan: _Plan) -> None:
        """Run one call (as a step, with a runner) and record what became of it; raises only for a real
        cancellation."""
        outcome = await (self._outcome(plan) if self.steps is None else self._step(plan))
        self._record(batch, plan, outcome)

    def _record(self, batch: ToolBatch, plan: _Plan, outcome: ToolOutcome) -> None:
        """Keep what became of a call that ran: its result, or the end of the run it asked for."""
        call, tool = plan.call, plan.tool
        assert tool is not None
        if outcome.done is not None:
            self._finish_run(batch, call, outcome.done, outcome.ran)
        else:
            assert outcome.result is not None
            self._keep(batch, call, outcome.result, outcome.error, tool=tool, ran=outcome.ran)

    async def _step(self, plan: _Plan) -> ToolOutcome:
        """The call as a durable step (``loop/steps.py``): a tool not safe to repeat runs at most once."""
        steps, call, tool = self.steps, plan.call, plan.tool
        assert steps is not None
        assert tool is not None
        if tool.nests:  # its agent's provider and tool calls are the run's steps (``nesting.py``), not the call
            return await self._outcome(plan)

        async def run() -> ToolOutcome:
            return portable(await self._outcome(plan))  # a step's outcome is kept: it must pickle

        name = f"tool:{call.name}:{call.id}"
        if tool.idempotent:
            return await steps.step(name, run)
        interrupted = ToolResult(call.id, call.name, INTERRUPTED.format(name=call.name), True, "tool_failed")
        return await at_most_once(steps, name, run, lambda: ToolOutcome(interrupted, None))

    async def _outcome(self, plan: _Plan) -> ToolOutcome:
        """Run one call: what became of it; raises only for a real cancellation."""
        call, tool, invoke = plan.call, plan.tool, plan.invoke
        assert tool is not None
        assert invoke is not None
        timeout = tool.timeout or self.timeout
        scope = Deadline(self.interrupter.alarm, timeout)
        context = self.observer.tool_context(call) if self.observer is not None else None
        started = time.perf_counter()
        try:
            with scope:
                if context is None:
                    value = await invoke()
                else:
                    with context:
                        value = await invoke()
            if isinstance(value, Done):
                raise value
            if type(value) is not str and (attached := with_attachments(value, self.reads)) is not None:
                return ToolOutcome(
                    ToolResult(call.id, call.name, attached[0], attachments=attached[1]), _since(started)
                )
            text = render_output(value)
        except TimeoutError as exc:
            ran = _since(started)
            if scope.passed:
                return ToolOutcome(timeout_result(call, tool, timeout), ran)
            return ToolOutcome(failure_result(call, exc), ran, exc)
        except Done as done:
            return ToolOutcome(None, _since(started), done=done)
        except TetherError as error:
            return ToolOutcome(error_result(call, error), _since(started), error)
        except asyncio.CancelledError as cancelled:
            if _being_cancelled():
                raise  # the run, its host or a deadline: see loop/interrupts.py
            return ToolOutcome(failure_result(call, cancelled), _since(started), cancelled)
        except BaseException as exc:  # noqa: BLE001 - whatever a tool raises, even SystemExit, is the model's to read
            if isinstance(exc, RaisedInThread) and exc.__cause__ is not None:
                exc = exc.__cause__
            return ToolOutcome(failure_result(call, exc), _since(started), exc)
        return ToolOutcome(ToolResult(call.id, call.name, text), _since(started))

    def _keep(
        self,
        batch: ToolBatch,
        call: ToolCall,
        result: ToolResult,
        exc: BaseException | None = None,
        *,
        tool: Tool | None = None,
        ran: float | None = None,
    ) -> None:
        """Record ``result`` (and the exception behind it): the one place results are recorded, made safe here.

        The text is repaired to encode as UTF-8, every known key is masked, and then a long output of a tool
        is kept and previewed, or cut to its limit (masking first, so that neither the cache nor a cut holds
        part of a key). ``ran``: how long the tool ran, in milliseconds, when it did.
        """
        content = self.masker.mask(utf8_safe(result.content))
        limit = tool.max_output if tool is not None and tool.max_output else self.max_output
        outputs = self.outputs
        if outputs is not None and tool is not None and outputs.keeps(tool.name, len(content), limit):
            content = outputs.put(content, name=tool.name, limit=limit)
        elif limit is not None and len(content) > limit:
            content = clip(content, limit)
        if content is not result.content:
            result = replace(result, content=content)
        batch.results[call.id] = result
        if ran is not None:
            batch.durations[call.id] = ran
        if exc is not None:
            batch.exceptions[call.id] = exc = mask_exception(exc, self.masker)
        if self.observer is not None:
            self.observer.tool_ended(call, result, tool_record(result, ran), exc)

    def _finish_run(self, batch: ToolBatch, call: ToolCall, done: Done, ran: float | None = None) -> None:
        try:
            message = render_output(done.message)
        except BaseException as error:  # noqa: BLE001 - the run still ends, as the tool asked
            why = describe_exception(error)
            message = f"(tool {call.name!r} ended the run with a message that cannot be shown: {why})"
        self._keep(batch, call, ToolResult(call.id, call.name, message), ran=ran)
        if batch.done is None:
            kept = batch.results[call.id].content
            batch.done, batch.done_by = (done if kept == done.message else Done(kept)), call.name


def _asks(plan: _Plan) -> bool:
    """Whether a call of ``plan`` is to be approved before it runs (its tool's ``approval=True``)."""
    return plan.tool is not None and plan.tool.approval


def _since(started: float) -> float:
    """Milliseconds since ``started`` (a ``time.perf_counter()`` reading)."""
    return (time.perf_counter() - started) * 1000.0


def _being_cancelled() -> bool:
    """Whether the running task has been asked to cancel: a ``CancelledError`` then is a real cancellation;
    without a request, it was raised by the tool itself."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def mask_exception(exc: BaseException, masker: Masker) -> BaseException:
    """``exc`` with known keys masked in its message (its ``args``, its chain's): the exception an event
    carries must not hold a key any more than the result does. When its text still shows a key (a ``__str__``
    of its own), a ``ToolError`` with the masked description stands in for it."""
    if not len(masker):
        return exc
    mask_exception_in_place(exc, masker)
    chain = [describe_exception(link) for link in chain_links(exc)]
    if all(masker.mask(text) == text for text in chain) and all(masker.mask(note) == note for note in _notes(exc)):
        return exc
    stand_in = ToolError(masker.mask(chain[0]))  # a text of its own still shows a key: the chain is not kept
    stand_in.__suppress_context__ = True
    return stand_in


def _notes(exc: BaseException) -> list[str]:
    notes = getattr(exc, "__notes__", None)
    return [note for note in notes if isinstance(note, str)] if isinstance(notes, list) else []


def portable(outcome: ToolOutcome) -> ToolOutcome:
    """``outcome`` as a durable step keeps it: itself when it pickles and reads back; else its error as a
    ``ToolError`` of the same description, and a ``Done`` of its text (what a tool raised or returned may hold a
    lock, or be of a class defined in a function): the reason survives a recovery, as text."""
    try:
        pickle.loads(pickle.dumps(outcome))
    except Exception:  # noqa: BLE001 - anything pickle refuses
        error = outcome.error
        done = outcome.done
        return replace(
            outcome,
            error=None if error is None else ToolError(describe_exception(error)),
            done=None if done is None else Done(_done_text(done)),
        )
    return outcome


def _done_text(done: Done) -> str:
    try:
        return render_output(done.message)
    except ToolError as error:
        return error.message
