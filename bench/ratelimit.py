"""What the client-side rate limit costs a request: the limiter's reservation (and the answer's headers read)
per attempt, in nanoseconds, and the same under callgrind in instructions when ``--instructions`` is given.

    .venv/bin/python bench/ratelimit.py                  # ns per reservation, median of 5 rounds
    .venv/bin/python bench/ratelimit.py --instructions   # instructions per reservation (needs valgrind)

A provider without a ``RateLimit`` has no limiter: its attempts test one attribute for ``None`` and do nothing
else. The reservations here never wait (the window is a nanosecond long), so the figure is the
bookkeeping alone: the window's deque, the tokens' sum, the server's quota counted down."""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time

from tether.providers.http.ratelimit import Limiter, RateLimit

ROUNDS, PER_ROUND = 5, 200_000
HEADERS = {"x-ratelimit-remaining-requests": "9999", "x-ratelimit-reset-requests": "6ms",
           "x-ratelimit-remaining-tokens": "1999000", "x-ratelimit-reset-tokens": "30ms"}  # fmt: skip


def per_call(limiter: Limiter, *, learn: bool) -> float:
    """Nanoseconds per reservation (with its ``sent`` and its usage settled), and per headers read if ``learn``."""
    reserve, sent = limiter.reserve, limiter.sent
    start = time.perf_counter_ns()
    for _ in range(PER_ROUND):
        ticket = reserve(400)
        sent(ticket)
        if ticket.spend is not None:
            ticket.spend.settle(420)
        if learn:
            limiter.learn(HEADERS)
    return (time.perf_counter_ns() - start) / PER_ROUND


def limiters() -> dict[str, tuple[Limiter, bool]]:
    """A window of a nanosecond: the window holds what a busy per-minute limit's holds (a full deque of recent
    requests, spends leaving as others come), and no reservation waits."""
    window, rpm, tpm = 1e-9, 10_000, 10**9
    return {
        "rpm": (Limiter(RateLimit(rpm=rpm, window=window)), False),
        "rpm + tpm": (Limiter(RateLimit(rpm=rpm, tpm=tpm, window=window)), False),
        "rpm + tpm + server headers": (Limiter(RateLimit(rpm=rpm, tpm=tpm, window=window)), True),
    }


def main() -> None:
    if "--instructions" in sys.argv:
        instructions()
        return
    for name, (limiter, learn) in limiters().items():
        rounds = [per_call(limiter, learn=learn) for _ in range(ROUNDS)]
        print(f"{name:28} {statistics.median(rounds):8.0f} ns per request (median of {ROUNDS} x {PER_ROUND:,})")


def instructions() -> None:
    """Each kind under callgrind, 20,000 reservations against 10,000: the difference over 10,000."""
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed")
    for name in limiters():
        counts = []
        for calls in (10_000, 20_000):
            code = (
                f"import bench.ratelimit as b; b.PER_ROUND = {calls}; l, learn = b.limiters()[{name!r}]; "
                "b.per_call(l, learn=learn)"
            )
            done = subprocess.run(
                ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c", code],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            line = next(line for line in done.stderr.splitlines() if "Collected" in line)
            counts.append(int(line.rsplit(":", 1)[1].replace(",", "").strip()))
        print(f"{name:28} {(counts[1] - counts[0]) / 10_000:8.0f} instructions per request")


if __name__ == "__main__":
    main()
