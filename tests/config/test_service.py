"""The configuration service: reads cached until a file changes, and updates by threads and processes at once
that each keep the others' keys and leave nothing behind but the file."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import pytest

from tests.config.helpers import Dirs
from tether.config import service as service_module
from tether.config.edit import set_value
from tether.config.load import Layer
from tether.config.load import read_file as real_read_file
from tether.config.lock import update_lock
from tether.config.schema import Config
from tether.config.service import ConfigService
from tether.errors import ConfigInvalid

ROOT = Path(__file__).resolve().parents[2]
HEADER = '# Team settings: keep this comment.\n[runtime]\nmodel = "openai:gpt-4o"  # the model we pay for\n'


def headers(path: Path) -> dict[str, str]:
    """The ``[providers.ollama.headers]`` the file holds: where the concurrent tests set their keys."""
    data = tomllib.loads(path.read_text())
    found: dict[str, str] = data.get("providers", {}).get("ollama", {}).get("headers", {})
    return found


def names(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


@pytest.fixture
def counted_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files the service reads and parses, in order (the reading itself is the real one)."""
    reads: list[Path] = []

    def read_file(path: Path, *, given_by: str | None = None) -> Layer | None:
        reads.append(path)
        return real_read_file(path, given_by=given_by)

    monkeypatch.setattr(service_module, "read_file", read_file)
    return reads


def test_a_second_load_reads_no_file_and_returns_the_same_configuration(dirs: Dirs, counted_reads: list[Path]) -> None:
    dirs.write_user("[runtime.limits]\nmax_turns = 5\n")
    dirs.write_project(HEADER)
    service = ConfigService(dirs.project, dirs.env)

    first = service.load()
    assert sorted(counted_reads) == sorted([dirs.user_toml, dirs.agent_toml])
    counted_reads.clear()

    assert service.load() is first
    assert service.config() is first.config
    assert counted_reads == []
    assert first.config.runtime.model == "openai:gpt-4o"
    assert first.config.runtime.limits.max_turns == 5


@pytest.mark.parametrize(
    "change",
    ["replaced", "rewritten in place, longer", "touched", "removed"],
)
def test_a_changed_file_is_read_again(dirs: Dirs, counted_reads: list[Path], change: str) -> None:
    dirs.write_project(HEADER)
    service = ConfigService(dirs.project, dirs.env)
    assert service.config().runtime.model == "openai:gpt-4o"
    counted_reads.clear()

    if change == "replaced":
        replacement = dirs.project / "new.toml"
        replacement.write_text('[runtime]\nmodel = "openai:gpt-4o-mini"\n')
        os.replace(replacement, dirs.agent_toml)
        expected: str | None = "openai:gpt-4o-mini"
    elif change == "rewritten in place, longer":
        with dirs.agent_toml.open("r+") as file:
            file.write(HEADER.replace("gpt-4o", "gpt-4.1-mini"))
        expected = "openai:gpt-4.1-mini"
    elif change == "touched":  # same bytes, same inode: only the times say it may have changed
        stamp = dirs.agent_toml.stat().st_mtime_ns + 5_000_000_000
        os.utime(dirs.agent_toml, ns=(stamp, stamp))
        expected = "openai:gpt-4o"
    else:
        dirs.agent_toml.unlink()
        expected = None

    assert service.config().runtime.model == expected
    assert counted_reads == [dirs.agent_toml], "the changed file is read again, and only it"


def test_a_file_created_after_the_first_read_is_seen(dirs: Dirs) -> None:
    service = ConfigService(dirs.project, dirs.env)
    assert service.config().runtime.model is None
    dirs.write_user('[runtime]\nmodel = "ollama:qwen3"\n')
    assert service.config().runtime.model == "ollama:qwen3"


def test_a_changed_variable_or_flag_gives_a_new_configuration_without_reading_the_files(
    dirs: Dirs, counted_reads: list[Path]
) -> None:
    dirs.write_project(HEADER)
    env = dict(dirs.env)
    service = ConfigService(dirs.project, env)
    service.load()
    counted_reads.clear()

    env["TETHER_RUNTIME__LIMITS__MAX_TURNS"] = "7"
    assert service.config().runtime.limits.max_turns == 7
    assert service.config({"runtime.model": "ollama:qwen3"}).runtime.model == "ollama:qwen3"
    assert service.config({"runtime.model": None}).runtime.model == "openai:gpt-4o"
    assert counted_reads == []


def test_a_broken_file_is_reported_on_every_load_and_read_again_once_fixed(dirs: Dirs) -> None:
    dirs.write_project("[runtime\n")
    service = ConfigService(dirs.project, dirs.env)
    for _ in range(2):
        with pytest.raises(ConfigInvalid, match="line 1"):
            service.load()
    dirs.write_project(HEADER)
    assert service.config().runtime.model == "openai:gpt-4o"


def test_set_writes_through_the_editor_and_the_next_load_sees_it(dirs: Dirs) -> None:
    dirs.write_project(HEADER)
    service = ConfigService(dirs.project, dirs.env)
    assert service.config().runtime.limits.max_turns != 4

    assert service.set("runtime.limits.max_turns", "4") == dirs.agent_toml

    assert service.config().runtime.limits.max_turns == 4
    assert dirs.agent_toml.read_text().startswith(HEADER)
    assert names(dirs.project) == ["agent.toml"]


def test_set_validates_the_project_file_with_the_users_below_and_an_invalid_value_changes_nothing(
    dirs: Dirs,
) -> None:
    dirs.write_user('[providers.gpu]\nprofile = "vllm"\nbase_url = "http://gpu:8000/v1"\n')
    dirs.write_project(HEADER)
    service = ConfigService(dirs.project, dirs.env)

    service.set("runtime.model", "gpu:qwen3")  # a provider only the user's file defines
    assert service.config().runtime.model == "gpu:qwen3"
    before = dirs.agent_toml.read_bytes()
    with pytest.raises(ConfigInvalid, match="max_turns"):
        service.set("runtime.limits.max_turns", "-1")

    assert dirs.agent_toml.read_bytes() == before
    assert names(dirs.project) == ["agent.toml"]


def test_set_user_and_init_write_where_the_service_reads(dirs: Dirs, tmp_path: Path) -> None:
    named = tmp_path / "team.toml"
    service = ConfigService(dirs.project, dirs.env, config_file=named)

    assert service.init() == named
    assert service.set("runtime.model", "ollama:qwen3", user=True) == dirs.user_toml
    assert service.config().runtime.model == "ollama:qwen3"
    with pytest.raises(FileExistsError):
        service.init()
    assert not dirs.agent_toml.exists()


THREADS = 8
KEYS_EACH = 5


def test_eight_threads_setting_different_keys_at_once_keep_every_key_and_leave_no_temporary_file(dirs: Dirs) -> None:
    dirs.write_project(HEADER)
    service = ConfigService(dirs.project, dirs.env)
    barrier = threading.Barrier(THREADS)
    failures: list[BaseException] = []

    def setter(n: int) -> None:
        try:
            barrier.wait()
            for k in range(KEYS_EACH):
                service.set(f"providers.ollama.headers.t{n}k{k}", f"v{n}.{k}")
        except BaseException as error:  # noqa: BLE001 - reported by the test below
            failures.append(error)

    threads = [threading.Thread(target=setter, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert failures == []
    expected = {f"t{n}k{k}": f"v{n}.{k}" for n in range(THREADS) for k in range(KEYS_EACH)}
    assert headers(dirs.agent_toml) == expected
    assert dirs.agent_toml.read_text().startswith(HEADER), "the comments are kept"
    assert names(dirs.project) == ["agent.toml"]
    assert service.config().providers["ollama"].headers == expected


def test_where_the_file_system_cannot_lock_threads_still_keep_every_key(
    dirs: Dirs, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import fcntl

    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")  # as some network file systems answer

    monkeypatch.setattr(fcntl, "flock", no_locks)
    dirs.write_project(HEADER)
    service = ConfigService(dirs.project, dirs.env)
    barrier = threading.Barrier(THREADS)

    def setter(n: int) -> None:
        barrier.wait()
        service.set(f"providers.ollama.headers.t{n}", f"v{n}")

    threads = [threading.Thread(target=setter, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert headers(dirs.agent_toml) == {f"t{n}": f"v{n}" for n in range(THREADS)}
    assert names(dirs.project) == ["agent.toml"]


SETTER = """
import sys, time
from tether.config.service import ConfigService

process, start, keys = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
service = ConfigService({project!r}, {{"HOME": {home!r}}})
while time.time() < start:  # every process starts at the same moment
    time.sleep(0.001)
for k in range(keys):
    service.set(f"providers.ollama.headers.p{{process}}k{{k}}", f"v{{process}}.{{k}}")
"""


def test_four_processes_setting_different_keys_at_once_keep_every_key_and_leave_no_temporary_file(
    dirs: Dirs,
) -> None:
    dirs.write_project(HEADER)
    script = SETTER.format(project=str(dirs.project), home=str(dirs.home))
    start = time.time() + 2.0
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(n), str(start), str(KEYS_EACH * 2)], cwd=ROOT, stderr=subprocess.PIPE
        )
        for n in range(4)
    ]
    for process in processes:
        _, errors = process.communicate(timeout=120)
        assert process.returncode == 0, errors.decode()

    expected = {f"p{n}k{k}": f"v{n}.{k}" for n in range(4) for k in range(KEYS_EACH * 2)}
    assert headers(dirs.agent_toml) == expected
    assert dirs.agent_toml.read_text().startswith(HEADER)
    assert names(dirs.project) == ["agent.toml"]


HOLDER = """
import sys, time
from tether.config.lock import update_lock
from tether.config.schema import Config

with update_lock(sys.argv[1]):
    print("locked", flush=True)
    sys.stdin.readline()
"""


def test_a_change_waits_while_another_process_holds_the_lock(dirs: Dirs) -> None:
    dirs.write_project(HEADER)
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(dirs.agent_toml)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdout is not None
        assert holder.stdin is not None
        try:
            assert holder.stdout.readline() == "locked\n"
            done = threading.Event()

            def change() -> None:
                set_value(dirs.agent_toml, "runtime.retries", "3")
                done.set()

            setter = threading.Thread(target=change)
            setter.start()
            assert not done.wait(0.5), "the change went ahead while another process held the lock"
            assert "retries" not in dirs.agent_toml.read_text()
            holder.stdin.write("\n")
            holder.stdin.flush()
            assert done.wait(30)
            setter.join()
        finally:
            holder.kill()
    assert tomllib.loads(dirs.agent_toml.read_text())["runtime"]["retries"] == 3


def test_a_lock_held_past_the_timeout_is_config_invalid_naming_the_file(dirs: Dirs) -> None:
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with update_lock(dirs.agent_toml):
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        with pytest.raises(ConfigInvalid) as caught, update_lock(dirs.agent_toml, timeout=0.2):
            pass
    finally:
        release.set()
        holder.join()
    assert str(dirs.agent_toml) in caught.value.message
    assert "held the lock for 0.2 s" in caught.value.message
    assert names(dirs.project) == []


def test_the_lock_creates_the_directory_of_a_new_file_but_not_when_told_not_to(tmp_path: Path) -> None:
    missing = tmp_path / "a" / "b" / "config.toml"
    with update_lock(missing, create=False):
        pass
    assert not (tmp_path / "a").exists()
    with update_lock(missing):
        pass
    assert missing.parent.is_dir()
    assert names(missing.parent) == []


def test_reads_and_updates_from_many_threads_see_whole_configurations(dirs: Dirs) -> None:
    dirs.write_project(HEADER)
    service = ConfigService(dirs.project, dirs.env)
    seen: list[int | None] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            seen.append(service.config().runtime.limits.max_turns)

    readers = [threading.Thread(target=reader) for _ in range(3)]
    for thread in readers:
        thread.start()
    try:
        for turns in range(10, 20):
            service.set("runtime.limits.max_turns", str(turns))
    finally:
        stop.set()
        for thread in readers:
            thread.join()
    assert service.config().runtime.limits.max_turns == 19
    assert seen, "the readers read"
    assert set(seen) <= {*range(10, 20), Config().runtime.limits.max_turns}


KILLED_SET = """
import os, sys
from pathlib import Path
from tether.config.service import ConfigService

real_replace = os.replace

def replace(src, dst, **kwargs):
    if Path(dst).name == "agent.toml":
        os._exit(3)  # the process dies just before the new file takes the old one's place
    real_replace(src, dst, **kwargs)

os.replace = replace
ConfigService({project!r}, {{"HOME": {home!r}}}).set("runtime.retries", "5")
"""


def test_a_change_killed_mid_way_leaves_the_file_as_it_was_and_the_next_change_removes_its_leftovers(
    dirs: Dirs,
) -> None:
    dirs.write_project(HEADER)
    service = ConfigService(dirs.project, dirs.env)
    service.set("runtime.limits.max_turns", "4")
    before = dirs.agent_toml.read_text()

    died = subprocess.run(
        [sys.executable, "-c", KILLED_SET.format(project=str(dirs.project), home=str(dirs.home))],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )

    assert died.returncode == 3, died.stderr.decode()
    assert dirs.agent_toml.read_text() == before
    left = [name for name in names(dirs.project) if name.endswith(".tmp")]
    assert left, "the killed change left its temporary files"
    service.set("runtime.retries", "2")
    assert names(dirs.project) == ["agent.toml"]
    assert service.config().runtime.retries == 2
    assert service.config().runtime.limits.max_turns == 4
