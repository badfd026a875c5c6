"""PythonRuntime's safety: the deadline on the main thread and on others (and that it never leaks out of the
call), and a read-only runtime that cannot be made to run code of the model's choosing."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tether.tools.python_runtime import PythonRuntime, RuntimeSettings

T = TypeVar("T")

SPIN = """
import time

def spin():
    while True:
        pass

def stubborn():
    while True:
        try:
            spin()
        except Exception:
            pass

class SlowRepr:
    def __repr__(self):
        spin()

class SwallowingRepr:
    def __repr__(self):
        try:
            spin()
        except BaseException:  # swallows the interrupt, then goes on for as long
            pass
        spin()
"""


def spinning(**settings: Any) -> tuple[dict[str, Any], PythonRuntime]:
    namespace: dict[str, Any] = {}
    exec(SPIN, namespace)
    return namespace, PythonRuntime(namespace, settings=RuntimeSettings(eval_timeout=0.2, **settings))


def timed_out(envelope: dict[str, Any]) -> dict[str, Any]:
    assert envelope["ok"] is False, envelope
    assert envelope["error"]["code"] == "python_exception"
    details: dict[str, Any] = envelope["error"]["details"]
    assert details["exc_type"] == "TimeoutError"
    assert "did not finish within 0.2 s" in details["message"]
    return details


def on_thread(function: Callable[[], T]) -> T:
    """``function()`` on a fresh thread, its value (or exception) back here."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(("value", function()))
        except BaseException as error:  # noqa: BLE001 - carried back to the test
            outcome.append(("error", error))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    kind, value = outcome[0]
    if kind == "error":
        raise value
    return value  # type: ignore[no-any-return]


# --- the deadline ---------------------------------------------------------------------------------------------


def test_on_the_main_thread_a_loop_is_interrupted_and_the_alarm_restored() -> None:
    assert threading.current_thread() is threading.main_thread()
    _, runtime = spinning()

    def mine(signum: int, frame: Any) -> None:
        raise AssertionError("the host's handler must not be called by the runtime")

    previous = signal.signal(signal.SIGALRM, mine)
    try:
        details = timed_out(runtime.call("eval_expr", {"expr": "spin()"}))
        assert signal.getsignal(signal.SIGALRM) is mine
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert "in spin" in details["traceback"]  # where it was stopped
    assert "python_runtime" not in details["traceback"]


def test_on_the_main_thread_a_blocking_sleep_is_interrupted() -> None:
    _, runtime = spinning()
    timed_out(runtime.call("eval_expr", {"expr": "time.sleep(3600)"}))


def test_the_hosts_own_timer_is_rearmed_after_the_call() -> None:
    _, runtime = spinning()
    previous = signal.signal(signal.SIGALRM, signal.SIG_IGN)
    signal.setitimer(signal.ITIMER_REAL, 3600)
    try:
        assert runtime.call("eval_expr", {"expr": "1"})["ok"] is True
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < left <= 3600
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_on_another_thread_a_loop_is_interrupted_by_an_async_exception() -> None:
    _, runtime = spinning()
    details = timed_out(on_thread(lambda: runtime.call("eval_expr", {"expr": "spin()"})))
    assert "in spin" in details["traceback"]


@pytest.mark.parametrize("where", ["main", "thread"])
def test_user_code_catching_exception_cannot_swallow_the_timeout(where: str) -> None:
    _, runtime = spinning()

    def run() -> dict[str, Any]:
        return runtime.call("eval_expr", {"expr": "stubborn()"})

    timed_out(run() if where == "main" else on_thread(run))


@pytest.mark.parametrize("where", ["main", "thread"])
def test_a_repr_that_hangs_is_interrupted_too(where: str) -> None:
    _, runtime = spinning()

    def run() -> dict[str, Any]:
        return runtime.call("get_repr", {"expr": "SlowRepr()"})

    timed_out(run() if where == "main" else on_thread(run))


@pytest.mark.parametrize("where", ["main", "thread"])
def test_a_repr_that_swallows_the_interrupt_is_interrupted_again(where: str) -> None:
    _, runtime = spinning()

    def run() -> dict[str, Any]:
        return runtime.call("get_repr", {"expr": "SwallowingRepr()"})

    timed_out(run() if where == "main" else on_thread(run))


# --- the process ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr",
    [
        "__import__('os')._exit(3)",
        "__import__('os').abort()",
        "__import__('os').kill(__import__('os').getpid(), 9)",
        "__import__('os').killpg(0, 9)",
        "__import__('signal').raise_signal(15)",
    ],
)
def test_code_that_would_end_or_signal_the_process_is_refused_and_reported(expr: str) -> None:
    import os

    kept = (os._exit, os.abort, os.kill, os.killpg)
    runtime = PythonRuntime({}, settings=RuntimeSettings(eval_timeout=5))
    envelope = runtime.call("eval_expr", {"expr": expr})
    assert envelope["ok"] is False, envelope
    assert envelope["error"]["details"]["exc_type"].endswith("ProcessExitRefused")
    assert (os._exit, os.abort, os.kill, os.killpg) == kept, "the real functions are back after the call"
    assert runtime.call("eval_expr", {"expr": "1 + 1"})["result"]["value_repr"] == "2", "the session lives on"


def test_a_thread_the_code_leaves_running_is_named() -> None:
    namespace: dict[str, Any] = {"stop": threading.Event()}
    runtime = PythonRuntime(namespace, settings=RuntimeSettings(eval_timeout=5))
    code = "__import__('threading').Thread(target=stop.wait, name='left-behind').start()"
    try:
        envelope = runtime.call("eval_expr", {"expr": code})
    finally:
        namespace["stop"].set()
    assert envelope["result"]["threads_left_running"] == ["left-behind"]


def test_listing_globals_runs_no_class_property_of_a_value() -> None:
    ran: list[str] = []

    class Sneaky:
        @property  # type: ignore[misc]
        def __class__(self) -> type:
            ran.append("__class__")
            return type(self)

    runtime = PythonRuntime({"sneaky": Sneaky()})
    listed = runtime.call("list_globals", {})
    assert listed["ok"] is True, listed
    assert ran == []


def test_the_timeout_never_reaches_the_thread_after_the_call() -> None:
    """Many quick calls on one thread, each with a watchdog; then the thread keeps running Python code, where
    an asynchronous exception left pending would land, without any arriving."""
    _, runtime = spinning()

    def many() -> int:
        done = 0
        for _ in range(200):
            done += runtime.call("eval_expr", {"expr": "sum(range(1000))"})["ok"]
        for _ in range(200_000):
            pass
        return done

    assert on_thread(many) == 200


def test_output_printed_before_a_timeout_does_not_leak_and_the_streams_come_back(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, runtime = spinning()
    stdout = sys.stdout
    timed_out(runtime.call("eval_expr", {"expr": "print('partial') or spin()"}))
    assert sys.stdout is stdout
    assert capsys.readouterr().out == ""


# --- read-only mode -------------------------------------------------------------------------------------------


def read_only(tmp_path: Path) -> tuple[dict[str, Any], PythonRuntime]:
    namespace: dict[str, Any] = {"__name__": "__main__", "marker": str(tmp_path / "ran")}
    exec(
        "import os\n"
        "class Box:\n"
        "    '''A box.'''\n"
        "    def __init__(self):\n"
        "        self.items = [1, 2]\n"
        "    def touch(self):\n"
        "        open(marker, 'w').close()\n"
        "box = Box()\n",
        namespace,
    )
    return namespace, PythonRuntime(namespace, settings=RuntimeSettings(allow_eval=False))


def test_read_only_offers_no_eval_expr(tmp_path: Path) -> None:
    _, runtime = read_only(tmp_path)
    assert "eval_expr" not in runtime.names
    envelope = runtime.call("eval_expr", {"expr": "1"})
    assert envelope["error"]["code"] == "unknown_function"
    assert "evaluation is turned off" in envelope["error"]["message"]
    assert [t.name for t in runtime.tools(_never)] == list(runtime.names)
    assert all(t.read_only for t in runtime.tools(_never))


async def _never(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    raise AssertionError("not called")


def test_read_only_resolves_names_and_attribute_paths(tmp_path: Path) -> None:
    _, runtime = read_only(tmp_path)
    assert runtime.call("get_repr", {"expr": "box.items"})["result"]["repr"] == "[1, 2]"
    assert runtime.call("get_type", {"expr": " box . items "})["result"]["name"] == "list"
    assert runtime.call("get_doc", {"expr": "box"})["result"]["doc"] == "A box."
    assert runtime.call("get_doc", {"expr": "len"})["result"]["doc"].startswith("Return the number of items")
    assert runtime.call("get_type", {"expr": "box.__class__"})["result"]["name"] == "type"
    assert "touch" in runtime.call("get_dir", {"expr": "box"})["result"]["members"]
    missing = runtime.call("get_repr", {"expr": "nothing.here"})["error"]
    assert (missing["code"], missing["details"]["exc_type"]) == ("python_exception", "NameError")
    assert runtime.call("get_repr", {"expr": "box.nothing"})["error"]["details"]["exc_type"] == "AttributeError"


@pytest.mark.parametrize(
    "expr",
    [
        "__import__('os').system('touch ' + marker)",
        "box.touch()",
        "os.system",  # allowed as a path, but only looked at: see below
        "box.touch.__call__",
        "box.__init__.__globals__",
        "box.touch.__func__.__globals__",
        "().__class__.__base__.__subclasses__",
        "box.__class__.__base__.__subclasses__",
        "__builtins__",
        "__import__",
        "box.items[0]",
        "[box.touch() for _ in 'x']",
        "(lambda: box.touch())",
        "box.touch if 1 else 0",
        "box.items + box.touch()",
        "getattr(box, 'touch')",
        "f'{box.touch()}'",
        "box.\ntouch()",
        "box.x.",
        "",
        "class.x",
        "box." + "a" * 600,
    ],
)
@pytest.mark.parametrize("capability", ["get_repr", "get_type", "get_dir", "get_doc"])
def test_read_only_runs_no_code_of_the_models_choosing(tmp_path: Path, expr: str, capability: str) -> None:
    _, runtime = read_only(tmp_path)
    envelope = runtime.call(capability, {"expr": expr})
    assert not (tmp_path / "ran").exists()
    if expr == "os.system":
        assert envelope["ok"] is True  # the function itself, never called
        return
    assert envelope["ok"] is False
    assert envelope["error"]["code"] == "invalid_args", envelope
    assert envelope["error"]["details"]["problems"]


def test_read_only_list_globals_and_last_exception_still_work(tmp_path: Path) -> None:
    namespace, _ = read_only(tmp_path)
    runtime = PythonRuntime(namespace, last_exception=lambda: KeyError("k"), settings=RuntimeSettings(allow_eval=False))
    assert [g["name"] for g in runtime.call("list_globals", {})["result"]["globals"]] == ["marker", "Box", "box"]
    assert runtime.call("get_last_exception", {})["result"]["exception"]["exc_type"] == "KeyError"
