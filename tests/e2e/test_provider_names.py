"""A provider of one's own naming (``[providers.NAME]``, an OpenAI-compatible server) goes by its NAME: in the
footer of a run, its ``--json``, the stored session and its export, and ``tether models`` lists it."""

from __future__ import annotations

import json
import re

import pexpect

from tests.e2e.conftest import Project, screen
from tests.e2e.mock_llm import MockLLM, Say
from tests.e2e.test_chat import load_sessions


def use_named(project: Project, server: MockLLM, name: str = "gpu") -> None:
    """``./agent.toml`` with ``[providers.NAME]`` at the mock server and ``NAME:mock`` as the model."""
    (project.cwd / "agent.toml").write_text(
        f'[runtime]\nmodel = "{name}:mock"\n\n'
        f'[providers.{name}]\nprofile = "vllm"\nbase_url = "{server.base_url}"\napi_key_env = "GPU_KEY"\n'
    )


def test_a_named_provider_shows_its_name_in_the_footer_json_session_and_export(project: Project) -> None:
    with MockLLM([Say("Hello from the box.")]) as server:
        use_named(project, server)
        child = project.spawn("run", "Greet me")
        child.expect(r"Hello from the box\.")
        child.expect(r"session \S+ · ([\w:.-]+)")
        found = child.match
        assert isinstance(found, re.Match)
        footer_model = found.group(1)
        child.expect(pexpect.EOF)
        child.close()
    with MockLLM([Say("Again.")]) as server:
        use_named(project, server)
        completed = project.run("run", "Again", "--json")

    assert child.exitstatus == 0, screen(child)
    assert footer_model == "gpu:mock", screen(child)
    assert "openai-compatible" not in screen(child)
    assert "vllm:" not in screen(child)
    assert json.loads(completed.stdout)["model"] == "gpu:mock", completed.stderr
    assert {session.model for session in load_sessions(project)} == {"gpu:mock"}
    session_id = json.loads(completed.stdout)["session_id"]
    exported = project.run("sessions", "export", session_id, "--format", "json")
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["model"] == "gpu:mock"


def test_tether_models_lists_the_configured_providers(project: Project) -> None:
    (project.cwd / "agent.toml").write_text(
        '[providers.gpu]\nprofile = "vllm"\nbase_url = "http://gpu-box:8000/v1"\napi_key_env = "GPU_KEY"\n\n'
        '[providers.ollama]\nbase_url = "http://other-host:11434/v1"\n'
    )

    listed = project.run("models", GPU_KEY="k")

    assert listed.returncode == 0, listed.stderr
    configured = listed.stdout.split("Configured providers", 1)[1]
    (gpu,) = [line for line in configured.splitlines() if line.strip().startswith("gpu:")]
    assert "profile vllm" in gpu
    assert "http://gpu-box:8000/v1" in gpu
    assert "GPU_KEY (set)" in gpu
    (ollama,) = [line for line in configured.splitlines() if line.strip().startswith("ollama:")]
    assert "http://other-host:11434/v1" in ollama
