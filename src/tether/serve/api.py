"""The JSON API's handlers (``/api/...``) and the protocol routes (``/agui``, ``/api/chat``), over one agent.

Each handler names its caller first (``serve/security.py``: 401 without a valid token), reads at most the
server's request size, and answers JSON; a refusal is an ``ApiError`` (status, stable code, message). A run's
route reserves a place (429 when none is left), starts the run (``serve/sources.py``), registers it
(``serve/runs.py``) and answers with its event stream (``serve/streaming.py``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import re
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tether.errors import ConfigInvalid, DecisionInvalid, SessionInvalid, TetherError
from tether.events import RunResult
from tether.loop.pausing import marked
from tether.messages import Attachment, Message, Prompt, messages_to_jsonable, redacted_messages
from tether.paused import PausedRun
from tether.redaction import Redaction
from tether.serve.decisions import may_pause
from tether.serve.encoders import AguiEvents, JsonEvents, VercelEvents
from tether.serve.events_json import pending_json
from tether.serve.runs import Keep, OnDisconnect, RunRegistry, ServerRun, Watcher
from tether.serve.security import Access, ApiError, Caller, read_body
from tether.serve.sources import (
    DurableServed,
    OpenedRun,
    ServedAgent,
    durable_engine,
    is_plain,
    open_resumed,
    open_run,
)  # fmt: skip
from tether.serve.streaming import OWN_HEADERS, Encoder, EventStream
from tether.sessions.base import (
    Session,
    SessionNotFound,
    SessionStore,
    check_session_id,
    new_session_id,
    suggest_title,
)

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["Api", "AttachmentIn", "RunRequest"]


class AttachmentIn(msgspec.Struct, frozen=True):
    """An attachment of ``POST /api/runs``: its bytes in base64."""

    media_type: str
    data: str
    name: str | None = None


class RunRequest(msgspec.Struct, frozen=True):
    """The body of ``POST /api/runs``."""

    prompt: str = ""
    session_id: str | None = None
    model: str | None = None
    attachments: list[AttachmentIn] = msgspec.field(default_factory=list)


_RUN_REQUEST = msgspec.json.Decoder(RunRequest)


class Api:
    """One served agent's routes: its handlers share the door, the store, the runs and the settings."""

    def __init__(
        self,
        agent: ServedAgent | DurableServed,
        plain: ServedAgent,
        store: SessionStore,
        access: Access,
        runs: RunRegistry,
        models: dict[str, ServedAgent],
        *,
        max_request_bytes: int,
        on_disconnect: OnDisconnect,
        stream_buffer: int,
    ) -> None:
        self.agent = agent
        self.plain = plain
        self.store = store
        self.access = access
        self.runs = runs
        self.model = plain.provider.info.model_string
        self.models: dict[str, ServedAgent | DurableServed] = {self.model: agent, **models}
        self.max_request_bytes = max_request_bytes
        self.on_disconnect = on_disconnect
        self.stream_buffer = stream_buffer
        self.redaction = Redaction(plain.secrets)
        self._resuming: set[str] = set()
        """Paused runs whose resumption is starting: a second answer meanwhile is 409."""

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        """The server's life: at its end, the runs in flight are cancelled and saved."""
        yield
        await self.runs.close()

    def protocol_routes(self) -> list[Route]:
        """``/agui`` and ``/api/chat``."""
        return [Route("/agui", self.agui, methods=["POST"]), Route("/api/chat", self.chat, methods=["POST"])]

    async def agui(self, request: Request) -> Response:
        """``POST /agui``: an AG-UI run (``RunAgentInput``; the client sends the conversation), its AG-UI events
        as SSE; its transcript kept as the session of its thread. A client that disconnects: as for
        ``POST /api/runs``."""
        from tether.serve import agui

        caller = await self.access.caller(request)
        asked = agui.run_input(await read_body(request, self.max_request_bytes))
        session_id = _client_session(caller, "agui", asked.thread_id)
        translator = agui.Translator.for_run(asked, redaction=self.redaction)
        pause = await self._client_pause(session_id, asked.history, asked.resume)
        if pause is not None:  # the client answered its thread's paused run: it goes on
            opened = self._open_resumed(*pause)
            translator.answering(pause[0].pending_ids)
        elif asked.resume:
            raise ApiError(409, "run_not_paused", "the thread has no paused run for these resume entries")
        else:
            opened = await self._open(self.agent, asked.prompt, None, asked.history, asked.instructions)
        run, watcher = await self._started(opened, caller, session_id, asked.prompt, self._keep)
        encoder = AguiEvents(translator)
        return EventStream(run, watcher, encoder, {})  # type: ignore[return-value]  # an ASGI response

    async def chat(self, request: Request) -> Response:
        """``POST /api/chat``: the Vercel AI SDK's ``useChat`` request (the client sends the conversation), its UI
        message stream as SSE; its transcript kept as the session of its chat. A client that disconnects: as for
        ``POST /api/runs``."""
        from tether.serve import vercel

        caller = await self.access.caller(request)
        asked = vercel.chat_input(await read_body(request, self.max_request_bytes))
        session_id = _client_session(caller, "chat", asked.chat_id)
        translator = vercel.Translator(redaction=self.redaction)
        pause = await self._client_pause(session_id, asked.history)
        if pause is not None:  # the page's addToolResult answered the chat's paused run: it goes on, same message
            opened = self._open_resumed(*pause)
            translator = vercel.Translator(asked.continues, redaction=self.redaction)
            translator.answering(pause[0].pending_ids)
        else:
            opened = await self._open(self.agent, asked.prompt, None, asked.history, asked.instructions)
        run, watcher = await self._started(opened, caller, session_id, asked.prompt, self._keep)
        headers = {k: v for k, v in vercel.HEADERS.items() if k.lower() not in OWN_HEADERS}
        return EventStream(run, watcher, VercelEvents(translator), headers)  # type: ignore[return-value]

    async def _started(
        self, opened: OpenedRun, caller: Caller, session_id: str | None, prompt: Any, keep: Keep | None = None
    ) -> tuple[ServerRun, Watcher]:
        """A run just opened, driven and registered once it started, and the caller's stream of it (from its
        first event)."""
        text = prompt if isinstance(prompt, str) else next((p for p in prompt or () if isinstance(p, str)), "")
        run = ServerRun(session_id, caller.owner, self.redaction.text(text), self.on_disconnect, opened.cancel)
        watcher = run.watch(self.stream_buffer)
        try:
            await self.runs.start(run, opened.events, self.redaction, keep)
        except asyncio.CancelledError:  # the client went before the run's first event: the disconnect rule
            run.leave(watcher)
            raise
        return run, watcher

    async def _keep(self, run: ServerRun, result: RunResult[Any]) -> None:
        """A protocol's run, whose client sends the whole conversation each time: its transcript saved as the
        session of its thread or chat (replacing the one before), so the page and ``/api/sessions`` show it."""
        if run.session_id is None:
            return
        messages = marked(list(result.messages), result.state)  # a paused run's pause kept for its client's answer
        try:
            stored = await self.store.load(run.session_id)
            session = stored.updated(messages=messages, usage=stored.usage + result.usage, model=run.model)
        except SessionNotFound:
            session = Session.new(
                id=run.session_id, messages=messages, usage=result.usage, model=run.model,
                title=suggest_title(messages),
            )  # fmt: skip
        await self.store.save(session)

    # --- the agent ------------------------------------------------------------------------------------------

    async def info(self, request: Request) -> Response:
        """``GET /api/info``: the agent, its models and tools."""
        await self.access.caller(request)
        tools = [{"name": t.name, "description": t.description} for t in self.plain.tools]
        return JSONResponse(
            {
                "name": self.plain.name,
                "model": self.model,
                "models": list(self.models),
                "tools": tools,
                "durable": not is_plain(self.agent),
                "approvals": may_pause(self.plain),
                "auth": not self.access.open,
                "max_request_bytes": self.max_request_bytes,
            }
        )

    # --- runs -----------------------------------------------------------------------------------------------

    async def start_run(self, request: Request) -> Response:
        """``POST /api/runs``: a run of the prompt, its events as SSE (``event: <kind>``, ``data: <json>``).

        A client that disconnects: the run is cancelled (``on_disconnect="cancel"``, its session saved with a
        valid transcript) or goes on to its end (``"detach"``)."""
        caller = await self.access.caller(request)
        body = await read_body(request, self.max_request_bytes)
        try:
            asked = _RUN_REQUEST.decode(body)
        except msgspec.DecodeError as error:
            raise ApiError(400, "request_invalid", f"the run's request is not valid: {error}") from None
        agent = self._agent_for(asked.model)
        prompt = _prompt(asked)
        session_id = await self._session_for(caller, asked.session_id)
        opened = await self._open(agent, prompt, session_id)
        run, watcher = await self._started(opened, caller, session_id, asked.prompt)
        return EventStream(run, watcher, self.json_events(run), {})  # type: ignore[return-value]  # an ASGI response

    async def decide(self, request: Request) -> Response:
        """``POST /api/runs/{run_id}/decisions``: a paused run's pending calls decided (``tether.paused``'s
        decisions as JSON, by call id), and the resumed run's events as SSE, as ``POST /api/runs`` streams them.

        The paused state is the one kept in the run's session, so a server started again still resumes it. 404:
        no such run of the caller's; 409 ``run_not_paused``: it is running or not paused (a second answer to the
        same pause); 400 ``decision_invalid`` (details name the calls): the decisions do not fit, nothing ran.
        A client that disconnects: as for ``POST /api/runs``."""
        from tether.serve.decisions import checked, paused_in, read_decisions

        caller = await self.access.caller(request)
        run_id = request.path_params["run_id"]
        decisions = read_decisions(await read_body(request, self.max_request_bytes))
        known = self.runs.owned(run_id, caller)
        if not is_plain(self.agent):
            if known is None and not caller.local:  # a durable run of another process: only this machine's caller
                raise ApiError(404, "not_found", f"no run {run_id!r}")
            return await self._decide_durable(run_id, decisions, known)
        if known is not None and known.running and known.pending is not None:
            await known.ended()  # its stream ended at the pause; the run is saving it
        if run_id in self._resuming or (known is not None and known.running):
            raise ApiError(409, "run_not_paused", f"run {run_id!r} is running: it is not paused")
        session_id = known.session_id if known is not None else await self._paused_session(caller, run_id)
        if session_id is None:
            raise ApiError(409, "run_not_paused", f"run {run_id!r} kept no session: it cannot be resumed here")
        session = await self._owned_session(caller, session_id)
        checked(paused_in(session.messages, run_id), decisions)
        self._resuming.add(run_id)
        try:
            opened = self._open_resumed(None, decisions, session_id)
            prompt = known.prompt if known is not None else ""
            run, watcher = await self._started(opened, caller, session_id, prompt)
        finally:
            self._resuming.discard(run_id)
        return EventStream(run, watcher, self.json_events(run), {})  # type: ignore[return-value]  # an ASGI response

    async def _decide_durable(self, run_id: str, decisions: Any, known: ServerRun | None) -> Response:
        """A durable run's decisions, sent to its workflow (``DurableAgent.decide``: it waits in the database).
        A run this server streams: the rest of its events, from a stream that watches it before the decisions
        go; a run of another process (or of this server before it started again): 202, it goes on there."""
        from tether.serve.decisions import DecisionRefused

        decide = getattr(self.agent, "decide", None)
        if decide is None:
            raise ConfigInvalid("this durable agent takes no decisions (DurableAgent.decide is missing)")
        if known is not None and known.pending is None:
            raise ApiError(409, "run_not_paused", f"run {run_id!r} is not paused: there is nothing to decide")
        watcher = known.watch(self.stream_buffer) if known is not None else None
        try:
            await decide(run_id, decisions)
        except DecisionInvalid as error:
            if known is not None and watcher is not None:
                known.leave(watcher)
            raise DecisionRefused(error) from None
        if known is None or watcher is None:
            return JSONResponse({"run_id": run_id, "decided": sorted(decisions)}, status_code=202)
        return EventStream(known, watcher, self.json_events(known), {})  # type: ignore[return-value]  # an ASGI response

    def _open_resumed(self, state: PausedRun | None, decisions: Any, session_id: str | None = None) -> OpenedRun:
        """A paused run resumed, its place reserved first (429 when none is left)."""
        self.runs.reserve()
        try:
            return open_resumed(self.agent, state, decisions, session_id)
        except BaseException:
            self.runs.reserved -= 1
            raise

    async def _client_pause(
        self, session_id: str | None, history: Sequence[Message], entries: Sequence[Any] = ()
    ) -> tuple[PausedRun, dict[str, Any]] | None:
        """A protocol's request that answers its thread's paused run (``serve/decisions.py``: tool results for
        the pending calls, or AG-UI resume entries): the pause and the checked decisions; ``None`` otherwise."""
        from tether.loop.pausing import paused_of
        from tether.serve.decisions import answered, checked, resumed_by

        if session_id is None:
            return None
        try:
            state = paused_of((await self.store.load(session_id)).messages)
        except SessionNotFound:
            return None
        if state is None:
            return None
        decisions = resumed_by(entries, state) or answered(history, state)
        if decisions is None:
            return None
        checked(state, decisions)
        return state, decisions

    async def _paused_session(self, caller: Caller, run_id: str) -> str:
        """The caller's session that holds ``run_id``'s pause (a run this server no longer knows: it was started
        again); ``ApiError`` 404 when none does."""
        from tether.loop.pausing import paused_of

        for listed in await self.store.list():
            if not caller.owns_session(listed.id):
                continue
            try:
                state = paused_of((await self.store.load(listed.id)).messages)
            except (SessionNotFound, TetherError):
                continue
            if state is not None and state.run_id == run_id:
                return listed.id
        raise ApiError(404, "not_found", f"no run {run_id!r}")

    async def _open(
        self,
        agent: ServedAgent | DurableServed,
        prompt: Prompt | None,
        session: str | None,
        history: Sequence[Message] = (),
        instructions: str | None = None,
    ) -> OpenedRun:
        """The run started, its place reserved first (429 when none is left; given back if it fails to start)."""
        self.runs.reserve()
        try:
            return await open_run(agent, prompt, session, history, instructions)
        except BaseException:
            self.runs.reserved -= 1
            raise

    def json_events(self, run: ServerRun) -> Encoder:
        """The encoder of ``/api/runs``' stream."""
        return JsonEvents(self.redaction, run.session_id)

    def _agent_for(self, model: str | None) -> ServedAgent | DurableServed:
        if model is None:
            return self.agent
        agent = self.models.get(model)
        if agent is None:
            raise ApiError(400, "request_invalid", f"model {model!r} is not offered; /api/info lists the models")
        return agent

    async def _session_for(self, caller: Caller, session_id: str | None) -> str:
        """The session a run goes on in: the caller's own (404 for another's or an unknown one), or a new one."""
        if session_id is None:
            return f"{caller.owner}-{new_session_id()}"
        await self._owned_session(caller, session_id)
        return session_id

    async def _owned_session(self, caller: Caller, session_id: str) -> Any:
        try:
            check_session_id(session_id)
            if not caller.owns_session(session_id):
                raise SessionNotFound(f"no session {session_id!r}")
            return await self.store.load(session_id)
        except SessionNotFound:
            raise ApiError(404, "not_found", f"no session {session_id!r}") from None
        except SessionInvalid as error:
            raise ApiError(400, "session_invalid", error.message) from None

    async def cancel_run(self, request: Request) -> Response:
        """``POST /api/runs/{run_id}/cancel``: stop a run; it ends as cancelled, its transcript saved."""
        caller = await self.access.caller(request)
        run = self.runs.get(request.path_params["run_id"], caller)
        run.cancel()
        return JSONResponse({"run_id": run.run_id, "status": run.status, "cancelled": run.running})

    async def list_runs(self, request: Request) -> Response:
        """``GET /api/runs``: this server's recent runs, newest first, and a durable agent's durable runs."""
        caller = await self.access.caller(request)
        body: dict[str, Any] = {"runs": self.runs.listing(caller)}
        if not is_plain(self.agent) and caller.local:
            body["durable_runs"] = await _durable_runs()
        return JSONResponse(body)

    async def get_run(self, request: Request) -> Response:
        """``GET /api/runs/{run_id}``: a run's result summary and turn records."""
        caller = await self.access.caller(request)
        return JSONResponse(self.runs.get(request.path_params["run_id"], caller).details())

    # --- sessions -------------------------------------------------------------------------------------------

    async def list_sessions(self, request: Request) -> Response:
        """``GET /api/sessions``: the caller's sessions, newest first."""
        caller = await self.access.caller(request)
        listed = [s for s in await self.store.list() if caller.owns_session(s.id)]
        sessions = [
            {
                "id": s.id,
                "title": self.redaction.text(s.title),
                "model": s.model,
                "created_at": s.created_at.isoformat(),
                "updated_at": s.updated_at.isoformat(),
                "message_count": s.message_count,
            }
            for s in listed
        ]
        return JSONResponse({"sessions": sessions})

    async def get_session(self, request: Request) -> Response:
        """``GET /api/sessions/{id}``: a session's messages as JSON (tool calls redacted, secrets masked)."""
        caller = await self.access.caller(request)
        session = await self._owned_session(caller, request.path_params["session_id"])
        messages = messages_to_jsonable(redacted_messages(session.messages, self.redaction))
        body = {
            "id": session.id,
            "title": session.title,
            "model": session.model,
            "created_at": session.created_at.isoformat(),
            "updated_at": session.updated_at.isoformat(),
            "usage": msgspec.to_builtins(session.usage),
            "messages": messages,
            "paused": self._paused_json(session.messages),
        }
        text = self.redaction.masker.mask(msgspec.json.encode(body).decode())
        return Response(text, media_type="application/json")

    def _paused_json(self, messages: Sequence[Message]) -> dict[str, Any] | None:
        """A paused session's run and pending calls (``None``: the session is not paused)."""
        from tether.loop.pausing import paused_of

        try:
            state = paused_of(messages)
        except TetherError:  # a marker this version cannot read: shown as not paused
            return None
        if state is None:
            return None
        return {"run_id": state.run_id, "pending": pending_json(state.pending, self.redaction)}

    async def delete_session(self, request: Request) -> Response:
        """``DELETE /api/sessions/{id}``: the session removed (204)."""
        caller = await self.access.caller(request)
        session_id = request.path_params["session_id"]
        await self._owned_session(caller, session_id)
        await self.store.delete(session_id)
        return Response(status_code=204)


def _prompt(asked: RunRequest) -> Prompt:
    """The run's prompt: its text, then its attachments in order; ``ApiError`` 400 for an empty one or an
    attachment that is not base64."""
    attachments = []
    for item in asked.attachments:
        try:
            data = base64.b64decode(item.data, validate=True)
        except (binascii.Error, ValueError):
            raise ApiError(400, "request_invalid", f"attachment {item.name or ''!r} is not base64") from None
        try:
            attachments.append(Attachment.from_bytes(data, item.media_type or None, name=item.name))
        except TetherError as error:
            raise ApiError(400, "request_invalid", error.message) from None
    if not asked.prompt.strip() and not attachments:
        raise ApiError(400, "request_invalid", "the run needs a prompt or an attachment")
    if not attachments:
        return asked.prompt
    return [asked.prompt, *attachments] if asked.prompt else attachments


async def _durable_runs() -> list[dict[str, Any]]:
    try:
        records = await durable_engine().list_runs(limit=100)
    except (TetherError, ConfigInvalid):
        return []
    return [msgspec.to_builtins(record, enc_hook=str) for record in records]


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def _client_session(caller: Caller, protocol: str, client_id: str | None) -> str | None:
    """The session a protocol's thread or chat is kept as: the caller's, named by the client's id (made safe as
    a session id); ``None`` without an id."""
    if not client_id:
        return None
    return f"{caller.owner}-{protocol}-{_UNSAFE.sub('-', client_id)[:80]}"
