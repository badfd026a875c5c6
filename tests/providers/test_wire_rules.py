"""The wire rules of ``wire_rules.py``: the real APIs' accepted requests keep them, tether's bodies keep them,
and each rule catches a body that breaks it."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.providers import wire_rules as rules
from tests.wire.replay import Cassette, cassette_files
from tether.messages import Message, Text, Thinking, ToolCall, ToolResult
from tether.providers.base import ModelSettings, Request

Body = dict[str, Any]

# --- the recorded requests the real APIs accepted -----------------------------------------------------------

CHECKS: dict[str, Callable[[Body], list[str]]] = {
    "anthropic": rules.anthropic_problems,
    "openai_chat": rules.chat_problems,
    "openai_compatible": rules.chat_problems,
    "openai_responses": rules.responses_problems,
}


def accepted_bodies() -> list[tuple[str, str, Body]]:
    """``(cassette, uri, body)`` of every recorded request a real API answered with 200."""
    found = []
    for folder in ("anthropic", "google", "openai_chat", "openai_compatible", "openai_responses"):
        for name in cassette_files(folder):
            for interaction in Cassette.load(name).interactions:
                if interaction.status == 200 and isinstance(interaction.request_body, dict):
                    found.append((name, interaction.uri, interaction.request_body))
    return found


ACCEPTED = accepted_bodies()
ACCEPTED_IDS = [f"{cassette}#{n}" for n, (cassette, _, _) in enumerate(ACCEPTED)]


def test_the_recordings_hold_requests_with_tool_results_for_every_api() -> None:
    with_results = {name.split("/")[0] for name, _, body in ACCEPTED if _answers_tools(json.dumps(body))}
    assert with_results == {"anthropic", "google", "openai_chat", "openai_compatible", "openai_responses"}


def _answers_tools(text: str) -> bool:
    return any(key in text for key in ('"tool_result"', '"role": "tool"', "function_call_output", "functionResponse"))


@pytest.mark.parametrize(("cassette", "uri", "body"), ACCEPTED, ids=ACCEPTED_IDS)
def test_every_request_a_real_api_accepted_keeps_its_rules(cassette: str, uri: str, body: Body) -> None:
    folder = cassette.split("/")[0]
    if folder == "google":
        assert rules.gemini_problems(body, signs_calls="gemini-3" in uri) == []
    else:
        assert CHECKS[folder](body) == []


# --- a conversation written by each provider ----------------------------------------------------------------


def conversation(origin: str) -> list[Message]:
    """A question, an assistant turn with signed thinking of ``origin``, text and two parallel calls, their
    results (one an error), and a follow-up question."""
    data = {"origin": origin}
    if origin == "openai-responses":
        summary = [{"type": "summary_text", "text": "plan"}]
        thinking = Thinking("plan", "enc-reasoning", {**data, "id": "rs_1", "summary": summary})
        text = Text("Let me look.", {**data, "id": "msg_1"})
        calls = [ToolCall(f"call_{n}", "lookup", {"q": n}, provider_data={**data, "id": f"fc_{n}"}) for n in (1, 2)]
    elif origin == "gemini":
        thinking = Thinking("plan", "gemini-thought-signature", data)
        text = Text("Let me look.")
        calls = [ToolCall("call_1", "lookup", {"q": 1}, provider_data={**data, "thoughtSignature": "gemini-call"})]
        calls.append(ToolCall("call_2", "lookup", {"q": 2}))
    else:
        thinking = Thinking("plan", "anthropic-signature", data)
        text = Text("Let me look.")
        calls = [ToolCall(f"toolu_{n}", "lookup", {"q": n}) for n in (1, 2)]
    results = (
        ToolResult(calls[0].id, "lookup", "found 1"),
        ToolResult(calls[1].id, "lookup", "no such thing", is_error=True, code="tool_failed"),
    )
    return [
        Message.user("Look these up."),
        Message("assistant", (thinking, text, *calls)),
        Message("tool", results),
        Message.user("And now?"),
    ]


def body_of(wire: str, origin: str, messages: list[Message] | None = None, **options: Any) -> Body:
    """The body of ``wire`` for the conversation of ``origin`` (or ``messages``), checked to keep every rule."""
    built = rules.assert_every_provider_accepts("Be brief.", messages or conversation(origin), **options)
    return copy.deepcopy(built[wire])


def broken(problems: list[str], *expected: str) -> None:
    """Each expected phrase is in one of the problems found."""
    for phrase in expected:
        assert any(phrase in problem for problem in problems), (phrase, problems)


@pytest.mark.parametrize("origin", ["anthropic", "gemini", "openai-responses", "openai"])
def test_tethers_bodies_for_a_conversation_of_any_origin_keep_every_rule(origin: str) -> None:
    built = rules.assert_every_provider_accepts("Be brief.", conversation(origin))
    assert set(built) == {"openai-chat", "openai-responses", "anthropic", "gemini-2.5", "gemini-3"}


def test_the_summary_call_with_tools_off_keeps_every_rule() -> None:
    history = [*conversation("anthropic")[:3], Message.user("Summarize the conversation so far.")]
    built = rules.assert_every_provider_accepts(None, history, tool_choice="none")
    assert built["anthropic"]["tool_choice"] == {"type": "none"}
    assert built["anthropic"]["tools"]


# --- Anthropic ----------------------------------------------------------------------------------------------


def anthropic(mutate: Callable[[Body], object], **options: Any) -> list[str]:
    body = body_of("anthropic", "anthropic", **options)
    mutate(body)
    return rules.anthropic_problems(body)


def test_anthropic_first_message_from_the_user_and_roles_alternating() -> None:
    broken(anthropic(lambda b: b["messages"].pop(0)), "the first message must use the user role")
    broken(anthropic(lambda b: b["messages"].insert(0, {"role": "user", "content": "hi"})), "roles must alternate")
    broken(anthropic(lambda b: b["messages"][0].update(role="system")), "neither 'user' nor 'assistant'")


def test_anthropic_content_and_text_blocks_not_empty() -> None:
    broken(anthropic(lambda b: b["messages"][0].update(content=[])), "must have non-empty content")
    broken(anthropic(lambda b: b["messages"][1]["content"][1].update(text="")), "text content blocks must be non-empty")


def test_anthropic_tool_uses_answered_at_the_start_of_the_next_message() -> None:
    broken(anthropic(lambda b: b["messages"][2]["content"].pop(1)), "did not find 2 tool_result block(s)")
    broken(
        anthropic(lambda b: b["messages"][2]["content"].insert(0, {"type": "text", "text": "first"})),
        "did not find 2 tool_result block(s) at the beginning",
    )
    del_end = anthropic(lambda b: b["messages"].__delitem__(slice(2, None)))
    broken(del_end, "tool_use ids were found without tool_result blocks", "must end with a user message")


def test_anthropic_no_result_without_its_tool_use() -> None:
    orphan = {"type": "tool_result", "tool_use_id": "toolu_9", "content": "?", "is_error": False}
    broken(anthropic(lambda b: b["messages"][2]["content"].insert(0, orphan)), "unexpected tool_use_id")
    broken(anthropic(lambda b: b["messages"][1]["content"].append(orphan)), "belong in a user message")


def test_anthropic_tool_blocks_need_tool_definitions() -> None:
    broken(anthropic(lambda b: b.pop("tools")), "must define tools")


def test_anthropic_tool_use_ids_and_inputs() -> None:
    broken(anthropic(lambda b: b["messages"][1]["content"][2].update(id="call.1")), "does not match")
    broken(anthropic(lambda b: b["messages"][1]["content"][2].update(input="{}")), "input must be an object")
    broken(anthropic(lambda b: b["messages"][1]["content"][3].update(id="toolu_1")), "tool_use ids must be unique")


def test_anthropic_thinking_replayed_signed() -> None:
    broken(anthropic(lambda b: b["messages"][1]["content"][0].pop("signature")), "thinking.signature is required")
    redacted = {"type": "redacted_thinking", "data": ""}
    broken(anthropic(lambda b: b["messages"][1]["content"].insert(0, redacted)), "redacted_thinking.data")


def test_anthropic_with_thinking_on_the_calling_message_starts_with_its_thinking() -> None:
    thinking = ModelSettings(extra={"thinking": {"type": "enabled", "budget_tokens": 1024}})
    in_loop = conversation("anthropic")[:3]
    body = body_of("anthropic", "anthropic", in_loop, settings=thinking)
    assert rules.anthropic_problems(body) == []
    body["messages"][1]["content"].pop(0)
    broken(rules.anthropic_problems(body), "expected thinking or redacted_thinking, found text")


# --- OpenAI Chat Completions --------------------------------------------------------------------------------


def chat(mutate: Callable[[Body], object]) -> list[str]:
    body = body_of("openai-chat", "openai")
    mutate(body)
    return rules.chat_problems(body)


def test_chat_every_call_answered_before_the_next_other_message() -> None:
    broken(chat(lambda b: b["messages"].pop(4)), "did not have response messages: ['toolu_2']")
    broken(chat(lambda b: b["messages"].insert(3, {"role": "user", "content": "wait"})), "did not have response")
    broken(chat(lambda b: b["messages"].__delitem__(slice(3, None))), "end: an assistant message with 'tool_calls'")


def test_chat_no_tool_message_without_its_call() -> None:
    orphan = {"role": "tool", "tool_call_id": "call_9", "content": "?"}
    broken(chat(lambda b: b["messages"].append(orphan)), "must be a response to a preceding message")
    broken(chat(lambda b: b["messages"][2].pop("tool_calls")), "must be a response to a preceding message")


def test_chat_assistant_messages_and_calls_well_formed() -> None:
    def empty(body: Body) -> None:
        body["messages"][2].update(content=None)
        body["messages"][2].pop("tool_calls")
        del body["messages"][3:5]

    broken(chat(empty), "needs content unless it has tool_calls")
    broken(chat(lambda b: b["messages"][2]["tool_calls"][0]["function"].update(arguments={})), "must be a string")
    broken(chat(lambda b: b["messages"][2]["tool_calls"][1].update(id="toolu_1")), "duplicate tool call ids")
    broken(chat(lambda b: b["messages"][1].update(role="robot")), "invalid role")


def test_chat_tool_choice_only_with_tools() -> None:
    broken(chat(lambda b: b.pop("tools")), "tool_choice: only allowed when tools are specified")


# --- OpenAI Responses ---------------------------------------------------------------------------------------


def responses(mutate: Callable[[list[Body]], object]) -> list[str]:
    body = body_of("openai-responses", "openai-responses")
    mutate(body["input"])
    return rules.responses_problems(body)


def test_responses_reference_body_is_linked_by_ids() -> None:
    items = body_of("openai-responses", "openai-responses")["input"]
    assert [(i.get("type"), i.get("id")) for i in items[:7]] == [
        (None, None),
        ("reasoning", "rs_1"),
        ("message", "msg_1"),
        ("function_call", "fc_1"),
        ("function_call", "fc_2"),
        ("function_call_output", None),
        ("function_call_output", None),
    ]


def test_responses_every_call_has_its_output_and_every_output_its_call() -> None:
    broken(responses(lambda items: items.pop(6)), "no tool output found for function call 'call_2'")
    orphan = {"type": "function_call_output", "call_id": "call_9", "output": "?"}
    broken(responses(lambda items: items.insert(5, orphan)), "no tool call found for function call output")
    broken(responses(lambda items: items.insert(2, items.pop(5))), "no tool call found")


def test_responses_reasoning_followed_by_its_output_item() -> None:
    broken(responses(lambda items: items.__delitem__(slice(2, 5))), "without its required following item")
    broken(responses(lambda items: items.insert(5, items.pop(1))), "without its required following item")


def test_responses_reasoning_sent_back_with_encrypted_content() -> None:
    broken(responses(lambda items: items[1].pop("encrypted_content")), "needs its encrypted_content")


def test_responses_output_item_ids_only_with_their_reasoning_and_prefixed() -> None:
    broken(responses(lambda items: items.pop(1)), "item 'fc_1' of type 'function_call' was provided without")
    broken(responses(lambda items: items[3].update(id="msg_x")), "expected an id that begins with 'fc'")
    broken(responses(lambda items: items[4].update(call_id="call_1")), "duplicate function_call call_ids")


# --- Gemini -------------------------------------------------------------------------------------------------


def gemini(
    mutate: Callable[[list[Body]], object], *, signs_calls: bool = False, messages: list[Message] | None = None
) -> list[str]:
    body = body_of("gemini-3" if signs_calls else "gemini-2.5", "gemini", messages)
    mutate(body["contents"])
    return rules.gemini_problems(body, signs_calls=signs_calls)


def test_gemini_contents_start_with_the_user_and_alternate() -> None:
    broken(gemini(lambda contents: contents.pop(0)), "the first content should be with role 'user'")
    broken(gemini(lambda contents: contents.insert(0, copy.deepcopy(contents[0]))), "must alternate")
    broken(gemini(lambda contents: contents[0].update(parts=[])), "parts must not be empty")


def test_gemini_a_call_turn_is_answered_by_the_next_turn_for_the_same_functions() -> None:
    broken(gemini(lambda contents: contents[2]["parts"].pop(1)), "number of function response parts (1)")
    rename = lambda contents: contents[2]["parts"][0]["functionResponse"].update(name="other")  # noqa: E731
    broken(gemini(rename), "answer other functions")
    swap_id = lambda contents: contents[2]["parts"][0]["functionResponse"].update(id="call_9")  # noqa: E731
    broken(gemini(swap_id), "answer other call ids")
    broken(gemini(lambda contents: contents.__delitem__(slice(2, None))), "number of function response parts (0)")


def test_gemini_a_response_turn_comes_right_after_its_call_turn() -> None:
    broken(gemini(lambda contents: contents.pop(1)), "must come immediately after a function call turn")
    first = lambda contents: contents.__delitem__(0)  # noqa: E731
    broken(gemini(first), "must come immediately after a user turn")


def test_gemini_3_the_first_call_of_each_model_turn_of_the_current_turn_is_signed() -> None:
    in_loop = conversation("gemini")[:3]
    unsign = lambda contents: contents[1]["parts"][2].pop("thoughtSignature")  # noqa: E731
    assert gemini(unsign, messages=in_loop) == []
    broken(gemini(unsign, signs_calls=True, messages=in_loop), "missing a thought_signature")


def test_gemini_3_a_call_turn_before_the_last_user_text_needs_no_signature() -> None:
    unsign = lambda contents: contents[1]["parts"][2].pop("thoughtSignature")  # noqa: E731
    assert gemini(unsign, signs_calls=True) == []


# --- signatures ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("origin", "wire", "remove"),
    [
        ("anthropic", "anthropic", lambda b: b["messages"][1]["content"].pop(0)),
        ("openai-responses", "openai-responses", lambda b: b["input"][1].update(encrypted_content="other")),
        ("gemini", "gemini-2.5", lambda b: b["contents"][1]["parts"][0].pop("thoughtSignature")),
        ("gemini", "gemini-3", lambda b: b["contents"][1]["parts"][2].update(thoughtSignature="other")),
    ],
)
def test_a_signature_not_sent_back_on_its_part_is_reported(
    origin: str, wire: str, remove: Callable[[Body], object]
) -> None:
    messages = conversation(origin)
    built = rules.bodies("Be brief.", messages, rules.tools_for(messages))
    assert rules.lost_signatures(messages, built) == []
    remove(built[wire])
    lost = rules.lost_signatures(messages, built)
    assert len(lost) == 1
    assert lost[0].startswith(f"{wire}: ")


def test_a_gemini_signature_moved_to_another_call_is_reported() -> None:
    messages = conversation("gemini")
    built = rules.bodies(None, messages, rules.tools_for(messages))
    parts = built["gemini-2.5"]["contents"][1]["parts"]
    parts[3]["thoughtSignature"] = parts[2].pop("thoughtSignature")
    assert rules.lost_signatures(messages, built) == ["gemini-2.5: call:call_1 gemini-call... is not sent back"]


def test_assert_every_provider_accepts_names_the_provider_and_the_rule() -> None:
    orphan = Message("tool", (ToolResult("call_9", "lookup", "?"),))
    with pytest.raises(AssertionError) as failure:
        rules.assert_every_provider_accepts(None, [Message.user("hi"), orphan])
    report = str(failure.value)
    for wire in ("openai-chat", "openai-responses", "anthropic", "gemini-2.5", "gemini-3"):
        assert f"\n  {wire}: " in report


def test_a_request_a_run_made_is_checked_with_its_tools_and_tool_choice() -> None:
    messages = conversation("gemini")[:3]
    request = Request(tuple(messages), "Be brief.", rules.tools_for(messages), "none")
    built = rules.assert_request_accepted(request)
    assert built["gemini-3"]["toolConfig"] == {"functionCallingConfig": {"mode": "NONE"}}
    with pytest.raises(AssertionError, match="anthropic: tools: requests which include tool_use"):
        rules.assert_request_accepted(Request(tuple(messages), "Be brief."))
