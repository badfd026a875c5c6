"""Known keys: the one rule for secret variable names, which values are keys, the masker, and masking at work:
a key a tool returns never reaches the model, the events or the saved session."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from tether import Agent, tool
from tether.errors import ConfigInvalid
from tether.events import RunEvent, ToolResultReceived
from tether.keys import ALL_KEY_VARIABLES
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.registry import PROFILES
from tether.providers.scripted import ScriptedProvider, call, reply
from tether.redaction import default_redaction
from tether.secrets import (
    MASK,
    Masker,
    connection_password,
    is_secret_argument,
    is_secret_name,
    is_secret_setting,
    known_secrets,
    secret_values,
)
from tether.sessions import SQLiteSessionStore

AGENT_KEY = "sk-agentkey-0123456789abcdef"
ENV_KEY = "envtoken-fedcba9876543210"

# --- which names are secret ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "LLAMA_API_KEY",
        "OPENAI_COMPATIBLE_API_KEY", "my_service_apikey", "GITHUB_TOKEN", "HF_TOKEN", "SLACK_BOT_TOKEN",
        "NGROK_AUTHTOKEN", "REFRESH_TOKENS", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "CLIENT_SECRET",
        "DB_PASSWORD", "MYSQL_PWD", "SMTP_PASS", "GITHUB_PAT", "AZURE_DEVOPS_EXT_PAT", "SENTRY_DSN",
        "ANALYTICS_DSN", "SIGNING_KEY", "KEY", "SESSION_COOKIE", "GOOGLE_APPLICATION_CREDENTIALS",
        "SSH_PRIVATE_KEY_FILE", "GPG_PASSPHRASE", "PGPASSWORD", "LDAP_PASSWD",
    ],
)  # fmt: skip
def test_credential_variables_are_secret(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "TOKENIZERS_PARALLELISM", "PWD", "OLDPWD", "SSH_AUTH_SOCK", "KEYBOARD_LAYOUT", "PATH", "HOME",
        "DATABASE_URL", "OPENAI_BASE_URL", "LANG", "PASSTHROUGH", "BYPASS", "COMPASS_HOME", "MONKEY_PATCH",
        "TERM", "SHELL",
    ],
)  # fmt: skip
def test_ordinary_variables_are_not_secret(name: str) -> None:
    assert not is_secret_name(name)


def test_every_provider_key_variable_is_secret() -> None:
    names = ALL_KEY_VARIABLES
    values = secret_values({name: f"value-of-{name}" for name in names})
    assert values == {f"value-of-{name}" for name in names}


# --- tool argument names ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["password", "db_password", "PASSWORD", "token", "GITHUB_TOKEN", "access_token", "api_key", "apiKey",
     "X-Api-Key", "X-API-KEY", "clientSecret", "client_secret", "Authorization", "privateKey", "cookie",
     "session.key", "sessionKey", "passphrase", "credentials", "aws-access-key"],
)  # fmt: skip
def test_argument_names_holding_a_secret_word_are_secret(name: str) -> None:
    assert is_secret_argument(name)
    assert default_redaction().is_secret_argument(name)


@pytest.mark.parametrize(
    "name",
    ["max_tokens", "tokens", "author", "authority", "key", "keys", "path", "secretary", "passage", "user",
     "command", "content", "tokenizer", "monkey", "", "a" * 10_000],
)  # fmt: skip
def test_ordinary_argument_names_are_not_secret(name: str) -> None:
    assert not is_secret_argument(name)


# --- configured setting names ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["Authorization", "Proxy-Authorization", "X-Api-Key", "X-Goog-Api-Key", "GITHUB_TOKEN", "access_token",
     "client_secret", "DB_PASSWORD", "Cookie", "X-Amz-Signature", "credentials", "key", "monkey"],
)  # fmt: skip
def test_setting_names_containing_a_secret_word_are_secret(name: str) -> None:
    assert is_secret_setting(name)


@pytest.mark.parametrize("name", ["X-Team", "Content-Type", "PATH", "HOME", "user", "region", ""])
def test_ordinary_setting_names_are_not_secret(name: str) -> None:
    assert not is_secret_setting(name)


def test_a_setting_name_can_be_judged_inside_a_longer_text() -> None:
    text = "https://h/api?region=eu&api_key=x"
    start = text.index("api_key")
    assert is_secret_setting(text, start, start + len("api_key"))
    assert not is_secret_setting(text, text.index("region"), text.index("region") + len("region"))


@pytest.mark.parametrize(
    ("name", "variable", "argument", "setting"),
    [
        ("KEY", True, False, True),  # a variable named KEY holds one; an argument "key" is a dict key
        ("PWD", False, True, False),  # the working directory; an argument "pwd" is a password
        ("tokens", True, False, True),  # a variable ending in TOKENS holds some; an argument counts them
        ("monkey", False, False, True),  # settings are judged broadest: rather hide than print
        ("DB_PASSWORD", True, True, True),
        ("OPENAI_API_KEY", True, True, True),
    ],
)
def test_the_three_kinds_of_name_differ_in_breadth_as_documented(
    name: str, variable: bool, argument: bool, setting: bool
) -> None:
    assert (is_secret_name(name), is_secret_argument(name), is_secret_setting(name)) == (variable, argument, setting)


def test_a_connection_string_with_a_password_is_a_key_whatever_its_name() -> None:
    environ = {
        "DATABASE_URL": "postgres://app:s3cr3t-pass%21@db.internal:5432/app",
        "HTTPS_PROXY": "http://proxyuser:proxy-password@proxy:3128",
        "PLAIN_URL": "https://example.com/path",
    }
    values = secret_values(environ)
    assert environ["DATABASE_URL"] in values
    assert "s3cr3t-pass!" in values  # decoded, as a program using it would print it
    assert "proxy-password" in values
    assert environ["PLAIN_URL"] not in values
    assert connection_password("redis://:hunter2hunter2@cache:6379/0") == "hunter2hunter2"
    assert connection_password("http://localhost:8080/v1") is None


def test_short_values_are_not_keys() -> None:
    assert secret_values({"GITHUB_TOKEN": "short", "API_KEY": "12345678"}) == {"12345678"}
    assert known_secrets({}, extra=["tiny", None, "", "long-enough"]) == {"long-enough"}


# --- the masker ---------------------------------------------------------------------------------------------


def test_a_key_is_masked_plain_in_json_and_inside_a_longer_line() -> None:
    masker = Masker([ENV_KEY])
    assert masker.mask(ENV_KEY) == MASK
    assert masker.mask(json.dumps({"token": ENV_KEY})) == '{"token": "***"}'
    assert masker.mask(f"export X={ENV_KEY}; echo done") == "export X=***; echo done"


def test_keys_are_found_as_json_and_urls_write_them() -> None:
    key = 'pa"ss\\word/ü-1234'
    masker = Masker([key])
    assert key not in masker.mask(json.dumps({"k": key}))
    assert masker.mask(json.dumps({"k": key})) == '{"k": "***"}'
    assert masker.mask(json.dumps({"k": key}, ensure_ascii=True)) == '{"k": "***"}'
    assert masker.mask("https://host/?key=pa%22ss%5Cword%2F%C3%BC-1234") == "https://host/?key=***"


def test_the_longest_key_wins_when_one_contains_another() -> None:
    masker = Masker(["abcdefgh", "abcdefgh-and-more"])
    assert masker.mask("x abcdefgh-and-more y abcdefgh z") == "x *** y *** z"


def test_a_masker_never_shows_its_keys() -> None:
    masker = Masker([ENV_KEY])
    assert ENV_KEY not in repr(masker)
    assert ENV_KEY not in str(masker)
    assert len(masker) == 1
    assert ENV_KEY in masker


KEYS = st.text(st.characters(blacklist_characters="*", blacklist_categories=["Cs"]), min_size=8, max_size=24)
FILLER = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40)


@settings(max_examples=60, deadline=None)
@given(keys=st.lists(KEYS, min_size=1, max_size=5), pieces=st.lists(st.tuples(FILLER, st.integers(0, 4)), max_size=6))
def test_no_key_is_left_in_any_masked_text(keys: list[str], pieces: list[tuple[str, int]]) -> None:
    text = "".join(filler + keys[index % len(keys)] for filler, index in pieces)
    masked = Masker(keys).mask(text)
    for key in keys:
        assert key not in masked


@settings(max_examples=60, deadline=None)
@given(keys=st.lists(KEYS, min_size=1, max_size=5), text=FILLER)
def test_a_text_without_keys_is_left_as_it_is(keys: list[str], text: str) -> None:
    masker = Masker(keys)
    if not any(form in text for key in keys for form in (key, json.dumps(key)[1:-1])):
        assert masker.mask(text) == text


# --- masking at work ----------------------------------------------------------------------------------------


class OneToolServer:
    """An OpenAI-compatible server playing a model that calls ``read_config`` once, then answers "ok"."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        if any(m["role"] == "tool" for m in body["messages"]):
            message: dict[str, Any] = {"role": "assistant", "content": "ok"}
        else:
            function = {"name": "read_config", "arguments": "{}"}
            calls = [{"id": "c1", "type": "function", "function": function}]
            message = {"role": "assistant", "content": None, "tool_calls": calls}
        choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if "tool_calls" in message else "stop"}
        return web.json_response({"id": "r", "model": body["model"], "choices": [choice]})


@pytest.fixture
async def server() -> AsyncIterator[tuple[OneToolServer, str]]:
    model = OneToolServer()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", model.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield model, f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    await runner.cleanup()


@tool
def read_config() -> str:
    """Read the configuration."""
    import os

    env_key = os.environ["MY_SERVICE_TOKEN"]
    document = json.dumps({"api_key": AGENT_KEY, "service": {"token": env_key}})
    return f"{AGENT_KEY}\n{document}\nline: Authorization: Bearer {env_key} (expires soon)"


async def test_keys_a_tool_returns_reach_neither_the_model_nor_the_events_nor_the_session(
    server: tuple[OneToolServer, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", ENV_KEY)
    model, base_url = server
    provider = OpenAIChatProvider(
        "m", profile=PROFILES["openai-compatible"], base_url=base_url, api_key=AGENT_KEY, stream=False
    )
    events: list[RunEvent] = []
    database = tmp_path / "sessions.db"
    async with SQLiteSessionStore(database) as store:
        agent = Agent(provider, tools=[read_config], store=store, on_event=events.append)
        result = await agent.run("Show the config.", session="s1")
        saved = await store.load("s1")
    assert result.stop_reason == "complete"
    (received,) = [e for e in events if isinstance(e, ToolResultReceived)]
    assert received.result.content.startswith("***\n")
    assert '{"api_key": "***", "service": {"token": "***"}}' in received.result.content
    assert "Authorization: Bearer *** (expires soon)" in received.result.content
    sent = json.dumps(model.requests[1])  # what the model got back
    stored = json.dumps([str(m) for m in saved.messages])
    for where in (sent, stored, str(received), str(result.messages), database.read_bytes().decode("latin-1")):
        assert AGENT_KEY not in where
        assert ENV_KEY not in where
    assert '\\"api_key\\": \\"***\\"' in sent


async def test_the_message_of_a_failing_tool_and_its_exception_are_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEPLOY_TOKEN", ENV_KEY)

    @tool
    def deploy() -> str:
        """Deploy."""
        try:
            raise KeyError(f"no such token {ENV_KEY}")
        except KeyError as error:
            raise RuntimeError(f"could not log in with {ENV_KEY}") from error

    events: list[RunEvent] = []
    agent = Agent(ScriptedProvider([call("deploy", {}), reply("sorry")]), tools=[deploy], on_event=events.append)
    await agent.run("deploy")
    (received,) = [e for e in events if isinstance(e, ToolResultReceived)]
    assert received.result.content == "Tool 'deploy' failed: RuntimeError: could not log in with ***"
    assert received.exception is not None
    assert ENV_KEY not in str(received.exception)
    assert received.exception.__cause__ is not None
    assert ENV_KEY not in str(received.exception.__cause__)


async def test_an_exception_that_shows_a_key_its_own_way_is_replaced_by_a_masked_stand_in() -> None:
    class Leaky(Exception):
        def __str__(self) -> str:
            return f"leaked {AGENT_KEY}"

    @tool
    def leak() -> str:
        """Leak."""
        raise Leaky()

    events: list[RunEvent] = []
    agent = Agent(ScriptedProvider([call("leak", {}), reply("x")]), tools=[leak], on_event=events.append)
    agent.secrets = agent.secrets.with_values([AGENT_KEY])
    await agent.run("go")
    (received,) = [e for e in events if isinstance(e, ToolResultReceived)]
    assert received.result.content == "Tool 'leak' failed: Leaky: leaked ***"
    assert str(received.exception) == "[tool_failed] Leaky: leaked ***"


async def test_values_a_host_passes_are_masked_too() -> None:
    @tool
    def whoami() -> str:
        """Who am I."""
        return "user=alice session=host-session-42"

    agent = Agent(ScriptedProvider([call("whoami", {}), reply("x")]), tools=[whoami], secrets=["host-session-42"])
    result = await agent.run("who?")
    assert result.messages[-2].tool_results[0].content == "user=alice session=***"


def test_the_agent_masks_its_own_key_whatever_its_source() -> None:
    provider = OpenAIChatProvider("m", profile=PROFILES["openai-compatible"], base_url="http://x/v1", api_key=AGENT_KEY)
    assert AGENT_KEY in Agent(provider).secrets
    assert AGENT_KEY in Agent("openai:gpt-4o-mini", api_key=AGENT_KEY).secrets


def test_the_agent_reads_the_environment_for_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_VENDOR_API_KEY", ENV_KEY)
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false-but-long")
    secrets = Agent("scripted:echo").secrets
    assert ENV_KEY in secrets
    assert "false-but-long" not in secrets


@pytest.mark.parametrize("bad", ["one-string-only", [b"bytes-are-not-text"]])
def test_secrets_must_be_a_list_of_strings(bad: Any) -> None:
    with pytest.raises(ConfigInvalid, match="secrets must be"):
        Agent("scripted:echo", secrets=bad)
