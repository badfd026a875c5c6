"""Agent: what users hold. A model, tools, a system prompt and limits; each run goes through the loop.

``run()`` returns a :class:`~tether.events.RunResult`; ``stream()`` yields the run's events as they happen (``run()``
is ``stream()`` consumed to its ``RunCompleted``); ``start()`` runs in the background and returns a :class:`RunHandle`
to cancel or await; ``to_asgi()`` serves it. An agent holds no state between runs: pass ``history=`` to continue a
conversation. See ``loop/interrupts.py`` for what cancellation guarantees.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, Unpack

from tether.agent_checks import (
    OutputMode,
    check_output_cache,
    checked_name,
    checked_output_mode,
    compaction_of,
    deps_checks,
    provider_credentials,
    response_cache_class,
    secret_strings,
    skills_of,
    team_of,
    tool_mode_of,
    with_output,
)
from tether.agent_settings import AgentSettings
from tether.errors import ConfigInvalid
from tether.events import OutputT, RunResult
from tether.health import DEFAULT_TIMEOUT, HealthReport, health_of, settle
from tether.limits import Compaction, Limits
from tether.loop.choice import ToolChoiceOption, resolve_tool_choice
from tether.loop.engine import Run
from tether.loop.executor import DEFAULT_MAX_OUTPUT, UnknownTool
from tether.loop.interrupts import Interrupter
from tether.loop.pausing import resumption
from tether.loop.progress import joined_instructions
from tether.loop.sinks import EventSink
from tether.loop.spec import RunSpec
from tether.messages import Message, Prompt, user_message
from tether.pricing import price_for
from tether.providers.attachments import refuse_unreadable
from tether.providers.base import ModelSettings, Provider
from tether.providers.fallback import resolve_models
from tether.run_context import DepsT, RunContext, check_deps
from tether.run_handles import RunHandle, RunStream, completed
from tether.secret_refs import is_reference
from tether.secrets import Masker, connection_password
from tether.serving import Servable
from tether.session_run import SessionRun, resumed_now, resumed_stream
from tether.team.agent_tool import AgentTool, agent_tool
from tether.telemetry import Telemetry
from tether.tools.base import Tool, ToolOptions
from tether.tools.output_cache import DEFAULT_THRESHOLD
from tether.tools.permissions import Approver, Mode, PermissionHook, Permissions
from tether.tools.registry import ToolRegistry
from tether.usage import Price

if TYPE_CHECKING:
    from tether.loop.steps import StepRunner
    from tether.output import OutputType
    from tether.paused import Decisions, PausedRun
    from tether.providers.http.ratelimit import RateLimit
    from tether.providers.response_cache import ResponseCache
    from tether.sessions import SessionStore
    from tether.skills import Skills
    from tether.team.guardrails import Guardrail, GuardrailCheck
    from tether.team.handoffs import Handoff
    from tether.team.relay import Member


class Agent(AgentSettings, Servable, Generic[DepsT, OutputT]):
    """An LLM agent: ``Agent("provider:model", tools=[...], system="...", limits=Limits(...))``.

    ``Agent[Deps, Output]`` is an agent whose runs are given ``deps`` of type ``Deps`` (``deps_type=Deps``), which
    its tools and its system function read from their ``RunContext[Deps]``, and whose ``result.output`` is an
    ``Output`` (``output_type=Output``; ``str``, the answer's text, by default)."""

    def __init__(
        self,
        model: str | Provider | Sequence[str | Provider],
        *,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        system: str | Callable[[RunContext[DepsT]], str | Awaitable[str | None] | None] | None = None,
        deps_type: type[DepsT] | None = None,
        limits: Limits | None = None,
        settings: ModelSettings | None = None,
        price: Price | None = None,
        concurrent_tools: bool = False,
        max_concurrency: int = 8,
        on_event: EventSink | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        rate_limit: RateLimit | None = None,
        mode: Mode | str = Mode.FULL,
        deny: Iterable[str] = (),
        can_use_tool: PermissionHook | None = None,
        approve: Approver | None = None,
        max_tool_output: int | None = DEFAULT_MAX_OUTPUT,
        cache_tool_outputs: int | None = DEFAULT_THRESHOLD,
        tool_mode: Literal["auto", "native", "json"] = "auto",
        store: SessionStore | None = None,
        save_errors: Literal["stop", "continue"] = "stop",
        secrets: Iterable[str] = (),
        telemetry: Telemetry | bool | None = None,
        compaction: Compaction | bool | None = None,
        tool_choice: ToolChoiceOption = "auto",
        output_type: OutputType[OutputT] = str,  # type: ignore[assignment]  # str is the default of OutputT
        output_mode: OutputMode | None = None,
        unknown_tool: UnknownTool | None = None,
        record_exchanges: bool = False,
        cache: ResponseCache | None = None,
        prompt_cache: Literal["off", "5m", "1h"] | None = None,
        skills: Skills | Iterable[str | os.PathLike[str]] = (),
        name: str | None = None,
        handoffs: Iterable[Agent[Any, Any] | Handoff] = (),
        input_guardrails: Iterable[Guardrail | GuardrailCheck] = (),
        output_guardrails: Iterable[Guardrail | GuardrailCheck] = (),
    ) -> None:
        """
        Args:
            model: a ``provider:model`` string or a Provider instance; or a list of them, tried in order when one
                fails for a passing reason before its answer begins (``tether.providers.FallbackProvider``).
            tools: Tools, or plain typed functions (wrapped with ``Tool.from_function``).
            system: the system prompt, sent once at the head of every request; or a function of the run's
                context (``RunContext[Deps]``, sync or async) that gives it, evaluated when each run starts.
                Either replaces a system prompt stored in a run's history.
            deps_type: the type of the ``deps`` each run is given (``run(..., deps=...)``), checked when a run
                starts; it makes the agent an ``Agent[Deps]`` for a type checker. Tools that declare
                ``ctx: RunContext[T]`` have their ``T`` checked too, and must agree with it.
            limits: the guards' settings; ``Limits()`` when not given.
            settings: sampling settings (temperature, max_tokens, ...).
            price: the model's price, for cost and ``max_cost_usd``; when not given, looked up in
                ``genai-prices`` (if installed), then in ``tether.pricing.PRICES`` (``tether.pricing``).
            concurrent_tools: run all of a turn's tool calls concurrently, not only tools marked so.
            max_concurrency: how many tool calls of one turn may run at once.
            on_event: called with every event of every run, in order (a sink; it must not block).
            base_url: where the model's API is, for a model string (needed by ``openai-compatible:``).
            api_key: the API key, for a model string, or a reference to it (``cmd:pass show openai``,
                ``file:~/.openai``, ``env:NAME``, ``keyring:SERVICE/USER``: ``tether.secret_refs``); otherwise
                read from the provider's environment variable.
            prompt_cache: for an ``anthropic:`` model string, the TTL of its cache breakpoints (``"5m"``, its
                default, or ``"1h"``) or ``"off"`` (``tether.providers.anthropic_cache``).
            rate_limit: requests and tokens per minute (``RateLimit(rpm=..., tpm=...)``), for a model string over
                HTTP: shared by every run of this process that sends to the same API, key and model, waited for
                before each request (``RateLimitWait``). A ``Provider`` instance takes its own ``rate_limit=``.
            mode: ``"full"`` offers every tool; ``"read-only"`` only tools marked ``read_only``.
            deny: names of tools never offered nor run.
            can_use_tool: asked before every tool call: ``Allow()``, ``Deny(reason)`` or ``Ask(reason)``.
            approve: answers an ``Ask`` or an ``approval=True`` tool's call (``approve(call, reason) -> bool``, may be
                async); without it, such a call pauses the run for a decision (``resume``, docs/approvals.md).
            max_tool_output: characters of a tool's output the model gets before the middle is cut (``None``:
                no limit); a tool's own ``max_output`` wins. With the cache on, the last line of defence: it
                cuts only outputs too long even to keep.
            cache_tool_outputs: characters above which a tool's output is kept whole for the run (and in the
                session's store, in a session) while the model gets its head and tail and a reference; the
                built-in read-only tool ``read_tool_output`` then lets it page through or search the rest
                (``tools/output_cache.py``). A tool's ``max_output`` or ``max_tool_output``, when smaller,
                lowers it. At least 1,000; ``None`` turns the cache off.
            tool_mode: ``native`` tool calling, ``json`` actions written in the model's text
                (``loop/actions.py``), or ``auto``: native when the model can call tools, else JSON actions.
            store: where ``run(..., session=ID)`` keeps sessions (``tether.sessions``).
            save_errors: what a failed save of a run's session does: ``"stop"`` (the default) stops the run with
                ``error``; ``"continue"`` logs it and goes on, and if the run's last save fails too its result
                keeps its answer, marked ``degraded`` with the failure in ``detail`` (``loop/saving.py``).
            secrets: more values to mask in tool results. By default every tool result (and the message of
                the exception behind a failed one) has these replaced by ``***`` before any event, session or
                request sees it: the provider's API key (passed, read from its variable, or held by a Provider
                instance), the values of the environment's secret-named variables and provider key variables,
                and the passwords of connection strings (``tether.secrets``). Values shorter than 8
                characters are not masked. ``agent.secrets`` is the masker the runs use.
            telemetry: how runs are observed (``tether.telemetry``): ``None`` (the default) uses
                OpenTelemetry's global tracer and meter providers when the application configured them, and
                logging when it enabled it; a :class:`~tether.telemetry.Telemetry` sets providers, content
                capture, the agent's name and the secret argument names; ``False`` turns all of it off.
            compaction: how a long run's history is compacted to fit the model's context window
                (:class:`~tether.limits.Compaction`, docs/context.md): ``None`` (the default) compacts when
                the window is known and recovers from a provider's ``context_overflow``; ``False`` never
                compacts.
            tool_choice: ``"auto"`` (the model decides), ``"none"`` (no tool call in the whole run: the model
                can only answer), ``"required"`` or a tool's name (``ForceTool(name)`` for a tool named like
                a mode): the model must call a tool (that tool) until it has called one in the run, then
                ``"auto"``. A run's own ``tool_choice=`` wins. Checked when the agent is built and when each
                run starts (``loop/choice.py``).
            output_type: what ``result.output`` is (docs/output.md): ``str`` (the answer's text, the default), a
                pydantic model, a dataclass, a ``TypedDict``, a primitive, a list or dict of one, a union (or list)
                of several, a function whose typed parameters are the output (its return value is the result), or
                an ``OutputSchema`` (a raw JSON Schema). An answer that fails its validation is sent back with the
                errors, up to ``Limits.output_retries`` times; then the run stops as ``invalid_output``.
            output_mode: how the output is asked for: ``"tool"`` (output tools the model calls; the default for
                a model that calls tools), ``"native"`` (the provider's JSON Schema output, or the embedded
                model's grammar; the default for a model that cannot call tools but has it), ``"prompted"`` (the
                schema in the instructions and JSON mode; the default otherwise).
            unknown_tool: what the model reads when it calls a tool this agent does not offer:
                ``unknown_tool(call, offered_names) -> str`` (the result is still an error, ``tool_not_found``);
                when not given, or when it raises, a message naming the tools there are.
            record_exchanges: keep each provider call's request body and raw answer (its events' JSON or its
                body), masked like telemetry, in the run's session: ``store.load_exchanges(session_id)`` reads
                them (``tether.exchanges``). A run without a session keeps none; off, nothing is copied.
            cache: a :class:`~tether.ResponseCache`: a request identical to one answered before (at temperature 0,
                unless it allows any) is answered from it, its events replayed, no request made.
            skills: Agent Skills (``tether.skills``): each path a skill's folder (with a ``SKILL.md``) or a folder
                of them, or a ``Skills``. Their names and descriptions join the system prompt; the read-only tool
                ``load_skill`` gives a skill's instructions and files when asked; scripts run through ``bash``,
                whose sandbox shows the skills' folders, read-only. A bad ``SKILL.md`` is ``SkillInvalid`` now.
            name: the agent's name: its handoff tool's, ``result.last_agent``, its observers' (unless telemetry's).
            handoffs: agents (each with a ``name``) or ``Handoff``s the model may pass the conversation to, one
                transfer tool each: the run goes on under the target (``tether.team.handoffs``, docs/agents.md).
            input_guardrails: checks of a run's prompt before the first model call (or alongside it) that may
                block the run (stop ``guardrail``): ``check(ctx, prompt) -> GuardrailResult``, sync or async, or
                ``Guardrail``s (``tether.team.guardrails``).
            output_guardrails: checks of the answer (its text, or the typed output once valid) that may block it
                or ask the model again with a message (an output retry).
        """
        limited = {"rate_limit": rate_limit} if rate_limit is not None else {}
        provider = resolve_models(model, base_url=base_url, api_key=api_key, prompt_cache=prompt_cache, **limited)
        self.name = checked_name(name)
        """The agent's name (see ``name=`` above)."""
        self._handoffs, self._input_guardrails, self._output_guardrails = team_of(
            handoffs, input_guardrails, output_guardrails
        )
        skill_set = skills_of(skills)
        registry = ToolRegistry([*skill_set.equip(tools), *(h.tool(self._handoffs) for h in self._handoffs)])
        limits = limits if limits is not None else Limits()
        price = price if price is not None else price_for(provider.info.model_string)
        if limits.max_cost_usd is not None and price is None:
            raise ConfigInvalid(
                f"Limits.max_cost_usd is set but the price of {provider.info.model_string!r} is unknown: "
                "pass price=Price(input=..., output=...) to Agent (or install tether[prices], whose table may know it)"
            )
        if max_concurrency < 1:
            raise ConfigInvalid(f"max_concurrency must be >= 1, not {max_concurrency!r}")
        if save_errors not in ("stop", "continue"):
            raise ConfigInvalid(f"save_errors must be 'stop' or 'continue', not {save_errors!r}")
        check_output_cache(cache_tool_outputs, registry)
        if cache is not None and not isinstance(cache, response_cache_class()):
            raise ConfigInvalid(f"cache must be a tether.ResponseCache, not {type(cache).__name__}")
        self._deps_checks = deps_checks(deps_type, registry)
        if system is not None and not isinstance(system, str) and not callable(system):
            kind = type(system).__name__
            raise ConfigInvalid(f"system must be a string or a function of the run context, not {kind}")
        permissions = Permissions.of(mode, deny, can_use_tool, approve)
        if unknown := sorted(set(permissions.deny) - set(registry.names)):
            raise ConfigInvalid(f"deny names tools this agent does not have: {', '.join(unknown)}")
        masker = Masker.from_environment(
            extra=(
                None if api_key and is_reference(api_key) else api_key,
                *provider_credentials(provider),
                connection_password(base_url or ""),
                *secret_strings(secrets),
            )
        )
        self.provider = provider
        self.store = store
        self.tools = registry
        self.system = system
        self.deps_type = deps_type
        self.limits = limits
        self.skills = skill_set.skills
        """The agent's skills (``tether.skills.Skills``; ``None`` without ``skills=``)."""
        catalog = skill_set.instructions("bash" in registry)
        self._spec = RunSpec(
            provider=provider,
            tools=registry,
            system=joined_instructions(system, catalog) if isinstance(system, str) or system is None else None,
            system_function=None if isinstance(system, str) or system is None else system,
            instructions=None if isinstance(system, str) or system is None else catalog,
            limits=limits,
            settings=settings or ModelSettings(),
            price=price,
            concurrent_tools=concurrent_tools,
            max_concurrency=max_concurrency,
            permissions=permissions,
            max_tool_output=max_tool_output,
            cache_tool_outputs=cache_tool_outputs,
            tool_mode=tool_mode_of(tool_mode, provider, registry),
            masker=masker,
            compaction=compaction_of(compaction),
            save_errors=save_errors,
            unknown_tool=unknown_tool,
            record_exchanges=bool(record_exchanges),
            response_cache=cache,
        )
        self._sinks: tuple[EventSink, ...] = (on_event,) if on_event is not None else ()
        self.telemetry = telemetry  # the setter takes a bool or None too
        self.tool_choice = tool_choice
        """The tool choice of the next runs (see ``tool_choice=`` above); a run's own wins."""
        self._output_mode = checked_output_mode(output_mode)
        self._spec = with_output(self._spec, output_type, output_mode)
        self._run_spec(None)  # a choice this agent can never keep is refused now, not at its first run

    def stream(
        self,
        prompt: Prompt | None = None,
        *,
        history: Sequence[Message] = (),
        on_event: EventSink | None = None,
        session: str | None = None,
        tool_choice: ToolChoiceOption | None = None,
        deps: DepsT = None,  # type: ignore[assignment]  # None is the default of an agent without deps_type
        instructions: str | None = None,
        output_type: Any = None,
    ) -> RunStream:
        """Start a run and iterate its events; ``cancel()`` on the returned stream stops it. ``prompt`` is a string,
        or strings and attachments (``Attachment``: images, documents, audio) in order; ``None`` (or left out)
        runs the history (``history=`` or the session's) exactly as it is, without a new user message: it must
        then end where the model speaks next, with a user message or tool results (``ConfigInvalid`` otherwise).

        With ``session=ID`` (and ``Agent(store=...)``) the run continues that session (or starts it) and
        saves it after every turn and at its end, so a killed process loses at most the turn in flight.
        ``tool_choice`` overrides the agent's for this run. ``deps`` is what the run's tools and system
        function read as ``ctx.deps`` (checked against ``deps_type`` now: ``ConfigInvalid`` before any request);
        ``instructions`` are added to the system prompt for this run only, after it; ``output_type`` replaces the
        agent's for this run (``result.output``; a type checker sees the agent's: give the agent the type for a
        typed result).
        """
        return self._open(prompt, history, on_event, session, tool_choice, None, deps, instructions, output_type)

    def _open(
        self,
        prompt: Prompt | None,
        history: Sequence[Message],
        on_event: EventSink | None,
        session: str | None,
        tool_choice: ToolChoiceOption | None,
        steps: StepRunner | None,
        deps: Any = None,
        instructions: str | None = None,
        output_type: Any = None,
    ) -> RunStream:
        """Every run's one entry: a run of ``prompt`` (in ``session``, or from ``history``), its provider and
        tool calls the steps of ``steps`` when it is durable (:func:`stream_with_steps`)."""
        for expected, where in self._deps_checks:
            check_deps(deps, expected, where)
        if prompt is None and not history and session is None:
            raise ConfigInvalid("a run needs a prompt, or a history (history= or session=) to run as it is")
        if not isinstance(prompt, str) or history:  # an attachment the model cannot read is refused before sending
            asked = (*history, user_message(prompt)) if prompt is not None else history
            refuse_unreadable(asked, self.provider.info, "the run's prompt or history")
        sinks = self._sinks + ((on_event,) if on_event is not None else ())
        spec = self._run_spec(tool_choice, instructions, output_type)
        interrupter = Interrupter()
        if self._handoffs or self._input_guardrails or self._output_guardrails:
            if steps is not None and self._handoffs:
                raise ConfigInvalid("a durable run cannot hand off to another agent yet: run it without handoffs")
            from tether.team.relay import Relay

            store = check_session(self, history) if session is not None else None
            relay = Relay(
                self._team_member(spec), prompt, history, interrupter, sinks, store=store, session=session,
                steps=steps, deps=deps,
            )  # fmt: skip
            return RunStream(relay.events(), relay, interrupter)
        if session is None:
            run = Run(spec, prompt, history, interrupter, sinks, steps=steps, deps=deps)
            return RunStream(run.events(), run, interrupter)
        store = check_session(self, history)
        stored = SessionRun(spec, prompt, store, session, interrupter, sinks, steps, deps)
        return RunStream(stored.events(), stored, interrupter)

    def _team_member(self, spec: RunSpec | None = None) -> Member:
        """This agent as a relay runs it (``tether.team.relay``), with ``spec`` (else its own: a handoff to it)."""
        from tether.team.relay import Member

        spec = spec if spec is not None else self._run_spec(None)
        return Member.of(self.name, spec, self._handoffs, self._input_guardrails, self._output_guardrails)

    def _run_spec(
        self, tool_choice: ToolChoiceOption | None, instructions: str | None = None, output_type: Any = None
    ) -> RunSpec:
        """The spec of the next run: the agent's, with the run's tool choice (else the agent's), checked against
        the tools offered now (the mode may have changed) and what the model can keep; with the run's own
        instructions, joined to a plain system prompt now or kept for the system function's; and with the run's
        output type."""
        option = self.tool_choice if tool_choice is None else tool_choice
        spec = self._spec
        if output_type is not None:
            spec = with_output(spec, output_type, self._output_mode)
        if instructions is not None:
            if not isinstance(instructions, str):
                raise ConfigInvalid(f"instructions must be a string, not {type(instructions).__name__}")
            if spec.system_function is None:
                spec = replace(spec, system=joined_instructions(spec.system, instructions))
            else:
                spec = replace(spec, instructions=joined_instructions(spec.instructions, instructions))
        if option == "auto":
            return spec
        offered = [t.name for t in spec.tools if spec.permissions.offers(t)]
        choice = resolve_tool_choice(option, offered, spec.provider.info, native=spec.tool_mode == "native")
        return replace(spec, tool_choice=choice)

    async def run(
        self,
        prompt: Prompt | None = None,
        *,
        history: Sequence[Message] = (),
        on_event: EventSink | None = None,
        session: str | None = None,
        tool_choice: ToolChoiceOption | None = None,
        deps: DepsT = None,  # type: ignore[assignment]  # None is the default of an agent without deps_type
        instructions: str | None = None,
        output_type: Any = None,
    ) -> RunResult[OutputT]:
        """Run to the end and return the result; never raises for a run that went wrong, it reports it (see
        :meth:`stream` for the arguments)."""
        stream = self._open(prompt, history, on_event, session, tool_choice, None, deps, instructions, output_type)
        return await completed(stream)

    def resume_stream(
        self,
        state: PausedRun | str | None,
        decisions: Decisions,
        *,
        session: str | None = None,
        on_event: EventSink | None = None,
        deps: DepsT = None,  # type: ignore[assignment]  # None is the default of an agent without deps_type
    ) -> RunStream:
        """Go on with a paused run (``docs/approvals.md``): ``state`` is its ``result.state`` (or its JSON, or
        ``None`` to take the one stored in ``session``); ``decisions`` settle its pending calls, by call id. They
        are checked first (``DecisionInvalid``, nothing run); then the decided calls run or are answered, and the
        run goes on where it stopped (same id, counts, what was left of its deadline), its answer checked by the
        output guardrails. Not yet for an agent with handoffs (``ConfigInvalid``)."""
        for expected, where in self._deps_checks:
            check_deps(deps, expected, where)
        if self._handoffs:
            raise ConfigInvalid("a paused run of an agent with handoffs cannot be resumed yet")
        sinks = self._sinks + ((on_event,) if on_event is not None else ())
        store = check_session(self, ()) if session is not None else None
        spec, resume = self._run_spec(None), resumed_now(resumption(state, decisions, session), session)
        if not self._input_guardrails and not self._output_guardrails:
            return resumed_stream(spec, resume, sinks, store, session, deps)
        from tether.team.relay import resumed_relay  # the agent's guardrails check the answer

        return resumed_relay(self._team_member(spec), resume, sinks, store, session, deps)

    async def resume(
        self,
        state: PausedRun | str | None,
        decisions: Decisions,
        *,
        session: str | None = None,
        on_event: EventSink | None = None,
        deps: DepsT = None,  # type: ignore[assignment]  # None is the default of an agent without deps_type
    ) -> RunResult[OutputT]:
        """:meth:`resume_stream` run to its end: the result (which may be paused again)."""
        stream = self.resume_stream(state, decisions, session=session, on_event=on_event, deps=deps)
        return await completed(stream)

    def resume_sync(
        self,
        state: PausedRun | str | None,
        decisions: Decisions,
        *,
        session: str | None = None,
        on_event: EventSink | None = None,
        deps: DepsT = None,  # type: ignore[assignment]  # None is the default of an agent without deps_type
    ) -> RunResult[OutputT]:
        """``resume()`` for code that is not async; it runs its own event loop."""
        return _sync(lambda: self.resume(state, decisions, session=session, on_event=on_event, deps=deps), "resume")

    def as_tool(
        self,
        *,
        name: str,
        description: str | None = None,
        input_type: type[Any] | None = None,
        **options: Unpack[ToolOptions],
    ) -> AgentTool:
        """This agent as a tool of another agent (docs/agents.md, "Many agents"): a call runs it as part of the
        calling run, with its ``deps``, under what is left of its budget (cost, tool calls, deadline), cancelled
        with it, its usage added to it and its events relayed in its stream as ``SubAgentEvent``s. ``name`` and
        ``description`` are what the calling model sees; ``input_type`` the input's type (a pydantic model, a
        dataclass or a ``TypedDict``; text by default). Its output is the call's result; a sub-run that fails is
        an error result, one that spends the budget or is cancelled stops the calling run too
        (``tether.team.agent_tool``). ``options`` are any tool's (``timeout=``, ``concurrent=``, ...)."""
        return agent_tool(self, name=name, description=description, input_type=input_type, **options)

    def output_validator(self, function: V) -> V:
        """Add a check of the typed output, run after its type's, in the order added: ``function(output)`` or
        ``function(ctx, output)`` (sync, on a worker thread, or async) returns the output to keep (the same, or
        changed) or raises ``ModelRetry(message)`` to send the model ``message`` and ask again (an output retry).
        Usable as a decorator."""
        if not callable(function):
            raise ConfigInvalid(f"an output validator must be a function, not {type(function).__name__}")
        self._spec = replace(self._spec, output_validators=(*self._spec.output_validators, function))
        return function

    def run_sync(
        self,
        prompt: Prompt | None = None,
        *,
        history: Sequence[Message] = (),
        on_event: EventSink | None = None,
        session: str | None = None,
        tool_choice: ToolChoiceOption | None = None,
        deps: DepsT = None,  # type: ignore[assignment]  # None is the default of an agent without deps_type
        instructions: str | None = None,
        output_type: Any = None,
    ) -> RunResult[OutputT]:
        """``run()`` for code that is not async; it runs its own event loop."""
        return _sync(
            lambda: self.run(
                prompt, history=history, on_event=on_event, session=session, tool_choice=tool_choice, deps=deps,
                instructions=instructions, output_type=output_type,
            ),
            "run",
        )  # fmt: skip

    async def health(self, *, timeout: float = DEFAULT_TIMEOUT) -> HealthReport:
        """Whether this agent's parts work now, one check each (``tether.health``): ``provider`` (its API
        reached and the key accepted, no token spent), ``mcp:<id>`` for each MCP server of its tools (a real
        ``tools/list``), ``store`` (a probe session written, read back and deleted). Each bounded by
        ``timeout`` seconds; never raises for a part that fails: ``report.ok``, ``report.failed``."""
        return await health_of(self.provider, self.tools, self.store, timeout=timeout, masker=self._spec.masker)

    def health_sync(self, *, timeout: float = DEFAULT_TIMEOUT) -> HealthReport:
        """``health()`` for code that is not async; it runs its own event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:

            async def checked() -> HealthReport:
                report = await self.health(timeout=timeout)
                await settle(timeout)
                return report

            return asyncio.run(checked())
        raise RuntimeError("health_sync() cannot be called from async code: use 'await agent.health()'")

    def start(
        self,
        prompt: Prompt | None = None,
        *,
        history: Sequence[Message] = (),
        on_event: EventSink | None = None,
        session: str | None = None,
        tool_choice: ToolChoiceOption | None = None,
        deps: DepsT = None,  # type: ignore[assignment]  # None is the default of an agent without deps_type
        instructions: str | None = None,
        output_type: Any = None,
    ) -> RunHandle[OutputT]:
        """Start a run in the background on the running event loop; await the handle for the result."""
        stream = self._open(prompt, history, on_event, session, tool_choice, None, deps, instructions, output_type)
        return RunHandle(stream)


def check_session(agent: Agent[Any, Any], history: Sequence[Message]) -> SessionStore:
    """The store a run of ``agent`` in a session keeps it in; ``ConfigInvalid`` without one, or with a history."""
    if agent.store is None:
        raise ConfigInvalid("session= needs a session store: Agent(..., store=SQLiteSessionStore(path))")
    if history:
        raise ConfigInvalid("pass history= or session=, not both: a session brings its own history")
    return agent.store


def stream_with_steps(
    agent: Agent[Any, Any],
    prompt: Prompt,
    steps: StepRunner,
    *,
    history: Sequence[Message] = (),
    on_event: EventSink | None = None,
    tool_choice: ToolChoiceOption | None = None,
    session: str | None = None,
    deps: Any = None,
) -> RunStream:
    """The entry of durable runs (``tether.durable``): ``agent.stream(...)`` whose provider and tool calls are
    the steps of ``steps`` (``loop/steps.py``), and whose run id is the runner's. With ``session=``, loading the
    session and each save of it are steps too, so that an execution of the run again sees the session as the
    first one did. Not part of the public API: a durable engine's seam."""
    return agent._open(prompt, history, on_event, session, tool_choice, steps, deps)


V = TypeVar("V", bound=Callable[..., Any])
T = TypeVar("T")


def _sync(make: Callable[[], Coroutine[Any, Any, T]], name: str) -> T:
    """``make()`` run on an event loop of its own; ``RuntimeError`` from async code, naming the method to await."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    raise RuntimeError(f"{name}_sync() cannot be called from async code: use 'await agent.{name}(...)'")
