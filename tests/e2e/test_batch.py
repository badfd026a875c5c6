"""``tether batch`` as a user runs it: a subprocess (and a pseudo-terminal for the progress bar) against the mock
model, on a SQLite file and on PostgreSQL; killed with SIGKILL and started again, it ends with one result per
prompt and no finished run made again."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.e2e.conftest import TETHER, Project, screen
from tests.e2e.mock_llm import MockLLM, Say, Step
from tests.postgres import fresh_database

DEADLINE = 240.0
"""Seconds a batch of the kill test may take before the test fails."""


def echo(body: dict[str, Any]) -> Step:
    """Answer each prompt with itself: the answer says which prompt it was."""
    return Say(f"echo: {prompt_of(body)}", pieces=1)


def prompt_of(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    assert isinstance(content, str)
    return content


def results(path: Path) -> list[dict[str, Any]]:
    """The results file's lines (split at line feeds only: an answer may hold a raw U+2028)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line]


def write_prompts(project: Project, prompts: Sequence[object]) -> None:
    """The prompts as JSON Lines, every character as it is (a raw U+2028 is valid JSON Lines)."""
    lines = "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in prompts)
    (project.cwd / "prompts.jsonl").write_text(lines, encoding="utf-8")


SEPARATORS = ["\u2028", "\u2029", "\u0085", "\x1c", "\x0b", "\x0c", "\r", ""]
"""What ``str.splitlines`` splits at and JSON Lines does not: the prompts of the kill test hold each, raw."""


def prompt_for(n: int) -> str:
    return f"prompt {n}{SEPARATORS[n % len(SEPARATORS)]}."


def test_a_batch_writes_one_result_per_prompt_and_a_second_run_makes_no_request(project: Project) -> None:
    with MockLLM([echo] * 10) as server:
        project.use(server)
        write_prompts(project, ["first", {"prompt": "second", "id": "two"}, {"prompt": "third", "id": 3}])
        completed = project.run("batch", "prompts.jsonl", "-o", "results.jsonl", "--concurrency", "2")
        assert completed.returncode == 0, completed.stderr
        again = project.run("batch", "prompts.jsonl", "-o", "results.jsonl")
        assert again.returncode == 0, again.stderr
        requests = len(server.requests)

    rows = {row["id"]: row for row in results(project.cwd / "results.jsonl")}
    assert set(rows) == {"line-1", "two", "3"}
    assert rows["two"]["text"] == "echo: second"
    assert rows["line-1"]["stop_reason"] == "complete"
    assert rows["line-1"]["error"] is None
    assert rows["3"]["usage"]["requests"] == 1
    assert set(rows["3"]) == {"id", "text", "stop_reason", "usage", "cost", "error", "run_id"}
    assert requests == 3
    assert "3 done · 0 failed" in completed.stderr
    assert "already have results" in again.stderr
    assert (project.root / "state" / "tether" / "runs.sqlite").exists(), "the default database"


def test_a_run_that_fails_is_written_with_its_error_and_the_exit_code_says_so(project: Project) -> None:
    from tests.e2e.mock_llm import Fail

    def answer(body: dict[str, Any]) -> Step:
        if prompt_of(body) == "bad":
            return Fail(400, {"error": {"message": "no such thing"}})
        return echo(body)

    with MockLLM([answer] * 10) as server:
        project.use(server)
        write_prompts(project, ["good", "bad"])
        completed = project.run("batch", "prompts.jsonl", "-o", "results.jsonl")

    assert completed.returncode == 4, completed.stderr
    rows = {row["id"]: row for row in results(project.cwd / "results.jsonl")}
    assert rows["line-1"]["error"] is None
    assert rows["line-2"]["stop_reason"] == "error"
    assert rows["line-2"]["error"]["code"] == "bad_request"
    assert "1 done · 1 failed" in completed.stderr


def test_a_bad_prompts_line_is_a_configuration_error_and_runs_nothing(project: Project) -> None:
    with MockLLM([echo] * 5) as server:
        project.use(server)
        (project.cwd / "prompts.jsonl").write_text('"fine"\n{"prompt": 3}\n')
        completed = project.run("batch", "prompts.jsonl", "-o", "results.jsonl")
        assert server.requests == []

    assert completed.returncode == 1
    assert "prompts.jsonl:2: the prompt must be a non-empty string" in completed.stderr
    assert not (project.cwd / "results.jsonl").exists()


def test_in_a_terminal_a_progress_bar_counts_done_failed_running_and_cost(project: Project) -> None:
    with MockLLM([echo] * 10) as server:
        project.use(server)
        write_prompts(project, ["a", "b", "c"])
        child = project.spawn("batch", "prompts.jsonl", "-o", "results.jsonl")
        child.expect("3/3")
        child.expect(r"3 done · 0 failed · 0 running · cost unknown")
        child.expect(pexpect.EOF)
        child.close()
    assert child.exitstatus == 0, screen(child)
    assert "batch" in screen(child)


@pytest.fixture
def postgres_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh PostgreSQL database (dropped after), its URL carrying a password (trust auth ignores it)."""
    with fresh_database(request.config, "tether_batch", "tether batch on PostgreSQL") as url:
        yield url.replace("://postgres@", "://postgres:hunter2-secret@", 1)


def test_a_batch_on_postgresql_never_prints_the_password(project: Project, postgres_url: str) -> None:
    with MockLLM([echo] * 5) as server:
        project.use(server)
        write_prompts(project, ["one", "two"])
        completed = project.run("batch", "prompts.jsonl", "-o", "results.jsonl", "--db", postgres_url)

    assert completed.returncode == 0, completed.stderr
    assert len(results(project.cwd / "results.jsonl")) == 2
    assert "hunter2-secret" not in completed.stderr + completed.stdout
    assert "postgresql://postgres:" in completed.stderr


def _wait_for_lines(path: Path, count: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + DEADLINE
    while not (path.exists() and path.read_bytes().count(b"\n") >= count):
        assert process.poll() is None, "the batch ended before it could be killed"
        assert time.monotonic() < deadline, f"no {count} results within {DEADLINE} s"
        time.sleep(0.05)


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_a_batch_of_1000_killed_and_started_again_ends_with_1000_results_and_no_finished_run_redone(
    project: Project, database: str, request: pytest.FixtureRequest
) -> None:
    db_args: list[str] = []
    if database == "postgres":
        db_args = ["--db", request.getfixturevalue("postgres_url")]
    prompts = [prompt_for(n) for n in range(1000)]
    concurrency = 16
    output = project.cwd / "results.jsonl"
    args = [TETHER, "batch", "prompts.jsonl", "-o", "results.jsonl", "--concurrency", str(concurrency), *db_args]
    with MockLLM([echo] * 1200) as server:
        project.use(server)
        write_prompts(project, prompts)
        first = subprocess.Popen(args, cwd=project.cwd, env=project.env(), stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            _wait_for_lines(output, 300, first)
            os.kill(first.pid, signal.SIGKILL)
        finally:
            first.wait()
        written_before = {row["id"] for row in results_tolerant(output)}
        second = subprocess.run(args, cwd=project.cwd, env=project.env(), stdin=subprocess.DEVNULL,
                                capture_output=True, text=True, timeout=DEADLINE, check=False)  # fmt: skip
        asked = collections.Counter(prompt_of(body) for body in server.requests)

    assert second.returncode == 0, second.stderr
    rows = results(output)
    assert len(rows) == 1000
    assert {row["id"] for row in rows} == {f"line-{n + 1}" for n in range(1000)}
    assert all(row["text"] == f"echo: {prompt_for(int(row['id'][5:]) - 1)}" for row in rows)
    assert set(asked) == set(prompts)
    for item in written_before:
        assert asked[prompt_for(int(item[5:]) - 1)] == 1, f"{item} had finished and was asked again"
    asked_again = [prompt for prompt, count in asked.items() if count > 1]
    assert len(asked_again) <= concurrency, "only the runs under way when killed may be asked again"
    assert 300 <= len(written_before) < 1000


def results_tolerant(path: Path) -> list[dict[str, Any]]:
    """The results file's whole lines (a killed writer may have left the last one cut)."""
    return [json.loads(line) for line in path.read_bytes().decode().split("\n")[:-1]]  # line feeds only


def test_ctrl_c_stops_the_batch_and_running_it_again_finishes_it(project: Project) -> None:
    def stall_first(body: dict[str, Any]) -> Step:
        return Say(f"echo: {prompt_of(body)}", pieces=1, stall=prompt_of(body) == "slow")

    with MockLLM([stall_first] * 10) as server:
        project.use(server)
        write_prompts(project, ["quick", "slow"])
        child = project.spawn("batch", "prompts.jsonl", "-o", "results.jsonl", "--concurrency", "1")
        assert server.stalled.wait(30), screen(child)
        child.sendintr()
        child.expect("run the same command again to go on")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 130, screen(child)
        assert [row["id"] for row in results(project.cwd / "results.jsonl")] == ["line-1"]
        server.release()
        again = project.run("batch", "prompts.jsonl", "-o", "results.jsonl")
        asked = collections.Counter(prompt_of(body) for body in server.requests)

    assert again.returncode == 0, again.stderr
    assert sorted(row["id"] for row in results(project.cwd / "results.jsonl")) == ["line-1", "line-2"]
    assert asked["quick"] == 1
