"""A first run with nothing configured and no key, in a pseudo-terminal or as a subprocess: a model server
found running is used and named; otherwise the embedded model, presented for what it is, with the tools the
banner names (the same rule in ``run`` and ``chat``)."""

from __future__ import annotations

import json
import socket
from typing import Any

import pexpect

from tests.e2e.conftest import Project, screen
from tests.e2e.mock_llm import Say
from tests.e2e.mock_ollama import OLLAMA_PORT, MockOllama

PROMPT = "tether>"
EMBEDDED = "using the embedded local:smollm2, a 135M demo model that works offline"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_run_with_no_key_and_no_config_uses_a_mock_ollama_on_its_usual_port_and_says_so(project: Project) -> None:
    models = {"nomic-embed-text:latest": ["embedding"], "llama3.2:latest": ["completion", "tools"]}
    with MockOllama([Say("Paris is the capital of France.")], models, port=OLLAMA_PORT) as ollama:
        # the usual ports (the variable empty): Ollama's 11434 is where the mock listens
        done = project.run("run", "What is the capital of France?", TETHER_LOCAL_SERVERS="")
    assert done.returncode == 0, done.stderr
    assert "Paris is the capital of France." in done.stdout
    assert (
        "using llama3.2:latest on Ollama at http://127.0.0.1:11434 (found running; TETHER_LOCAL_SERVERS=off "
        "turns this off)" in done.stderr
    )
    assert "embedded" not in done.stderr
    assert len(ollama.requests) == 1
    request = ollama.requests[0]
    assert request["model"] == "llama3.2:latest"
    assert {tool["function"]["name"] for tool in request["tools"]} >= {"read", "write", "edit", "bash"}, (
        "a model the user runs gets the workspace's tools, as any configured model"
    )


def test_with_nothing_listening_the_embedded_model_runs_labelled_for_what_it_is(project: Project) -> None:
    nowhere = f"http://127.0.0.1:{closed_port()}"
    done = project.run("run", "--json", "What is the capital of France?", TETHER_LOCAL_SERVERS=nowhere)
    assert EMBEDDED in done.stderr, done.stderr
    assert "It has read-only tools" in done.stderr
    assert "tether models pull" in done.stderr, "how to get a better model"
    assert json.loads(done.stdout)["model"] == "local:smollm2"


def test_chat_gives_the_embedded_model_the_read_only_tools_its_banner_names(
    project: Project, children: list[Any]
) -> None:
    child = project.spawn("chat")
    children.append(child)
    child.expect_exact(EMBEDDED)
    child.expect_exact("It has read-only tools (--mode full or --yes for the others)")
    child.expect_exact("· read-only ·")
    child.expect_exact(PROMPT)
    child.sendline("/tools")
    child.expect(r"write\s+not offered in read-only mode")
    child.expect(r"bash\s+not offered in read-only mode")
    child.expect_exact(PROMPT)
    child.sendline("/mode")
    child.expect_exact("mode: read-only")
    child.expect_exact(PROMPT)
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, screen(child)
    assert "asks first" not in screen(child)


def test_chat_with_yes_says_the_embedded_model_has_every_tool(project: Project, children: list[Any]) -> None:
    child = project.spawn("chat", "--yes")
    children.append(child)
    child.expect_exact(EMBEDDED)
    child.expect_exact("It has every tool, changes allowed without asking (--yes)")
    child.expect_exact("· full ·")
    child.expect_exact(PROMPT)
    child.sendline("/tools")
    child.expect(r"write\s+allowed \(--yes\)")
    child.expect_exact(PROMPT)
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert "read-only tools" not in screen(child)


def test_run_yes_and_mode_full_do_not_print_the_read_only_banner(project: Project, children: list[Any]) -> None:
    for flags, offered in (
        (("--yes",), "It has every tool, changes allowed without asking (--yes)"),
        (("--mode", "full"), "It has every tool, each change asked about first"),
        (("--mode", "read-only"), "It has read-only tools"),
    ):
        child = project.spawn("run", *flags, "Say hello.")
        children.append(child)
        child.expect_exact(EMBEDDED)
        child.expect_exact(offered)
        banner = screen(child)
        child.terminate(force=True)  # the banner is what is tested, not the model's answer
        if offered.startswith("It has every tool"):
            assert "read-only tools" not in banner, flags
