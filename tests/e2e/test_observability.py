"""The command's observability as a user sees it: ``tether run --trace`` and ``/trace`` in a pseudo-terminal,
``-v`` on stderr while ``--json`` keeps stdout, and the spans of ``tether run`` exported over OTLP/HTTP to a
receiver on 127.0.0.1 (or one dim line when OpenTelemetry's SDK is missing)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pexpect

from tests.e2e.conftest import Project, screen
from tests.e2e.mock_llm import Call, Fail, MockLLM, Say
from tests.e2e.otlp_receiver import otlp_receiver

PROMPT = "tether>"
RATE_LIMITED = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}


def plain(text: str) -> str:
    """What the terminal shows, without its escape sequences and carriage returns."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\r", "", text)


def test_run_trace_draws_the_turns_and_the_tool_calls_after_the_answer(project: Project, children: list[Any]) -> None:
    (project.cwd / "notes.txt").write_text("Buy milk\n")
    script: list[Any] = [
        Fail(429, RATE_LIMITED),
        Call("read", {"path": "notes.txt"}),
        Call("read", {"path": "missing.txt"}),
        Say("The notes say: buy milk."),
    ]
    with MockLLM(script) as server:
        project.use(server)
        child = project.spawn("run", "--trace", "What is in notes.txt?")
        children.append(child)
        child.expect_exact("The notes say: buy milk.")
        child.expect_exact(" · openai-compatible:mock · complete · ")
        child.expect(pexpect.EOF)
        child.close()

    shown = plain(screen(child))
    assert child.exitstatus == 0, shown
    branches = [line for line in shown.splitlines() if line[:1] in "├│└"]
    first_turn = r"├── turn 1 · .+ · 200 in / 10 out · tool_calls · 1 retry after \d+ ms waiting\s*"
    assert re.fullmatch(first_turn, branches[0]), shown
    assert re.fullmatch(r"│   └── ✓ read · \d+(\.\d)? ms\s*", branches[1]), shown
    assert re.fullmatch(r"├── turn 2 · .+ · tool_calls\s*", branches[2]), shown
    assert re.fullmatch(r"│   └── ✗ read · tool_failed · \d+(\.\d)? ms\s*", branches[3]), shown
    assert re.fullmatch(r"└── turn 3 · .+ · stop\s*", branches[4]), shown
    assert re.search(r"\nrun [0-9a-f]{8} · openai-compatible:mock · complete · ", shown), shown
    assert shown.index("The notes say: buy milk.") < shown.index("├── turn 1")


def test_chat_trace_draws_the_last_answer(project: Project, children: list[Any]) -> None:
    (project.cwd / "notes.txt").write_text("Buy milk\n")
    with MockLLM([Call("read", {"path": "notes.txt"}), Say("Milk.")]) as server:
        project.use(server)
        child = project.spawn("chat")
        children.append(child)
        child.expect_exact(PROMPT)
        child.sendline("What is in notes.txt?")
        child.expect_exact("Milk.")
        child.expect_exact(PROMPT)
        child.sendline("/trace")
        child.expect_exact("· stop")
        child.expect_exact(PROMPT)
        child.sendeof()
        child.expect(pexpect.EOF)
        child.close()

    shown = plain(screen(child))
    assert child.exitstatus == 0, shown
    tree = shown[shown.rindex("/trace") :]
    assert re.search(r"run [0-9a-f]{8} · openai-compatible:mock · complete · ", tree), shown
    branches = [line for line in tree.splitlines() if line[:1] in "├│└"]
    assert re.fullmatch(r"├── turn 1 · .+ · tool_calls\s*", branches[0]), shown
    assert re.fullmatch(r"│   └── ✓ read · \d+(\.\d)? ms\s*", branches[1]), shown
    assert re.fullmatch(r"└── turn 2 · .+ · stop\s*", branches[2]), shown


def test_verbose_logs_go_to_stderr_and_json_keeps_stdout(project: Project) -> None:
    with MockLLM([Fail(429, RATE_LIMITED), Call("read", {"path": "notes.txt"}), Say("Hello.")]) as server:
        project.use(server)
        (project.cwd / "notes.txt").write_text("hello\n")
        quiet = project.run("run", "Read the notes", "--json")
    with MockLLM([Fail(429, RATE_LIMITED), Call("read", {"path": "notes.txt"}), Say("Hello.")]) as server:
        project.use(server)
        loud = project.run("run", "Read the notes", "--json", "-vv")

    assert quiet.returncode == 0, quiet.stderr
    assert "tether." not in quiet.stderr, "without -v the run's own records are not shown"
    assert loud.returncode == 0, loud.stderr
    result = json.loads(loud.stdout)
    assert result["text"] == "Hello."
    lines = [line for line in loud.stderr.splitlines() if re.match(r"\d\d:\d\d:\d\d\.\d{3} ", line)]
    shown = [re.sub(r"^\S+ (\S+) +(\S+) (\[\S+\]) (\w+).*", r"\1 \2 \4", line) for line in lines]
    assert shown == [
        "INFO tether.loop run",
        "WARNING tether.providers retry",
        "DEBUG tether.loop turn",
        "DEBUG tether.tools tool",
        "DEBUG tether.loop turn",
        "INFO tether.loop run",
    ], loud.stderr


def test_run_exports_its_spans_over_otlp(project: Project) -> None:
    """Needs the OpenTelemetry observer (``tether/telemetry/otel.py``) that makes the spans."""
    with MockLLM([Call("read", {"path": "notes.txt"}), Say("Hello.")]) as server, otlp_receiver() as received:
        project.use(server)
        (project.cwd / "notes.txt").write_text("hello\n")
        done = project.run("run", "Read the notes", OTEL_EXPORTER_OTLP_ENDPOINT=received.endpoint)

    assert done.returncode == 0, done.stderr
    assert "Hello." in done.stdout
    names = [name for name, _ in received.spans()]
    assert {service for _, service in received.spans()} == {"tether"}
    assert [name for name in names if name.startswith("invoke_agent")], names
    assert len([name for name in names if name.startswith("chat")]) == 2, names


def test_without_the_sdk_the_run_says_what_to_install_and_goes_on(project: Project, tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "opentelemetry"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")  # an opentelemetry package with nothing in it
    path = os.pathsep.join(filter(None, [str(shadow.parent), os.environ.get("PYTHONPATH")]))
    with MockLLM([Say("Hello.")]) as server:
        project.use(server)
        done = project.run("run", "hi", OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9", PYTHONPATH=path)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello.\n"
    assert "OTEL_EXPORTER_OTLP_ENDPOINT is set, but spans need" in done.stderr
    assert "pip install 'tether[otel]'" in done.stderr
