"""A run that pauses, as a user meets it on the command line: ``tether run`` with no terminal stops with exit 5
listing the calls that wait, ``--json`` and ``--state-out`` keep its state, ``tether run --resume FILE`` or
``--session ID`` with ``--approve``, ``--deny`` or ``--result`` goes on from there in another process; a state
or decisions that cannot be used exit 1 naming the error's code; in a terminal ``tether run`` asks inline, and
``tether chat`` takes the decisions as commands. The agent is a Python module of the project (``--agent``) on
the mock model; its approval tool appends to a file, which counts how many times it ran."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pexpect

from tests.e2e.conftest import Project, screen
from tests.e2e.mock_llm import Call, MockLLM, Say, Step
from tests.e2e.test_chat import PROMPT
from tether.paused import PausedRun

AGENT = '''
import os
from pathlib import Path

from tether import Agent, tool

LOG = Path(os.environ["DEPLOY_LOG"])


@tool(approval=True)
def deploy(service: str) -> str:
    """Deploy a service to production."""
    with LOG.open("a") as log:
        log.write(service + "\\n")
    return f"deployed {service}"


@tool(external=True)
def weather(city: str) -> str:
    """The weather in a city, as the user's browser sees it."""
    ...


agent = Agent(
    "openai-compatible:mock", base_url=os.environ["PAUSE_MOCK_URL"], tools=[deploy, weather], system="You deploy."
)
'''

SPEC = "deployer:agent"
CALL = "call_1_0"
"""The id the mock model gives its first tool call."""


def echo(body: dict[str, Any]) -> Step:
    """The model answers with what its tool said (the result, or the reason it was denied)."""
    said = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "tool")
    return Say(f"The tool said: {said}", pieces=1)


def deployer(project: Project) -> Path:
    (project.cwd / "deployer.py").write_text(AGENT)
    return project.root / "deployed.log"


def tether(project: Project, server: MockLLM, *args: str) -> Any:
    return project.run(*args, PAUSE_MOCK_URL=server.base_url, DEPLOY_LOG=str(project.root / "deployed.log"))


def runs(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_a_run_without_a_terminal_pauses_lists_the_call_and_exits_5(project: Project) -> None:
    log = deployer(project)
    with MockLLM([Call("deploy", {"service": "web"})]) as server:
        done = tether(project, server, "run", "--agent", SPEC, "Deploy web")

    assert done.returncode == 5, done.stderr
    assert f"{CALL}  deploy(service='web'): waits for approval" in done.stderr
    assert "[paused]" in done.stderr
    assert f"--approve {CALL}" in done.stderr
    assert "resume it: tether run --session " in done.stderr
    assert runs(log) == [], "nothing runs before it is approved"
    assert len(server.requests) == 1


def test_json_prints_the_state_and_resume_from_it_runs_the_tool_once(project: Project) -> None:
    log = deployer(project)
    with MockLLM([Call("deploy", {"service": "web"}), echo]) as server:
        paused = tether(project, server, "run", "--agent", SPEC, "--json", "Deploy web")
        assert paused.returncode == 5, paused.stderr
        shown = json.loads(paused.stdout)
        assert shown["stop_reason"] == "paused"
        assert shown["exit_code"] == 5
        assert [(p["id"], p["tool"], p["arguments"], p["kind"]) for p in shown["pending"]] == [
            (CALL, "deploy", {"service": "web"}, "approval")
        ]
        state = PausedRun.from_json(json.dumps(shown["state"]))
        assert state.pending_ids == (CALL,)
        (project.cwd / "state.json").write_text(json.dumps(shown["state"]))

        resumed = tether(project, server, "run", "--agent", SPEC, "--resume", "state.json", "--approve", CALL)

    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "The tool said: deployed web"
    assert runs(log) == ["web"], "the approved call ran exactly once"
    assert len(server.requests) == 2, "the resumed run made the one model call after the pause"


def test_state_out_writes_the_state_and_the_hint_names_the_file(project: Project) -> None:
    log = deployer(project)
    with MockLLM([Call("deploy", {"service": "api"}), echo]) as server:
        paused = tether(project, server, "run", "--agent", SPEC, "--state-out", "paused.json", "Deploy api")
        assert paused.returncode == 5, paused.stderr
        assert f"resume it: tether run --resume paused.json --approve {CALL}" in paused.stderr
        state = PausedRun.from_json((project.cwd / "paused.json").read_text())
        assert state.pending[0].arguments == {"service": "api"}

        resumed = tether(project, server, "run", "--agent", SPEC, "--resume", "paused.json", "--approve", CALL)

    assert resumed.returncode == 0, resumed.stderr
    assert runs(log) == ["api"]


def test_a_paused_session_is_resumed_by_its_id_with_no_state_file(project: Project) -> None:
    log = deployer(project)
    with MockLLM([Call("deploy", {"service": "db"}), echo]) as server:
        paused = tether(project, server, "run", "--agent", SPEC, "--session", "ops-1", "Deploy db")
        assert paused.returncode == 5, paused.stderr
        assert f"resume it: tether run --session ops-1 --approve {CALL}" in paused.stderr

        again = tether(project, server, "run", "--agent", SPEC, "--session", "ops-1", "Deploy it now")
        assert again.returncode == 5, again.stderr
        assert f"{CALL}  deploy(service='db')" in again.stderr, "a paused session says what it waits on"
        assert "the session ops-1 is paused: the prompt was not run" in again.stderr
        assert len(server.requests) == 1, "a prompt to a paused session makes no model call"

        resumed = tether(project, server, "run", "--agent", SPEC, "--session", "ops-1", "--approve", CALL)

    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "The tool said: deployed db"
    assert runs(log) == ["db"]


def test_a_denied_call_reaches_the_model_with_its_reason(project: Project) -> None:
    log = deployer(project)
    with MockLLM([Call("deploy", {"service": "web"}), echo]) as server:
        tether(project, server, "run", "--agent", SPEC, "--state-out", "s.json", "Deploy web")
        resumed = tether(
            project, server, "run", "--agent", SPEC, "--resume", "s.json", "--deny", CALL, "--reason", "not on Fridays"
        )

    assert resumed.returncode == 0, resumed.stderr
    assert "not on Fridays" in resumed.stdout
    told = next(m for m in server.messages(1) if m["role"] == "tool")
    assert "not on Fridays" in told["content"]
    assert runs(log) == [], "a denied call never runs"


def test_an_external_call_is_resumed_with_its_result(project: Project) -> None:
    deployer(project)
    with MockLLM([Call("weather", {"city": "Oslo"}), echo]) as server:
        paused = tether(project, server, "run", "--agent", SPEC, "--state-out", "s.json", "Weather in Oslo?")
        assert paused.returncode == 5, paused.stderr
        assert f"{CALL}  weather(city='Oslo'): waits for its result from outside" in paused.stderr
        assert f"--result {CALL}=JSON" in paused.stderr
        resumed = tether(
            project, server, "run", "--agent", SPEC, "--resume", "s.json", "--result", f'{CALL}="snow, -3 C"'
        )

    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "The tool said: snow, -3 C"


def test_a_state_or_decisions_that_cannot_be_used_exit_1_naming_the_code(project: Project) -> None:
    log = deployer(project)
    (project.cwd / "broken.json").write_text("{not json")
    with MockLLM([Call("deploy", {"service": "web"})]) as server:
        tether(project, server, "run", "--agent", SPEC, "--state-out", "s.json", "Deploy web")
        newer = json.loads((project.cwd / "s.json").read_text()) | {"version": 99}
        (project.cwd / "newer.json").write_text(json.dumps(newer))

        broken = tether(project, server, "run", "--agent", SPEC, "--resume", "broken.json", "--approve", CALL)
        future = tether(project, server, "run", "--agent", SPEC, "--resume", "newer.json", "--approve", CALL)
        missing = tether(project, server, "run", "--agent", SPEC, "--resume", "nowhere.json", "--approve", CALL)
        unknown = tether(project, server, "run", "--agent", SPEC, "--resume", "s.json", "--approve", "call_9")

    assert broken.returncode == 1, broken.stderr
    assert "(state_invalid)" in broken.stderr
    assert future.returncode == 1, future.stderr
    assert "(format_unsupported)" in future.stderr
    assert missing.returncode == 1
    assert "cannot read the paused run's state 'nowhere.json'" in missing.stderr
    assert unknown.returncode == 1, unknown.stderr
    assert "(decision_invalid)" in unknown.stderr
    assert "call_9" in unknown.stderr
    assert runs(log) == [], "nothing ran for a refused resume"
    assert len(server.requests) == 1


def test_decisions_without_a_paused_run_are_a_usage_error(project: Project) -> None:
    deployer(project)
    with MockLLM([]) as server:
        alone = tether(project, server, "run", "--agent", SPEC, "--approve", CALL)
        with_prompt = tether(project, server, "run", "--agent", SPEC, "--resume", "s.json", "--approve", CALL, "hi")
        reason = tether(project, server, "run", "--agent", SPEC, "--session", "x", "--approve", CALL, "--reason", "r")

    assert alone.returncode == 2
    assert "--resume STATE.json or --session ID" in alone.stderr
    assert with_prompt.returncode == 2
    assert "takes no PROMPT" in with_prompt.stderr
    assert reason.returncode == 2
    assert "--reason is the reason of --deny" in reason.stderr


def test_in_a_terminal_run_asks_inline_and_goes_on(project: Project, children: list[Any]) -> None:
    log = deployer(project)
    with MockLLM([Call("deploy", {"service": "web"}), echo]) as server:
        child = project.spawn("run", "--agent", SPEC, "Deploy web", PAUSE_MOCK_URL=server.base_url, DEPLOY_LOG=str(log))
        children.append(child)
        child.expect_exact("Allow deploy(service='web')? [y/N]")
        assert runs(log) == []
        child.sendline("y")
        child.expect_exact("The tool said: deployed web")
        child.expect(pexpect.EOF)
        child.close()

    assert child.exitstatus == 0, screen(child)
    assert runs(log) == ["web"]


def test_the_chat_pauses_on_an_external_call_and_goes_on_with_its_result(project: Project, children: list[Any]) -> None:
    deployer(project)
    with MockLLM([Call("weather", {"city": "Oslo"}), echo, Say("Bye.")]) as server:
        child = project.spawn("chat", "--agent", SPEC, PAUSE_MOCK_URL=server.base_url, DEPLOY_LOG="/dev/null")
        children.append(child)
        child.expect_exact(PROMPT)
        child.sendline("Weather in Oslo?")
        child.expect_exact(f"{CALL}  weather(city='Oslo'): waits for its result from outside")
        child.expect_exact("/result ID VALUE")
        child.expect_exact(PROMPT)
        child.sendline("/result call_9 sunny")
        child.expect_exact("no paused call 'call_9'")
        child.expect_exact(PROMPT)
        child.sendline(f"/result {CALL} sunny and warm")
        child.expect_exact("The tool said: sunny and warm")
        child.expect_exact(PROMPT)
        child.sendline("/exit")
        child.expect(pexpect.EOF)
        child.close()

    assert child.exitstatus == 0, screen(child)
    assert len(server.requests) == 2


def test_a_state_resumed_once_is_refused_the_second_time(project: Project) -> None:
    log = deployer(project)
    with MockLLM([Call("deploy", {"service": "web"}), echo, echo]) as server:
        tether(project, server, "run", "--agent", SPEC, "--state-out", "s.json", "Deploy web")
        first = tether(project, server, "run", "--agent", SPEC, "--resume", "s.json", "--approve", CALL)
        second = tether(project, server, "run", "--agent", SPEC, "--resume", "s.json", "--approve", CALL)
        by_session = tether(project, server, "run", "--agent", SPEC, "--continue", "--approve", CALL)

    assert first.returncode == 0, first.stderr
    assert second.returncode == 1, second.stdout + second.stderr
    assert "(decision_invalid)" in second.stderr
    assert by_session.returncode == 1, by_session.stdout + by_session.stderr
    assert runs(log) == ["web"], "an approval never runs twice"
    assert len(server.requests) == 2


def test_in_a_terminal_an_external_call_still_pauses_the_run(project: Project, children: list[Any]) -> None:
    log = deployer(project)
    with MockLLM([Call("weather", {"city": "Oslo"})]) as server:
        child = project.spawn(
            "run", "--agent", SPEC, "Weather in Oslo?", PAUSE_MOCK_URL=server.base_url, DEPLOY_LOG=str(log)
        )
        children.append(child)
        child.expect_exact(f"{CALL}  weather(city='Oslo'): waits for its result from outside")
        child.expect_exact(f"--result {CALL}=JSON")
        child.expect(pexpect.EOF)
        child.close()

    assert child.exitstatus == 5, screen(child)


def test_a_chat_without_a_terminal_takes_its_decisions_as_lines(project: Project) -> None:
    log = deployer(project)
    with MockLLM([Call("deploy", {"service": "web"}), echo]) as server:
        done = project.run(
            "chat", "--agent", SPEC, stdin=f"Deploy web\n/approve {CALL}\n",
            PAUSE_MOCK_URL=server.base_url, DEPLOY_LOG=str(log),
        )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert f"{CALL}  deploy(service='web'): waits for approval" in done.stdout + done.stderr
    assert "The tool said: deployed web" in done.stdout
    assert runs(log) == ["web"]


def test_resume_dash_reads_the_state_from_stdin(project: Project) -> None:
    log = deployer(project)
    with MockLLM([Call("deploy", {"service": "web"}), echo]) as server:
        paused = tether(project, server, "run", "--agent", SPEC, "--json", "Deploy web")
        state = json.dumps(json.loads(paused.stdout)["state"])
        resumed = project.run(
            "run", "--agent", SPEC, "--resume", "-", "--approve", CALL, stdin=state,
            PAUSE_MOCK_URL=server.base_url, DEPLOY_LOG=str(log),
        )  # fmt: skip

    assert resumed.returncode == 0, resumed.stderr
    assert runs(log) == ["web"]


def test_in_a_terminal_the_chat_asks_about_an_approval_tool_inline(project: Project, children: list[Any]) -> None:
    log = deployer(project)
    with MockLLM([Call("deploy", {"service": "web"}), echo]) as server:
        child = project.spawn("chat", "--agent", SPEC, PAUSE_MOCK_URL=server.base_url, DEPLOY_LOG=str(log))
        children.append(child)
        child.expect_exact(PROMPT)
        child.sendline("Deploy web")
        child.expect_exact("Allow deploy(service='web')? [y/N]")
        assert runs(log) == []
        child.sendline("y")
        child.expect_exact("The tool said: deployed web")
        child.expect_exact(PROMPT)
        child.sendline("/exit")
        child.expect(pexpect.EOF)
        child.close()

    assert child.exitstatus == 0, screen(child)
    assert runs(log) == ["web"]
    assert "[paused]" not in screen(child), "a question answered inline pauses nothing"


def test_a_state_file_that_cannot_be_written_is_said_and_the_session_keeps_the_pause(project: Project) -> None:
    deployer(project)
    with MockLLM([Call("deploy", {"service": "web"})]) as server:
        paused = tether(
            project, server, "run", "--agent", SPEC, "--session", "s9", "--state-out", "no/such/dir/s.json", "Deploy"
        )

    assert paused.returncode == 5, paused.stderr
    assert "error: cannot write the paused run's state to 'no/such/dir/s.json'" in paused.stderr
    assert f"resume it: tether run --session s9 --approve {CALL}" in paused.stderr
