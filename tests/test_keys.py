"""The one table of provider key variables (tether.keys): the providers, the CLI's model choice and
catalog, and the secret rules all read it, in its order."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from tether import Agent
from tether.cli.catalog import catalog
from tether.errors import ConfigInvalid
from tether.keys import ALL_KEY_VARIABLES, KEY_VARIABLES, find_key, key_variables, missing_key
from tether.providers.default_model import KEYED_DEFAULTS, choose_model
from tether.providers.registry import PROFILES, over_http, prefixes
from tether.secrets import is_secret_name, secret_values

AUTH_HEADERS = ("Authorization", "x-api-key", "x-goog-api-key", "api-key")
KEYED = sorted(KEY_VARIABLES)


class KeyServer:
    """Answers every request 401 and keeps the credential it was sent."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    async def handle(self, request: web.Request) -> web.Response:
        sent = [request.headers[name] for name in AUTH_HEADERS if name in request.headers]
        self.keys.append(sent[0].removeprefix("Bearer ") if sent else "")
        return web.json_response({"error": {"message": "bad key", "type": "authentication_error"}}, status=401)


@pytest.fixture
async def server() -> AsyncIterator[tuple[KeyServer, str]]:
    keys = KeyServer()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", keys.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield keys, f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    await runner.cleanup()


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ALL_KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_every_provider_over_http_has_key_variables_and_in_process_ones_have_none() -> None:
    assert set(KEY_VARIABLES) == {prefix for prefix in prefixes() if over_http(prefix)}
    assert key_variables("scripted") == key_variables("local") == ()
    for name, profile in PROFILES.items():
        assert profile.key_variables == KEY_VARIABLES[name]


@pytest.mark.parametrize("prefix", KEYED)
async def test_each_provider_sends_the_key_of_the_first_variable_set_in_the_tables_order(
    prefix: str, server: tuple[KeyServer, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    keys, base_url = server
    variables = key_variables(prefix)
    for name in variables:
        monkeypatch.setenv(name, f"key-of-{name}")
    expected = []
    for name in variables:
        await Agent(f"{prefix}:some-model", base_url=base_url).run("hi")
        expected.append(f"key-of-{name}")
        monkeypatch.setenv(name, "")  # an empty variable does not count: the next one is read
    assert keys.keys == expected


@pytest.mark.parametrize("prefix", ["anthropic", "gemini", "openai", "openai-responses", "deepseek", "minimax"])
def test_a_provider_that_needs_a_key_names_every_variable_it_reads(prefix: str) -> None:
    with pytest.raises(ConfigInvalid) as raised:
        Agent(f"{prefix}:m")
    assert raised.value.message == missing_key(prefix, "m")
    assert " or ".join(key_variables(prefix)) in raised.value.message


def test_find_key_takes_the_first_variable_set_and_not_empty() -> None:
    assert find_key("gemini", {"GOOGLE_API_KEY": "g", "GEMINI_API_KEY": ""}) == ("GOOGLE_API_KEY", "g")
    assert find_key("gemini", {"GOOGLE_API_KEY": "g", "GEMINI_API_KEY": "m"}) == ("GEMINI_API_KEY", "m")
    assert find_key("scripted", {"OPENAI_API_KEY": "o"}) is None


@pytest.mark.parametrize("model", KEYED_DEFAULTS)
def test_the_cli_picks_a_default_model_by_every_variable_of_its_provider(model: str) -> None:
    for name in key_variables(model.partition(":")[0]):
        assert choose_model(None, {name: "secret-value"}, lambda: False).model == model


def test_the_catalog_lists_each_providers_variables_in_the_tables_order() -> None:
    text = catalog({"GOOGLE_API_KEY": "g"})
    for prefix, variables in KEY_VARIABLES.items():
        shown = " or ".join(f"{name} (set)" if name == "GOOGLE_API_KEY" else name for name in variables)
        assert any(line.strip().startswith(f"{prefix}:") and shown in line for line in text.splitlines()), prefix


def test_every_key_variable_is_a_secret_name_and_its_value_a_secret() -> None:
    assert all(is_secret_name(name) for name in ALL_KEY_VARIABLES)
    environ = {name: f"value-of-{name}" for name in ALL_KEY_VARIABLES}
    assert secret_values(environ) == set(environ.values())
