"""Client-side rate limits: requests and tokens per window, shared by every run of the process that sends to
the same API, key and model, waited for before a request is sent.

* **What is kept.** :class:`RateLimit` says how many requests (``rpm``) and tokens (``tpm``) a window
  (``window`` seconds, 60 by default) may carry. One :class:`Limiter` per base URL, key and model
  (:func:`limiter_for`) holds the grants of the last window: a bucket whose every token comes back one window
  after it was spent. A bucket that refills continuously would let twice its size through some window (a full
  bucket at its start, its refill during it), which a server that counts per window refuses; this one never
  lets more than ``rpm`` requests or ``tpm`` tokens into any window.
* **Counted from when the server has it.** A request is counted in the window from its slot, then from when it
  is sent, then from when its answer's head comes (by then the server has it, whatever delayed its arrival): the
  request a window later waits for the last of these, so a late first request never lets the next window's close
  in on it at the server.
* **Reserved, then waited for.** :meth:`Limiter.reserve` gives a request its time slot at once (no lock held
  across a wait, no task woken to be put back to sleep: callers queue in the order they asked);
  :meth:`Limiter.ready` sleeps until it. A run that waits says so first (``RateLimitWait``).
* **Tokens** are estimated before the request (its body's bytes over four, a conservative guess for JSON) and
  corrected by the usage its answer reports (:meth:`Spend.settle`).
* **What the server says.** Where an answer carries the server's remaining quota (OpenAI's
  ``x-ratelimit-remaining-requests`` / ``-tokens`` with ``x-ratelimit-reset-*`` durations, Anthropic's
  ``anthropic-ratelimit-requests-remaining`` / ``-tokens-remaining`` with ``-reset`` times), the limiter counts
  it down with each grant and holds requests until the reset once it is spent: a busy process slows down
  before it gets 429s. A 429's ``Retry-After`` pauses every waiter of that limiter (:meth:`Limiter.pause`): the
  whole schedule moves back by the pause.
* **Cost.** A provider without a ``RateLimit`` has no limiter and pays nothing; one with it pays a reservation
  per attempt (``bench/ratelimit.py`` prints it).
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import hashlib
import math
import re
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from tether.errors import ConfigInvalid

__all__ = ["Limiter", "RateLimit", "Spend", "Ticket", "estimate_tokens", "limiter_for", "limiter_of"]

BYTES_PER_TOKEN = 4
"""A request's tokens, estimated before it is sent: its body's bytes over this (JSON's punctuation and keys make
it an over-estimate for prose, which errs on the side of waiting)."""


@dataclass(frozen=True, slots=True)
class RateLimit:
    """Requests and tokens a provider may be sent per window, by every run of this process together.

    ``RateLimit()`` with neither sets no limit of its own but still follows the server's remaining-quota headers
    and its ``Retry-After`` pauses."""

    rpm: int | None = None
    """Requests per window (per minute by default); ``None``: not limited."""
    tpm: int | None = None
    """Tokens per window, input and output together; ``None``: not limited."""
    window: float = 60.0
    """The window's length in seconds: 60 for per-minute limits (shorter ones are for tests)."""

    def __post_init__(self) -> None:
        for name in ("rpm", "tpm"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigInvalid(f"RateLimit.{name} must be a positive integer or None, not {value!r}")
        window = self.window
        if isinstance(window, bool) or not isinstance(window, (int, float)) or not (0 < window < math.inf):
            raise ConfigInvalid(f"RateLimit.window must be a positive number of seconds, not {window!r}")


class Spend:
    """The tokens one request was granted: its estimate, corrected by :meth:`settle` once its usage is known."""

    __slots__ = ("amount", "at", "counted", "limiter")

    def __init__(self, limiter: Limiter, at: float, amount: int) -> None:
        self.limiter, self.at, self.amount = limiter, at, amount
        self.counted = True
        """Still inside the limiter's window (its amount part of the limiter's sum)."""

    def settle(self, actual: int) -> None:
        """The request used ``actual`` tokens (its answer's usage): the window counts that, not the estimate."""
        limiter = self.limiter
        with limiter._lock:
            if self.counted:
                limiter._token_sum += actual - self.amount
            self.amount = actual


class Sent:
    """When a request of the window went: its slot, then the time it really left (a busy event loop wakes a
    waiter late, and a slot reckoned from the plan would let the next window's requests close in on it)."""

    __slots__ = ("at",)

    def __init__(self, at: float) -> None:
        self.at = at


class Ticket:
    """A reserved slot: when the request may go, and what of the window it holds; ``prior`` the request ``rpm``
    before it, which must have left a window before this one leaves."""

    __slots__ = ("at", "delay", "prior", "reason", "sent", "shift", "spend")

    def __init__(
        self, at: float, delay: float, reason: str, shift: float, spend: Spend | None, sent: Sent | None,
        prior: Sent | None,
    ) -> None:  # fmt: skip
        self.at, self.delay, self.reason, self.shift, self.spend = at, delay, reason, shift, spend
        self.sent, self.prior = sent, prior


class Limiter:
    """One API's, key's and model's window of grants (see the module docstring)."""

    __slots__ = (
        "_last",
        "_lock",
        "_paused",
        "_requests",
        "_server_requests",
        "_server_tokens",
        "_shift",
        "_token_sum",
        "_tokens",
        "limit",
    )

    def __init__(self, limit: RateLimit) -> None:
        self.limit = limit
        self._lock = threading.Lock()  # runs on other threads' event loops share it
        self._requests: deque[Sent] | None = deque(maxlen=limit.rpm) if limit.rpm else None
        self._tokens: deque[Spend] = deque()
        self._token_sum = 0
        self._last = 0.0
        """The latest slot given: slots are given in order."""
        self._paused = 0.0
        """No slot before this (a 429's ``Retry-After``)."""
        self._shift = 0.0
        """The pauses so far, in all: a waiter whose slot a later pause moved back waits the difference."""
        self._server_requests: tuple[int, float] | None = None
        """The server's remaining requests and when they reset (monotonic time), counted down per grant."""
        self._server_tokens: tuple[int, float] | None = None

    def reserve(self, tokens: int = 0, now: float | None = None) -> Ticket:
        """A slot for a request of about ``tokens`` tokens: the earliest time no limit is passed, held at once."""
        now = time.monotonic() if now is None else now
        limit = self.limit
        with self._lock:
            at, reason = max(now, self._last), "requests"
            if self._paused > at:
                at, reason = self._paused, "retry_after"
            requests, prior = self._requests, None
            if requests is not None and len(requests) == requests.maxlen:
                prior = requests[0]
                if prior.at + limit.window > at:
                    at, reason = prior.at + limit.window, "requests"
            spend = None
            if limit.tpm is not None:
                at, reason = self._tokens_room(min(tokens, limit.tpm), at, reason)
            at, reason = self._server_room(tokens, at, reason)
            sent = None
            if requests is not None:
                requests.append(sent := Sent(at))
            if limit.tpm is not None:
                spend = Spend(self, at, tokens)
                self._tokens.append(spend)
                self._token_sum += tokens
            self._last = at
            return Ticket(at, at - now, reason, self._shift, spend, sent, prior)

    def _tokens_room(self, tokens: int, at: float, reason: str) -> tuple[float, str]:
        """The earliest time from ``at`` the window has room for ``tokens`` more, spends leaving it on the way."""
        spent, window, most = self._tokens, self.limit.window, self.limit.tpm or 0
        while spent and (spent[0].at + window <= at or self._token_sum + tokens > most):
            oldest = spent.popleft()
            oldest.counted = False
            self._token_sum -= oldest.amount
            if oldest.at + window > at:
                at, reason = oldest.at + window, "tokens"
        return at, reason

    def _server_room(self, tokens: int, at: float, reason: str) -> tuple[float, str]:
        """``at``, or the server's reset when its remaining quota is spent; the quota counted down."""
        known = self._server_requests
        if known is not None and at < known[1]:
            if known[0] <= 0:
                at, reason = known[1], "server"
            else:
                self._server_requests = (known[0] - 1, known[1])
        known = self._server_tokens
        if known is not None and at < known[1]:
            if known[0] < tokens:
                at, reason = known[1], "server"
            else:
                self._server_tokens = (known[0] - tokens, known[1])
        return at, reason

    async def ready(self, ticket: Ticket) -> None:
        """Sleep until ``ticket``'s slot, and longer by any pause that came meanwhile."""
        wait = ticket.at - time.monotonic()
        while wait > 0:
            await asyncio.sleep(wait)
            moved, ticket.shift = self._shift - ticket.shift, self._shift
            wait = moved
            if ticket.prior is not None:  # the request a window before left late: as late again
                wait = max(wait, ticket.prior.at + self.limit.window - time.monotonic())
        left = self._paused - time.monotonic()  # a slot given before a pause that ended it: the pause bounds it too
        if left > 0:
            await asyncio.sleep(left)

    @staticmethod
    def sent(ticket: Ticket) -> None:
        """The request of ``ticket`` leaves now: the window counts it from now if that is after its slot."""
        if ticket.sent is not None:
            ticket.sent.at = max(ticket.sent.at, time.monotonic())

    async def acquire(self, tokens: int = 0) -> Spend | None:
        """:meth:`reserve` and :meth:`ready` in one, for callers with nothing to say of the wait."""
        ticket = self.reserve(tokens)
        if ticket.delay > 0:
            await self.ready(ticket)
        self.sent(ticket)
        return ticket.spend

    def pause(self, seconds: float, now: float | None = None) -> None:
        """The server asked for ``seconds`` of quiet (a 429's ``Retry-After``): no slot before then, and every
        slot given moves back by as much (waiters sleep the difference)."""
        if not math.isfinite(seconds) or seconds <= 0:
            return
        now = time.monotonic() if now is None else now
        with self._lock:
            until = now + seconds
            if until <= self._paused:
                return
            moved = until - max(now, self._paused)
            self._paused = until
            self._shift += moved
            self._last += moved
            for sent in self._requests or ():
                sent.at += moved
            for spend in self._tokens:
                spend.at += moved

    def answered(self, ticket: Ticket | None, headers: Any) -> None:
        """An attempt's answer has its head: its request reached the server by now, so the window counts it from
        now at the latest (the server counts it from when it arrived, which a connection opened for it or a busy
        machine may have put well after the send); and the server's quota is read from ``headers``."""
        if ticket is not None:
            self.sent(ticket)
        self.learn(headers)

    def learn(self, headers: Any, now: float | None = None) -> None:
        """Read the server's remaining quota from an answer's headers, where it sends it (OpenAI's, Anthropic's)."""
        requests = _quota(headers, "requests")
        tokens = _quota(headers, "tokens")
        if requests is None and tokens is None:
            return
        now = time.monotonic() if now is None else now
        with self._lock:
            if requests is not None:
                self._server_requests = (requests[0], now + requests[1])
            if tokens is not None:
                self._server_tokens = (tokens[0], now + tokens[1])


def _quota(headers: Any, what: str) -> tuple[int, float] | None:
    """The remaining ``what`` (``requests``, ``tokens``) and the seconds until they reset, or ``None``."""
    remaining = headers.get(f"x-ratelimit-remaining-{what}")
    if remaining is not None:
        reset = _duration(headers.get(f"x-ratelimit-reset-{what}"))
    else:
        remaining = headers.get(f"anthropic-ratelimit-{what}-remaining")
        if remaining is None:
            return None
        reset = _until(headers.get(f"anthropic-ratelimit-{what}-reset"))
    try:
        count = int(remaining)
    except ValueError:
        return None
    return (count, reset) if reset is not None else None


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


@functools.lru_cache(maxsize=256)
def _duration(text: str | None) -> float | None:
    """OpenAI's reset durations (``1s``, ``6m0s``, ``20ms``, ``1h2m3.5s``) in seconds; the few a server sends
    over and over read once."""
    if not text:
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    parts = _DURATION.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text.strip():
        return None
    return sum(float(number) * scale[unit] for number, unit in parts)


def _until(text: str | None) -> float | None:
    """Seconds from now until Anthropic's reset time (RFC 3339), at least 0."""
    if not text:
        return None
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def estimate_tokens(body: bytes) -> int:
    """A request's tokens before it is sent, from its body's size (see :data:`BYTES_PER_TOKEN`)."""
    return len(body) // BYTES_PER_TOKEN + 1


_LIMITERS: dict[tuple[str, str, str], Limiter] = {}
_LIMITERS_LOCK = threading.Lock()


def limiter_for(base_url: str, api_key: str | None, model: str, limit: RateLimit) -> Limiter:
    """The process's one limiter for ``base_url``, ``api_key`` and ``model`` (the key known by a digest only);
    made on first use. A provider made later with a different ``limit`` for the same three gets a new limiter
    in its place (the last configured wins for the providers made from then on; those made before keep theirs)."""
    digest = hashlib.sha256(api_key.encode()).hexdigest()[:16] if api_key else ""
    key = (base_url.rstrip("/"), digest, model)
    with _LIMITERS_LOCK:
        limiter = _LIMITERS.get(key)
        if limiter is None or limiter.limit != limit:
            limiter = _LIMITERS[key] = Limiter(limit)
        return limiter


def limiter_of(limit: RateLimit | None, base_url: str, api_key: str | None, model: str) -> Limiter | None:
    """A provider's limiter (:func:`limiter_for`), or ``None`` without a ``limit``: no limiter, and no cost."""
    return None if limit is None else limiter_for(base_url, api_key, model, limit)
