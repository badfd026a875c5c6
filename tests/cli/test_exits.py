"""Exit codes of `tether run`: every stop reason maps to the code the help promises."""

from __future__ import annotations

import pytest

from tether.cli.exits import exit_code
from tether.limits import StopReason

EXPECTED = {
    StopReason.COMPLETE: 0,
    StopReason.DONE_TOOL: 0,
    StopReason.ASK_USER: 0,
    StopReason.MAX_TURNS: 3,
    StopReason.MAX_TOOL_CALLS: 3,
    StopReason.CONSECUTIVE_ERRORS: 3,
    StopReason.INVALID_RESPONSE: 3,
    StopReason.INVALID_OUTPUT: 3,
    StopReason.BUDGET: 3,
    StopReason.TIMEOUT: 3,
    StopReason.GUARDRAIL: 3,
    StopReason.ERROR: 4,
    StopReason.PAUSED: 5,
    StopReason.CANCELLED: 130,
}


def test_every_stop_reason_has_its_exit_code() -> None:
    assert set(EXPECTED) == set(StopReason), "a new stop reason needs an exit code"


@pytest.mark.parametrize(("reason", "code"), EXPECTED.items())
def test_exit_code_of(reason: StopReason, code: int) -> None:
    assert exit_code(reason) == code
    assert exit_code(reason.value) == code
