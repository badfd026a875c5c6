"""The loop's step seam inside a DBOS workflow: each provider call and tool call a DBOS step."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from dbos import DBOS

if TYPE_CHECKING:
    pass


T = TypeVar("T")


_CANCEL_TOPIC = "tether.cancel"
"""The topic of the message :func:`cancel_run` sends a running run."""


class DBOSSteps:
    """The loop's :class:`~tether.loop.steps.StepRunner` inside a DBOS workflow: each step a DBOS step.

    Before each model call it reads (as a recorded workflow operation, so that every execution of the run
    reads the same) whether :func:`cancel_run` asked the run to stop, and then calls ``on_cancel``: the run
    stops as a plain run cancelled by its host does."""

    __slots__ = ("_live", "_replayed", "_run_id", "on_cancel", "resumed")

    def __init__(self, run_id: str) -> None:
        self._run_id = run_id
        self.on_cancel: Callable[[], None] | None = None
        self._replayed = self._live = False
        self.resumed: str | None = None
        """The step this execution ran first after replaying kept ones: where an earlier one stopped
        (``tether.loop.steps``); ``None`` for a first execution, or until then."""

    @property
    def run_id(self) -> str:
        return self._run_id

    async def step(self, name: str, function: Callable[[], Awaitable[T]]) -> T:
        ran = False

        async def call() -> T:  # DBOS runs a coroutine function on the loop, anything else in a thread
            nonlocal ran
            ran = True
            if not self._live:
                self._live = True
                if self._replayed:
                    self.resumed = name
            return await function()

        # a model call of the run's, or of an agent it runs as a tool (``agent:{tool}:{call}/model:...``)
        cancellable = self.on_cancel is not None and (name.startswith("model:") or "/model:" in name)
        if cancellable and await DBOS.recv_async(_CANCEL_TOPIC, timeout_seconds=0) is not None:
            assert self.on_cancel is not None
            self.on_cancel()

        try:
            result: T = await DBOS.run_step_async({"name": name, "retries_allowed": False}, call)
        finally:
            self._replayed = self._replayed or not ran
        return result

    async def sleep(self, seconds: float) -> None:
        """A durable sleep (``DBOS.sleep_async``): its end is kept, so that an execution of the run after a
        crash waits only what is left of it. The provider's retry waits are these (``tether.loop.steps``)."""
        await DBOS.sleep_async(seconds)
