"""The engine-neutral values of durable queues and runs: a queue's declaration and a run's record.

Contract. :class:`Queue` only declares a queue (its name and limits), checked when made; the engine registers
it in the workflow database when a process first enqueues on it or serves it. :class:`RunRecord` is what the
workflow store says of one run, small and plain: the listing and the command line show it as it is.
:class:`Waiting` is what a paused run publishes (the calls it waits on) and :class:`DecisionMessage` what
``decide`` sends it: both stored in tether's format, read by the engine and by :mod:`tether.durable.store` alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import msgspec

from tether.errors import ConfigInvalid
from tether.limits import StopReason
from tether.paused import Decision, PendingCall

RunStatus = Literal["queued", "running", "paused", "completed", "failed", "cancelled"]
"""``queued``: waiting on its queue; ``running``: taken by a process (or left by one that died, until
recovered); ``paused``: waiting for decisions on its pending calls (``DurableAgent.decide``), holding no
worker; ``completed``: ended with a ``RunResult`` (whatever its stop reason); ``failed``: the workflow itself
raised; ``cancelled``: cancelled through :func:`cancel_run`."""

RUN_STATUSES: tuple[RunStatus, ...] = ("queued", "running", "paused", "completed", "failed", "cancelled")
ENGINE_STATUSES: dict[str, RunStatus] = {
    "ENQUEUED": "queued",
    "DELAYED": "queued",
    "PENDING": "running",
    "SUCCESS": "completed",
    "ERROR": "failed",
    "MAX_RECOVERY_ATTEMPTS_EXCEEDED": "failed",
    "CANCELLED": "cancelled",
}
"""The workflow store's statuses -> a run's; an unknown one reads as ``failed``."""
WORKFLOW_PREFIX = "tether.run."
"""The workflow name of a durable agent's runs starts with this; the agent's name follows."""
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
PROMPT_HEAD = 80
"""Characters of the prompt a :class:`RunRecord` keeps."""


class RateLimit(NamedTuple):
    """At most ``runs`` runs of a queue start in any window of ``seconds`` seconds."""

    runs: int
    seconds: float


@dataclass(frozen=True, slots=True)
class Queue:
    """A named queue of durable runs.

    ``concurrency``: runs of the queue running at once across all workers; ``worker_concurrency``: at once in
    one worker process; ``limit``: runs started per period (``RateLimit(runs, seconds)`` or a pair), which for
    a queue serving one model is that model's request budget. ``None`` means no limit. Bad values raise
    ``ConfigInvalid``.
    """

    name: str
    concurrency: int | None = None
    worker_concurrency: int | None = None
    limit: RateLimit | None = None

    def __init__(
        self,
        name: str,
        *,
        concurrency: int | None = None,
        worker_concurrency: int | None = None,
        limit: RateLimit | tuple[int, float] | None = None,
    ) -> None:
        if not isinstance(name, str) or not _NAME.fullmatch(name) or name.startswith("_"):
            raise ConfigInvalid(
                f"queue name {name!r} must be 1-64 letters, digits, '_', '.' or '-', not starting with '_'"
            )
        for label, value in (("concurrency", concurrency), ("worker_concurrency", worker_concurrency)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigInvalid(f"queue {name!r}: {label} must be a positive integer or None, not {value!r}")
        if worker_concurrency is not None and concurrency is not None and worker_concurrency > concurrency:
            raise ConfigInvalid(f"queue {name!r}: worker_concurrency ({worker_concurrency}) exceeds concurrency")
        rate = None if limit is None else _rate_limit(name, limit)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "concurrency", concurrency)
        object.__setattr__(self, "worker_concurrency", worker_concurrency)
        object.__setattr__(self, "limit", rate)


def _rate_limit(name: str, limit: RateLimit | tuple[int, float]) -> RateLimit:
    try:
        runs, seconds = limit
    except (TypeError, ValueError):
        raise ConfigInvalid(f"queue {name!r}: limit must be (runs, seconds), not {limit!r}") from None
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ConfigInvalid(f"queue {name!r}: the limit's runs must be a positive integer, not {runs!r}")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise ConfigInvalid(f"queue {name!r}: the limit's period must be a positive number of seconds")
    return RateLimit(runs, float(seconds))


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One durable run as the workflow store has it. Times are Unix epoch seconds."""

    run_id: str
    status: RunStatus
    agent: str
    """The durable agent's name."""
    queue: str | None
    """The queue it was enqueued on; ``None`` for a run started directly."""
    created_at: float | None
    updated_at: float | None
    prompt_head: str
    """The first :data:`PROMPT_HEAD` characters of the prompt."""
    stop_reason: StopReason | None = None
    """Once ``completed``: the ``RunResult``'s stop reason."""
    cost_usd: float | None = None
    """Once ``completed``: what the run cost, when the model's price is known."""
    worker: str | None = None
    """The id of the worker process that ran it last."""
    version: str | None = None
    """The deploy version of the process that started or enqueued it: only a worker of this version takes it
    (:mod:`tether.durable.versions`)."""
    pending: tuple[PendingCall, ...] = ()
    """Once ``paused``: the calls still waiting for a decision, in the model's order."""
    decide_by: float | None = None
    """Once ``paused`` with an approval timeout: when the calls still undecided are rejected."""


UNDER_WAY = ("PENDING", "ENQUEUED")
"""The engine's statuses of a run that may be paused: taken by a worker, or put back on its queue after its
worker died (its pause still published: it waits there until a worker takes it up)."""
PENDING_EVENT = "tether.pending"
"""The key of the workflow event where a paused run publishes its :class:`Waiting`; ``None`` once it goes on."""
DECISIONS_TOPIC = "tether.decisions"
"""The topic of the messages (:class:`DecisionMessage`) a paused run waits for."""


class Waiting(msgspec.Struct, frozen=True):
    """What a paused durable run waits on: its ``pending`` calls (those ``decided`` already have a decision)
    and, with an approval timeout, the time (Unix epoch seconds) the undecided ones are rejected at."""

    pending: tuple[PendingCall, ...]
    decided: tuple[str, ...] = ()
    deadline: float | None = None

    @property
    def undecided(self) -> tuple[PendingCall, ...]:
        """The pending calls still without a decision, in the model's order."""
        return tuple(call for call in self.pending if call.id not in self.decided)


class DecisionMessage(msgspec.Struct, frozen=True):
    """What ``decide`` sends a paused run: decisions for some of its calls, keyed by call id; or, from
    ``cancel_run``, ``cancel``: the run rejects every call it waits on and stops before its next model call."""

    decisions: dict[str, Decision] = msgspec.field(default_factory=dict)
    cancel: bool = False


def run_record(
    *,
    run_id: str,
    engine_status: str | None,
    workflow_name: str,
    queue: str | None,
    created_ms: float | None,
    updated_ms: float | None,
    inputs: Any,
    output: Any,
    worker: str | None,
    version: str | None = None,
    waiting: Any = None,
) -> RunRecord:
    """The record of one workflow row, whoever read it (the engine, or :mod:`tether.durable.store` without
    it): ``inputs`` are the workflow's ``{"args": (prompt, ...)}``, ``output`` its ``RunResult`` once ended,
    ``waiting`` its published :class:`Waiting` (a run under way that publishes one is ``paused``)."""
    from tether.events import RunResult

    args = inputs.get("args", ()) if isinstance(inputs, dict) else ()
    prompt = args[0] if args and isinstance(args[0], str) else ""
    result = output if isinstance(output, RunResult) else None
    cost = result.cost.total_usd if result is not None and result.cost is not None else None
    state = ENGINE_STATUSES.get(engine_status or "", "failed")
    if result is not None and result.stop_reason == StopReason.CANCELLED:
        state = "cancelled"
    paused = state in ("running", "queued") and isinstance(waiting, Waiting)
    if paused:
        state = "paused"
    return RunRecord(
        run_id=run_id,
        status=state,
        agent=workflow_name.removeprefix(WORKFLOW_PREFIX),
        queue=None if queue is None or queue.startswith("_") else queue,
        created_at=None if created_ms is None else created_ms / 1000,
        updated_at=None if updated_ms is None else updated_ms / 1000,
        prompt_head=prompt[:PROMPT_HEAD],
        stop_reason=None if result is None else result.stop_reason,
        cost_usd=cost,
        worker=worker,
        version=version,
        pending=waiting.undecided if paused else (),
        decide_by=waiting.deadline if paused else None,
    )
