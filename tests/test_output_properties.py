"""Any sequence of valid and invalid outputs, in any mode and with any retry budget, ends within the limits with
the first valid output, or with ``invalid_output`` once the invalid tries pass ``Limits.output_retries``; the
transcript is valid either way, and the model was asked no more than it needed to be."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from tether import Agent, Limits, StopReason, tool
from tether.errors import InvalidOutput
from tether.messages import transcript_problems
from tether.providers.scripted import ScriptedProvider, Step, call, parallel, reply


class Reading(BaseModel):
    sensor: str
    value: int


@tool
def probe(sensor: str) -> str:
    """Probe a sensor."""
    return f"{sensor}: ok"


VALID: dict[str, object] = {"sensor": "s1", "value": 3}
EXPECTED = Reading(sensor="s1", value=3)
# each try: (its step in tool mode, its step in the text modes, whether it is a valid output)
TRIES: dict[str, tuple[Step, Step, bool]] = {
    "valid": (call("final_result", VALID), reply('{"sensor": "s1", "value": 3}'), True),
    "wrong type": (
        call("final_result", {"sensor": "s1", "value": "x"}),
        reply('{"sensor": "s1", "value": "x"}'),
        False,
    ),
    "missing field": (call("final_result", {"sensor": "s1"}), reply('{"sensor": "s1"}'), False),
    "prose": (reply("The value is three."), reply("The value is three."), False),
    "fenced valid": (
        parallel(call("probe", {"sensor": "s1"}), call("final_result", VALID)),
        reply('```json\n{"sensor": "s1", "value": 3}\n```'),
        True,
    ),
}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tries=st.lists(st.sampled_from(sorted(TRIES)), min_size=1, max_size=6),
    retries=st.integers(min_value=0, max_value=3),
    mode=st.sampled_from(["tool", "native", "prompted"]),
)
def test_any_sequence_of_outputs_ends_with_the_first_valid_one_or_invalid_output(
    tries: list[str], retries: int, mode: str
) -> None:
    steps = [TRIES[name][0] if mode == "tool" else TRIES[name][1] for name in tries]
    model = ScriptedProvider(
        steps, supports_tools=mode == "tool", supports_output_schema=mode == "native", repeat_last=True
    )
    agent = Agent(
        model, tools=[probe] if mode == "tool" else [], output_type=Reading, output_mode=mode,  # type: ignore[arg-type]
        limits=Limits(output_retries=retries, max_turns=50),
    )  # fmt: skip
    result = asyncio.run(agent.run("Read sensor s1."))

    assert transcript_problems(result.messages) == []
    valid_at = next((i for i, name in enumerate(tries) if TRIES[name][2]), None)
    if valid_at is not None and valid_at <= retries:
        assert result.stop_reason == StopReason.COMPLETE, result.detail
        assert result.output == EXPECTED
        assert len(model.requests) == valid_at + 1
    else:  # too many invalid tries first (a script that runs out repeats its last, invalid, try)
        assert result.stop_reason == StopReason.INVALID_OUTPUT, result.detail
        assert result.output is None
        assert isinstance(result.error, InvalidOutput)
        assert len(model.requests) == retries + 1
    assert result.turns <= 50
    assert all(r.code != "repeated" for m in result.messages for r in m.tool_results), "outputs are never repeats"
