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
* ``on_retry`` is told of each retry before its wait (the run's records, logs and spans).
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from tether.errors import ProviderError
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
    if not is_retryable(error) or attempt >= policy.max_retries:
        raise error
    wait = policy.delay(attempt, error.retry_after)
    if deadline is not None and asyncio.get_running_loop().time() + wait >= deadline:
        raise error
    if on_retry is not None:
        on_retry(error, attempt + 1, wait)
    await asyncio.sleep(wait)
