"""The one retry ladder of the HTTP layer, for streamed and whole answers alike.

:func:`retrying` makes an attempt until one succeeds or no attempt is left or worth making. An attempt is the
request up to the point where its answer starts to be delivered: for a whole answer, the whole body; for a
stream, its head and its first event (``stream.py``). What fails after that is never retried here: the
consumer has acted on what it got, and a replay would duplicate output.

* Retried: HTTP 429, 500, 502, 503, 504 and 529, connection failures and timeouts (``errors.is_retryable``).
  Not: a redirect, an answer past a limit or not UTF-8 or not JSON (the same server would send it again), an
  exhausted quota.
* Each retry waits with exponential backoff and full jitter (:class:`RetryPolicy`), or as long as the server
  asked (``Retry-After``, ``retry-after-ms``, capped by ``RetryPolicy.max_delay``), and never past the run's
  deadline: a retry whose wait would end after it is not made, and the error is raised.
* ``on_retry`` is told of each retry before its wait (the run's records, logs and spans). A durable run's
  ``on_retry`` raises instead, ending the call's step so that the run waits as a durable sleep and makes the
  next attempt as a new step (``loop/steps.py``); its ``retried`` attribute, when it has one, is the number of
  retries of the call already made, which the ladder counts on from. A stream of events
  (``client.py``) then hands on a ``ProviderRetry`` event before it waits, so that the consumer can say so as
  it happens; it is not part of the answer, which only the attempt that succeeds gives.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from tether.errors import ProviderError
from tether.events import ProviderRetry
from tether.providers.base import OnRetry
from tether.providers.http.errors import is_retryable

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How failed requests are retried (see the module docstring)."""

    max_retries: int = 3
    """Retries after the first attempt."""
    base_delay: float = 0.5
    """Seconds; the n-th retry waits a random time up to ``base_delay * 2**n``."""
    max_delay: float = 30.0
    """The longest single wait, ``Retry-After`` included."""

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None and math.isfinite(retry_after):
            return min(max(retry_after, 0.0), self.max_delay)
        return random.uniform(0.0, min(self.max_delay, self.base_delay * 2**attempt))


async def retrying(
    attempt: Callable[..., Awaitable[T]],
    arguments: tuple[Any, ...],
    policy: RetryPolicy,
    deadline: float | None,
    on_retry: OnRetry | None,
) -> T:
    """What ``attempt(*arguments)`` gives once it succeeds; its ``ProviderError`` when no attempt is left or worth
    making. (Arguments, not a closure: a run waiting for its answer holds no function and cells for it.)"""
    number = 0
    while True:
        try:
            return await attempt(*arguments)
        except ProviderError as error:
            await back_off(error, number, policy, deadline, on_retry)
        number += 1


async def back_off(
    error: ProviderError, attempt: int, policy: RetryPolicy, deadline: float | None, on_retry: OnRetry | None
) -> None:
    """Wait before the next attempt (after attempt number ``attempt``, 0 the first), or raise ``error`` when
    none is left or worth making."""
    await asyncio.sleep(next_wait(error, attempt, policy, deadline, on_retry))


def next_wait(
    error: ProviderError, attempt: int, policy: RetryPolicy, deadline: float | None, on_retry: OnRetry | None
) -> float:
    """The wait before the attempt after ``error`` (which ended attempt number ``attempt``, 0 the first), with
    ``on_retry`` told of it; ``error`` raised when no attempt is left or worth making. The ladder's one decision,
    for a ladder that waits itself (:func:`back_off`) and for a stream that says so first (``client.py``)."""
    attempt += getattr(on_retry, "retried", 0)  # a durable run's retries of this call made in earlier steps
    if not is_retryable(error) or attempt >= policy.max_retries:
        raise error
    wait = policy.delay(attempt, error.retry_after)
    if deadline is not None and asyncio.get_running_loop().time() + wait >= deadline:
        raise error
    if on_retry is not None:
        on_retry(error, attempt + 1, wait)
    return wait


def retry_event(error: ProviderError, attempt: int, wait: float) -> ProviderRetry:
    """The ``ProviderRetry`` a stream hands on before the wait of :func:`next_wait` (after ``on_retry``, which
    masks the run's keys in ``error``). ``attempt`` is the number of the attempt that failed, 0 the first."""
    return ProviderRetry(attempt + 2, wait, error.code, error.message, error.status)
