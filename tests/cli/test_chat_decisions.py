"""The chat's decisions on a paused answer, without a terminal: the pending calls listed, ``/approve``, ``/deny``,
``/result`` and ``/pending``, the run resumed once each call has its decision; on a scripted model."""

from __future__ import annotations

import io

from tether.agent import Agent
from tether.cli.render import Renderer, make_console
from tether.cli.repl import DECIDE, Chat
from tether.providers.base import Request
from tether.providers.scripted import ScriptedProvider, Step, parallel, reply
from tether.providers.scripted import call as scripted_call
from tether.sessions import MemorySessionStore
from tether.tools.base import tool

ran: list[str] = []


@tool(approval=True)
def deploy(service: str) -> str:
    """Deploy a service.

    Args:
        service: Its name.
    """
    ran.append(service)
    return f"deployed {service}"


@tool(external=True)
def weather(city: str) -> str:
    """The weather in a city, from outside.

    Args:
        city: The city.
    """
    raise AssertionError("an external tool's body never runs")


def echo(request: Request) -> Step:
    """The model says what its tools said, in order."""
    told = [m for m in request.messages if m.role == "tool"][-1]
    return reply(" | ".join(str(result.content) for result in told.tool_results))


class Chatting:
    def __init__(self, *script: Step | object) -> None:
        ran.clear()
        self.file = io.StringIO()
        self.provider = ScriptedProvider(list(script))  # type: ignore[arg-type]
        self.store = MemorySessionStore()
        renderer = Renderer(make_console(self.file))
        self.chat = Chat(self.build, self.store, renderer, model="scripted:one", mode="full")

    def build(self, model: str, mode: str) -> Agent:
        return Agent(self.provider, tools=[deploy, weather], mode=mode, store=self.store)

    @property
    def shown(self) -> str:
        return self.file.getvalue()


BOTH = parallel(
    scripted_call("deploy", {"service": "web"}, id="c1"), scripted_call("weather", {"city": "Oslo"}, id="c2")
)


async def test_a_paused_answer_lists_its_calls_and_resumes_once_each_is_decided() -> None:
    chatting = Chatting(BOTH, echo)
    await chatting.chat.handle("Deploy web and tell me the weather")

    assert "c1  deploy(service='web'): waits for approval" in chatting.shown
    assert "c2  weather(city='Oslo'): waits for its result from outside" in chatting.shown
    assert DECIDE in chatting.shown
    assert ran == [], "nothing runs before it is approved"

    await chatting.chat.handle("/approve c1")
    assert "c1: decided; still to decide: c2" in chatting.shown
    assert ran == [], "the run resumes only once every call has its decision"
    assert len(chatting.provider.requests) == 1

    await chatting.chat.handle('/result c2 {"sky": "snow"}')
    assert ran == ["web"]
    assert len(chatting.provider.requests) == 2
    assert "deployed web | {" in chatting.shown
    assert chatting.chat.paused is None, "the resumed run answered"


async def test_a_denial_gives_the_model_its_reason() -> None:
    chatting = Chatting(scripted_call("deploy", {"service": "db"}, id="c1"), echo)
    await chatting.chat.handle("Deploy db")
    await chatting.chat.handle("/deny c1 the database is frozen today")

    told = [m for m in chatting.provider.requests[1].messages if m.role == "tool"][-1]
    assert "the database is frozen today" in str(told.tool_results[0].content)
    assert ran == []


async def test_decisions_that_fit_nothing_are_said_and_change_nothing() -> None:
    chatting = Chatting(scripted_call("deploy", {"service": "db"}, id="c1"), echo)
    await chatting.chat.handle("/approve c1")
    assert "no answer is paused" in chatting.shown

    await chatting.chat.handle("Deploy db")
    await chatting.chat.handle("/approve c9")
    assert "no paused call 'c9': it is one of c1" in chatting.shown
    await chatting.chat.handle("/result c1")
    assert "usage: /result ID VALUE" in chatting.shown
    assert len(chatting.provider.requests) == 1
    assert ran == []


async def test_pending_lists_the_calls_and_what_was_decided() -> None:
    chatting = Chatting(BOTH, echo)
    await chatting.chat.handle("Deploy web and tell me the weather")
    await chatting.chat.handle("/deny c1 not now")
    chatting.file.truncate(0)
    chatting.file.seek(0)
    await chatting.chat.handle("/pending")

    assert "c1  deploy(service='web'): waits for approval" in chatting.shown
    assert "[denied]" in chatting.shown
    assert "c2  weather(city='Oslo')" in chatting.shown


async def test_a_new_session_forgets_the_paused_answer() -> None:
    chatting = Chatting(scripted_call("deploy", {"service": "db"}, id="c1"))
    await chatting.chat.handle("Deploy db")
    await chatting.chat.handle("/new")
    await chatting.chat.handle("/approve c1")

    assert "no answer is paused" in chatting.shown
    assert ran == []


async def test_tools_says_which_tools_pause_and_which_ask() -> None:
    chatting = Chatting()
    await chatting.chat.handle("/tools")

    shown = {line.split()[0]: line for line in chatting.shown.splitlines() if line.strip()}
    assert "external: a call pauses the answer for its result (/result)" in shown["weather"]
    assert "asks first (approval)" in shown["deploy"]


async def test_a_message_to_a_paused_session_is_not_sent_and_the_calls_still_wait() -> None:
    chatting = Chatting(scripted_call("deploy", {"service": "db"}, id="c1"), echo)
    await chatting.chat.handle("Deploy db")
    await chatting.chat.handle("Are you there?")

    assert "this session is paused: your message was not sent" in chatting.shown
    assert len(chatting.provider.requests) == 1
    await chatting.chat.handle("/approve c1")
    assert ran == ["db"]
    assert "deployed db" in chatting.shown
