"""The chat's logic, apart from the terminal: slash commands, turns, the session, the usage so far.

:class:`Chat` takes lines (``handle``) and shows what happens through a :class:`~tether.cli.render.Renderer`;
it never reads input itself. ``chat_terminal.py`` feeds it lines from prompt_toolkit and calls
:meth:`Chat.cancel` on Ctrl-C; tests feed it lines directly, with a scripted model and a console writing to a
string.

A turn is one run of the agent in the chat's session (``agent.stream(prompt, session=ID)``): the store keeps
the conversation after every model turn, and a cancelled turn leaves a valid transcript behind, so the next
prompt simply goes on from it.

A turn that pauses (a call waiting for an approval no one was asked, or for an external result) lists its
pending calls; ``/approve``, ``/deny`` and ``/result`` decide them one by one, and once each has its decision the
run resumes (``agent.resume_stream(state, decisions, session=ID)``) and its answer is shown as a turn's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text

from tether.cli.decisions import DENIED, parse_result
from tether.cli.render import Renderer, not_run, pending_lines, probe_address, shorten, usage_line
from tether.cli.table import aligned
from tether.cli.transcript import summary_table, summary_text
from tether.errors import TetherError
from tether.events import RunCompleted, RunResult
from tether.messages import Attachment, compaction_of
from tether.paused import Approve, Decision, ExternalResult, PausedRun, Reject
from tether.sessions import SessionNotFound, new_session_id
from tether.usage import Cost, Usage

if TYPE_CHECKING:
    from tether.agent import Agent
    from tether.config.service import ConfigService
    from tether.run_handles import RunStream
    from tether.sessions import SessionStore

AgentBuilder = Callable[[str, str], "Agent"]
"""``build(model, mode)`` -> a new agent; raises ``ConfigInvalid`` for a model it cannot run."""

MODES = ("read-only", "full")
DECIDE = "decide each: /approve ID, /deny ID [REASON], /result ID VALUE; the answer goes on once all are decided"
DECIDED = {Approve: "approved", Reject: "denied", ExternalResult: "result given"}
"""How ``/pending`` marks a call decided, by its decision's type."""
SAVE_FLAG = "--save"
"""After ``/model`` or ``/mode``: write the setting to the configuration file too."""

HELP = """\
Type a message and press Enter to send it. For several lines: Esc then Enter, or end a line with \\
and press Enter. Up and Down go through earlier inputs.

  /help             this help
  /model [NAME]     show the model, or switch to NAME (provider:model, e.g. openai:gpt-4o-mini)
  /tools            the tools and whether the model may use them
  /mode [MODE]      show or set the tool mode: read-only or full
                    /model and /mode with --save also write the setting (runtime.model, tools.mode) to
                    the configuration file (./agent.toml, or the one --config names), for the next chats
  /sessions         the saved sessions, most recent first
  /resume ID        continue session ID
  /new              start a new session
  /attach PATH      attach a file (an image, a PDF, audio, a text file) to the next message
  /approve ID       approve the paused call ID
  /deny ID [REASON] deny the paused call ID; the model reads REASON
  /result ID VALUE  give the paused external call ID its result (JSON, or plain text)
  /pending          the calls a paused answer waits on, and the decisions given so far
  /usage            tokens and cost so far
  /trace            the last answer's provider calls and tool calls, as a tree with their times
  /exit             leave (or Ctrl-D)

Ctrl-C while the model answers stops that answer (the conversation is kept); at the prompt it clears the
line."""


class Chat:
    """A conversation with an agent, driven one line at a time (see the module docstring)."""

    def __init__(
        self,
        build: AgentBuilder,
        store: SessionStore,
        renderer: Renderer,
        *,
        model: str,
        mode: str,
        session_id: str | None = None,
        deny: Collection[str] = (),
        yes: bool = False,
        settings: ConfigService | None = None,
        own_permissions: bool = False,
    ) -> None:
        self.build = build
        self.settings = settings
        """Where ``--save`` writes; ``None``: nowhere (the chat says so)."""
        self.store = store
        self.renderer = renderer
        self.model = model
        self.mode = mode
        self.agent = build(model, mode)
        self.session_id = session_id or new_session_id()
        self.deny = frozenset(deny)
        self.yes = yes
        self.own_permissions = own_permissions
        """The agent's permissions are its own (``--agent``): ``/tools`` does not say what the command's are."""
        self.usage = Usage()
        """Tokens used by this chat's turns (all sessions)."""
        self.cost: Cost | None = Cost(0.0, 0.0)
        """Their cost; ``None`` once a turn ran on a model whose price is unknown."""
        self.last: RunResult | None = None
        self._last_agent: Agent | None = None
        """The agent that ran ``last`` (``/model`` may have changed it since)."""
        self._stream: RunStream | None = None
        self.paused: PausedRun | None = None
        """The state of the last answer when it paused: its calls wait for ``/approve``, ``/deny``, ``/result``."""
        self.decided: dict[str, Decision] = {}
        """The decisions given so far for the paused calls; the run resumes once each has one."""
        self.attached: list[Attachment] = []
        """Files attached to the next message (``/attach``)."""
        self._commands: dict[str, Callable[[str], Awaitable[bool]]] = {
            "help": self._help,
            "attach": self._attach,
            "model": self._model,
            "tools": self._tools,
            "mode": self._mode,
            "sessions": self._sessions,
            "resume": self._resume,
            "new": self._new,
            "approve": self._approve,
            "deny": self._deny,
            "result": self._result,
            "pending": self._pending,
            "usage": self._usage,
            "trace": self._trace,
            "exit": self._exit,
            "quit": self._exit,
        }

    # --- input --------------------------------------------------------------------------------------------

    async def handle(self, line: str) -> bool:
        """Act on one input: a slash command or a prompt. ``False`` means the chat is over."""
        text = line.strip()
        if not text:
            return True
        if text.startswith("/"):
            name, _, argument = text[1:].partition(" ")
            command = self._commands.get(name.lower())
            if command is None:
                self.say(f"unknown command /{name}; /help lists the commands", "red")
                return True
            try:
                return await command(argument.strip())
            except (TetherError, OSError) as error:  # a store that cannot be read: say so, keep chatting
                self.say(f"error: {getattr(error, 'message', error)}", "red")
                return True
        await self.ask(line.rstrip())
        return True

    @property
    def running(self) -> bool:
        """Whether a turn is going on."""
        return self._stream is not None

    def cancel(self) -> bool:
        """Stop the turn going on, if any (it ends as cancelled, its transcript valid and saved)."""
        if self._stream is None:
            return False
        self._stream.cancel()
        return True

    async def ask(self, prompt: str) -> RunResult | None:
        """One turn: run the agent on ``prompt`` in this chat's session, showing its events as they come."""
        attached, self.attached = self.attached, []
        return await self._follow(
            lambda agent: agent.stream([prompt, *attached] if attached else prompt, session=self.session_id)
        )

    async def _follow(self, start: Callable[[Agent], RunStream]) -> RunResult | None:
        """A run the agent starts (``start(agent)``), shown as it goes; its usage added to the chat's."""
        result: RunResult | None = None
        agent = self.agent
        self.renderer.redaction = agent.redaction  # the agent may have changed (/model)
        self.renderer.probe = probe_address(agent.provider)
        try:
            self._stream = start(agent)
            async for event in self._stream:
                self.renderer(event)
                if type(event) is RunCompleted:
                    result = event.result
        except TetherError as error:  # the session could not be loaded, or the decisions were refused
            self.say(f"error: {error.message} ({error.code})", "red")
        finally:
            self._stream = None
            self.renderer.stop_spinner()
        if result is not None:
            self._ended(result, agent)
        return result

    def _ended(self, result: RunResult, agent: Agent) -> None:
        self.last, self._last_agent = result, agent
        self.paused = result.state if result.stop_reason == "paused" else None
        self.decided = {}
        if self.paused is not None:
            if not_run(result):
                self.say("this session is paused: your message was not sent; decide its calls first", "yellow")
            self.say(DECIDE, "yellow")
        self.usage += result.usage
        if self.cost is not None and result.cost is not None:
            self.cost = Cost(self.cost.input_usd + result.cost.input_usd, self.cost.output_usd + result.cost.output_usd)
        elif result.usage.requests:
            self.cost = None

    def say(self, line: str, style: str = "") -> None:
        """A line of the chat's own output."""
        self.renderer.note(line, style)

    def banner(self) -> str:
        return f"tether chat · {self.model} · {self.mode} · session {self.session_id} · /help, Ctrl-D to leave"

    # --- commands -----------------------------------------------------------------------------------------

    async def _attach(self, argument: str) -> bool:
        if not argument:
            shown = ", ".join(repr(a) for a in self.attached) or "nothing"
            self.say(f"attached to the next message: {shown}")
            return True
        from tether.errors import ConfigInvalid

        try:
            attachment = await asyncio.to_thread(_attachment, argument)
        except ConfigInvalid as error:
            self.say(f"error: {error.message}", "red")
            return True
        self.attached.append(attachment)
        self.say(f"attached {argument} ({attachment.media_type}, {attachment.size:,} bytes) to the next message")
        return True

    async def _help(self, argument: str) -> bool:
        self.renderer.end_lines()
        self.renderer.err.print(Text(HELP))
        return True

    async def _model(self, argument: str) -> bool:
        argument, save = _save_flag(argument)
        if not argument:
            self.say(f"model: {self.model}")
        else:
            from tether.errors import ConfigInvalid

            try:
                agent = self.build(argument, self.mode)
            except ConfigInvalid as error:
                self.say(f"error: {error.message} (still on {self.model})", "red")
                return True
            self.agent, self.model = agent, argument
            self.say(f"model: {argument}")
        if save:
            await self._save("runtime.model", self.model)
        return True

    async def _mode(self, argument: str) -> bool:
        argument, save = _save_flag(argument)
        if not argument:
            self.say(f"mode: {self.mode}")
        elif argument not in MODES:
            self.say(f"mode must be read-only or full, not {argument!r}", "red")
            return True
        else:
            self.agent.mode = argument
            self.mode = argument
            self.say(f"mode: {argument}" + ("  (only tools that change nothing)" if argument == "read-only" else ""))
        if save:
            await self._save("tools.mode", self.mode)
        return True

    async def _save(self, key: str, value: str) -> None:
        """Write ``key = value`` to the configuration file through the chat's :class:`ConfigService` (on a
        worker thread: it may wait for another change of the file to end)."""
        if self.settings is None:
            self.say(f"{key} not saved: this chat has no configuration file", "red")
            return
        from tether.config.load import CONFIG_FLAG
        from tether.errors import ConfigInvalid

        try:
            path = await asyncio.to_thread(self.settings.set, key, _toml_string(value))
        except ConfigInvalid as error:
            self.say(f"{key} not saved: {error.message}", "red")
            return
        named = "" if self.settings.project.given_by != CONFIG_FLAG else f" (named by {CONFIG_FLAG})"
        self.say(f"saved {key} = {value!r} in {path}{named}")

    async def _tools(self, argument: str) -> bool:
        tools = list(self.agent.tools)
        rows: list[tuple[str, str, str]] = []
        for tool in tools:
            if tool.name in self.deny:
                status = "denied (tools.deny)"
            elif tool.read_only:
                status = "read-only"
            elif self.mode == "read-only":
                status = "not offered in read-only mode"
            elif tool.external:
                status = "external: a call pauses the answer for its result (/result)"
            elif tool.approval and not self.yes:
                status = "asks first (approval)"
            elif self.own_permissions:
                status = "as the agent's can_use_tool decides"
            else:
                status = "allowed (--yes)" if self.yes else "asks first"
            rows.append((tool.name, status, shorten(tool.description, 60)))
        for line in aligned(rows, free_last=True):
            self.say(line)
        if not tools:
            self.say("no tools")
        return True

    async def _sessions(self, argument: str) -> bool:
        summaries = await self.store.list()
        if not summaries:
            self.say("no saved sessions yet")
            return True
        for line in summary_table(summaries).splitlines():
            current = line.startswith(self.session_id + " ")
            self.say(("* " if current else "  ") + line, "bold" if current else "")
        return True

    async def _resume(self, argument: str) -> bool:
        if not argument:
            self.say("usage: /resume ID (/sessions lists them)", "red")
            return True
        try:
            session = await self.store.load(argument)
        except SessionNotFound:
            self.say(f"no session {argument!r}; /sessions lists them", "red")
            return True
        except TetherError as error:
            self.say(f"error: {error.message}", "red")
            return True
        self.session_id = session.id
        self.paused, self.decided = None, {}
        self.say(f"resumed {session.id}: {session.title or '(untitled)'} ({len(session.messages)} messages)")
        for message in session.messages[-2:]:
            if compaction_of(message) is not None:
                self.say(f"  (compacted) {shorten(summary_text(message), 200)}", "dim")
            elif message.role in ("user", "assistant") and message.text.strip():
                who = "you" if message.role == "user" else "assistant"
                self.say(f"  {who}: {shorten(message.text, 200)}", "dim")
        return True

    async def _new(self, argument: str) -> bool:
        self.session_id = new_session_id()
        self.paused, self.decided = None, {}
        self.say(f"new session {self.session_id}")
        return True

    async def _approve(self, argument: str) -> bool:
        return await self._decide(argument, lambda rest: Approve())

    async def _deny(self, argument: str) -> bool:
        return await self._decide(argument, lambda rest: Reject(rest or DENIED))

    async def _result(self, argument: str) -> bool:
        if len(argument.split(maxsplit=1)) < 2:
            self.say("usage: /result ID VALUE (JSON, or plain text)", "red")
            return True
        return await self._decide(argument, lambda rest: ExternalResult(parse_result(rest)))

    async def _decide(self, argument: str, decision: Callable[[str], Decision]) -> bool:
        """One paused call decided; once each has its decision, the run resumes and its answer is shown."""
        call_id, _, rest = argument.partition(" ")
        if self.paused is None:
            self.say("no answer is paused: no call waits for a decision", "red")
            return True
        waiting = self.paused.pending_ids
        if call_id not in waiting:
            self.say(f"no paused call {call_id!r}: it is one of {', '.join(waiting)} (/pending lists them)", "red")
            return True
        self.decided[call_id] = decision(rest.strip())
        if undecided := [known for known in waiting if known not in self.decided]:
            self.say(f"{call_id}: decided; still to decide: {', '.join(undecided)}")
            return True
        state, decided = self.paused, self.decided
        await self._follow(lambda agent: agent.resume_stream(state, decided, session=self.session_id))
        return True

    async def _pending(self, argument: str) -> bool:
        if self.paused is None:
            self.say("no answer is paused: no call waits for a decision")
            return True
        lines = pending_lines(self.paused.pending, self.agent.redaction)
        for call, line in zip(self.paused.pending, lines, strict=True):
            given = self.decided.get(call.id)
            self.say(line + (f"  [{DECIDED[type(given)]}]" if given is not None else ""))
        self.say(DECIDE, "yellow")
        return True

    async def _usage(self, argument: str) -> bool:
        self.say(f"this chat: {usage_line(self.usage, self.cost)}")
        try:
            session = await self.store.load(self.session_id)
        except SessionNotFound:
            return True
        from msgspec.structs import replace

        from tether.pricing import price_for
        from tether.usage import cost_of

        price = price_for(session.model) if session.model else None
        # A session keeps only its total usage, not each request's prompt size: priced at the base rates, which
        # is exact unless a request passed a long-context tier, and never charges a tier no request reached.
        cost = cost_of(session.usage, replace(price, tiers=())) if price is not None else None
        self.say(f"session {session.id}: {usage_line(session.usage, cost)}")
        return True

    async def _trace(self, argument: str) -> bool:
        if self.last is None or self._last_agent is None:
            self.say("no answer yet: /trace shows the last one's provider calls and tool calls")
            return True
        from tether.cli.trace import print_trace

        agent = self._last_agent
        self.renderer.end_lines()
        print_trace(self.renderer.err, self.last, agent.provider.info.model_string, agent.redaction)
        return True

    async def _exit(self, argument: str) -> bool:
        return False


def _save_flag(argument: str) -> tuple[str, bool]:
    """A command's argument without ``--save``, and whether it was there."""
    words = argument.split()
    return " ".join(word for word in words if word != SAVE_FLAG), SAVE_FLAG in words


def _toml_string(value: str) -> str:
    """``value`` as a TOML string, so that it is written as one whatever it looks like."""
    import json

    return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string


def _attachment(path: str) -> Attachment:
    """``/attach``'s file, read (on a worker thread: a file may be large)."""
    return Attachment.from_path(Path(path).expanduser())
