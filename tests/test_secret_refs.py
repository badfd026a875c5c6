"""API keys given as references (tether.secret_refs): each kind resolved from a real variable, file, command or
keyring; failures coded ``secret_unavailable`` and never showing a value; resolved keys masked everywhere."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import keyring
import pytest
from keyring.backend import KeyringBackend

from tests.model_api import model_api
from tether import Agent
from tether.cli.catalog import catalog
from tether.config.schema import ProviderConfig
from tether.errors import AuthFailed, ConfigInvalid
from tether.keys import ALL_KEY_VARIABLES
from tether.secret_refs import SecretUnavailable, describe, forget, is_reference, resolve_secret, resolved_values
from tether.secrets import Masker

KEY = "sk-resolved-0123456789abcdef"
PRINT_KEY = "print('sk-resolved' + '-0123456789abcdef')"
"""Python that prints ``KEY`` without holding it: a command that quotes the key would hide what is tested."""


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test resolves its references anew, with no provider key in the environment."""
    forget()
    for name in ALL_KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def python(code: str) -> str:
    """A ``cmd:`` reference that runs ``code`` in this Python."""
    return "cmd:" + shlex.join([sys.executable, "-c", code])


def secret_file(directory: Path, text: str, mode: int = 0o600) -> Path:
    path = directory / "key"
    path.write_text(text)
    path.chmod(mode)
    return path


# --- each kind --------------------------------------------------------------------------------------------


def test_env_reads_the_variable_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_TEAM_KEY", KEY)

    assert resolve_secret("env:MY_TEAM_KEY") == KEY


def test_env_naming_an_unset_variable_is_secret_unavailable_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MY_TEAM_KEY", raising=False)

    with pytest.raises(SecretUnavailable, match="MY_TEAM_KEY is not set") as raised:
        resolve_secret("env:MY_TEAM_KEY")
    assert raised.value.code == "secret_unavailable"
    assert isinstance(raised.value, ConfigInvalid)


def test_file_reads_the_file_without_one_trailing_newline(tmp_path: Path) -> None:
    one, two = KEY + "\n", KEY + "\n\n"
    assert resolve_secret(f"file:{secret_file(tmp_path, one)}") == KEY
    forget()
    assert resolve_secret(f"file:{secret_file(tmp_path, two)}") == one


def test_file_expands_the_home_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    secret_file(tmp_path, KEY)

    assert resolve_secret("file:~/key") == KEY


@pytest.mark.skipif(sys.platform == "win32", reason="no group and other mode bits")
@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644])
def test_a_file_others_may_read_is_refused_saying_how_to_fix_it(tmp_path: Path, mode: int) -> None:
    path = secret_file(tmp_path, KEY, mode)

    with pytest.raises(SecretUnavailable, match="may be read by others") as raised:
        resolve_secret(f"file:{path}")
    assert f"chmod 600 {path}" in raised.value.message
    assert KEY not in raised.value.message


def test_a_missing_file_is_secret_unavailable(tmp_path: Path) -> None:
    with pytest.raises(SecretUnavailable, match="cannot be read"):
        resolve_secret(f"file:{tmp_path / 'nothing'}")


def test_cmd_runs_the_command_without_a_shell_and_keeps_its_stripped_output() -> None:
    assert resolve_secret(python(f"print('  {KEY}  ')")) == KEY
    assert resolve_secret("cmd:echo $HOME; echo more") == "$HOME; echo more"  # no shell: words, not syntax


def test_a_failing_command_names_itself_and_its_status_never_its_output() -> None:
    reference = python(f"import sys; {PRINT_KEY}; sys.stderr.write('sk-resolved' + '-0123456789abcdef'); sys.exit(3)")

    with pytest.raises(SecretUnavailable) as raised:
        resolve_secret(reference)
    assert raised.value.code == "secret_unavailable"
    assert "exited with status 3" in raised.value.message
    assert sys.executable in raised.value.message
    assert KEY not in str(raised.value)


def test_a_command_that_is_not_there_is_secret_unavailable() -> None:
    with pytest.raises(SecretUnavailable, match="cannot be run"):
        resolve_secret("cmd:no-such-program-for-a-key --show")


def test_a_command_that_takes_too_long_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tether.secret_refs.COMMAND_TIMEOUT", 0.5)

    with pytest.raises(SecretUnavailable, match=r"the command took over 0\.5 s"):
        resolve_secret(python("import time; time.sleep(30)"))


def test_a_command_that_prints_nothing_gives_no_key() -> None:
    with pytest.raises(SecretUnavailable, match="is empty"):
        resolve_secret(python("pass"))


class MemoryKeyring(KeyringBackend):
    """A keyring that holds its entries in a dict (the OS keyrings are not there in a test). It has no priority,
    so keyring never picks it by itself: only ``keyring.set_keyring`` puts it in use."""

    entries: ClassVar[dict[tuple[str, str], str]] = {}

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]

    def get_password(self, service: str, username: str) -> str | None:
        return self.entries.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.entries[service, username] = password

    def delete_password(self, service: str, username: str) -> None:
        del self.entries[service, username]


@pytest.fixture
def memory_keyring() -> Iterator[MemoryKeyring]:
    before = keyring.get_keyring()
    backend = MemoryKeyring()
    backend.entries.clear()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(before)


def test_keyring_reads_the_entry_of_service_and_user(memory_keyring: MemoryKeyring) -> None:
    keyring.set_password("api.openai.com/v1", "team", KEY)

    assert resolve_secret("keyring:api.openai.com/v1/team") == KEY  # the last "/" separates the user


def test_a_missing_keyring_entry_is_secret_unavailable_naming_service_and_user(memory_keyring: MemoryKeyring) -> None:
    with pytest.raises(SecretUnavailable, match="no entry for 'team' in 'openai'"):
        resolve_secret("keyring:openai/team")


def test_a_keyring_reference_without_a_user_is_refused(memory_keyring: MemoryKeyring) -> None:
    with pytest.raises(SecretUnavailable, match="keyring:SERVICE/USER"):
        resolve_secret("keyring:openai")


def test_keyring_not_installed_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "keyring", None)  # import keyring now raises ImportError

    with pytest.raises(SecretUnavailable, match=r"tether\[keyring\]"):
        resolve_secret("keyring:openai/team")


# --- literals, the cache, the source ---------------------------------------------------------------------


def test_a_value_without_a_known_prefix_is_a_literal_key_and_literal_escapes_one() -> None:
    assert not is_reference(KEY)
    assert resolve_secret(KEY) == KEY
    assert resolve_secret("literal:cmd:not-a-command") == "cmd:not-a-command"
    assert resolve_secret("https://x") == "https://x"


def test_a_reference_is_resolved_once_per_process(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    reference = python(f"open({str(counter)!r}, 'a').write('x'); print('{KEY}')")

    assert resolve_secret(reference) == resolve_secret(reference) == KEY
    assert counter.read_text() == "x"


def test_the_source_is_described_without_the_value() -> None:
    assert describe("cmd:pass show openai") == "the command 'pass show openai'"
    assert describe("file:~/.openai") == "the file '~/.openai'"
    assert describe("env:K") == "the environment variable 'K'"
    assert describe("keyring:s/u") == "the keyring entry 's/u'"
    assert describe(KEY) == describe(f"literal:{KEY}") == "a key given as it is"


# --- masking ------------------------------------------------------------------------------------------------


def test_a_resolved_key_joins_the_keys_every_masker_hides(tmp_path: Path) -> None:
    key = f"sk-only-in-a-file-{tmp_path.name}"
    assert key not in resolved_values()
    resolve_secret(f"file:{secret_file(tmp_path, key)}")

    assert key in resolved_values()
    assert Masker.from_environment({}).mask(f"the server said: bad key {key}") == "the server said: bad key ***"


async def test_an_agent_sends_the_resolved_key_and_masks_it_in_the_error_quoting_it(tmp_path: Path) -> None:
    with model_api("refuse") as api:
        agent = Agent("openai-compatible:small-model", base_url=api.url, api_key=python(PRINT_KEY))
        result = await agent.run("hi")

    assert api.requests[0][2] == f"Bearer {KEY}"
    assert isinstance(result.error, AuthFailed)
    assert KEY not in str(result.error)
    assert result.error.message.endswith("Incorrect API key provided: ***")


def test_a_literal_key_passed_to_an_agent_still_works() -> None:
    agent = Agent("openai-compatible:m", base_url="http://127.0.0.1:9/v1", api_key=KEY)

    assert agent.provider.credentials() == (KEY,)  # type: ignore[attr-defined]


def test_tether_models_names_a_configured_references_source_without_resolving_it(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    reference = python(f"open({str(counter)!r}, 'a').write('x'); {PRINT_KEY}")

    text = catalog({}, {"gpu": ProviderConfig(profile="vllm", api_key=reference)})

    line = next(line for line in text.splitlines() if line.strip().startswith("gpu:"))
    assert line.endswith(f"key from {describe(reference)}")
    assert not counter.exists()
