"""The token gauge and the compaction plan, unit by unit (``loop/context/tokens.py``, ``window.py``)."""

from __future__ import annotations

import pytest

from tether.limits import Compaction
from tether.loop.context.history import cut_points
from tether.loop.context.tokens import CHARS_PER_TOKEN, TokenGauge, fixed_chars, message_chars
from tether.loop.context.window import Budget, ContextWindow, tokens_in_error, window_in_error
from tether.messages import (
    CompactionInfo,
    Message,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    compaction_marker,
    compaction_of,
    model_view,
    transcript_problems,
)
from tether.providers.base import ToolDefinition
from tether.usage import Usage


def exchange(n: int, size: int = 400) -> list[Message]:
    call = ToolCall(f"c{n}", "fetch", {"n": n}, f'{{"n": {n}}}')
    return [Message("assistant", (call,)), Message("tool", (ToolResult(f"c{n}", "fetch", "x" * size),))]


def conversation(exchanges: int, size: int = 400) -> list[Message]:
    messages = [Message.system("S"), Message.user("go")]
    for n in range(exchanges):
        messages += exchange(n, size)
    return messages


# --- the gauge ----------------------------------------------------------------------------------------------


def test_an_estimate_is_the_last_report_plus_what_was_added_since() -> None:
    gauge = TokenGauge(fixed_chars=0)
    view = conversation(3)[1:]
    gauge.observe(view, Usage(input_tokens=700, cache_read_tokens=300))
    added = exchange(9)
    assert gauge.estimate([*view, *added]) == 1000 + gauge.messages(added)


def test_a_view_that_does_not_extend_the_last_one_is_estimated_from_its_characters() -> None:
    gauge = TokenGauge(fixed_chars=0)
    view = conversation(3)[1:]
    gauge.observe(view, Usage(input_tokens=5000))
    other = conversation(3)[1:]  # equal, but other objects: a compacted view is rebuilt, never the same
    assert gauge.estimate(other) == gauge.whole(other) < 5000 + 1


def test_reports_calibrate_the_rate_within_bounds() -> None:
    gauge = TokenGauge(fixed_chars=0)
    view = [Message.user("字" * 4000)]  # one token a character, not four
    gauge.observe(view, Usage(input_tokens=4000))
    assert gauge.ratio == pytest.approx(4000 * CHARS_PER_TOKEN / message_chars(view[0]))
    gauge.observe([Message.user("a" * 40)], Usage(input_tokens=10**6))
    assert gauge.ratio == 4.0  # MAX_RATIO: one absurd report cannot make every estimate absurd


def test_a_report_of_no_input_tokens_changes_nothing() -> None:
    gauge = TokenGauge(fixed_chars=0)
    view = conversation(2)[1:]
    gauge.observe(view, Usage())
    assert gauge.ratio == 1.0
    assert gauge.estimate(view) == gauge.whole(view)


def test_an_overflow_raises_the_rate_so_the_refused_view_is_estimated_over_the_window() -> None:
    gauge = TokenGauge(fixed_chars=0)
    view = conversation(5)[1:]
    gauge.observe(view, Usage(input_tokens=gauge.whole(view)))
    refused_window = gauge.whole(view) * 2  # the estimate was half of what the provider counted
    gauge.overflowed(view, window=refused_window)
    assert gauge.estimate(view) > refused_window
    assert gauge.estimate([*view, *exchange(7)]) == gauge.whole([*view, *exchange(7)])  # the anchor is gone


def test_every_part_counts_signatures_and_arguments_included() -> None:
    thinking = Message("assistant", (Thinking("t" * 100, signature="s" * 400),))
    assert message_chars(thinking) > 500
    call = Message("assistant", (ToolCall("id", "f", {"a": "v" * 300}),))  # no raw text: dumped
    assert message_chars(call) > 300
    tools = (ToolDefinition("fetch", "Fetch.", {"type": "object", "properties": {"n": {"type": "integer"}}}),)
    assert fixed_chars("system", tools) > len("system") + len("fetch")


# --- where history may be cut ---------------------------------------------------------------------------------


def test_cuts_fall_before_user_and_assistant_messages_never_before_a_tool_message() -> None:
    messages = conversation(3)
    cuts = cut_points(messages, 1, len(messages))
    assert all(messages[c].role in ("user", "assistant") for c in cuts)
    for cut in cuts:  # each side is valid on its own
        assert transcript_problems(messages[1:cut]) == []
        assert transcript_problems([Message.user("summary"), *messages[cut:]]) == []


# --- the plan ------------------------------------------------------------------------------------------------


def window_for(messages: list[Message], tokens: int = 4000, **settings: object) -> ContextWindow:
    gauge = TokenGauge(fixed_chars=0)
    return ContextWindow(messages, 1, Compaction(**settings), tokens, None, gauge)  # type: ignore[arg-type]


def test_the_plan_keeps_the_most_recent_exchanges_that_fit_the_keep_budget() -> None:
    messages = conversation(30)
    window = window_for(messages)
    plan = window.plan(window.view())
    assert plan is not None
    kept = messages[plan.cut :]
    assert window.gauge is not None
    assert window.gauge.messages(kept) <= window.budget.keep  # type: ignore[union-attr]
    assert window.gauge.messages(messages[plan.cut - 2 :]) > window.budget.keep  # type: ignore[union-attr]
    assert messages[plan.cut].role == "assistant"
    assert list(plan.summarized) == messages[1 : plan.cut]


def test_the_last_exchange_is_kept_whatever_its_size() -> None:
    messages = conversation(4)
    messages += exchange(99, size=9000)
    window = window_for(messages)
    plan = window.plan(window.view())
    assert plan is not None
    assert plan.cut == len(messages) - 2


def test_only_what_fits_one_request_is_sent_for_summary() -> None:
    messages = conversation(60, size=400)  # ~6,000 tokens before the kept part: more than one request holds
    window = window_for(messages)
    plan = window.plan(window.view())
    assert plan is not None
    budget = window.budget
    assert budget is not None
    assert window.gauge is not None
    assert window.gauge.messages(plan.summarized) + budget.summary_tokens <= budget.limit


def test_nothing_can_be_planned_when_the_view_is_the_prompt_or_a_summary_and_one_exchange() -> None:
    alone = [Message.system("S"), Message.user("go" * 5000)]
    window = window_for(alone)
    assert window.plan(window.view()) is None
    marker = compaction_marker("S", CompactionInfo(2, 9, 10, 5, {}))
    summarized = [Message.system("S"), Message.user("go"), marker, *exchange(1)]
    window = window_for(summarized)
    assert window.start == 2
    assert window.plan(window.view()) is None


def test_a_compaction_inserts_a_marker_the_view_starts_from() -> None:
    messages = conversation(30)
    window = window_for(messages)
    plan = window.plan(window.view())
    assert plan is not None
    marker = window.compacted(plan, "the summary")
    assert messages[plan.cut] is marker
    info = compaction_of(marker)
    assert info is not None
    assert info.kept == len(messages) - plan.cut - 1
    assert info.tokens_after < info.tokens_before
    assert window.view() == list(model_view(messages)[1:])
    assert transcript_problems(messages[1:]) == []


def test_a_second_compaction_summarizes_the_first_summary_with_what_followed() -> None:
    messages = conversation(30)
    window = window_for(messages)
    first = window.plan(window.view())
    assert first is not None
    window.compacted(first, "first summary")
    messages += [m for n in range(30, 60) for m in exchange(n)]
    second = window.plan(window.view())
    assert second is not None
    assert second.summarized[0].text.endswith("first summary")
    window.compacted(second, "second summary")
    assert window.view()[0].text.endswith("second summary")
    assert sum(1 for m in messages if compaction_of(m)) == 2


def test_cached_outputs_in_the_kept_part_are_trimmed_except_the_last_turns() -> None:
    messages = conversation(30, size=100)
    window = ContextWindow(messages, 1, Compaction(), 4000, None, TokenGauge(0), stub=lambda r: f"[ref of {r.call_id}]")
    plan = window.plan(window.view())
    assert plan is not None
    last_call = messages[-1].tool_results[0].call_id
    kept_calls = {r.call_id for m in messages[plan.cut :] for r in m.tool_results}
    assert set(plan.trimmed) == kept_calls - {last_call}
    window.compacted(plan, "s")
    shown = {r.call_id: r.content for m in window.view() for r in m.tool_results}
    assert shown[last_call] == "x" * 100
    assert all(shown[c] == f"[ref of {c}]" for c in plan.trimmed)
    assert all(r.content == "x" * 100 for m in messages for r in m.tool_results)  # the transcript keeps all


def test_trimming_can_be_turned_off() -> None:
    messages = conversation(30, size=100)
    window = ContextWindow(
        messages, 1, Compaction(trim_tool_outputs=False), 4000, None, TokenGauge(0), stub=lambda r: "ref"
    )
    plan = window.plan(window.view())
    assert plan is not None
    assert plan.trimmed == {}


def test_a_marker_followed_by_a_user_message_is_one_message_for_the_model() -> None:
    marker = compaction_marker("S", CompactionInfo(1, 2, 10, 5, {}))
    view = model_view([Message.system("sys"), Message.user("a"), marker, Message.user("b")])
    assert [m.role for m in view] == ["system", "user"]
    assert [p.text for p in view[1].parts if type(p) is Text] == [marker.text, "b"]


def test_a_damaged_marker_record_is_an_ordinary_user_message() -> None:
    for record in (
        {"kept": "x"},
        {"kept": 1},
        "no",
        {"kept": -1, "summarized": 0, "tokens_before": 0, "tokens_after": 0},
    ):
        message = Message("user", (Text("t"),), {"compaction": record})
        assert compaction_of(message) is None
        assert model_view([Message.user("a"), message]) == (Message.user("a"), message)


# --- the budget and the window in an error --------------------------------------------------------------------


def test_the_budget_leaves_room_for_the_answer() -> None:
    budget = Budget.of(Compaction(), 10_000, 3_000)
    assert budget.limit == 7_000
    assert budget.trigger == 7_000  # 80% of the window would not leave the answer its room
    assert budget.summary_tokens == 1_250
    assert Budget.of(Compaction(), 1_000_000, None).summary_tokens == 4_096


@pytest.mark.parametrize(
    ("detail", "window"),
    [
        ("This model's maximum context length is 128000 tokens. However, your messages resulted in", 128_000),
        ("prompt is too long: 210000 tokens > 200000 maximum", 200_000),
        ("The input token count (1200000) exceeds the maximum number of tokens allowed (1,048,576).", 1_048_576),
        ('{"type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}', 8_192),
        ("input length exceeds maximum context length", None),
    ],
)
def test_the_window_an_overflow_error_states_is_read(detail: str, window: int | None) -> None:
    assert window_in_error(detail) == window


@pytest.mark.parametrize(
    ("detail", "sent"),
    [
        (
            "This model's maximum context length is 128000 tokens. However, your messages resulted in 130500 tokens.",
            130_500,
        ),
        ("prompt is too long: 210000 tokens > 200000 maximum", 210_000),
        ("The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", 1_200_000),
        ('{"type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}', 9_000),
        ("Your input exceeds the context window of this model.", None),
    ],
)
def test_the_size_an_overflow_error_counted_is_read(detail: str, sent: int | None) -> None:
    assert tokens_in_error(detail) == sent


def test_an_overflow_that_states_its_count_calibrates_the_estimate_to_it() -> None:
    messages = conversation(10)
    window = window_for(messages, tokens=100_000)
    view = window.view()
    counted = window.gauge.whole(view) * 3  # type: ignore[union-attr]
    assert window.learn_overflow(view, f"prompt is too long: {counted} tokens > 3000 maximum")
    assert window.budget is not None
    assert window.budget.window == 3000
    assert window.estimate(view) >= counted
