"""The page of ``tether serve`` in a real browser: headless Chromium drives it against the real app.

The app runs under uvicorn on 127.0.0.1 with a scripted agent that has a tool; the system's Chromium (Debian's
``chromium``, driven by Playwright, which never downloads a browser of its own) opens ``/``, chats, attaches a
file, stops a run and reads a run's timeline, all through the page's own controls, and the checks read the DOM.

A screenshot of each step is saved in ``test-artifacts/browser/`` at the repository's root (gitignored; CI
keeps the folder as an artefact): ``1-opened.png``, ``2-answered.png``, ``3-attached.png``, ``4-run.png``,
``5-streaming.png``, ``6-stopped.png``, ``7-refused.png``, ``8-signed-in.png``, ``9-mounted.png``,
``10-failed-run.png``, ``11-durable.png``, ``12-approval.png``, ``13-approved.png``, ``14-denied.png``,
``15-external.png``.

Without Chromium the test is skipped with the reason, except under ``CI=true``, where it fails: CI installs
Chromium (``.ci/run``), and a skip there would hide a page that no longer works.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tether import Agent, Attachment, tool
from tether.errors import AuthFailed
from tether.loop.context import COMPACTION_REQUEST
from tether.messages import ToolResult
from tether.providers.base import Request
from tether.providers.scripted import ScriptedProvider, Step, call, fail, parallel, reply

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-artifacts" / "browser"


def chromium() -> str:
    """The system's Chromium; a skip (a failure under ``CI=true``) where there is none, or no Playwright."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    problem = None
    if found is None:
        problem = "no chromium on PATH (Debian: apt-get install chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError as error:
            problem = f"Playwright cannot be imported: {error}"
    if problem is None and found is not None:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must test the page in a browser, but {problem}", pytrace=False)
    pytest.skip(f"no browser test here: {problem}")


@tool
def lookup(item: str) -> str:
    """How many of an item are in stock."""
    return f"{item}: 12 in stock"


@tool
def restock(item: str) -> str:
    """Order more of an item."""
    raise RuntimeError("the supplier is closed")


@pytest.fixture
def model() -> ScriptedProvider:
    """Three runs' script: two tool calls (one fails), then a thought-out answer streamed in pieces; an answer
    to an attachment; an answer that streams, then waits until it is stopped."""
    return ScriptedProvider(
        [
            parallel(call("lookup", {"item": "pears"}), call("restock", {"item": "pears"})),
            reply("There are 12 pears in stock.", chunk_size=4, thinking="The tool said 12."),
            reply("Your note says hello."),
            reply("Once upon a time", hang=True),
        ],
        model="shopkeeper",
    )


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """``app`` under uvicorn on 127.0.0.1 (a free port), in a thread; its base URL."""
    import uvicorn

    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                pytest.fail("uvicorn did not start")
            threading.Event().wait(0.02)
        yield f"http://127.0.0.1:{listening.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        listening.close()


@pytest.fixture
def server(model: ScriptedProvider) -> Iterator[str]:
    """The real app (``agent.to_asgi()``) of an agent named ``shop``, with the ``lookup`` and ``restock`` tools;
    its base URL."""
    with serving(Agent(model, tools=[lookup, restock], name="shop").to_asgi()) as url:
        yield url


@contextmanager
def browser_page() -> Iterator[Any]:
    """A page of headless Chromium (the system's); the test fails on any error a page's script throws."""
    executable = chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # --no-sandbox: Chromium refuses its own sandbox to root, which CI runs as
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            context = browser.new_context(viewport={"width": 1100, "height": 900})
            errors: list[str] = []
            context.on("page", lambda page: page.on("pageerror", lambda error: errors.append(str(error))))
            yield context.new_page()
            assert errors == [], errors
        finally:
            browser.close()


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / name), full_page=True)


def test_the_page_chats_streams_shows_tool_calls_attaches_draws_a_runs_timeline_and_stops_a_run(
    server: str, model: ScriptedProvider
) -> None:
    from playwright.sync_api import expect

    with browser_page() as page:
        page.goto(f"{server}/")

        # The agent's name and model come from /api/info.
        expect(page.locator("#agent-name")).to_have_text("shop")
        expect(page.get_by_label("Model")).to_have_value("scripted:shopkeeper")
        shot(page, "1-opened.png")

        # A message: each tool call is shown with its arguments and result (a failed one marked), the thinking
        # folded away, the answer streamed into one bubble.
        page.get_by_label("Message").fill("How many pears?")
        page.get_by_role("button", name="Send").click()
        expect(page.locator(".message.assistant .text").last).to_have_text("There are 12 pears in stock.")
        expect(page.locator("#log .tool-call .tool-name")).to_have_text(["lookup", "restock"])
        failed = page.locator("#log .tool-call.failed")
        expect(failed.locator(".tool-state")).to_have_text("failed (tool_failed)")
        expect(failed.locator(".tool-result")).to_contain_text("the supplier is closed")
        tool_call = page.locator("#log .tool-call").first
        expect(tool_call.locator(".tool-args")).to_contain_text('"item": "pears"')
        expect(tool_call.locator(".tool-result")).to_have_text("pears: 12 in stock")
        expect(tool_call).not_to_have_class("running")
        thinking = page.locator("details.thinking")
        expect(thinking).to_have_count(1)
        expect(thinking).not_to_have_attribute("open", "")
        expect(thinking.locator(".thinking-text")).to_have_text("The tool said 12.")
        expect(page.get_by_role("status")).to_contain_text("Run complete")
        expect(page.get_by_label("Session")).not_to_have_value("")
        expect(page.get_by_role("log")).to_have_attribute("aria-busy", "false")  # read aloud once whole
        expect(page.get_by_label("Message")).to_be_focused()  # ready for the next message
        shot(page, "2-answered.png")

        # A file attached: its name is shown, and the model's request carries it, bytes and all, in the session
        # the first message began.
        page.get_by_label("Attach files").set_input_files(
            files=[{"name": "note.txt", "mimeType": "text/plain", "buffer": b"hello from the note"}]
        )
        expect(page.locator("#attached")).to_contain_text("note.txt")
        page.get_by_label("Message").fill("What does my note say?")
        page.get_by_label("Message").press("Enter")  # the keyboard sends too
        expect(page.locator(".message.assistant .text").last).to_have_text("Your note says hello.")
        expect(page.locator(".message.user .attachments").last).to_have_text("Attached: note.txt")
        expect(page.locator("#attached")).to_be_empty()
        shot(page, "3-attached.png")
        asked = model.requests[2].messages
        sent = [part for part in asked[-1].parts if isinstance(part, Attachment)]
        assert [(a.name, a.media_type, a.data) for a in sent] == [("note.txt", "text/plain", b"hello from the note")]
        assert [m.text for m in asked if m.role == "user"] == ["How many pears?", "What does my note say?"]

        # The session, picked again after a reload: its conversation drawn from the store, tool call and
        # attachment included.
        session = page.get_by_label("Session").input_value()
        page.reload()
        page.get_by_label("Session").select_option(session)
        expect(page.locator(".message.user .text")).to_have_text(["How many pears?", "What does my note say?"])
        expect(page.locator("#log .tool-call .tool-result").first).to_have_text("pears: 12 in stock")
        expect(page.locator("#log .tool-call.failed .tool-name")).to_have_text("restock")
        expect(page.locator(".message.user .attachments")).to_have_text("Attached: note.txt")
        expect(page.locator(".message.assistant .text").last).to_have_text("Your note says hello.")

        # The runs view: the first run's turns as a timeline, its tool calls in the first turn's row.
        page.get_by_role("button", name="Runs").click()
        page.locator(".run-link").filter(has_text="How many pears?").click()
        turns = page.locator(".timeline > li.turn")
        expect(turns).to_have_count(2)
        expect(turns.nth(0).locator(".tool-call .tool-name")).to_have_text(["lookup", "restock"])
        expect(turns.nth(0).locator(".tool-call.failed")).to_contain_text("failed (tool_failed)")
        expect(turns.nth(0).locator(".bar")).to_have_count(3)  # the model call, and each tool call
        expect(turns.nth(1).locator(".tool-call")).to_have_count(0)
        expect(page.locator(".run-summary")).to_contain_text("complete")
        shot(page, "4-run.png")

        # A run that streams and does not end: its text is on the page while it runs, and Stop cancels it.
        page.get_by_role("button", name="Chat").click()
        page.get_by_label("Message").fill("Tell me a story.")
        page.get_by_role("button", name="Send").click()
        expect(page.locator(".message.assistant .text").last).to_have_text("Once upon a time")
        expect(page.get_by_role("button", name="Send")).to_be_disabled()
        expect(page.get_by_role("log")).to_have_attribute("aria-busy", "true")
        shot(page, "5-streaming.png")
        page.get_by_role("button", name="Stop").click()
        expect(page.get_by_role("status")).to_contain_text("Run cancelled")
        expect(page.get_by_role("button", name="Send")).to_be_enabled()
        shot(page, "6-stopped.png")

        # The session deleted, once confirmed: gone from the picker, the page, and the server.
        page.once("dialog", lambda dialog: dialog.accept())
        page.get_by_role("button", name="Delete session").click()
        expect(page.get_by_label("Session")).to_have_value("")
        expect(page.locator("#session option")).to_have_count(1)
        expect(page.locator("#log > *")).to_have_count(0)
        expect(page.get_by_role("button", name="Delete session")).to_be_disabled()


def test_a_server_with_a_token_asks_for_it_and_the_page_keeps_it_for_the_tab() -> None:
    from playwright.sync_api import expect

    agent = Agent(ScriptedProvider([reply("Signed in.")]), name="guarded")
    with serving(agent.to_asgi(token="s3cret-token")) as url, browser_page() as page:
        page.goto(f"{url}/")
        login = page.get_by_role("button", name="Sign in")
        expect(login).to_be_visible()
        expect(page.get_by_label("Message")).to_be_hidden()  # nothing else works before a token is accepted
        page.get_by_label("Token").fill("wrong")
        login.click()
        expect(page.get_by_role("alert")).to_have_text("That token was refused.")
        shot(page, "7-refused.png")
        page.get_by_label("Token").fill("s3cret-token")
        login.click()
        expect(page.locator("#agent-name")).to_have_text("guarded")
        expect(login).to_be_hidden()
        expect(page.get_by_label("Message")).to_be_visible()
        shot(page, "8-signed-in.png")

        # A link with the token (a new tab: nothing kept yet): taken once, gone from the address bar, sent with
        # every request.
        page = page.context.new_page()
        page.goto(f"{url}/#token=s3cret-token")
        expect(page.locator("#agent-name")).to_have_text("guarded")
        assert page.url == f"{url}/"
        page.get_by_label("Message").fill("Hello?")
        page.get_by_role("button", name="Send").click()
        expect(page.locator(".message.assistant .text")).to_have_text("Signed in.")


def test_the_page_works_where_the_app_is_mounted() -> None:
    """``app.mount("/agent", agent.to_asgi())``: the page's files and API calls are relative to where it is."""
    from playwright.sync_api import expect
    from starlette.applications import Starlette
    from starlette.routing import Mount

    agent = Agent(ScriptedProvider([reply("Mounted.")]), name="mounted")
    with serving(Starlette(routes=[Mount("/agent", app=agent.to_asgi())])) as url, browser_page() as page:
        page.goto(f"{url}/agent")
        expect(page.locator("#agent-name")).to_have_text("mounted")
        assert page.url == f"{url}/agent/"
        page.get_by_label("Message").fill("Where are you?")
        page.get_by_label("Message").press("Enter")
        expect(page.locator(".message.assistant .text")).to_have_text("Mounted.")
        shot(page, "9-mounted.png")


def test_a_compaction_and_a_failed_model_call_are_marked_in_the_chat_and_in_the_runs_timeline() -> None:
    from playwright.sync_api import expect

    long = reply("a long answer: " + "word " * 1_800)  # two of them take the session past its compaction trigger
    answers = iter([long, long, fail(AuthFailed("the key was revoked"))])

    def respond(request: Request) -> Step:
        """Two long answers (a summary when asked), then a failure."""
        last = request.messages[-1]
        if last.role == "user" and last.text == COMPACTION_REQUEST:
            return reply("SUMMARY: a long answer was given.")
        return next(answers)

    model = ScriptedProvider([respond], repeat_last=True, context_window=4_000)
    with serving(Agent(model, name="forgetful").to_asgi()) as url, browser_page() as page:
        page.goto(f"{url}/")
        for prompt in ("Tell me everything.", "And more?"):
            page.get_by_label("Message").fill(prompt)
            page.get_by_label("Message").press("Enter")
            expect(page.get_by_role("status")).to_contain_text("Run complete")
        expect(page.locator(".message.notice")).to_contain_text("Conversation compacted")

        page.get_by_label("Message").fill("And again?")
        page.get_by_label("Message").press("Enter")
        expect(page.locator(".message.error")).to_have_text("the key was revoked (auth_failed)")
        expect(page.get_by_role("status")).to_contain_text("Run error")

        page.get_by_role("button", name="Runs").click()
        page.locator(".run-link").filter(has_text="And more?").click()
        turns = page.locator(".timeline > li.turn")
        expect(turns).to_have_count(2)
        expect(turns.nth(1)).to_have_class("turn compaction")
        expect(turns.nth(1).locator(".turn-head")).to_contain_text("Compaction")
        page.locator(".run-link").filter(has_text="And again?").click()
        expect(page.locator(".timeline > li.turn.failed .error")).to_have_text("Failed: auth_failed")
        expect(page.locator("#run-detail > .error")).to_have_text("the key was revoked (auth_failed)")
        shot(page, "10-failed-run.png")


def test_a_file_past_the_servers_limit_is_refused_by_the_page_before_it_is_sent_and_can_be_removed() -> None:
    from playwright.sync_api import expect

    model = ScriptedProvider([reply("Read without the file.")])
    with serving(Agent(model).to_asgi(max_request_bytes=4_096)) as url, browser_page() as page:
        page.goto(f"{url}/")
        page.get_by_label("Attach files").set_input_files(
            files=[{"name": "big.bin", "mimeType": "application/octet-stream", "buffer": b"x" * 4_000}]
        )
        page.get_by_label("Message").fill("Read this.")
        page.get_by_role("button", name="Send").click()
        expect(page.locator(".message.error")).to_contain_text("Too large to send")
        expect(page.locator(".message.error")).to_contain_text("up to 4096 bytes")
        expect(page.get_by_label("Message")).to_have_value("Read this.")  # kept, to send without the file
        expect(page.locator("#attached")).to_contain_text("big.bin")

        # The file removed, the message goes alone.
        page.get_by_role("button", name="Remove big.bin").click()
        expect(page.locator("#attached")).to_be_empty()
        page.get_by_role("button", name="Send").click()
        expect(page.locator(".message.assistant .text")).to_have_text("Read without the file.")
    assert [m.text for m in model.requests[0].messages] == ["Read this."]


def test_a_durable_agents_page_lists_the_durable_runs_that_ran_elsewhere(tmp_path: Path) -> None:
    """A ``DurableAgent`` served: its chat runs as workflows; the runs view also lists the durable runs of its
    database that this server did not run (a worker's, a batch's), each once."""
    from playwright.sync_api import expect

    from tether.durable import DurableAgent, launch, shutdown
    from tether.sessions import SQLiteSessionStore

    model = ScriptedProvider([reply("Served durably."), reply("Ran elsewhere.")])
    durable = DurableAgent(Agent(model, store=SQLiteSessionStore(tmp_path / "sessions.db")), name="keeper")
    launch(tmp_path / "runs.sqlite")
    try:
        with serving(durable.to_asgi()) as url, browser_page() as page:
            page.goto(f"{url}/")
            page.get_by_label("Message").fill("Hello?")
            page.get_by_label("Message").press("Enter")
            expect(page.locator(".message.assistant .text")).to_have_text("Served durably.")
            elsewhere: list[str] = []  # run on a thread of its own: Playwright's loop holds this one
            worker = threading.Thread(
                target=lambda: elsewhere.append(asyncio.run(durable.run("The nightly report")).text)
            )
            worker.start()
            worker.join(60)
            assert elsewhere == ["Ran elsewhere."]

            page.get_by_role("button", name="Runs").click()
            expect(page.locator(".run-link")).to_have_text(["Hello? · complete"])
            expect(page.locator(".durable-run")).to_have_text(["The nightly report · complete · keeper"])
            page.locator(".run-link").click()
            expect(page.locator(".timeline > li.turn")).to_have_count(1)
            shot(page, "11-durable.png")
    finally:
        shutdown()


SENT: list[str] = []


@tool(approval=True)
def send_invoice(customer: str) -> str:
    """Send an invoice (a person approves each one)."""
    SENT.append(customer)
    return f"invoice sent to {customer}"


def test_a_paused_run_shows_its_pending_call_and_approve_resumes_it_in_the_same_conversation() -> None:
    """A run pauses on an approval tool: the page shows the call (tool, arguments) with Approve and Deny; Approve
    posts the decision and the resumed run's answer streams into the same conversation; the tool ran once."""
    from playwright.sync_api import expect

    SENT.clear()
    model = ScriptedProvider([call("send_invoice", {"customer": "ACME"}), reply("The invoice is on its way.")])
    agent = Agent(model, tools=[send_invoice], name="billing")
    with serving(agent.to_asgi()) as url, browser_page() as page:
        page.goto(f"{url}/")
        page.get_by_label("Message").fill("Bill ACME")
        page.get_by_role("button", name="Send").click()
        pending = page.locator(".approvals .pending-call")
        expect(pending).to_have_count(1)
        expect(pending.locator("legend")).to_have_text("Run send_invoice?")
        expect(pending.locator(".tool-args")).to_contain_text('"customer": "ACME"')
        expect(page.get_by_role("button", name="Deny")).to_be_visible()
        expect(page.get_by_label("Reason to deny")).to_be_visible()
        expect(page.locator("#status")).to_contain_text("Run paused")
        expect(page.get_by_role("button", name="Approve")).to_be_focused()  # the keyboard is where the decision is
        assert SENT == []
        shot(page, "12-approval.png")

        page.get_by_role("button", name="Approve").click()
        expect(page.locator(".message.assistant .text").last).to_have_text("The invoice is on its way.")
        expect(page.locator("#log .tool-call .tool-result").last).to_have_text("invoice sent to ACME")
        expect(pending.locator(".decided")).to_have_text("Approved")
        expect(page.get_by_role("button", name="Approve")).to_be_disabled()
        expect(page.locator("#status")).to_contain_text("Run complete")
        shot(page, "13-approved.png")
    assert SENT == ["ACME"]


def test_a_paused_session_opened_again_shows_its_pending_call_and_a_denial_reaches_the_model() -> None:
    """The page reloaded while a run waits: picking its session draws the conversation and the pending call's
    buttons (from GET /api/sessions/{id}); Deny with a reason resumes the run, the tool never runs, and the model
    is given the reason."""
    from playwright.sync_api import expect

    SENT.clear()
    model = ScriptedProvider([call("send_invoice", {"customer": "Initech"}), reply("Understood, no invoice.")])
    agent = Agent(model, tools=[send_invoice], name="billing")
    with serving(agent.to_asgi()) as url, browser_page() as page:
        page.goto(f"{url}/")
        page.get_by_label("Message").fill("Bill Initech")
        page.get_by_role("button", name="Send").click()
        expect(page.locator(".approvals .pending-call")).to_have_count(1)
        session_id = page.get_by_label("Session").input_value()

        page.reload()
        expect(page.locator(".approvals")).to_have_count(0)
        page.get_by_label("Session").select_option(session_id)
        pending = page.locator(".approvals .pending-call")
        expect(pending.locator("legend")).to_have_text("Run send_invoice?")
        expect(pending.locator(".tool-args")).to_contain_text('"customer": "Initech"')
        page.get_by_label("Reason to deny").fill("Initech paid already")
        page.get_by_role("button", name="Deny").click()
        expect(page.locator(".message.assistant .text").last).to_have_text("Understood, no invoice.")
        expect(pending.locator(".decided")).to_have_text("Denied")
        expect(page.locator("#log .tool-call.failed .tool-result").last).to_have_text("Initech paid already")
        shot(page, "14-denied.png")
    assert SENT == []
    answered = [p for m in model.requests[-1].messages for p in m.parts if isinstance(p, ToolResult)]
    assert [(r.content, r.code) for r in answered] == [("Initech paid already", "permission_denied")]


@tool(external=True)
def choose_date(question: str) -> str:
    """Ask the person for a date."""
    raise AssertionError("an external tool's body never runs")


def test_an_external_call_takes_its_result_from_the_pages_json_box() -> None:
    """An external tool's call waits for a result: the page asks for it as JSON (refusing what is not JSON), and
    the result given is what the model reads."""
    from playwright.sync_api import expect

    model = ScriptedProvider([call("choose_date", {"question": "When?"}), reply("Booked for Friday.")])
    with serving(Agent(model, tools=[choose_date], name="booking").to_asgi()) as url, browser_page() as page:
        page.goto(f"{url}/")
        page.get_by_label("Message").fill("Book a table")
        page.get_by_role("button", name="Send").click()
        pending = page.locator(".approvals .pending-call")
        expect(pending.locator("legend")).to_have_text("choose_date needs a result")
        page.get_by_label("Result (JSON)").fill("Friday")
        page.get_by_role("button", name="Send result").click()
        expect(pending.get_by_role("alert")).to_have_text("The result must be JSON (a string in quotes).")
        page.get_by_label("Result (JSON)").fill('{"day": "Friday"}')
        page.get_by_role("button", name="Send result").click()
        expect(page.locator(".message.assistant .text").last).to_have_text("Booked for Friday.")
        expect(pending.locator(".decided")).to_have_text("Result sent")
        shot(page, "15-external.png")
    answered = [p for m in model.requests[-1].messages for p in m.parts if isinstance(p, ToolResult)]
    assert len(answered) == 1
    assert "Friday" in answered[0].content
