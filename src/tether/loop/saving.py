"""A run's saves: its transcript and usage handed to its checkpoint (a session store), and what a failed save does.

A run in a session is saved after every turn and at its end (``engine.py``). A save that fails does what
``Agent(save_errors=...)`` says:

* ``"stop"`` (the default): the run stops with ``error``, the save's exception as ``result.error``. A host
  that asked for a session learns at once that it is not being kept, and the run spends nothing more on a
  conversation that will not be there next time.
* ``"continue"``: the failure is logged (a warning on ``tether.sessions``) and the run goes on; each later
  save writes the whole transcript again, so one that succeeds leaves the session whole. Only when the *last*
  save fails is the result marked: its answer and stop reason are kept, ``degraded`` is set, ``detail`` says
  the session was not saved and ``error`` is the save's exception (unless the run had one of its own).

Tool outputs kept whole are flushed to their store before the transcript that names them is saved.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Literal

from msgspec.structs import replace

from tether.limits import StopReason
from tether.loop.guard import Stop
from tether.messages import Message
from tether.usage import Usage

if TYPE_CHECKING:
    from tether.tools.output_cache import OutputCache

Checkpoint = Callable[[Sequence[Message], Usage], Awaitable[None]]
"""Saves a run's state (its transcript so far and its usage) after every turn and at its end."""
SaveErrors = Literal["stop", "continue"]
"""What a failed save does (``Agent(save_errors=...)``; see the module docstring)."""


class Saves:
    """The saves of one run in a session (see the module docstring)."""

    __slots__ = ("checkpoint", "errors", "outputs", "unsaved")

    def __init__(self, checkpoint: Checkpoint, outputs: OutputCache | None, errors: SaveErrors) -> None:
        self.checkpoint = checkpoint
        self.outputs = outputs
        self.errors = errors
        self.unsaved: Stop | None = None
        """With ``"continue"``: the failure of the last save, until one succeeds (``None``: the session holds
        what was last saved)."""

    async def save(self, transcript: Sequence[Message], usage: Usage) -> Stop | None:
        """Save ``transcript`` and ``usage``; the stop a failure decides (``None``: the run goes on)."""
        try:
            if self.outputs is not None:
                await self.outputs.flush()  # first: a saved transcript never names an output its store lacks
            await self.checkpoint(tuple(transcript), usage)
        except Exception as error:  # noqa: BLE001 - what follows depends on save_errors
            failed = Stop(StopReason.ERROR, f"could not save the session: {type(error).__name__}: {error}", error)
            if self.errors == "stop":
                return failed
            from tether._logging import get_logger  # only when a save fails: the loop imports no logging

            get_logger("tether.sessions").warning("%s; the run goes on (save_errors='continue')", failed.detail)
            self.unsaved = failed
            return None
        self.unsaved = None
        return None

    def marked(self, stop: Stop) -> tuple[Stop, bool]:
        """The run's stop with its last save's failure said (its detail, its error when it had none), and
        whether that makes the run degraded."""
        unsaved = self.unsaved
        if unsaved is None:
            return stop, False
        detail = f"{stop.detail}; {unsaved.detail}" if stop.detail else unsaved.detail
        return replace(stop, detail=detail, error=stop.error if stop.error is not None else unsaved.error), True
