"""`tether py` without a terminal: lines read plainly, questions asked of the configured model, a configuration
that cannot be read refused before anything runs, a missing script a usage error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def py(cwd: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith("TETHER_") and k != "TETHER_LOCAL_SERVERS") and not k.endswith("_API_KEY")
    }
    env.update(HOME=str(cwd), XDG_DATA_HOME=str(cwd / "data"), XDG_STATE_HOME=str(cwd / "state"))
    return subprocess.run(
        [sys.executable, "-m", "tether.cli.app", "py", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_piped_lines_run_as_python_and_questions_go_to_the_model(tmp_path: Path) -> None:
    completed = py(tmp_path, "--model", "scripted:echo", stdin="x = 20\n?what is x\nx + 22\n")

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == ["what is x", "42"], "the echo model answers with the question"
    assert completed.stderr.startswith(">>> "), "prompts go to stderr, as Python's do"
    assert "tether py ·" not in completed.stderr, "no banner without a terminal"
    assert not (tmp_path / "state").exists(), "no history without a terminal"


def test_a_configuration_that_cannot_be_read_exits_1_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text("[runtime\n")
    completed = py(tmp_path, stdin="print('ran')\n")

    assert completed.returncode == 1
    assert "agent.toml line 1" in completed.stderr
    assert "ran" not in completed.stdout


def test_an_unknown_model_exits_1_naming_the_setting(tmp_path: Path) -> None:
    completed = py(tmp_path, "--model", "nosuch:x", stdin="print('ran')\n")

    assert completed.returncode == 1
    assert "runtime.model" in completed.stderr
    assert completed.stdout == ""


def test_a_missing_script_is_a_usage_error(tmp_path: Path) -> None:
    completed = py(tmp_path, "missing.py")

    assert completed.returncode == 2
    assert "missing.py" in completed.stderr


def test_the_scripts_arguments_are_its_own(tmp_path: Path) -> None:
    (tmp_path / "args.py").write_text("import sys\nprint(sys.argv)\n")
    completed = py(tmp_path, "--model", "scripted:echo", "args.py", "--model", "-v", stdin="")

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "['args.py', '--model', '-v']\n"


def test_no_eval_makes_the_assistant_only_look(tmp_path: Path) -> None:
    from tether.assistant import Assistant
    from tether.cli.py_terminal import banner, open_questions

    env = {"HOME": str(tmp_path)}
    looking, _ = open_questions(tmp_path, env, "scripted:echo", None, allow_eval=False)
    evaluating, _ = open_questions(tmp_path, env, "scripted:echo", None)
    assert isinstance(looking.assistant, Assistant)
    assert isinstance(evaluating.assistant, Assistant)
    assert looking.assistant.settings is not None
    assert looking.assistant.settings.allow_eval is False
    assert evaluating.assistant.settings is not None
    assert evaluating.assistant.settings.allow_eval is True
    assert "may run the model's Python code" in banner(evaluating), "said at the start, where it is used"
    assert "may run" not in banner(looking)
    assert py(tmp_path, "--no-eval", "--model", "scripted:echo", stdin="?what is x\n").returncode == 0


def test_the_embedded_model_answers_questions_through_json_actions_when_asked(tmp_path: Path) -> None:
    from tether.assistant import LOCAL_ASK_LIMITS
    from tether.cli.py_terminal import open_questions

    env = {"HOME": str(tmp_path)}
    refused, _ = open_questions(tmp_path, env, "local:smollm2", None)
    assert refused.assistant is None
    assert "--tool-mode json" in (refused.problem or ""), "the way to ask it anyway is named"
    from tether.assistant import Assistant

    questions, _ = open_questions(tmp_path, env, "local:smollm2", None, json_actions=True)
    assert isinstance(questions.assistant, Assistant)
    assert questions.assistant.tool_mode == "json"
    assert questions.assistant.limits == LOCAL_ASK_LIMITS

    completed = py(tmp_path, "--model", "local:smollm2", "--tool-mode", "json", stdin="x = 41\n?what is x\n")
    assert completed.returncode == 0, completed.stderr
    assert "questions are off" not in completed.stdout + completed.stderr
    assert "did not finish within" not in completed.stdout + completed.stderr
