"""``tether run --schema`` in a pseudo-terminal: the answer is JSON valid under the schema, printed alone. Once
against a scripted server (an invalid output sent back with its errors, then a valid one), and once on the real
embedded model, which tether picks when nothing is configured: the schema is a grammar there, and the
``calculate`` tool gives a 135M model the sum it cannot work out itself."""

from __future__ import annotations

import json
from typing import Any

import pexpect
import pytest

from tests.e2e.conftest import Project, screen
from tests.e2e.mock_llm import Call, MockLLM
from tether.providers.default_model import local_model_installed

SCHEMA = '{"type":"object","properties":{"sum":{"type":"integer"}},"required":["sum"]}'


def test_schema_prints_the_validated_json_after_sending_the_errors_back(project: Project, children: list[Any]) -> None:
    script: list[Any] = [Call("final_result", {"sum": "forty-two"}), Call("final_result", {"sum": 42})]
    with MockLLM(script) as server:
        project.use(server)
        child = project.spawn("run", "--schema", SCHEMA, "What is 17+25?")
        children.append(child)
        child.expect(pexpect.EOF)
        child.close()
    shown = screen(child)
    assert child.exitstatus == 0, shown
    assert '{"sum": 42}' in shown, shown
    final_tool = [t["function"] for t in server.requests[0]["tools"] if t["function"]["name"] == "final_result"]
    assert final_tool[0]["parameters"]["properties"] == {"sum": {"type": "integer"}}
    answered = [m for m in server.messages(1) if m["role"] == "tool"][-1]["content"]
    assert "sum: 'forty-two' is not of type 'integer'" in answered


def test_schema_with_json_puts_the_output_in_the_result(project: Project, children: list[Any]) -> None:
    with MockLLM([Call("final_result", {"sum": 42})]) as server:
        project.use(server)
        child = project.spawn("run", "--schema", SCHEMA, "--json", "What is 17+25?")
        children.append(child)
        child.expect(pexpect.EOF)
        child.close()
    shown = screen(child)
    assert child.exitstatus == 0, shown
    result = json.loads(shown[shown.index("{\r\n") :].split("\r\n}\r\n")[0] + "}")
    assert result["output"] == {"sum": 42}
    assert result["stop_reason"] == "complete"


def test_a_schema_that_cannot_be_used_is_a_usage_error(project: Project, children: list[Any]) -> None:
    child = project.spawn("run", "--schema", '{"type": "nonsense"}', "hi")
    children.append(child)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2
    assert "not a valid JSON Schema" in screen(child)


@pytest.mark.skipif(not local_model_installed(), reason="the embedded model (tether[local]) is not installed")
def test_on_the_embedded_model_the_schema_is_kept_and_the_sum_is_right(project: Project, children: list[Any]) -> None:
    child = project.spawn("run", "--schema", SCHEMA, "What is 17+25?")
    children.append(child)
    child.expect(pexpect.EOF, timeout=600)
    child.close()
    shown = screen(child)
    assert child.exitstatus == 0, shown
    assert "local:smollm2" in shown
    assert '{"sum": 42}' in shown, shown
