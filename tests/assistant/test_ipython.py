"""``%load_ext tether``: ``%ask`` and ``%%ask`` in IPython's own shell, with scripted models.

These tests skip, saying why, where IPython is not installed; under ``CI=true`` they fail instead, since the
dev extra installs it and a skip there would hide a broken extension.
"""

from __future__ import annotations

import asyncio
import io
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from tether.errors import ConfigInvalid
from tether.events import RunResult, TextDelta, ToolCallStarted
from tether.limits import StopReason
from tether.messages import ToolCall, ToolResult
from tether.providers.base import Request
from tether.providers.scripted import ScriptedProvider, Step, call, hang, reply
from tether.usage import Usage

if TYPE_CHECKING:
    from IPython.core.interactiveshell import ExecutionResult, InteractiveShell

    from tether.assistant.ipython import AskMagics

# tether.assistant.ipython imports IPython: each test imports it after the fixture below checked it is there.

_announced: list[str] = []


def require_ipython(config: pytest.Config) -> None:
    """Skip (fail under ``CI=true``) when IPython is not installed, printing why once."""
    try:
        import IPython  # noqa: F401
    except ImportError as error:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must test the IPython extension, but IPython cannot be imported: {error}", pytrace=False)
        reason = f"IPython is not installed ({error}); pip install -e '.[ipython]' to run these tests"
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        capture = config.pluginmanager.get_plugin("capturemanager")
        if reporter is not None and capture is not None and not _announced:
            _announced.append(reason)
            with capture.global_and_fixture_disabled():
                reporter.write_line(f"\nskipping the IPython extension tests: {reason}", yellow=True)
        pytest.skip(reason)


def forget_last_exception() -> None:
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        if hasattr(sys, name):
            delattr(sys, name)


@pytest.fixture(autouse=True)
def ipython_here(request: pytest.FixtureRequest) -> None:
    """Skip (fail under ``CI=true``) when IPython is not installed."""
    require_ipython(request.config)


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    """IPython's shell (one per process, as IPython makes it) with the extension freshly loaded, an empty user
    namespace and no last exception."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing.tools import default_config

    config = default_config()
    config.InteractiveShell.colors = "nocolor"
    ipython = InteractiveShell.instance(config=config)
    ipython.reset(new_session=False)
    forget_last_exception()
    ipython.run_line_magic("load_ext", "tether")
    try:
        yield ipython
    finally:
        ipython.run_line_magic("unload_ext", "tether")
        ipython.config.pop("AskMagics", None)  # what %config set
        forget_last_exception()


def magics(shell: InteractiveShell) -> AskMagics:
    from tether.assistant.ipython import AskMagics

    instance = shell.magics_manager.registry["AskMagics"]
    assert isinstance(instance, AskMagics)
    return instance


def use(shell: InteractiveShell, model: ScriptedProvider) -> ScriptedProvider:
    """Give the shell's ``%ask`` this model, as ``%config AskMagics.model = ...`` does."""
    magics(shell).model = model
    return model


def tool_results(request: Request) -> list[str]:
    return [part.content for message in request.messages for part in message.parts if isinstance(part, ToolResult)]


def run(shell: InteractiveShell, cell: str) -> None:
    result = shell.run_cell(cell)
    assert result.success, result.error_in_exec or result.error_before_exec


# --- loading ------------------------------------------------------------------------------------------------


def test_load_ext_tether_gives_the_line_and_cell_magic_and_unload_takes_them(shell: InteractiveShell) -> None:
    assert shell.find_line_magic("ask") is not None
    assert shell.find_cell_magic("ask") is not None
    shell.run_line_magic("unload_ext", "tether")
    assert shell.find_line_magic("ask") is None
    assert shell.find_cell_magic("ask") is None
    shell.run_line_magic("load_ext", "tether")  # the fixture unloads it again
    assert shell.find_line_magic("ask") is not None


# --- asking -------------------------------------------------------------------------------------------------


def test_ask_inspects_the_user_namespace_and_streams_the_answer(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    script = [call("get_repr", {"expr": "scores"}), reply("scores maps a to 41.", chunk_size=3)]
    model = use(shell, ScriptedProvider(script))
    run(shell, "scores = {'a': 41}")
    outcome = shell.run_cell("%ask what is in scores?")

    assert outcome.success
    assert outcome.result is None, "nothing lands in Out"
    assert "{'a': 41}" in tool_results(model.requests[1])[0], "the function ran against the shell's namespace"
    out = capsys.readouterr().out
    assert "  → get_repr(expr='scores')\nscores maps a to 41.\n" in out
    result = magics(shell).last_result
    assert result is not None
    assert result.stop_reason == "complete"
    assert "what is in scores?" in result.messages[result.first_new_message].text


def test_the_last_exception_is_the_one_ipython_recorded(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    model = use(shell, ScriptedProvider([call("get_last_exception"), reply("You divided by zero.")]))
    assert not shell.run_cell("total = 3\ntotal / 0").success
    failure = sys.last_value

    shell.run_line_magic("ask", "why did the last line fail?")

    assert "ZeroDivisionError" in tool_results(model.requests[1])[0]
    assert "You divided by zero." in capsys.readouterr().out
    assert sys.last_value is failure, "asking leaves the session's last exception as it was"


def test_cell_magic_takes_the_whole_cell_as_the_question(shell: InteractiveShell) -> None:
    model = use(shell, ScriptedProvider([reply("Two things, then.")]))
    run(shell, "%%ask\nWhat does `frame` hold?\nAnd why is it 'empty'?\n")

    asked = model.requests[0].messages[-1].text
    assert "What does `frame` hold?\nAnd why is it 'empty'?" in asked


def test_the_question_is_kept_verbatim(shell: InteractiveShell) -> None:
    model = use(shell, ScriptedProvider([reply("ok")]))
    run(shell, """%ask why doesn't d["k"]  work?""")
    assert """why doesn't d["k"]  work?""" in model.requests[0].messages[-1].text


def test_one_assistant_is_kept_per_setting_and_a_new_setting_makes_a_new_one(shell: InteractiveShell) -> None:
    use(shell, ScriptedProvider([reply("one"), reply("two"), reply("three")]))
    kept = magics(shell)
    shell.run_line_magic("ask", "first?")
    shell.run_line_magic("ask", "second?")
    assert len(kept.assistants) == 1

    shell.run_line_magic("ask", "--no-eval third?")
    assert len(kept.assistants) == 2
    kept.allow_eval = False
    assert kept.assistants == {}, "a changed setting applies from the next question on"


def test_config_sets_the_shell_model_from_the_user_namespace(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.user_ns["scripted_model"] = ScriptedProvider([reply("configured")])
    shell.run_line_magic("config", "AskMagics.model = scripted_model")
    del shell.user_ns["scripted_model"]

    shell.run_line_magic("ask", "which model?")
    assert "configured" in capsys.readouterr().out


def test_the_model_option_picks_a_model_for_one_question(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    use(shell, ScriptedProvider([reply("the shell's model")]))
    shell.run_line_magic("ask", "--model scripted:echo say it back")
    assert "say it back" in capsys.readouterr().out
    shell.run_line_magic("ask", "and now?")
    assert "the shell's model" in capsys.readouterr().out


def test_without_eval_the_assistant_is_offered_read_only_functions(shell: InteractiveShell) -> None:
    model = use(shell, ScriptedProvider([reply("a"), reply("b"), reply("c")]))
    shell.run_line_magic("ask", "with eval?")
    shell.run_line_magic("ask", "--no-eval without?")
    magics(shell).allow_eval = False
    shell.run_line_magic("ask", "without, by setting?")

    offered = [{tool.name for tool in request.tools} for request in model.requests]
    assert "eval_expr" in offered[0]
    assert "eval_expr" not in offered[1]
    assert "eval_expr" not in offered[2]
    assert "get_repr" in offered[1] & offered[2]


# --- errors -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("--frobnicate why?", "unknown option '--frobnicate'"),
        ("", "a question is needed"),
        ("--model", "--model needs a model"),
        ("--model scripted:nope why?", "'scripted:nope' is unknown"),
    ],
)
def test_a_bad_line_prints_a_coded_error_and_keeps_the_last_exception(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], line: str, words: str
) -> None:
    use(shell, ScriptedProvider([]))
    assert not shell.run_cell("{}['missing']").success
    failure = sys.last_value
    capsys.readouterr()

    outcome = shell.run_cell(f"%ask {line}")

    assert outcome.success
    err = capsys.readouterr().err
    assert err.startswith("%ask: [config_invalid] ")
    assert words in err
    assert sys.last_value is failure


def test_cell_magic_with_a_question_on_its_first_line_says_where_the_question_goes(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    use(shell, ScriptedProvider([]))
    run(shell, "%%ask what about\nthis?")
    assert "%%ask takes options on its first line and the question in the cell" in capsys.readouterr().err


# --- cancelling and the event loop --------------------------------------------------------------------------


def interrupt_then_hang(request: Request) -> Step:
    """The model is asked: Ctrl-C reaches the shell's thread (as a terminal's would), and the model never answers."""
    main = threading.main_thread().ident
    assert main is not None
    signal.pthread_kill(main, signal.SIGINT)
    return hang("Let me look")


def test_ctrl_c_cancels_the_question_and_never_the_shell(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    use(shell, ScriptedProvider([interrupt_then_hang, reply("Still here.")]))
    assert not shell.run_cell("value = 7\nvalue.nope").success
    failure = sys.last_value
    capsys.readouterr()

    outcome = shell.run_cell("%ask what went wrong?")

    assert outcome.success
    assert sys.last_value is failure, "the interrupt is not recorded as the session's last exception"
    result = magics(shell).last_result
    assert result is not None
    assert result.stop_reason == "cancelled"
    out = capsys.readouterr().out
    assert out.startswith("Let me look")
    assert out.rstrip().endswith(result.text.strip()), "the answer says the question was cancelled"
    run(shell, "value += 1")
    assert shell.user_ns["value"] == 8
    shell.run_line_magic("ask", "are you there?")
    assert "Still here." in capsys.readouterr().out


async def run_as_a_kernel_does(shell: InteractiveShell, cell: str) -> ExecutionResult:
    """What ipykernel does with a cell: transform it, then await it on the kernel's running loop."""
    transformed = shell.transform_cell(cell)
    return await shell.run_cell_async(cell, store_history=True, transformed_cell=transformed)


async def test_ask_works_inside_the_running_event_loop_of_a_kernel(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Jupyter kernel runs cells as coroutines on its event loop; the question is answered all the same."""
    model = use(shell, ScriptedProvider([call("eval_expr", {"expr": "len(items)"}), reply("items has 3 entries.")]))
    asyncio.get_running_loop()  # the loop is running on this thread, as in a kernel
    assert (await run_as_a_kernel_does(shell, "items = [1, 2, 3]")).success

    outcome = await run_as_a_kernel_does(shell, "%ask how many items?")

    assert outcome.success
    assert '"value_repr":"3"' in tool_results(model.requests[1])[0].replace(" ", "")
    assert "items has 3 entries." in capsys.readouterr().out


def test_the_answer_is_written_by_the_shell_thread(shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel sends what a cell's thread writes to that cell: every piece of the answer comes from the
    thread that asked, not from the loop's worker thread."""
    writers: list[tuple[str, str]] = []

    class Recording(io.StringIO):
        def write(self, text: str) -> int:
            writers.append((threading.current_thread().name, text))
            return len(text)

    use(shell, ScriptedProvider([call("list_globals"), reply("Nothing defined yet.", chunk_size=5)]))
    monkeypatch.setattr(sys, "stdout", Recording())
    shell.run_line_magic("ask", "what is defined?")
    monkeypatch.undo()

    assert "".join(text for _, text in writers) == "  → list_globals()\nNothing defined yet.\n"
    assert {name for name, _ in writers} == {threading.current_thread().name}


# --- the pieces ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "model", "no_eval", "question"),
    [
        ("why did it fail?", None, False, "why did it fail?"),
        ("-m gemini:flash  why?", "gemini:flash", False, "why?"),
        ("--model=openai:gpt --no-eval what's x?", "openai:gpt", True, "what's x?"),
        ("-- --no-eval is a flag?", None, False, "--no-eval is a flag?"),
        ("--no-eval", None, True, ""),
    ],
)
def test_parse_line_splits_the_options_from_the_question(
    line: str, model: str | None, no_eval: bool, question: str
) -> None:
    from tether.assistant.ipython import Options, parse_line

    assert parse_line(line) == Options(model, no_eval, question)


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (["%ask why did it fail?"], ["get_ipython().run_line_magic('ask', 'why did it fail?')"]),
        (
            ["x = 1\n", "    %ask -m a:b is x 'one'?\n"],
            ["x = 1\n", "    get_ipython().run_line_magic('ask', \"-m a:b is x 'one'?\")\n"],
        ),
        (["%ask?"], ["%ask?"]),
        (["%asked = 1"], ["%asked = 1"]),
        (["%%ask\n", "%ask inside a cell magic?"], ["%%ask\n", "%ask inside a cell magic?"]),
    ],
)
def test_ask_lines_keep_a_question_whole_before_ipython_reads_its_question_mark(
    lines: list[str], expected: list[str]
) -> None:
    from tether.assistant.ipython import ask_lines

    assert ask_lines(lines) == expected


def test_parse_line_refuses_an_unknown_option() -> None:
    from tether.assistant.ipython import parse_line

    with pytest.raises(ConfigInvalid, match="unknown option '-x'"):
        parse_line("-x why?")


def test_the_printer_shows_an_answer_that_did_not_stream() -> None:
    from tether.assistant.printer import AnswerPrinter

    out = io.StringIO()
    printer = AnswerPrinter(out, calls=out)
    printer(ToolCallStarted(ToolCall("c1", "get_dir", {"expr": "client"}), turn=1))
    printer(TextDelta("Looking"))
    fallback = "(Stopped at the step limit.) client has 40 members."
    printer.finish(ended(fallback, "max_turns", "the step limit was reached"))
    assert out.getvalue() == f"  → get_dir(expr='client')\nLooking\n{fallback}\n"


def test_the_printer_says_why_a_question_ended_without_an_answer() -> None:
    from tether.assistant.printer import AnswerPrinter

    out = io.StringIO()
    printer = AnswerPrinter(out, calls=out)
    printer(ToolCallStarted(ToolCall("c1", "send", None, raw_arguments="not json"), turn=1))
    printer.finish(ended("", "error", "the provider failed"))
    assert out.getvalue() == "  → send(not json)\n[error] the provider failed\n"


def test_the_printer_hides_calls_when_asked() -> None:
    from tether.assistant.printer import AnswerPrinter

    out = io.StringIO()
    printer = AnswerPrinter(out)
    printer(ToolCallStarted(ToolCall("c1", "get_dir", {"expr": "client"}), turn=1))
    printer(TextDelta("Done."))
    printer.finish(ended("Done.", "complete", ""))
    assert out.getvalue() == "Done.\n"


def ended(text: str, reason: str, detail: str, **fields: Any) -> RunResult:
    return RunResult(text, StopReason(reason), (), Usage(), degraded=reason != "complete", detail=detail, **fields)
