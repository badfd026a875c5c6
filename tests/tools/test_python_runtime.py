"""PythonRuntime: each capability's arguments and result, truncation, the envelope, and the capabilities as
Tools run by an agent, in the model's order, on the one thread that owns the namespace."""

from __future__ import annotations

import asyncio
import builtins
import json
import queue
import sys
import threading
from collections import UserDict
from typing import Any

import pytest

from tether import Agent
from tether.messages import ToolResult
from tether.providers.scripted import ScriptedProvider, call, parallel, reply
from tether.tools.python_runtime import PythonRuntime, RuntimeSettings

SOURCE = '''
import os
import json as _json

class Point:
    """A point in the plane."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def norm(self):
        """Its distance to the origin."""
        return (self.x ** 2 + self.y ** 2) ** 0.5

class BadRepr:
    def __repr__(self):
        raise ValueError("no repr for you")

class BadDir:
    def __dir__(self):
        raise RuntimeError("no dir")

class BadDoc:
    @property
    def __doc__(self):
        raise RuntimeError("no doc")

def fail():
    return {}["missing"]

p = Point(3, 4)
_private = 1
'''


def session(**settings: Any) -> tuple[dict[str, Any], PythonRuntime]:
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(SOURCE, namespace)
    return namespace, PythonRuntime(namespace, settings=RuntimeSettings(**settings))


def ok(envelope: dict[str, Any]) -> dict[str, Any]:
    assert envelope["ok"] is True, envelope
    assert set(envelope) == {"ok", "result"}
    return envelope["result"]  # type: ignore[no-any-return]


def error(envelope: dict[str, Any], code: str) -> dict[str, Any]:
    assert envelope["ok"] is False, envelope
    assert set(envelope) == {"ok", "error"}
    assert set(envelope["error"]) == {"code", "message", "details"}
    assert envelope["error"]["code"] == code, envelope
    assert json.loads(json.dumps(envelope)) == envelope  # plain JSON
    return envelope["error"]  # type: ignore[no-any-return]


# --- list_globals ---------------------------------------------------------------------------------------------


def test_list_globals_lists_user_names_with_their_types_in_definition_order() -> None:
    _, runtime = session()
    result = ok(runtime.call("list_globals", {}))
    assert result == {
        "globals": [
            {"name": "Point", "type_name": "type"},
            {"name": "BadRepr", "type_name": "type"},
            {"name": "BadDir", "type_name": "type"},
            {"name": "BadDoc", "type_name": "type"},
            {"name": "fail", "type_name": "function"},
            {"name": "p", "type_name": "Point"},
        ],
        "truncated": False,
        "original_len": 6,
    }


def test_list_globals_include_all_adds_dunders_modules_and_private_names() -> None:
    _, runtime = session()
    names = [entry["name"] for entry in ok(runtime.call("list_globals", {"include_all": True}))["globals"]]
    assert {"__name__", "__builtins__", "os", "_json", "_private", "p"} <= set(names)


def test_list_globals_leaves_out_the_hosts_hidden_names() -> None:
    namespace = {"In": [], "Out": {}, "df": 1}
    runtime = PythonRuntime(namespace, hidden={"In", "Out"})
    assert ok(runtime.call("list_globals", {}))["globals"] == [{"name": "df", "type_name": "int"}]


def test_list_globals_keeps_the_most_recent_names_and_says_how_many_there_were() -> None:
    namespace = {f"v{i}": i for i in range(10)}
    result = ok(PythonRuntime(namespace, settings=RuntimeSettings(max_globals=3)).call("list_globals", {}))
    assert [entry["name"] for entry in result["globals"]] == ["v7", "v8", "v9"]
    assert result["truncated"] is True
    assert result["original_len"] == 10


# --- get_type, get_repr, get_dir, get_doc -----------------------------------------------------------------------


def test_get_type_names_the_type_its_module_and_qualified_name() -> None:
    _, runtime = session()
    assert ok(runtime.call("get_type", {"expr": "p"})) == {
        "name": "Point",
        "module": "__main__",
        "qualified": "__main__.Point",
    }
    assert ok(runtime.call("get_type", {"expr": "p.x + 0.5"})) == {
        "name": "float",
        "module": "builtins",
        "qualified": "float",
    }
    ordered = ok(runtime.call("get_type", {"expr": "__import__('collections').OrderedDict()"}))
    assert ordered["qualified"] == "collections.OrderedDict"


def test_get_type_of_a_class_with_a_hostile_metaclass_reads_the_real_names() -> None:
    namespace: dict[str, Any] = {}
    exec(
        "class Meta(type):\n"
        "    @property\n"
        "    def __name__(cls): raise RuntimeError('gotcha')\n"
        "class Odd(metaclass=Meta): pass\n"
        "odd = Odd()\n",
        namespace,
    )
    result = ok(PythonRuntime(namespace).call("get_type", {"expr": "odd"}))
    assert result == {"name": "Odd", "module": "builtins", "qualified": "Odd"}


def test_get_repr_gives_the_repr_and_its_truncation() -> None:
    _, runtime = session(max_repr=10)
    assert ok(runtime.call("get_repr", {"expr": "[1, 2]"})) == {"repr": "[1, 2]", "truncated": False, "original_len": 6}
    long = ok(runtime.call("get_repr", {"expr": "'x' * 50"}))
    assert long == {"repr": "'" + "x" * 9, "truncated": True, "original_len": 52}


def test_get_repr_that_raises_is_a_python_exception() -> None:
    _, runtime = session()
    failure = error(runtime.call("get_repr", {"expr": "BadRepr()"}), "python_exception")
    assert failure["details"]["exc_type"] == "ValueError"
    assert failure["details"]["message"] == "no repr for you"
    assert "in __repr__" in failure["details"]["traceback"]


def test_get_repr_of_a_huge_int_reports_the_interpreters_refusal() -> None:
    _, runtime = session()
    failure = error(runtime.call("get_repr", {"expr": "10 ** 5000"}), "python_exception")
    assert failure["details"]["exc_type"] == "ValueError"


def test_get_dir_lists_members_without_dunders_unless_asked() -> None:
    namespace, runtime = session()
    result = ok(runtime.call("get_dir", {"expr": "p"}))
    assert result == {"members": ["norm", "x", "y"], "truncated": False, "original_len": 3}
    everything = ok(runtime.call("get_dir", {"expr": "p", "include_dunder": True}))
    assert everything["members"] == dir(namespace["p"])
    assert everything["original_len"] == len(dir(namespace["p"]))


def test_get_dir_truncates_to_max_members() -> None:
    _, runtime = session(max_members=2)
    assert ok(runtime.call("get_dir", {"expr": "p"})) == {
        "members": ["norm", "x"],
        "truncated": True,
        "original_len": 3,
    }


def test_get_dir_whose_dunder_dir_raises_is_a_python_exception() -> None:
    _, runtime = session()
    failure = error(runtime.call("get_dir", {"expr": "BadDir()"}), "python_exception")
    assert failure["details"]["exc_type"] == "RuntimeError"
    assert failure["details"]["message"] == "no dir"


def test_get_doc_gives_the_cleaned_docstring_or_null() -> None:
    _, runtime = session(max_doc=8)
    assert ok(runtime.call("get_doc", {"expr": "p.norm"})) == {"doc": "Its dist", "truncated": True, "original_len": 27}
    namespace = {"f": lambda: None}
    assert ok(PythonRuntime(namespace).call("get_doc", {"expr": "f"})) == {
        "doc": None,
        "truncated": False,
        "original_len": 0,
    }


def test_get_doc_whose_doc_raises_is_a_python_exception() -> None:
    _, runtime = session()
    assert error(runtime.call("get_doc", {"expr": "BadDoc()"}), "python_exception")["details"]["message"] == "no doc"


# --- eval_expr ------------------------------------------------------------------------------------------------------


def test_eval_expr_returns_the_repr_and_captures_output_without_showing_it(capsys: pytest.CaptureFixture[str]) -> None:
    _, runtime = session()
    result = ok(runtime.call("eval_expr", {"expr": "print('out') or __import__('sys').stderr.write('err') and p.x"}))
    assert result == {
        "value_repr": "3",
        "stdout": "out\n",
        "stderr": "err",
        "truncated": False,
        "original_len": {"value_repr": 1, "stdout": 4, "stderr": 3},
    }
    assert capsys.readouterr() == ("", "")
    assert type(sys.stdout).__name__ != "_Router"


def test_eval_expr_bounds_the_output_and_the_repr() -> None:
    _, runtime = session(max_output=5, max_repr=4)
    result = ok(runtime.call("eval_expr", {"expr": "[print('abcdefgh') for _ in range(2)] and 'xyzxyz'"}))
    assert result["stdout"] == "abcde"
    assert result["value_repr"] == "'xyz"
    assert result["truncated"] is True
    assert result["original_len"] == {"value_repr": 8, "stdout": 18, "stderr": 0}


def test_eval_expr_can_change_the_session_but_leaves_underscore_and_builtins_alone() -> None:
    namespace: dict[str, Any] = {"_": "last result", "items": []}
    builtins_underscore = getattr(builtins, "_", None)
    runtime = PythonRuntime(namespace)
    assert ok(runtime.call("eval_expr", {"expr": "items.append(1) or (total := 41 + 1)"}))["value_repr"] == "42"
    assert namespace["items"] == [1]
    assert namespace["total"] == 42
    assert namespace["_"] == "last result"
    assert getattr(builtins, "_", None) is builtins_underscore
    assert "__builtins__" not in namespace  # lent for the evaluation only


def test_eval_expr_sees_names_inside_comprehensions_and_lambdas() -> None:
    runtime = PythonRuntime({"limit": 2, "values": [1, 2, 3]})
    assert ok(runtime.call("eval_expr", {"expr": "[v for v in values if v > limit]"}))["value_repr"] == "[3]"
    assert ok(runtime.call("eval_expr", {"expr": "(lambda: limit)()"}))["value_repr"] == "2"


def test_eval_expr_works_over_a_mapping_that_is_not_a_dict() -> None:
    namespace: UserDict[str, Any] = UserDict({"a": 2})
    assert ok(PythonRuntime(namespace).call("eval_expr", {"expr": "a * len('abc')"}))["value_repr"] == "6"


def test_eval_expr_exception_is_a_python_exception_with_the_users_frames_only() -> None:
    _, runtime = session()
    before = getattr(sys, "last_value", None)
    failure = error(runtime.call("eval_expr", {"expr": "fail()"}), "python_exception")
    assert failure["message"] == "KeyError: 'missing'"
    details = failure["details"]
    assert details["exc_type"] == "KeyError"
    assert details["message"] == "'missing'"
    assert details["traceback"].startswith('Traceback (most recent call last):\n  File "<expression>"')
    assert "in fail" in details["traceback"]
    assert "python_runtime" not in details["traceback"]
    assert details["truncated"] is False
    assert getattr(sys, "last_value", None) is before  # the session's last exception is not ours


def test_eval_expr_syntax_error_and_exit_are_reported_and_the_session_survives() -> None:
    _, runtime = session()
    assert (
        error(runtime.call("eval_expr", {"expr": "x = 1"}), "python_exception")["details"]["exc_type"] == "SyntaxError"
    )
    assert (
        error(runtime.call("eval_expr", {"expr": "exit(3)"}), "python_exception")["details"]["exc_type"] == "SystemExit"
    )
    assert ok(runtime.call("eval_expr", {"expr": "p.x"}))["value_repr"] == "3"


def test_eval_expr_value_whose_repr_raises_gets_a_placeholder() -> None:
    _, runtime = session()
    result = ok(runtime.call("eval_expr", {"expr": "BadRepr()"}))
    assert result["value_repr"] == "<__main__.BadRepr object; repr() raised ValueError: no repr for you>"


def test_eval_expr_leaves_other_threads_output_on_the_real_stream(capsys: pytest.CaptureFixture[str]) -> None:
    def print_elsewhere() -> None:
        thread = threading.Thread(target=print, args=("from another thread",))
        thread.start()
        thread.join()

    runtime = PythonRuntime({"elsewhere": print_elsewhere})
    assert ok(runtime.call("eval_expr", {"expr": "print('mine') or elsewhere()"}))["stdout"] == "mine\n"
    assert capsys.readouterr().out == "from another thread\n"


# --- get_last_exception -----------------------------------------------------------------------------------------


def raised(source: str, namespace: dict[str, Any]) -> BaseException:
    try:
        exec(source, namespace)
    except Exception as caught:  # noqa: BLE001
        return caught
    raise AssertionError("did not raise")


def test_get_last_exception_is_null_without_one() -> None:
    runtime = PythonRuntime({}, last_exception=lambda: None)
    assert ok(runtime.call("get_last_exception", {})) == {"exception": None}


def test_get_last_exception_describes_the_sessions_exception() -> None:
    namespace, _ = session()
    caught = raised("fail()", namespace)
    runtime = PythonRuntime(namespace, last_exception=lambda: caught)
    exception = ok(runtime.call("get_last_exception", {}))["exception"]
    assert exception["exc_type"] == "KeyError"
    assert exception["message"] == "'missing'"
    assert exception["traceback"].endswith("KeyError: 'missing'\n")
    assert "in fail" in exception["traceback"]
    assert exception["truncated"] is False
    assert exception["original_len"] == {"message": 9, "traceback": len(exception["traceback"])}


def test_get_last_exception_reads_sys_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "last_value", ZeroDivisionError("division by zero"), raising=False)
    monkeypatch.delattr(sys, "last_exc", raising=False)
    exception = ok(PythonRuntime({}).call("get_last_exception", {}))["exception"]
    assert exception["exc_type"] == "ZeroDivisionError"


def test_get_last_exception_cuts_a_long_traceback_in_the_middle_and_keeps_its_end() -> None:
    namespace: dict[str, Any] = {}
    chain = "".join(f"def f{i}():\n    return f{i + 1}()\n" for i in range(30)) + "def f30():\n    return 1 / 0\n"
    caught = raised(chain + "f0()", namespace)
    runtime = PythonRuntime(namespace, last_exception=lambda: caught, settings=RuntimeSettings(max_traceback=400))
    exception = ok(runtime.call("get_last_exception", {}))["exception"]
    assert len(exception["traceback"]) <= 400
    assert exception["traceback"].startswith("Traceback (most recent call last):")
    assert exception["traceback"].endswith("ZeroDivisionError: division by zero\n")
    assert "characters not shown" in exception["traceback"]
    assert exception["truncated"] is True
    assert exception["original_len"]["traceback"] > 400


def test_chained_exceptions_show_both() -> None:
    namespace: dict[str, Any] = {}
    caught = raised("try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    raise ValueError('bad') from e", namespace)
    exception = ok(PythonRuntime(namespace, last_exception=lambda: caught).call("get_last_exception", {}))
    trace = exception["exception"]["traceback"]
    assert "ZeroDivisionError: division by zero" in trace
    assert "direct cause" in trace
    assert trace.endswith("ValueError: bad\n")


# --- the envelope -----------------------------------------------------------------------------------------------


def test_unknown_function_lists_what_is_available() -> None:
    _, runtime = session()
    failure = error(runtime.call("get_source", {"expr": "p"}), "unknown_function")
    assert failure["details"] == {"name": "get_source", "available": list(runtime.names)}
    assert "get_source" in failure["message"]


@pytest.mark.parametrize(
    ("name", "arguments", "problem"),
    [
        ("get_repr", {}, "missing required argument 'expr'"),
        ("get_repr", {"expr": "p", "depth": 2}, "unknown argument 'depth'"),
        ("get_repr", {"expr": 3}, "argument 'expr' must be a string, not number"),
        ("get_dir", {"expr": "p", "include_dunder": "yes"}, "argument 'include_dunder' must be a boolean, not string"),
        ("list_globals", {"include_all": 1}, "argument 'include_all' must be a boolean, not number"),
        ("get_last_exception", {"x": None}, "unknown argument 'x'"),
        ("eval_expr", ["p"], "the arguments must be a JSON object, not array"),
    ],
)
def test_invalid_arguments_are_named(name: str, arguments: Any, problem: str) -> None:
    _, runtime = session()
    failure = error(runtime.call(name, arguments), "invalid_args")
    assert any(p.startswith(problem) for p in failure["details"]["problems"]), failure


def test_every_problem_is_listed_at_once() -> None:
    _, runtime = session()
    failure = error(runtime.call("get_dir", {"include_dunder": 1, "extra": 0}), "invalid_args")
    assert len(failure["details"]["problems"]) == 3


def test_a_failure_of_the_runtime_itself_is_internal() -> None:
    _, runtime = session()

    def broken(arguments: dict[str, Any]) -> dict[str, Any]:
        raise AttributeError("a bug")

    runtime._handlers["get_type"] = broken  # the runtime's own code failing, not the user's
    failure = error(runtime.call("get_type", {"expr": "p"}), "internal")
    assert failure["details"] == {"exc_type": "AttributeError", "message": "a bug"}


def test_keyboard_interrupt_is_let_through_for_the_host_to_cancel() -> None:
    def interrupt() -> None:
        raise KeyboardInterrupt

    runtime = PythonRuntime({"interrupt": interrupt})
    with pytest.raises(KeyboardInterrupt):
        runtime.call("eval_expr", {"expr": "interrupt()"})
    assert type(sys.stdout).__name__ != "_Router"


# --- as tools ---------------------------------------------------------------------------------------------------


class Owner:
    """The thread that owns a namespace, serving capability calls one at a time in the order they come."""

    def __init__(self, runtime: PythonRuntime) -> None:
        self.runtime = runtime
        self.jobs: queue.Queue[Any] = queue.Queue()
        self.threads: set[int] = set()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while (job := self.jobs.get()) is not None:
            name, arguments, loop, future = job
            self.threads.add(threading.get_ident())
            envelope = self.runtime.call(name, arguments)
            loop.call_soon_threadsafe(future.set_result, envelope)

    async def run_call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        self.jobs.put((name, arguments, loop, future))
        return await future

    def stop(self) -> None:
        self.jobs.put(None)
        self.thread.join()


def test_tools_offer_each_capability_with_its_schema_and_read_only_flag() -> None:
    _, runtime = session()
    tools = {t.name: t for t in runtime.tools(Owner(runtime).run_call)}
    assert tuple(tools) == runtime.names
    assert [name for name, t in tools.items() if not t.read_only] == ["eval_expr"]
    description = tools["get_repr"].parameters["properties"]["expr"]["description"]
    assert "evaluated" in description
    assert tools["get_repr"].parameters == {
        "type": "object",
        "properties": {
            "expr": {"type": "string", "description": tools["get_repr"].parameters["properties"]["expr"]["description"]}
        },
        "additionalProperties": False,
        "required": ["expr"],
    }
    assert "required" not in tools["list_globals"].parameters
    assert tools["list_globals"].parameters["properties"]["include_all"]["default"] is False


async def test_a_batch_of_calls_runs_in_the_models_order_on_the_owning_thread() -> None:
    namespace: dict[str, Any] = {"log": []}
    runtime = PythonRuntime(namespace)
    owner = Owner(runtime)
    model = ScriptedProvider(
        [
            parallel(
                call("eval_expr", {"expr": "log.append('first')"}, id="c1"),
                call("get_repr", {"expr": "log"}, id="c2"),
                call("eval_expr", {"expr": "log.append('second')"}, id="c3"),
                call("get_repr", {"exprr": "log"}, id="c4"),
                call("eval_expr", {"expr": "log.append(missing)"}, id="c5"),
            ),
            reply("done"),
        ]
    )
    try:
        result = await Agent(model, tools=runtime.tools(owner.run_call)).run("what is in log?")
    finally:
        owner.stop()
    assert result.text == "done"
    assert namespace["log"] == ["first", "second"]
    assert owner.threads == {owner.thread.ident}
    results = [part for message in result.messages for part in message.parts if isinstance(part, ToolResult)]
    assert [r.call_id for r in results] == ["c1", "c2", "c3", "c4", "c5"]
    envelopes = [json.loads(r.content) for r in results]
    assert envelopes[1] == {"ok": True, "result": {"repr": "['first']", "truncated": False, "original_len": 9}}
    assert results[1].content == json.dumps(envelopes[1], separators=(",", ":"))  # compact
    assert [r.is_error for r in results] == [False, False, False, True, True]
    assert envelopes[3]["error"]["code"] == "invalid_args"
    assert envelopes[4]["error"]["details"]["exc_type"] == "NameError"
