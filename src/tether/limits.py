"""The guards' settings (:class:`Limits`) and why a run stopped (:class:`StopReason`).

Every run is bounded by default: a model that never stops calling tools, a provider that never answers
and a tool that never returns all end in a typed stop with a result. ``None`` switches a limit off.

The rules for a limit's value live here once (:func:`limit_problem`), and both ``Limits(...)`` and the
``[runtime.limits]`` table of ``agent.toml`` apply them: a count is a whole number >= 1, a time (seconds)
or a cost (dollars) a finite number > 0, ``invalid_response_retries`` (and ``output_retries``,
``answer_continuations``) a whole number >= 0 that cannot be switched off. Booleans are not numbers. The
same goes for :class:`Compaction` (:func:`compaction_problem`). A choice (``excess_tool_calls``) is one of its
words (:data:`CHOICES`).

``Limits`` also has a JSON form (:meth:`Limits.to_json`, :meth:`Limits.from_json`, and their dict forms), for
hosts that keep settings as JSON: ``null`` is "no limit", a key left out its default, and a key it does not know
or a value the rules refuse is ``config_invalid`` naming the field, as in TOML.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from typing import Any, Literal, TypeGuard

from tether.errors import ConfigInvalid


class StopReason(StrEnum):
    """Why a run ended. A ``StrEnum``, so ``result.stop_reason == "complete"`` works."""

    COMPLETE = "complete"
    """The model gave a final answer."""
    DONE_TOOL = "done_tool"
    """A tool ended the run with a final message."""
    ASK_USER = "ask_user"
    """The model asked the user a question; the question is the result's text."""
    MAX_TURNS = "max_turns"
    MAX_TOOL_CALLS = "max_tool_calls"
    CONSECUTIVE_ERRORS = "consecutive_errors"
    TIMEOUT = "timeout"
    """A request, step or run deadline passed."""
    CANCELLED = "cancelled"
    INVALID_RESPONSE = "invalid_response"
    """The model kept answering with nothing usable after the corrective retries."""
    INVALID_OUTPUT = "invalid_output"
    """A typed output was asked for and the model's last answers failed its validation after
    ``Limits.output_retries`` retries; ``result.text`` is the last raw answer, ``result.error`` the errors."""
    BUDGET = "budget"
    """``max_cost_usd`` was reached."""
    GUARDRAIL = "guardrail"
    """A guardrail blocked the input or the output (``tether.team.guardrails``); ``result.text`` is its message."""
    PAUSED = "paused"
    """A tool call needs a person's approval, or its result comes from outside (``@tool(approval=True)``,
    ``@tool(external=True)``, ``Ask`` without an approver): the run stopped with ``result.pending`` and
    ``result.state``, to be resumed with decisions (``Agent.resume``). Not an answer, and not degraded."""
    ERROR = "error"
    """The provider failed (after its own retries) or something unexpected broke; see ``result.error``."""


@dataclass(frozen=True, slots=True)
class Limits:
    """How far a run may go before a guard stops it. Times are in seconds; ``None`` means no limit."""

    max_turns: int | None = 20
    """Model turns (provider calls that produced an answer). On reaching it the loop asks once more, with
    tools disabled, for an answer from what was gathered."""
    max_tool_calls_per_turn: int | None = 16
    """Calls run from one turn; the excess get an error result saying so, in the model's order."""
    max_tool_calls: int | None = 100
    """Calls run in the whole run, counted exactly: a call past it is refused and the run stops."""
    max_consecutive_errors: int | None = 3
    """Turns in a row whose tool calls all failed before the run stops."""
    request_timeout: float | None = 60.0
    """Wait for a provider's first byte and between chunks; kept by the provider, per attempt (it retries a
    request that timed out before answering)."""
    step_timeout: float | None = 300.0
    """One provider call from request to its last event."""
    tool_timeout: float | None = 60.0
    """One tool call, unless the tool sets its own."""
    run_timeout: float | None = None
    """The whole run, tools and model calls included."""
    invalid_response_retries: int = 1
    """Corrective re-prompts after an empty or unusable answer before the run stops as degraded."""
    output_retries: int = 2
    """Times a typed output that failed its validation (or an answer without one) is sent back to the model with
    the errors before the run stops as ``invalid_output``."""
    answer_continuations: int = 1
    """Calls (tools off) asking the model to go on with a final answer cut off at the output limit (finish reason
    ``length``), each joined to the answer; ``0``: none. An answer still cut after them ends the run ``complete``
    but ``degraded``, its detail saying so (``loop/continuation.py``)."""
    max_cost_usd: float | None = None
    """Stop once the run has cost this much; needs a known price for the model."""
    max_history_messages: int | None = None
    """Send at most this many recent messages (cut at a user message, so no call loses its result)."""
    excess_tool_calls: Literal["refuse", "stop"] = "refuse"
    """What becomes of a turn that asks for more than ``max_tool_calls_per_turn`` calls. ``"refuse"``: the
    excess get an error result and the run goes on (the model can ask again). ``"stop"``: the excess get an
    error result too, the others run, and the run then stops with ``max_tool_calls`` (and the one tools-off call
    for an answer, as after every step limit)."""

    approval_timeout: float | None = None
    """How long a paused run's calls wait for their decisions, from the pause. A run resumed later treats every
    approval as rejected and every external call as failed, saying no one answered in time; a durable run waits
    at most this long."""

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if (problem := limit_problem(field.name, value)) is not None:
                raise ConfigInvalid(f"Limits.{field.name} {problem}, not {value!r}")

    def to_dict(self) -> dict[str, Any]:
        """Every limit by name, ``None`` where it is off: :meth:`from_dict` gives back an equal ``Limits``."""
        return asdict(self)

    def to_json(self) -> str:
        """The limits as a JSON object (``null`` where one is off): :meth:`from_json` gives back an equal
        ``Limits``, each value of the same type (a time of ``30.0`` stays a float, ``30`` an int)."""
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Limits:
        """The limits ``data`` names, the others at their defaults; ``ConfigInvalid`` naming the field for a key
        that is not a limit or a value the rules refuse (no coercion: ``"5"`` is not a number)."""
        if not isinstance(data, Mapping):
            raise ConfigInvalid(f"Limits must be given as an object of limits by name, not {type(data).__name__}")
        names = [field.name for field in fields(cls)]
        for key, value in data.items():
            if key not in names:
                raise ConfigInvalid(f"Limits has no field {key!r}; its fields are {', '.join(names)}")
            if (problem := limit_problem(key, value, off="null")) is not None:
                raise ConfigInvalid(f"Limits.{key} {problem}, not {_shown(value)}")
        return cls(**data)

    @classmethod
    def from_json(cls, text: str | bytes) -> Limits:
        """The limits of a JSON object as :meth:`to_json` writes it (keys left out keep their defaults);
        ``ConfigInvalid`` for text that is not JSON, or as :meth:`from_dict` says."""
        try:
            data = json.loads(text)
        except (ValueError, TypeError, RecursionError) as error:
            raise ConfigInvalid(f"Limits: not valid JSON ({error})") from None
        return cls.from_dict(data)


COUNTS = frozenset(
    {"max_turns", "max_tool_calls_per_turn", "max_tool_calls", "max_consecutive_errors", "max_history_messages"}
)
"""The limits that count (whole numbers); the others but :data:`ALWAYS_ON` are seconds or dollars."""
ALWAYS_ON = frozenset({"invalid_response_retries", "output_retries", "answer_continuations"})
"""The limits that cannot be switched off (whole numbers, 0 or more)."""
CHOICES: dict[str, tuple[str, ...]] = {"excess_tool_calls": ("refuse", "stop")}
"""The settings that are one of a few words, and their words."""


def limit_problem(name: str, value: object, *, off: str = "None") -> str | None:
    """What is wrong with ``value`` as the limit ``name`` (``"must be ..."``, ``off`` naming the spelling of
    "no limit"), or ``None`` when it is a valid value."""
    if name in CHOICES:
        words = CHOICES[name]
        return None if isinstance(value, str) and value in words else "must be " + " or ".join(map(repr, words))
    if name in ALWAYS_ON:
        return None if is_int(value) and value >= 0 else "must be a whole number >= 0"
    if value is None:
        return None
    if name in COUNTS:
        return None if is_int(value) and value >= 1 else f"must be a whole number >= 1, or {off}"
    return None if is_number(value) and value > 0 else f"must be a number > 0, or {off}"


def _shown(value: object) -> str:
    """A value as JSON writes it, for a message about JSON input (``true``, ``null``, ``"5"``)."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def is_int(value: object) -> TypeGuard[int]:
    """A whole number, not a boolean."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    """A finite number, not a boolean."""
    return is_int(value) or (isinstance(value, float) and math.isfinite(value))


@dataclass(frozen=True, slots=True)
class Compaction:
    """When and how a long run's history is compacted to fit the model's context window (docs/context.md).

    Before each request the loop estimates its size (the last call's reported input tokens plus about four
    characters a token for what was added since). Above ``threshold`` of the window, the model is asked,
    without tools, for a summary of the conversation so far, and the run goes on from the system prompt, the
    summary and the most recent turns kept verbatim. A provider's ``context_overflow`` answer triggers one
    compaction and one retry. Compaction needs a window: the model's known one or ``context_window``.
    """

    enabled: bool = True
    """``False``: never compact; a run that outgrows the window stops with ``context_overflow``."""
    context_window: int | None = None
    """The model's context window in tokens; ``None``: ``ModelInfo.context_window`` (known models)."""
    threshold: float = 0.8
    """Compact when the next request is estimated above this fraction of the window."""
    keep_recent: float = 0.25
    """At most this fraction of the window is kept verbatim after a compaction (the most recent turns;
    at least the last one, whatever its size)."""
    summary_tokens: int | None = None
    """``max_tokens`` of the summary call; ``None``: an eighth of the window, at most 4,096."""
    trim_tool_outputs: bool = True
    """At a compaction, tool outputs kept whole in the tool-output cache are shown to the model by reference
    only (except the last turn's); the model can still read them with ``read_tool_output``."""
    instructions: str | None = None
    """The request for a summary; ``None``: tether's (``loop/context/prompts.py``)."""
    after_answer: Literal["session", "always", "never"] = "session"
    """Whether a run that answered also compacts after its answer when the conversation is then over
    ``threshold``, so that what it leaves is ready for the next run (which otherwise compacts before its first
    request). ``"session"``: in a session only (its next run is expected: the summary is made while the answer
    is read, and the stored conversation is already small); ``"always"``: every run (``result.messages`` too);
    ``"never"``."""

    def __post_init__(self) -> None:
        for name in ("context_window", "summary_tokens", "threshold", "keep_recent"):
            value = getattr(self, name)
            if (problem := compaction_problem(name, value)) is not None:
                raise ConfigInvalid(f"Compaction.{name} {problem}, not {value!r}")
        if self.keep_recent >= self.threshold:
            raise ConfigInvalid(
                f"Compaction.keep_recent ({self.keep_recent}) must be below threshold ({self.threshold}): "
                "otherwise a compaction could keep everything and free nothing"
            )
        if self.instructions is not None and not (isinstance(self.instructions, str) and self.instructions.strip()):
            raise ConfigInvalid("Compaction.instructions must be non-empty text or None")
        if self.after_answer not in AFTER_ANSWER:
            raise ConfigInvalid(
                f"Compaction.after_answer must be 'session', 'always' or 'never', not {self.after_answer!r}"
            )


AFTER_ANSWER = ("session", "always", "never")
"""The choices of ``Compaction.after_answer``."""
MIN_TOKENS = {"context_window": 256, "summary_tokens": 16}
"""The smallest context window and summary (in tokens) :class:`Compaction` takes."""


def compaction_problem(name: str, value: object) -> str | None:
    """What is wrong with ``value`` as the :class:`Compaction` field ``name`` (a token count or a fraction of
    the window), or ``None`` when it is valid (``None`` is, for a token count: the model's own)."""
    if name in MIN_TOKENS:
        least = MIN_TOKENS[name]
        return (
            None
            if value is None or (is_int(value) and value >= least)
            else f"must be a whole number of tokens >= {least}"
        )
    if is_number(value) and 0 < value < 1:
        return None
    return "must be a fraction between 0 and 1 (0.8 is 80% of the window)"
