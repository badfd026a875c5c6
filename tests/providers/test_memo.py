"""Each message's wire form made once (``providers/memo.py``): what the Anthropic, Responses and Gemini providers
send is exactly the body they build as a dict, and a growing history is encoded by its new messages only."""

from __future__ import annotations

import gc
import json
import math
from collections.abc import Callable
from types import ModuleType
from typing import Any

import msgspec
import pytest

from tether.message_memo import MessageMemo
from tether.messages import Message, Text, Thinking, ToolCall, ToolResult
from tether.providers import anthropic, gemini, openai_responses
from tether.providers.anthropic import AnthropicProvider
from tether.providers.base import ModelSettings, Request, ToolDefinition
from tether.providers.gemini import GeminiProvider
from tether.providers.memo import ToolsMemo
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.openai_responses import OpenAIResponsesProvider

ADD = ToolDefinition(
    "add", "Add two integers.", {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
)

Provider = AnthropicProvider | OpenAIResponsesProvider | GeminiProvider

PROVIDERS: dict[str, Callable[[], Provider]] = {
    "anthropic": lambda: AnthropicProvider(
        "claude-sonnet-4-5", api_key="k", base_url="http://127.0.0.1:9/v1", prompt_cache="off"
    ),
    "openai-responses": lambda: OpenAIResponsesProvider("o4-mini", api_key="k", base_url="http://127.0.0.1:9/v1"),
    "gemini-2.5": lambda: GeminiProvider("gemini-2.5-flash", api_key="k", base_url="http://127.0.0.1:9/v1beta"),
    "gemini-3": lambda: GeminiProvider("gemini-3-pro-preview", api_key="k", base_url="http://127.0.0.1:9/v1beta"),
}
MODULES: dict[str, ModuleType] = {
    "anthropic": anthropic,
    "openai-responses": openai_responses,
    "gemini-2.5": gemini,
    "gemini-3": gemini,
}


def call(call_id: str, origin: str | None = None, **data: Any) -> ToolCall:
    provider_data = {"origin": origin, **data} if origin else None
    return ToolCall(call_id, "add", {"a": 1, "b": 2}, '{"a": 1, "b": 2}', provider_data)


def result(call_id: str, content: str = "3", **options: Any) -> ToolResult:
    return ToolResult(call_id, "add", content, **options)


def thought(origin: str, **data: Any) -> Thinking:
    return Thinking("Adding.", signature="sig-" + origin, provider_data={"origin": origin, "id": "rs_1", **data})


NUL_TEXT = "\x00history\x00"
"""Text with NUL characters in it, as a hostile history may hold."""

HISTORIES: dict[str, list[Message]] = {
    "a tool turn": [
        Message.user("Add 1 and 2."),
        Message("assistant", (Text("Adding."), call("c1"))),
        Message("tool", (result("c1"),)),
        Message("assistant", (Text("It is 3."),)),
    ],
    "one role twice in a row": [
        Message.user("First."),
        Message.user("Second."),
        Message("assistant", (Text("One."),)),
        Message("assistant", (call("c1"), call("c2"))),
        Message("tool", (result("c1"),)),
        Message("tool", (result("c2", "failed", is_error=True, code="tool_failed"),)),
        Message.user("And now?"),
    ],
    "system messages, empty ones and empty texts": [
        Message.system("Be brief."),
        Message.user(""),
        Message("assistant", (Text(""),)),
        Message.system(""),
        Message("assistant", ()),
        Message("tool", ()),
        Message.user("Go on."),
        Message("assistant", (Text("Done."),)),
    ],
    "calls in merged turns, some with signatures, and thinking of every origin": [
        Message.user("Go."),
        Message("assistant", (Text("Thinking first."),)),
        Message("assistant", (thought("gemini"), call("c1"), call("c2"))),
        Message("tool", (result("c1"), result("c2"))),
        Message("assistant", (call("c3", "gemini", thoughtSignature="real-signature"), call("c4"))),
        Message("tool", (result("c3"), result("c4"))),
        Message("assistant", (thought("anthropic"), thought("openai-responses"), Text("Three."), call("c5"))),
        Message("tool", (result("c5", '{"ok": true, "result": 5}'),)),
        Message("assistant", (call("c6"),)),
        Message("assistant", (call("c7"),)),
        Message("tool", (result("c6"), result("c7"))),
    ],
    "hostile text: NUL, line separators, non-finite numbers": [
        Message.user(NUL_TEXT),
        Message(
            "assistant", (Text("\x00\u2028é😀" + NUL_TEXT), ToolCall("c1", "add", {"a": math.nan, "b": -math.inf}))
        ),
        Message("tool", (result("c1", NUL_TEXT),)),
        Message("assistant", (ToolCall("c2", "add", None, '{"a": 1,'),)),
        Message("tool", (result("c2", ""),)),
    ],
}


def canonical(body: Any) -> str:
    """A body as comparable text: key order ignored, written as ``msgspec.json`` writes it (a number JSON has no
    form for, NaN or an infinity, is ``null``), whether it is the payload's bytes or the body as plain data."""
    data = json.loads(body) if isinstance(body, bytes) else json.loads(msgspec.json.encode(body))
    return json.dumps(data, sort_keys=True)


def requests(history: list[Message], **options: Any) -> list[Request]:
    """The requests of a run that ends with ``history``: one per prefix, growing, sharing the message objects."""
    return [Request(tuple(history[: end + 1]), **options) for end in range(len(history))]


@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.parametrize("history", HISTORIES)
def test_the_payload_sent_is_the_body_built_as_a_dict_turn_after_turn(name: str, history: str) -> None:
    provider = PROVIDERS[name]()
    options: dict[str, Any] = {"system": "Be exact.", "tools": (ADD,)}
    for request in requests(HISTORIES[history], **options):  # the same messages, known from the turns before
        assert canonical(provider.request_payload(request)) == canonical(provider.request_body(request))


@pytest.mark.parametrize("name", PROVIDERS)
def test_extra_fields_that_replace_the_tools_or_history_are_sent_as_given(name: str) -> None:
    provider = PROVIDERS[name]()
    history_key = {"anthropic": "messages", "openai-responses": "input"}.get(name, "contents")
    replaced = [{"role": "user", "content": "from extra"}]
    for extra in ({"metadata": {"note": NUL_TEXT}}, {history_key: replaced}, {"tools": [{"name": "own"}]}):
        request = Request(
            tuple(HISTORIES["a tool turn"]), system=NUL_TEXT, tools=(ADD,), settings=ModelSettings(extra=extra)
        )
        sent = json.loads(provider.request_payload(request))
        assert canonical(msgspec.json.encode(sent)) == canonical(provider.request_body(request))
        for key, value in extra.items():
            if key != "metadata":
                assert sent[key] == value  # a setting's extra replaces what tether builds, as it would the dict's


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_growing_history_is_encoded_by_its_new_messages_only(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module, encoded = MODULES[name], []
    kept_json = module._kept_json

    def counted(message: Message, position: int) -> Any:
        encoded.append(message)
        return kept_json(message, position)

    monkeypatch.setattr(module, "_kept_json", counted)
    provider = PROVIDERS[name]()
    kept = HISTORIES["calls in merged turns, some with signatures, and thinking of every origin"]
    history = [Message(m.role, m.parts, m.provider_data) for m in kept]  # objects no other test encoded
    for request in requests(history, tools=(ADD,)):
        provider.request_payload(request)
    assert [id(message) for message in encoded] == [id(message) for message in history]


@pytest.mark.parametrize("name", PROVIDERS)
def test_each_tool_is_encoded_once_across_requests_and_agents(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run offers the same tools every turn, and an agent made afresh makes new definitions around the same
    tool's schema: each tool is encoded once; one with another schema, name or description anew."""
    module, encoded = MODULES[name], []

    def counting(encode: Callable[[ToolDefinition], Any]) -> Callable[[ToolDefinition], Any]:
        def counted(tool: ToolDefinition) -> Any:
            encoded.append(tool.name)
            return encode(tool)

        return counted

    if isinstance(module._TOOLS, dict):  # Gemini: one memo per way of writing a schema
        for key, memo in module._TOOLS.items():
            monkeypatch.setitem(module._TOOLS, key, ToolsMemo(counting(memo._encode)))
    else:
        monkeypatch.setattr(module, "_TOOLS", ToolsMemo(counting(module._TOOLS._encode)))
    multiply = ToolDefinition("multiply", "Multiply two integers.", {"type": "object", "properties": {}})
    history = tuple(HISTORIES["a tool turn"])
    for _ in range(2):  # two agents: the same tools, the definitions made afresh
        provider = PROVIDERS[name]()
        offered = (ToolDefinition(ADD.name, ADD.description, ADD.parameters), multiply)
        for end in range(1, len(history) + 1):
            request = Request(history[:end], tools=offered)
            assert canonical(provider.request_payload(request)) == canonical(provider.request_body(request))
    assert encoded == ["add", "multiply"]
    renamed = ToolDefinition("sum", ADD.description, ADD.parameters)
    request = Request(history, tools=(renamed, multiply))
    assert canonical(provider.request_payload(request)) == canonical(provider.request_body(request))
    assert encoded == ["add", "multiply", "sum"]


def test_an_entry_lives_as_long_as_its_message_and_answers_for_that_message_and_origin_only() -> None:
    memo: MessageMemo[bytes] = MessageMemo()
    message, twin = Message.user("Hi."), Message.user("Hi.")
    made: list[tuple[Message, str]] = []

    def make_for(origin: str) -> Callable[[Message, int], bytes]:
        def make(message: Message, position: int) -> bytes:
            made.append((message, origin))
            return f"{message.text} for {origin}".encode()

        return make

    assert memo.values([message], make_for("a"), "a") == [b"Hi. for a"]
    assert memo.values([message], make_for("a"), "a") == [b"Hi. for a"]
    assert memo.values([message], make_for("b"), "b") == [b"Hi. for b"]  # another server's wire form may differ
    assert memo.values([twin], make_for("a"), "a") == [b"Hi. for a"]  # an equal message is another object
    assert [(id(m), origin) for m, origin in made] == [(id(message), "a"), (id(message), "b"), (id(twin), "a")]
    assert memo.values([message], make_for("a"), "a") == [b"Hi. for a"]  # kept for b since: made again for a
    assert len(made) == 4
    assert len(memo) == 2
    made.clear()  # it held the message too
    del message
    gc.collect()
    assert len(memo) == 1  # the message died: its entry went with it; the twin's stays


def test_values_makes_only_what_is_not_kept_and_tells_make_where_each_message_is() -> None:
    memo: MessageMemo[str] = MessageMemo()
    first, second, third = Message.user("a"), Message.user("b"), Message.user("c")
    made: list[int] = []

    def make(message: Message, position: int) -> str:
        made.append(position)
        return f"{message.text}@{position}"

    assert memo.values([first, second], make, "o") == ["a@0", "b@1"]
    assert memo.values([first, second, third], make, "o") == ["a@0", "b@1", "c@2"]
    assert made == [0, 1, 2]  # the known two were not made again
    assert memo.values([third], make, "other") == ["c@0"]  # made again for another origin, and kept for it
    assert made == [0, 1, 2, 0]


@pytest.mark.parametrize("name", PROVIDERS)
def test_every_request_is_sent_as_it_asks_whatever_the_one_before_asked(name: str) -> None:
    """A run's requests ask for the same model, tools and settings every turn; a request asking for anything
    else, or with settings whose ``extra`` fields were changed in place, is sent as it asks: the body around the
    history is built for each request."""
    provider = PROVIDERS[name]()
    settings, tools = ModelSettings(max_tokens=5), (ADD,)
    history = list(HISTORIES["a tool turn"])
    for end in range(1, len(history) + 1):
        request = Request(tuple(history[:end]), system="Be brief.", tools=tools, settings=settings)
        assert canonical(provider.request_payload(request)) == canonical(provider.request_body(request))
    extra = ModelSettings(extra={"metadata": {"seed": 1}})
    asked = [
        Request(tuple(history), tools=tools, settings=settings, tool_choice="none"),
        Request(tuple(history), tools=tools, settings=settings, tool_choice="required"),
        Request(tuple(history), tools=(ADD,), settings=settings, parallel_tool_calls=False),
        Request(tuple(history), tools=(), settings=settings),
        Request(tuple(history), tools=tools, settings=ModelSettings(max_tokens=9)),
        Request(tuple(history), tools=tools, settings=extra),
        Request(tuple(history), system="Be long.", tools=tools, settings=settings),
        Request(tuple(history), system="Be short.", tools=tools, settings=settings),
        Request((Message.system("Be exact."), *history), system="Be short.", tools=tools, settings=settings),
    ]
    for request in asked:
        assert canonical(provider.request_payload(request)) == canonical(provider.request_body(request))
    extra.extra["metadata"] = {"seed": 2}  # changed in place: the next request sends it
    sent = json.loads(provider.request_payload(Request(tuple(history), tools=tools, settings=extra)))
    assert sent["metadata"] == {"seed": 2}


@pytest.mark.parametrize("name", ["openai", "anthropic", "openai-responses"])
def test_a_provider_switched_to_whole_answers_asks_for_them_at_once(name: str) -> None:
    """What the body holds of the provider's own settings is read for each request: a provider that no longer
    streams asks for a whole answer at once."""
    provider = (
        OpenAIChatProvider("gpt-4o-mini", api_key="k", base_url="http://127.0.0.1:9/v1")
        if name == "openai"
        else PROVIDERS[name]()
    )
    request = Request(tuple(HISTORIES["a tool turn"]), system="Be brief.", tools=(ADD,))
    assert json.loads(provider.request_payload(request))["stream"] is True
    provider.streaming = False
    assert json.loads(provider.request_payload(request))["stream"] is False
