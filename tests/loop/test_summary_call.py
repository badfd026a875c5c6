"""The summary call after a step limit, as docs/agents.md describes it: what it sends (the system prompt, the
history, the summary request; the tool definitions with tool_choice "none"), what each provider's body then
holds, and what the transcript keeps (the answer, not the request)."""

from __future__ import annotations

from tether import Agent, Limits, Message, tool
from tether.loop.context import SUMMARY_REQUEST
from tether.providers.anthropic import AnthropicProvider
from tether.providers.gemini import GeminiProvider
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.openai_responses import OpenAIResponsesProvider
from tether.providers.registry import PROFILES
from tether.providers.scripted import ScriptedProvider, call, reply


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


async def summary_run() -> tuple[ScriptedProvider, list[Message]]:
    model = ScriptedProvider([call("lookup", {"key": "a"}), reply("From what I found: a.", thinking="hmm")])
    result = await Agent(model, tools=[lookup], system="Be brief.", limits=Limits(max_turns=1)).run("find a")
    assert result.stop_reason == "max_turns"
    assert result.text == "From what I found: a."
    return model, list(result.messages)


async def test_the_summary_call_sends_the_system_prompt_the_history_and_the_request_with_tools_off() -> None:
    model, transcript = await summary_run()
    first, summary = model.requests
    assert summary.system == "Be brief."
    assert transcript[0] == Message.system("Be brief."), "the transcript holds it once, at its head"
    assert summary.messages == (*transcript[1:4], Message.user(SUMMARY_REQUEST))
    assert summary.tools == first.tools, "the definitions are kept"
    assert summary.tool_choice == "none"


async def test_the_transcript_keeps_the_summary_answer_and_not_the_request() -> None:
    _, transcript = await summary_run()
    assert [m.role for m in transcript] == ["system", "user", "assistant", "tool", "assistant"]
    assert transcript[-1].text == "From what I found: a."
    assert all(SUMMARY_REQUEST not in m.text for m in transcript)


async def test_each_provider_s_summary_body_keeps_the_definitions_with_tools_off_or_offers_none() -> None:
    model, _ = await summary_run()
    summary = model.requests[1]

    anthropic = AnthropicProvider("claude-sonnet-4-5", api_key="k", prompt_cache="off").request_body(summary)
    assert anthropic["tool_choice"] == {"type": "none"}
    assert [t["name"] for t in anthropic["tools"]] == ["lookup"], "it refuses tool_use blocks without definitions"
    assert any(block["type"] == "tool_use" for m in anthropic["messages"] for block in m["content"])
    assert anthropic["messages"][-1]["content"][-1] == {"type": "text", "text": SUMMARY_REQUEST}

    chat = OpenAIChatProvider("m", profile=PROFILES["openai"], api_key="k").request_body(summary)
    assert (chat["tool_choice"], len(chat["tools"])) == ("none", 1)
    responses = OpenAIResponsesProvider("gpt-4o", api_key="k").request_body(summary)
    assert (responses["tool_choice"], len(responses["tools"])) == ("none", 1)
    gemini = GeminiProvider("gemini-2.5-flash", api_key="k").request_body(summary)
    assert gemini["toolConfig"] == {"functionCallingConfig": {"mode": "NONE"}}
    assert len(gemini["tools"][0]["functionDeclarations"]) == 1

    ollama = OpenAIChatProvider("m", profile=PROFILES["ollama"]).request_body(summary)
    assert {"tools", "tool_choice"} & set(ollama) == set(), "a server that cannot be told none is offered no tools"
    assert [m["role"] for m in ollama["messages"]] == ["system", "user", "assistant", "tool", "user"]
