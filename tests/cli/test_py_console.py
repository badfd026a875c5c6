"""``tether py``'s console fed from a list of lines: Python's console semantics, questions told apart from
Python, Ctrl-C and Ctrl-D at the prompt, a script run first, plain reading from a pipe."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tether.assistant.printer import AnswerPrinter
from tether.cli.py_console import PyConsole, Questions, exit_code, question_of
from tether.cli.py_terminal import plain_reader
from tether.events import RunResult, TextDelta, ToolCallStarted, TurnStarted
from tether.messages import ToolCall, ToolResult
from tether.usage import Usage


class Lines:
    """A fake input source: each item a line, or an exception raised in its place (``KeyboardInterrupt`` for
    Ctrl-C); ``EOFError`` (Ctrl-D) once they are used up. The prompts it was shown are kept."""

    def __init__(self, *items: str | type[BaseException]) -> None:
        self.items = list(items)
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if not self.items:
            raise EOFError
        item = self.items.pop(0)
        if isinstance(item, str):
            return item
        raise item


def off() -> Questions:
    return Questions(None, "set runtime.model")


def run(*items: str | type[BaseException], namespace: dict[str, Any] | None = None) -> tuple[PyConsole, int, Lines]:
    console = PyConsole(namespace, questions=off())
    lines = Lines(*items)
    return console, console.session(lines), lines


def test_continuation_lines_and_values_as_python_shows_them(capsys: pytest.CaptureFixture[str]) -> None:
    console, code, lines = run("def double(x):", "    return x * 2", "", "double(21)", "None", "'a'", "_ * 2")

    assert code == 0
    assert lines.prompts == [">>> ", "... ", "... ", ">>> ", ">>> ", ">>> ", ">>> ", ">>> "]
    assert capsys.readouterr().out == "42\n'a'\n'aa'\n"
    assert console.namespace["__name__"] == "__main__"


def test_a_traceback_is_written_as_python_writes_it_and_is_the_last_exception(
    capsys: pytest.CaptureFixture[str],
) -> None:
    console, _, _ = run("def f(a):", "    return a / 0", "", "f(1)", "x = 5")

    err = capsys.readouterr().err
    assert (
        'Traceback (most recent call last):\n  File "<stdin>", line 1, in <module>\n'
        '  File "<stdin>", line 2, in f\nZeroDivisionError: division by zero\n'
    ) in err
    assert isinstance(console.last_exception, ZeroDivisionError)
    assert sys.last_value is console.last_exception
    assert sys.last_exc is console.last_exception  # type: ignore[attr-defined, unused-ignore]
    assert console.namespace["x"] == 5, "the session goes on after the traceback"


def test_a_syntax_error_is_shown_and_kept_as_the_last_exception(capsys: pytest.CaptureFixture[str]) -> None:
    console, _, _ = run("1 +* 2")

    assert "SyntaxError: invalid syntax" in capsys.readouterr().err
    assert isinstance(console.last_exception, SyntaxError)


def test_ctrl_c_at_the_prompt_drops_the_line_and_the_statement_it_continued(
    capsys: pytest.CaptureFixture[str],
) -> None:
    console, code, lines = run("if True:", "    y = 1", KeyboardInterrupt, "y = 2", KeyboardInterrupt, "z = y")

    assert code == 0
    assert lines.prompts == [">>> ", "... ", "... ", ">>> ", ">>> ", ">>> ", ">>> "]
    assert capsys.readouterr().err == "\nKeyboardInterrupt\n\nKeyboardInterrupt\n\n", (
        "the line is ended after a plain read"
    )
    assert console.namespace["z"] == 2, "the interrupted block never ran"


def test_after_a_reader_that_ends_its_lines_no_blank_line_is_added(capsys: pytest.CaptureFixture[str]) -> None:
    console = PyConsole(questions=off())
    assert console.session(Lines("x = 1", KeyboardInterrupt), ends_lines=True) == 0
    assert capsys.readouterr().err == "KeyboardInterrupt\n"


def test_ctrl_c_while_code_runs_is_a_traceback_and_the_session_goes_on(capsys: pytest.CaptureFixture[str]) -> None:
    console, code, _ = run("raise KeyboardInterrupt", "after = 1")

    assert code == 0
    assert "KeyboardInterrupt" in capsys.readouterr().err
    assert isinstance(console.last_exception, KeyboardInterrupt)
    assert console.namespace["after"] == 1


@pytest.mark.parametrize(
    ("line", "status", "printed"),
    [("raise SystemExit(3)", 3, ""), ("raise SystemExit", 0, ""), ("raise SystemExit('bye')", 1, "bye\n")],
)
def test_system_exit_leaves_with_its_status(
    line: str, status: int, printed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, code, lines = run(line, "never = 1")

    assert code == status
    assert len(lines.prompts) == 1, "nothing is read after the exit"
    assert capsys.readouterr().err == printed


def test_exit_code_maps_like_the_interpreter() -> None:
    err = io.StringIO()
    assert [exit_code(SystemExit(v), err) for v in (None, 0, 7, "message")] == [0, 0, 7, 1]
    assert err.getvalue() == "message\n"


@pytest.mark.parametrize(
    ("line", "question"),
    [
        ("?why did it fail", "why did it fail"),
        ("  ?  what is df ", "what is df"),
        ("?", ""),
        ("%ask what is x", "what is x"),
        ("/ask what is x", "what is x"),
        ("%ask", ""),
        ("x = 1", None),
        ("%asking", None),
        ("/asked", None),
        ("print('?')", None),
        ("x  # ?", None),
    ],
)
def test_which_lines_are_questions(line: str, question: str | None) -> None:
    assert question_of(line) == question


def test_a_question_without_an_assistant_says_what_to_set_and_the_session_goes_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    console, code, lines = run("x = 1", "?what is x", "%ask what is x", "x += 1")

    assert code == 0
    assert capsys.readouterr().err.count("questions are off: set runtime.model\n") == 2
    assert console.namespace["x"] == 2
    assert lines.prompts == [">>> "] * 5
    assert console.last_exception is None, "a question is not Python: no SyntaxError"


def test_inside_a_continued_statement_a_question_mark_is_python(capsys: pytest.CaptureFixture[str]) -> None:
    console, _, _ = run("s = '''", "?not a question", "'''")

    assert console.namespace["s"] == "\n?not a question\n"
    assert "questions are off" not in capsys.readouterr().err


def test_a_script_runs_as_main_and_its_names_stay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "job.py"
    script.write_text("import sys\ntotal = 6 * 7\nif __name__ == '__main__':\n    print('main', __file__)\n")
    console = PyConsole(questions=off())
    console.run_script(str(script))

    assert console.session(Lines("total + 0")) == 0
    assert capsys.readouterr().out == f"main {script}\n42\n"
    assert console.last_exception is None


def test_a_script_that_raises_shows_its_traceback_and_the_session_keeps_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "job.py"
    script.write_text("before = 1\n\n\ndef load():\n    return {}['missing']\n\n\nload()\nafter = 2\n")
    console = PyConsole(questions=off())
    console.run_script(str(script))

    err = capsys.readouterr().err
    assert f'  File "{script}", line 8, in <module>\n' in err
    assert f'  File "{script}", line 5, in load\n' in err
    assert err.endswith("KeyError: 'missing'\n")
    assert isinstance(console.last_exception, KeyError)
    assert console.namespace["before"] == 1
    assert "after" not in console.namespace


def test_a_script_that_exits_or_does_not_parse_stays_interactive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exits = tmp_path / "exits.py"
    exits.write_text("import sys\nsys.exit(4)\n")
    broken = tmp_path / "broken.py"
    broken.write_text("x = (\n")
    console = PyConsole(questions=off())

    console.run_script(str(exits))
    assert isinstance(console.last_exception, SystemExit)
    console.run_script(str(broken))
    assert isinstance(console.last_exception, SyntaxError)
    assert console.session(Lines("alive = True")) == 0
    assert console.namespace["alive"] is True
    err = capsys.readouterr().err
    assert "SystemExit: 4" in err
    assert f'File "{broken}", line 1' in err


def test_plain_reading_writes_prompts_to_their_stream_and_ends_with_eof() -> None:
    prompts = io.StringIO()
    read = plain_reader(io.StringIO("a = 1\r\nb\n"), prompts)

    assert read(">>> ") == "a = 1"
    assert read("... ") == "b"
    with pytest.raises(EOFError):
        read(">>> ")
    assert prompts.getvalue() == ">>> ... >>> "


def result(text: str, stop: str = "complete", detail: str = "") -> RunResult:
    return RunResult(text=text, stop_reason=stop, messages=(), usage=Usage(), detail=detail)  # type: ignore[arg-type]


def test_the_answer_streams_and_capability_calls_show_on_their_own_lines() -> None:
    out, err = io.StringIO(), io.StringIO()
    printer = AnswerPrinter(out, calls=err, notes=err)
    printer(TurnStarted(1))
    printer(TextDelta("Let me look."))
    printer(ToolCallStarted(ToolCall("c1", "get_repr", {"expr": "x"}), 1))
    assert out.getvalue() == "Let me look.\n", "the call's line starts on a line of its own"
    printer(ToolCallStarted(ToolCall("c2", "get_last_exception", {}), 1))
    printer(ToolCallStarted(ToolCall("c3", "get_doc", None, raw_arguments="not json"), 1))
    printer(TurnStarted(2))
    printer(TextDelta("x is "))
    printer(TextDelta("42."))
    printer.finish(result("x is 42."))

    assert out.getvalue() == "Let me look.\nx is 42.\n", "what streamed is not written again"
    assert err.getvalue() == "  → get_repr(expr='x')\n  → get_last_exception()\n  → get_doc(not json)\n"


def test_an_answer_the_loop_wrote_is_written_once_whether_or_not_it_streamed() -> None:
    out, err = io.StringIO(), io.StringIO()
    printer = AnswerPrinter(out, calls=err, notes=err)
    printer(TextDelta("Looking"))
    printer.finish(result("Out of time; x is 42 so far.", "timeout", "the question took longer than 20 s"))
    assert out.getvalue() == "Looking\nOut of time; x is 42 so far.\n"

    out, err = io.StringIO(), io.StringIO()
    printer = AnswerPrinter(out, calls=err, notes=err)
    printer(TextDelta("Looking"))
    printer(TextDelta("\n\n(Stopped: the question was cancelled.)"))
    printer.finish(result("(Stopped: the question was cancelled.)", "cancelled"))
    assert out.getvalue() == "Looking\n\n(Stopped: the question was cancelled.)\n"
    assert err.getvalue() == ""


def test_without_an_answer_the_printer_says_why_the_question_ended() -> None:
    out, err = io.StringIO(), io.StringIO()
    printer = AnswerPrinter(out, calls=err, notes=err)
    printer(TextDelta("half an ans"))
    printer.finish(result("", "cancelled", "cancelled"))
    printer.finish(result("", "error", "the provider could not be reached"))

    assert out.getvalue() == "half an ans\n"
    assert err.getvalue() == "[cancelled]\n[error] the provider could not be reached\n"


def test_a_question_sees_the_sessions_names_and_its_last_exception(capsys: pytest.CaptureFixture[str]) -> None:
    from tether.assistant import Assistant
    from tether.providers.base import Request
    from tether.providers.scripted import ScriptedProvider, Step, call, parallel, reply

    def answer(request: Request) -> Step:  # the model says what the capabilities returned
        results = [p for m in request.messages for p in m.parts if isinstance(p, ToolResult)]
        envelopes = [json.loads(result.content) for result in results]
        exception = envelopes[0]["result"]["exception"]
        return reply(f"{exception['exc_type']} while total was {envelopes[1]['result']['repr']}.")

    model = ScriptedProvider([parallel(call("get_last_exception"), call("get_repr", {"expr": "total"})), answer])
    console = PyConsole(questions=Questions(Assistant(model)))

    assert console.session(Lines("total = 41", "total / 0", "?why did that fail", "total += 1")) == 0
    captured = capsys.readouterr()
    assert captured.out == "ZeroDivisionError while total was 41.\n"
    assert "  → get_last_exception()\n  → get_repr(expr='total')\n" in captured.err
    assert console.namespace["total"] == 42, "the session goes on after the question"
    assert "why did that fail" in model.requests[0].messages[-1].text
