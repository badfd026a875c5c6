"""Six realistic first prompts, run by the real ``tether run`` on the embedded model with nothing configured.

What a 135M model answers is not tested (it is often wrong); how its runs end is:

* a question it can answer without a tool does not end in exit 3 (a failing call repeated until the
  consecutive-errors guard), which is what calling ``read(path='Paris')`` again and again used to do;
* no run ends in a sentence repeated back to back (greedy decoding's failure, which used to run on until the
  output limit);
* a call that failed, such as ``bash(command='hello.txt')`` (exit 127: the command never ran), is recorded as a
  failure, never as a result the run may call a success.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.e2e.conftest import Project

KNOWLEDGE = ("What is the capital of France?", "Say hello in three languages", "What is 17*23?")
PROMPTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("What is the capital of France?", ()),
    ("Say hello in three languages", ()),
    ("Create hello.txt containing hello world", ("--yes",)),
    ("List the files here", ()),
    ("Summarize README.md", ()),
    ("What is 17*23?", ()),
)
README = """\
# Orchard

Orchard keeps track of the fruit trees in a garden: when each was planted, when it was pruned, and how much
it gave each year. Run `orchard add apple` to add a tree and `orchard report` for the year's harvest.
"""


def sentences(text: str) -> list[str]:
    return [part.strip().lower() for part in re.split(r"(?<=[.!?])\s+|\n+", text) if part.strip()]


def ends_in_a_repeated_sentence(text: str) -> bool:
    """Whether the answer's last sentence (of ten characters or more) was already said in it."""
    said = sentences(text)
    return bool(said) and len(said[-1]) >= 10 and said.count(said[-1]) > 1


def test_ends_in_a_repeated_sentence_sees_a_repeat_and_nothing_else() -> None:
    assert ends_in_a_repeated_sentence("Paris is the capital. Paris is the capital. Paris is the capital.")
    assert ends_in_a_repeated_sentence("Hi.\nThe answer is 391.\nThe answer is 391.")
    assert not ends_in_a_repeated_sentence("Hello! Bonjour! Hola!")
    assert not ends_in_a_repeated_sentence("17*23 is 391. That is the product of 17 and 23.")


def failed_calls_recorded_as_results(messages: list[dict[str, Any]]) -> list[str]:
    """Tool results that say the command never ran, yet are not marked as errors."""
    wrong = []
    for message in messages:
        for part in message.get("parts", []):
            if part.get("kind") != "tool_result":
                continue
            content = str(part.get("content", ""))
            if re.match(r"exit code 12[67]\b", content) and not part.get("is_error"):
                wrong.append(content[:80])
    return wrong


def test_six_first_prompts_on_the_embedded_model_end_as_they_should(project: Project) -> None:
    (project.cwd / "README.md").write_text(README)
    (project.cwd / "notes.txt").write_text("Buy apples.\n")
    outcomes: list[dict[str, Any]] = []
    for prompt, flags in PROMPTS:
        done = project.run("run", "--json", *flags, prompt)
        assert done.stdout.strip(), f"{prompt!r}: no result (exit {done.returncode}): {done.stderr[-2000:]}"
        result = json.loads(done.stdout)
        outcome = {
            "prompt": prompt,
            "exit": done.returncode,
            "stop": result["stop_reason"],
            "text": result["text"],
            "wrong": failed_calls_recorded_as_results(result["messages"]),
        }
        outcomes.append(outcome)
        print(json.dumps(outcome))  # the outcomes, for whoever reads the test's output (-s)
    problems = []
    for outcome in outcomes:
        if outcome["prompt"] in KNOWLEDGE and outcome["exit"] == 3:
            problems.append(f"{outcome['prompt']!r} ended in exit 3 ({outcome['stop']}): {outcome['text']!r}")
        if ends_in_a_repeated_sentence(outcome["text"]):
            problems.append(f"{outcome['prompt']!r} ended in a repeated sentence: {outcome['text']!r}")
        if outcome["wrong"]:
            problems.append(f"{outcome['prompt']!r}: a command that never ran recorded as a result: {outcome['wrong']}")
    assert not problems, "\n".join(problems)
