"""The project keeps its promises: the README's commands and example hold, `import tether` stays light."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def shell_blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)\n```", README, re.DOTALL)


def test_the_readme_quick_start_has_exactly_two_commands() -> None:
    blocks = shell_blocks()
    assert len(blocks) == 2
    assert all("\n" not in block for block in blocks), "each command is one line"


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    test_command = shell_blocks()[1]
    assert "pytest" in test_command
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_command in ci_lines


def test_the_readme_example_runs_and_prints_what_it_says() -> None:
    (example,) = re.findall(r"```python\n(.*?)\n```", README, re.DOTALL)
    completed = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True, timeout=60, check=True)
    assert completed.stdout.startswith("5 complete Usage(")


def test_the_quick_start_example_runs() -> None:
    offline = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "TETHER_MODEL"}
    completed = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        env=offline,
    )
    assert "[model: local:smollm2]" in completed.stdout, "without a key it runs on the embedded model"
    assert "-> add({'a': 17, 'b': 25})" in completed.stdout
    assert "<- 42" in completed.stdout
    *_, answer, closing = completed.stdout.splitlines()
    assert "42" in answer, "the model's answer (greedy decoding: the same every time)"
    assert closing.startswith("[complete: "), "a repeated call ends in an answer, not an error-sounding stop"


def test_import_tether_loads_no_dependency_and_no_submodule() -> None:
    code = "import sys, tether; print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
    code += "{'tether', 'pydantic', 'pydantic_core', 'jsonschema', 'aiohttp', 'typing_extensions', 'yaml'})))"
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert completed.stdout.split() == ["tether"]


def test_public_names_resolve_lazily() -> None:
    code = "import tether; print(all(getattr(tether, name) is not None for name in tether.__all__))"
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert completed.stdout.strip() == "True"
