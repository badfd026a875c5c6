"""The run's tree (``tether/cli/trace.py``), rendered to text: from a result built by hand, from a real
scripted run, and in the chat through ``/trace``."""

from __future__ import annotations

import io

from rich.console import Console

from tests.cli.test_repl import Harness
from tether.cli.trace import print_trace, trace_tree
from tether.events import RunResult, ToolCallRecord, TurnRecord
from tether.limits import StopReason
from tether.providers.scripted import call, reply
from tether.redaction import Redaction
from tether.secrets import Masker
from tether.telemetry.logs import duration_text as duration
from tether.usage import Cost, Usage

RUN_ID = "3f2a1b2c" + "0" * 24
KEY = "sk-trace-key-0b8e6f1d2a"


def text_of(result: RunResult, model: str = "openai:gpt-4o-mini", redaction: Redaction | None = None) -> str:
    file = io.StringIO()
    console = Console(file=file, width=120, color_system=None, markup=False, highlight=False, emoji=False)
    print_trace(console, result, model, redaction)
    return file.getvalue()


def result_of(records: tuple[TurnRecord, ...], stop: StopReason = StopReason.COMPLETE) -> RunResult:
    usage = Usage(input_tokens=1100, output_tokens=134, requests=len(records))
    return RunResult(
        text="done", stop_reason=stop, messages=(), usage=usage, turns=len(records), cost=Cost(0.0011, 0.0002),
        run_id=RUN_ID, turn_records=records, duration_ms=1412.0,
    )  # fmt: skip


def test_the_tree_shows_the_run_its_provider_calls_and_their_tool_calls() -> None:
    records = (
        TurnRecord(1, 1, False, 812.4, 240.2, Usage(600, 40), "tool_calls", retries=0, tool_calls=(
            ToolCallRecord("c1", "read", False, duration_ms=0.42),
            ToolCallRecord("c2", "bash", True, "tool_failed", 12.3),
            ToolCallRecord("c3", "write", True, "permission_denied"),
            ToolCallRecord("c4", "read", False, "repeated"),
        )),
        TurnRecord(2, 1, False, 20.0, None, Usage(), "error", rejected=f"the answer was cut off near {KEY}"),
        TurnRecord(2, 2, False, 590.0, 210.0, Usage(500, 94), "stop", retries=2, retry_wait_ms=2500.0),
        TurnRecord(3, 1, True, 3.0, None, Usage(), "error", error="rate_limited"),
    )  # fmt: skip
    shown = text_of(result_of(records), redaction=Redaction(Masker([KEY])))
    assert shown.splitlines() == [
        "run 3f2a1b2c · openai:gpt-4o-mini · complete · 1.4 s · 1,234 tokens (1,100 in, 134 out), 4 requests, $0.0013",
        "├── turn 1 · 812 ms · ttft 240 ms · 600 in / 40 out · tool_calls",
        "│   ├── ✓ read · 0.4 ms",
        "│   ├── ✗ bash · tool_failed · 12 ms",
        "│   ├── ✗ write · permission_denied · not run",
        "│   └── ↺ read · repeated · not run",
        "├── turn 2 · 20 ms · 0 in / 0 out · error · rejected: the answer was cut off near ***",
        "├── turn 2 attempt 2 · 590 ms · ttft 210 ms · 500 in / 94 out · stop · 2 retries after 2.5 s waiting",
        "└── turn 3 final · 3.0 ms · 0 in / 0 out · error rate_limited",
    ]


def test_a_run_without_a_provider_call_says_so_and_long_lines_wrap_under_their_branch() -> None:
    shown = text_of(result_of((), StopReason.CANCELLED), model="openai-compatible:" + "m" * 90)
    assert shown.splitlines()[-1] == "└── no provider call"
    assert "cancelled" in shown
    assert all(len(line) <= 120 for line in shown.splitlines())


def test_durations_read_at_a_glance() -> None:
    assert [duration(ms) for ms in (0.04, 9.94, 10.0, 999.4, 1000.0, 61_500.0)] == [
        "0.0 ms", "9.9 ms", "10 ms", "999 ms", "1.0 s", "61.5 s",
    ]  # fmt: skip


def test_a_call_that_summarized_the_history_is_labelled_compaction() -> None:
    records = (
        TurnRecord(4, 1, True, 30.0, 10.0, Usage(900, 120), "stop", compaction=True),
        TurnRecord(4, 1, False, 20.0, 8.0, Usage(400, 12), "stop"),
    )
    lines = text_of(result_of(records)).splitlines()
    assert lines[1] == "├── turn 4 compaction · 30 ms · ttft 10 ms · 900 in / 120 out · stop"
    assert lines[2].startswith("└── turn 4 · ")


async def test_a_real_run_s_tree_matches_its_turn_records() -> None:
    harness = Harness([call("peek", {"path": "a"}), reply("It holds a.")])
    result = await harness.chat.ask("what is in a?")
    assert result is not None
    tree = trace_tree(result, "scripted:one")
    turns = [str(child.label) for child in tree.children]
    assert [label.split(" · ")[0] for label in turns] == ["turn 1", "turn 2"]
    assert turns[0].endswith("tool_calls")
    (peek,) = tree.children[0].children
    assert str(peek.label).startswith("✓ peek · ")


async def test_chat_trace_prints_the_tree_of_the_last_answer() -> None:
    harness = Harness([call("peek", {"path": "a"}), reply("It holds a.")], [reply("Hi.")])
    await harness.chat.handle("/trace")
    assert "no answer yet" in harness.take()

    await harness.chat.handle("what is in a?")
    harness.take()
    await harness.chat.handle("/trace")
    shown = harness.take()
    assert shown.startswith("run ")
    assert " · scripted:one · complete · " in shown
    branches = [line for line in shown.splitlines() if line[:1] in "├│└"]
    assert branches[0].startswith("├── turn 1 · ")
    assert branches[1].startswith("│   └── ✓ peek · ")
    assert branches[2].startswith("└── turn 2 · ")

    await harness.chat.handle("/model scripted:two")
    await harness.chat.handle("/trace")
    assert " · scripted:one · " in harness.take(), "the tree is of the last answer, on the model that gave it"
