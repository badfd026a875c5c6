"""Keys stay inside the process: what a tool brings back is masked before the CLI prints it, the session stores
it or the model is sent it; a connection string's password never reaches a command's environment."""

from __future__ import annotations

import json
from typing import Any

from tests.e2e.conftest import Project
from tests.e2e.mock_llm import Call, MockLLM, Say

KEY = "sk-e2e-Hq7WnB3xLp9RtV2cMz6d"
DB_PASSWORD = "pw-e2e-Kd82LxQv"


def _leaks(project: Project, needle: str) -> list[str]:
    stored = [path for path in project.root.rglob("*") if path.is_file() and path.parent != project.cwd]
    return [str(path) for path in stored if needle.encode() in path.read_bytes()]


def test_a_key_a_tool_reads_from_a_file_is_masked_everywhere_it_goes(project: Project) -> None:
    (project.cwd / ".env").write_text(f"OPENAI_COMPATIBLE_API_KEY={KEY}\nDEBUG=1\n")
    script: list[Any] = [Call("read", {"path": ".env"}), Say("The file sets two variables.")]
    with MockLLM(script) as server:
        project.use(server)
        completed = project.run("run", "What does .env set?", "--json", OPENAI_COMPATIBLE_API_KEY=KEY)

    assert completed.returncode == 0, completed.stderr
    assert server.authorizations[0] == f"Bearer {KEY}", "the key was still used for the provider"
    sent_back = next(m for m in server.messages(1) if m["role"] == "tool")["content"]
    assert "DEBUG=1" in sent_back, "the rest of the file reached the model"
    assert KEY not in sent_back
    assert "***" in sent_back
    result = json.loads(completed.stdout)
    assert "DEBUG=1" in json.dumps(result)
    assert KEY not in completed.stdout
    assert KEY not in completed.stderr
    assert project.sessions_db.exists()
    assert _leaks(project, KEY) == []


def test_a_connection_string_password_never_reaches_a_command(project: Project) -> None:
    url = f"postgresql://app:{DB_PASSWORD}@db.internal:5432/app"
    script: list[Any] = [Call("bash", {"command": "env; echo listed"}), Say("Listed.")]
    with MockLLM(script) as server:
        project.use(server)
        completed = project.run(
            "run", "List the environment", "--yes", "--json", DATABASE_URL=url, ORDERS_DSN=url, DEPLOY_PAT=KEY
        )

    assert completed.returncode == 0, completed.stderr
    sent_back = next(m for m in server.messages(1) if m["role"] == "tool")["content"]
    assert "listed" in sent_back, "the command ran"
    for secret in (DB_PASSWORD, KEY):
        assert secret not in sent_back
        assert secret not in completed.stdout
        assert _leaks(project, secret) == []
