"""What a run has so far: its transcript, the turn under way and the tool calls in flight.

A :class:`RunState` is the run's one piece of mutable state besides the guard's counts (``guard.py``) and the
records (``records.py``). The loop appends to the transcript (an answer, a turn's results), a compaction inserts
markers into it (``compactor.py``), and whatever stops the run, :meth:`RunState.close_open_calls` answers every
call that has no result: the transcript is valid at every stop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tether.errors import ConfigInvalid
from tether.loop.context import prepare_history, unrunnable
from tether.loop.executor import ToolBatch
from tether.loop.repeats import Verdict
from tether.messages import (
    Message,
    Prompt,
    Thinking,
    ToolCall,
    ToolResult,
    cancelled_result,
    open_tool_calls,
    spoken_by,
    user_message,
)


class RunState:
    """A run's transcript and what is under way in it (see the module docstring)."""

    __slots__ = ("batch", "body_start", "first_new", "prompted", "speaker", "system_text", "transcript", "turn")

    def __init__(self, system: str | None, history: Sequence[Message], prompt: Prompt | None) -> None:
        """``prompt`` ``None``: the history is run as it is, and must end where the model speaks next
        (``ConfigInvalid`` otherwise, before anything is sent)."""
        transcript = prepare_history(system, history)
        self.body_start = 1 if transcript and transcript[0].role == "system" else 0
        """Where the conversation starts, after the system prompt."""
        self.system_text = transcript[0].text if self.body_start else None
        self.first_new = len(transcript)
        """Where the run's own messages start (its prompt, or its first answer); a compaction before it moves it."""
        self.prompted = prompt is not None
        """The run added a user message of its own (else it runs its history as it is)."""
        if prompt is not None:
            transcript.append(user_message(prompt))
        elif (problem := unrunnable(transcript, self.body_start)) is not None:
            raise ConfigInvalid(problem)
        self.transcript = transcript
        """Every message of the conversation, the system prompt first: the run appends, compaction inserts."""
        self.turn = 0
        """The number of the turn under way (0 before the first)."""
        self.batch: ToolBatch | None = None
        """The tool calls in flight, until their results join the transcript."""
        self.speaker: str | None = None
        """The name each answer is marked with (``spoken_by``), in a run of agents that hand off to each other."""

    def instruct(self, system: str | None) -> None:
        """The system prompt set before the first request (``system=`` given as a function): the head of the
        transcript replaced, added or removed, whatever a stored history had there."""
        if self.body_start:
            del self.transcript[0]
        if system is not None:
            self.transcript.insert(0, Message.system(system))
        shift = (system is not None) - self.body_start
        self.body_start += shift
        self.first_new += shift
        self.system_text = system

    @property
    def prompt(self) -> str:
        """The text of the run's prompt; ``""`` for a run of its history as it is."""
        return self.transcript[self.first_new].text if self.prompted else ""

    def history(self) -> tuple[Message, ...]:
        """The conversation the run continues from, the system prompt aside."""
        return tuple(self.transcript[self.body_start : self.first_new])

    def answered(self, message: Message) -> None:
        """The model's usable answer joins the transcript (marked with the agent that gave it, in a relay)."""
        self.transcript.append(message if self.speaker is None else spoken_by(message, self.speaker))

    def continue_answer(self, message: Message) -> Message:
        """More of the answer the transcript ends with (a continuation after the output limit): its parts are
        joined to that message's, its thinking left out (a message's thinking comes first); the joined message."""
        last = self.transcript[-1]
        assert last.role == "assistant", "a continuation follows the answer it continues"
        more = tuple(part for part in message.parts if type(part) is not Thinking)
        joined = Message("assistant", (*last.parts, *more), last.provider_data)
        self.transcript[-1] = joined
        return joined

    def start_batch(
        self,
        calls: Sequence[ToolCall],
        verdicts: Sequence[Verdict],
        approved: frozenset[str] = frozenset(),
        earlier: Mapping[str, ToolResult] | None = None,
    ) -> ToolBatch:
        """A turn's tool calls are in flight from now on; ``verdicts`` say which may run (``guard.admit``). A
        resumed run's (``pausing.py``): ``approved`` run without asking, ``earlier`` are the results of the calls
        that ran before its pause."""
        self.batch = ToolBatch(calls, verdicts, approved)
        if earlier:
            self.batch.results.update(earlier)
        return self.batch

    def end_batch(self, batch: ToolBatch) -> list[ToolResult]:
        """A turn's tool calls were all answered: their results join the transcript, in the model's order."""
        results = batch.ordered_results("the run was cancelled")
        self.transcript.append(Message("tool", tuple(results)))
        self.batch = None
        return results

    def close_open_calls(self, why: str) -> tuple[list[ToolResult], list[ToolResult], Mapping[str, float] | None]:
        """Answer every call that has no result, with ``why`` (the transcript must stay valid). Returns the
        results written, those of them whose start was announced but not their result (each
        ``ToolCallStarted`` gets its result event), and how long the calls in flight that ran took (``None``:
        none was in flight; the calls answered were left open by an earlier run)."""
        batch, self.batch = self.batch, None
        if batch is not None:
            results = batch.ordered_results(why)
            announced = [r for r in results if r.call_id in batch.started and r.call_id not in batch.reported]
            durations: Mapping[str, float] | None = batch.durations
        else:
            results = [cancelled_result(call, why) for call in open_tool_calls(self.transcript)]
            announced, durations = [], None
        if results:
            self.transcript.append(Message("tool", tuple(results)))
        return results, announced, durations
