"""``runtime.model = [...]`` in agent.toml: the command runs on the second model when the first is not there."""

from __future__ import annotations

from tests.e2e.conftest import Project
from tests.e2e.mock_llm import MockLLM, Say
from tests.e2e.test_connection_errors import free_port


def test_a_list_of_models_answers_on_the_second_when_the_first_refuses_the_connection(project: Project) -> None:
    port = free_port()
    with MockLLM([Say("Hello from the backup.")]) as server:
        (project.cwd / "agent.toml").write_text(
            '[runtime]\nmodel = ["down:m", "up:mock"]\nretries = 0\n\n'
            f'[providers.down]\nprofile = "openai-compatible"\nbase_url = "http://127.0.0.1:{port}/v1"\n\n'
            f'[providers.up]\nprofile = "openai-compatible"\nbase_url = "{server.base_url}"\n'
        )
        result = project.run("run", "hello")

        assert result.returncode == 0, result.stderr
        assert "Hello from the backup." in result.stdout
        assert len(server.requests) == 1
