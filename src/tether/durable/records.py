"""The engine-neutral values of durable queues and runs: a queue's declaration and a run's record.

Contract. :class:`Queue` only declares a queue (its name and limits), checked when made; the engine registers
it in the workflow database when a process first enqueues on it or serves it. :class:`RunRecord` is what the
workflow store says of one run, small and plain: the listing and the command line show it as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, NamedTuple

from tether.errors import ConfigInvalid
from tether.limits import StopReason

RunStatus = Literal["queued", "running", "completed", "failed", "cancelled"]
"""``queued``: waiting on its queue; ``running``: taken by a process (or left by one that died, until
recovered); ``completed``: ended with a ``RunResult`` (whatever its stop reason); ``failed``: the workflow
itself raised; ``cancelled``: cancelled through :func:`cancel_run`."""

RUN_STATUSES: tuple[RunStatus, ...] = ("queued", "running", "completed", "failed", "cancelled")
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
