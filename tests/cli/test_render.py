"""How runs look: the answer streams to `out`, everything else goes to `err` as one-liners."""

from __future__ import annotations

import io
from typing import Any

from tether.cli.render import Renderer, describe_call, describe_compaction, describe_result, make_console, usage_line
from tether.events import (
    THINKING_ENDED,
    THINKING_STARTED,
    Compacted,
    HandoffTaken,
    ProviderRetry,
    RunCompleted,
    RunEvent,
    RunResult,
    RunStarted,
    TextDelta,
    ThinkingDelta,
    ToolCallStarted,
    ToolResultReceived,
    TurnCompleted,
    TurnStarted,
)
from tether.limits import StopReason
from tether.messages import CompactionInfo, Message, ToolCall, ToolResult, compaction_marker
from tether.usage import Cost, Usage


class Screen:
    """A renderer writing to two strings."""

    def __init__(self, **options: Any) -> None:
        self.out_file, self.err_file = io.StringIO(), io.StringIO()
        self.renderer = Renderer(make_console(self.out_file), make_console(self.err_file), **options)

    def play(self, *events: RunEvent) -> None:
        for event in events:
            self.renderer(event)

    @property
    def out(self) -> str:
        return self.out_file.getvalue()

    @property
    def err(self) -> str:
        return self.err_file.getvalue()


def completed(text: str = "", reason: StopReason = StopReason.COMPLETE, detail: str = "") -> RunCompleted:
    return RunCompleted(RunResult(text, reason, (), Usage(), detail=detail))


def turn_done(rejected: str | None = None) -> TurnCompleted:
    return TurnCompleted(1, Message.assistant(""), Usage(), "stop", rejected)


CALL = ToolCall("c1", "write", {"path": "notes.md", "content": "x" * 300})


def test_text_streams_to_out_exactly_as_it_comes_and_ends_its_line() -> None:
    screen = Screen()
    screen.play(RunStarted("r", "m", "p"), TurnStarted(1), TextDelta("Hel"), TextDelta("lo  "), TextDelta("world"))
    assert screen.out == "Hello  world"
    screen.play(turn_done(), completed("Hello  world"))
    assert screen.out == "Hello  world\n"
    assert screen.err == ""


def test_tool_calls_and_results_are_one_line_each_on_err() -> None:
    screen = Screen()
    screen.play(
        TurnStarted(1),
        TextDelta("Writing."),
        turn_done(),
        ToolCallStarted(CALL, 1),
        ToolResultReceived(ToolResult("c1", "write", "Created notes.md (300 bytes)\nmore\nlines"), 1),
        ToolResultReceived(ToolResult("c2", "read", "no such file", is_error=True, code="tool_failed"), 1),
    )
    assert screen.out == "Writing.\n"
    lines = screen.err.splitlines()
    assert lines[0] == "→ write(path='notes.md', content='" + "x" * 39 + "…')"
    assert lines[1] == "  ✓ write: Created notes.md (300 bytes) (+2 lines)"
    assert lines[2] == "  ✗ read: tool_failed: no such file"


def test_a_tool_line_starts_on_a_new_line_after_streamed_text() -> None:
    console_file = io.StringIO()
    console = make_console(console_file)
    renderer = Renderer(console)
    for event in (TurnStarted(1), TextDelta("Let me look"), ToolCallStarted(ToolCall("c", "read", {"path": "a"}), 1)):
        renderer(event)
    assert console_file.getvalue() == "Let me look\n→ read(path='a')\n"


def test_thinking_is_dim_on_err_or_hidden() -> None:
    shown = Screen()
    shown.play(TurnStarted(1), ThinkingDelta("hmm, "), ThinkingDelta("let me see"), TextDelta("Answer"))
    assert shown.err == "hmm, let me see\n"
    assert shown.out == "Answer"
    hidden = Screen(thinking=False)
    hidden.play(TurnStarted(1), ThinkingDelta("hmm"), TextDelta("Answer"))
    assert hidden.err == ""
    assert hidden.out == "Answer"


def test_thinking_is_styled_dim_on_a_color_terminal() -> None:
    err_file = io.StringIO()
    renderer = Renderer(
        make_console(io.StringIO()), make_console(err_file, force_terminal=True, color_system="standard")
    )
    renderer(ThinkingDelta("pondering"))
    assert "\x1b[2;3mpondering" in err_file.getvalue()


def test_with_text_off_nothing_goes_to_out() -> None:
    screen = Screen(text=False)
    screen.play(TurnStarted(1), TextDelta("Hello"), turn_done(), completed("Hello"))
    assert screen.out == ""


def test_an_answer_that_was_not_streamed_is_printed_at_the_end() -> None:
    screen = Screen()
    screen.play(
        TurnStarted(1, final=True),
        turn_done("empty answer"),
        completed("Best effort summary.", StopReason.MAX_TURNS, "hit max_turns"),
    )
    assert screen.out == "Best effort summary.\n"
    assert "(answer not used: empty answer)" in screen.err
    assert screen.err.splitlines()[-1] == "[max_turns] hit max_turns"


def test_an_error_stop_is_reported_on_err_and_its_note_is_not_taken_for_an_answer() -> None:
    screen = Screen()
    screen.play(
        TurnStarted(1), turn_done("HTTP 500"), completed("The run stopped on an error.", StopReason.ERROR, "HTTP 500")
    )
    assert screen.out == ""
    assert screen.err.splitlines() == ["[error] HTTP 500"], "the rejected turn's reason is not said twice"


def test_a_cancelled_run_says_so_and_keeps_the_partial_text() -> None:
    screen = Screen()
    screen.play(TurnStarted(1), TextDelta("Counting: one,"), turn_done("cancelled by the host"),
                completed("", StopReason.CANCELLED, "cancelled by the host"))  # fmt: skip
    assert screen.out == "Counting: one,\n"
    assert screen.err == "[cancelled] cancelled by the host\n"


def test_retries_and_the_final_summary_call_are_noted() -> None:
    screen = Screen()
    screen.play(TurnStarted(1, attempt=2), TurnStarted(2, final=True))
    assert "asking again" in screen.err
    assert "final answer" in screen.err


def test_a_providers_retry_is_one_dim_line_saying_how_long_it_waits_and_why() -> None:
    screen = Screen()
    screen.play(
        TurnStarted(1),
        ProviderRetry(2, 2.0, "rate_limited", "Rate limit reached", 429),
        ProviderRetry(3, 0.25, "transport", "connection refused"),
        TextDelta("Hi"),
    )
    assert screen.err == "retrying in 2.0 s (rate_limited, HTTP 429)\nretrying in 0.2 s (transport)\n"
    assert screen.out == "Hi"


def test_each_thinking_block_has_lines_of_its_own() -> None:
    screen = Screen()
    screen.play(
        TurnStarted(1),
        THINKING_STARTED,
        ThinkingDelta("first"),
        THINKING_ENDED,
        THINKING_STARTED,
        ThinkingDelta("second"),
        THINKING_ENDED,
        TextDelta("Answer"),
    )
    assert screen.err == "first\nsecond\n"
    assert screen.out == "Answer"


def test_no_spinner_when_err_is_not_a_terminal() -> None:
    screen = Screen(spinner=True)
    assert screen.renderer.spinner is False
    screen.play(TurnStarted(1), TextDelta("x"))
    assert screen.err == ""


def test_describe_call_cuts_long_values_and_survives_bad_arguments() -> None:
    assert describe_call(ToolCall("c", "read", {"path": "a.txt", "limit": 5})) == "read(path='a.txt', limit=5)"
    assert describe_call(ToolCall("c", "bash", None, '{"command": "ls')) == 'bash({"command": "ls)'
    assert len(describe_call(CALL)) <= 100


def test_describe_result_counts_the_lines_it_leaves_out() -> None:
    assert describe_result(ToolResult("c", "bash", "")) == "bash: (no output)"
    assert describe_result(ToolResult("c", "read", "one\ntwo")) == "read: one (+1 line)"
    assert describe_result(ToolResult("c", "read", "one\n\ntwo\nthree")) == "read: one (+2 lines)"


def test_a_repeated_call_is_labelled_as_such_not_as_a_refusal() -> None:
    repeated = ToolResult("c2", "read", "1\tBuy milk\n2\tCall Alice", code="repeated")
    assert describe_result(repeated) == "read: (repeated: answered from the earlier result)"
    screen = Screen()
    screen.play(ToolResultReceived(repeated, 2))
    assert screen.err == "  ↺ read: (repeated: answered from the earlier result)\n"


def test_the_same_output_gets_the_same_one_line_summary() -> None:
    content = "1\tBuy milk\n2\tCall Alice"
    first = describe_result(ToolResult("c1", "read", content))
    assert first == describe_result(ToolResult("c9", "read", content)) == "read: 1 Buy milk (+1 line)"


def test_usage_line_shows_tokens_requests_and_cost_only_when_known() -> None:
    usage = Usage(input_tokens=1000, output_tokens=234, requests=2)
    assert usage_line(usage, None) == "1,234 tokens (1,000 in, 234 out), 2 requests"
    assert usage_line(usage, Cost(0.001, 0.0002)) == "1,234 tokens (1,000 in, 234 out), 2 requests, $0.0012"
    assert usage_line(Usage(cache_read_tokens=5, requests=1), None) == "5 tokens (0 in, 0 out, 5 cached), 1 request"


def test_with_stream_off_a_turns_text_is_held_and_printed_whole_when_the_turn_ends() -> None:
    screen = Screen(stream=False)
    screen.play(RunStarted("r", "m", "p"), TurnStarted(1), TextDelta("Hel"), TextDelta("lo "))
    screen.play(ThinkingDelta("hmm"), TextDelta("world"))
    assert screen.out == ""
    assert screen.err == "hmm"

    screen.play(turn_done())
    assert screen.out == "Hello world\n"
    screen.play(completed("Hello world"))
    assert screen.out == "Hello world\n"


def test_with_stream_off_the_text_of_a_turn_cut_short_is_still_printed() -> None:
    screen = Screen(stream=False)
    screen.play(RunStarted("r", "m", "p"), TurnStarted(1), TextDelta("Half"), TextDelta("way"))
    assert screen.out == ""

    screen.play(completed("Halfway", StopReason.CANCELLED, "cancelled by the user"))
    assert screen.out == "Halfway\n"
    assert "[cancelled]" in screen.err


def compacted(reason: str = "threshold", trimmed: int = 0, summarized: int = 33) -> Compacted:
    marker = compaction_marker("They read the notes.", CompactionInfo(4, summarized, 3284, 1092, {}))
    return Compacted(3, 3284, 1092, summarized, 4, trimmed, reason, marker)  # type: ignore[arg-type]


def test_a_compaction_is_one_quiet_line_on_err_between_the_answers() -> None:
    screen = Screen()
    screen.play(TurnStarted(1), TextDelta("Reading"), turn_done(), compacted(), TurnStarted(2), TextDelta("Done."))

    assert screen.out == "Reading\nDone."
    assert screen.err == "context compacted: 3,284 → 1,092 tokens (33 messages summarized)\n"


def test_a_compaction_line_says_when_an_overflow_set_it_off_and_what_was_trimmed() -> None:
    assert describe_compaction(compacted("overflow", trimmed=2, summarized=1)) == (
        "context compacted after the model's context overflowed: 3,284 → 1,092 tokens "
        "(1 message summarized, 2 tool outputs shown by reference)"
    )
    assert describe_compaction(compacted(trimmed=1)).endswith(
        "(33 messages summarized, 1 tool output shown by reference)"
    )


def test_an_overflow_is_told_before_the_compaction_it_set_off_and_the_retry_after_it() -> None:
    screen = Screen()
    screen.play(
        TurnStarted(3), turn_done("ContextOverflow: too long"), compacted("overflow"), TurnStarted(3, attempt=2)
    )

    lines = screen.err.splitlines()
    assert lines[0] == "(answer not used: ContextOverflow: too long)"
    assert lines[1].startswith("context compacted after the model's context overflowed: ")
    assert lines[2] == "(the answer could not be used; asking again)"


def cut_turn(text: str) -> TurnCompleted:
    return TurnCompleted(1, Message.assistant(text), Usage(), "length")


def test_an_answer_continued_past_the_output_limit_shows_as_one_answer_without_a_note_between() -> None:
    for stream in (True, False):
        screen = Screen(stream=stream)
        screen.play(TurnStarted(1), TextDelta("The capital is"), cut_turn("The capital is"))
        screen.play(TurnStarted(2, final=True), TextDelta(" Paris."), turn_done())
        screen.play(completed("The capital is Paris."))
        assert screen.out == "The capital is Paris.\n", stream
        assert screen.err == "", "no 'final answer' note, no closing mark: the answer was finished"


def test_an_answer_still_cut_at_the_output_limit_is_marked_on_the_closing_line() -> None:
    screen = Screen()
    cut = "the model's answer was cut off at the output limit, still after 1 continuation(s)"
    result = RunResult("One two", StopReason.COMPLETE, (), Usage(), degraded=True, detail=cut, finish_reason="length")
    screen.play(TurnStarted(1), TextDelta("One"), cut_turn("One"), TurnStarted(2, final=True), TextDelta(" two"))
    screen.play(cut_turn(" two"), RunCompleted(result))
    assert screen.out == "One two\n"
    assert screen.err.splitlines()[-1] == f"[complete, degraded, cut off at the output limit] {cut}"


def test_a_handoff_is_a_dim_line_saying_who_takes_over() -> None:
    screen = Screen()
    screen.play(
        TurnStarted(1),
        turn_done(),
        ToolCallStarted(ToolCall("c1", "transfer_to_billing", {}), 1),
        ToolResultReceived(ToolResult("c1", "transfer_to_billing", "Transferred to billing."), 1),
        HandoffTaken("triage", "billing", 1),
        TurnStarted(2),
        TextDelta("You owe 12 EUR."),
        turn_done(),
        completed("You owe 12 EUR."),
    )
    assert "⇢ billing takes over from triage" in screen.err.splitlines()
    assert screen.out == "You owe 12 EUR.\n"
