"""A paused run's pieces on the command line: the flags read into decisions, the state written whole and read
back, the pending calls shown (secrets hidden) and the command that resumes the run."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tether.cli.app import main
from tether.cli.decisions import DENIED, Resume, decisions_of, how_to_resume, pending_json, read_state, write_state
from tether.cli.render import pending_lines
from tether.errors import StateInvalid
from tether.messages import Message, ToolCall
from tether.paused import Approve, ExternalResult, PausedRun, PendingCall, Reject

APPROVAL = PendingCall.of("c1", "login", {"user": "ann", "password": "hunter2"}, "it signs in", "approval")
EXTERNAL = PendingCall.of("c2", "weather", {"city": "Oslo"}, "from the browser", "external")


def state() -> PausedRun:
    calls = (ToolCall("c1", "login", APPROVAL.arguments), ToolCall("c2", "weather", EXTERNAL.arguments))
    messages = (Message.user("hi"), Message("assistant", calls))
    return PausedRun(run_id="r1", messages=messages, pending=(APPROVAL, EXTERNAL), paused_at=1.0, session_id="s1")


def test_the_flags_become_one_decision_per_call() -> None:
    decided = decisions_of(Resume("s.json", ("c1",), ("c3",), "", (("c2", {"sky": "snow"}),)))

    assert decided == {"c1": Approve(), "c3": Reject(DENIED), "c2": ExternalResult({"sky": "snow"})}
    assert decisions_of(Resume(deny=("c1",), reason="not today")) == {"c1": Reject("not today")}


def test_the_state_is_written_whole_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "paused.json"
    write_state(str(path), state())

    assert read_state(str(path)) == state()
    assert [p.name for p in tmp_path.iterdir()] == ["paused.json"], "no partial file is left behind"


def test_a_file_that_is_no_state_is_state_invalid(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text("[1, 2]")
    with pytest.raises(StateInvalid):
        read_state(str(tmp_path / "x.json"))


def test_pending_calls_are_shown_with_secrets_hidden() -> None:
    lines = pending_lines([APPROVAL, EXTERNAL])

    assert lines == [
        "  c1  login(user='ann', password='***'): waits for approval (it signs in)",
        "  c2  weather(city='Oslo'): waits for its result from outside (from the browser)",
    ]
    shown = pending_json([APPROVAL])
    assert shown[0]["arguments"] == {"user": "ann", "password": "***"}
    assert shown[0]["digest"] == APPROVAL.digest


def test_the_hint_resumes_by_session_or_by_the_state_file() -> None:
    assert how_to_resume([APPROVAL, EXTERNAL], session_id="s1", state_file=None) == (
        "resume it: tether run --session s1 --approve c1 --result c2=JSON  (or --deny ID --reason TEXT)"
    )
    assert how_to_resume([APPROVAL], session_id="s1", state_file="p.json").startswith(
        "resume it: tether run --resume p.json --approve c1"
    )
    assert how_to_resume([APPROVAL], session_id=None, state_file=None) == (
        "this run is in no session: resume it from its state: tether run --resume STATE.json --approve c1"
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--result", "c2"], "give it as ID=JSON"),
        (["--result", "c2=sunny"], "the result of c2 is not JSON"),
        (["--approve", "c1", "--deny", "c1"], "c1 has more"),
        (["--resume", "s.json"], "takes no PROMPT"),
        (["--resume", "s.json", "--session", "s1", "--approve", "c1"], "--session and --continue cannot be used"),
        (["--session", "s1", "--approve", "c1", "--schema", '{"type": "object"}'], "it takes no --schema"),
    ],
)
def test_decision_flags_that_cannot_be_meant_are_usage_errors(args: list[str], said: str) -> None:
    prompt = ["a prompt"] if "--resume" in args and "--approve" not in args else []
    done = CliRunner().invoke(main, ["run", *args, *prompt])

    assert done.exit_code == 2, done.output
    assert said in done.output
