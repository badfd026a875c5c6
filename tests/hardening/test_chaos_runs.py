"""Acceptance: nothing a model server sends can break a run, leak a key or escape as an untyped error.

2,000 runs, split evenly over the four wire protocols (OpenAI Chat, OpenAI Responses, Anthropic, Gemini),
streamed and whole, each an ``Agent`` with one tool, a distinctive key (``sk-chaos-...``), short timeouts and
a fast retry policy, talk to the chaos server (``chaos_server.py``), which answers every request with a
fault drawn by a seeded die: malformed, truncated, wrongly typed, not UTF-8, oversized, cut, stalled,
redirected elsewhere, an HTTP error with a garbage body, an error inside the stream, and some valid answers
so that runs go on to call their tool. The guarantee:

* every run ends with exactly one ``RunResult``: completed, stopped by a guard, or failed with
  ``result.error`` a ``TetherError`` whose ``code`` is one of ``tether.errors.ErrorCode``; never another
  exception type, never a traceback in what the run reports;
* the events follow ARCHITECTURE.md §4 (``RunStarted`` first, ``RunCompleted`` last, every turn and call closed)
  and the transcript is valid;
* the key is sent nowhere but the configured origin (the redirect target receives nothing at all) and
  appears in nothing a run returns or emits, even when a server quotes it back;
* a failed run's code names what went wrong with the last answer it got (a stall is a ``timeout``, a body
  that is not JSON is ``invalid_response``, an HTTP 429 is ``rate_limited``, ...);
* nothing reaches the event loop's exception handler, and no answer past the response limits (set small
  here, where the providers take them) is kept: memory stays bounded (``bench/chaos.py`` measures it).

The workload runs once per module; each test checks one part of the guarantee. Every failure is listed with
its seed, run, family and the faults that run met, so that it can be replayed alone:
``PYTHONPATH=src python bench/chaos.py --seed SEED --only RUN``. ``TETHER_CHAOS_SEED`` picks another seed.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import importlib
import json
import os
import random
import re
import traceback
import typing
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.hardening.chaos_server import FAMILIES, FAULTS, OVERSIZE, TOOL_NAME, choose_fault, die, running
from tests.hardening.chaos_wire import Material, get_path, insert_bad_utf8, json_paths, retype
from tests.helpers import check_order
from tether import Agent, Limits
from tether.errors import ErrorCode, TetherError
from tether.events import RunCompleted, RunEvent, RunResult, RunStarted, ToolResultReceived
from tether.limits import StopReason
from tether.messages import transcript_problems
from tether.providers.anthropic import AnthropicProvider
from tether.providers.base import Provider
from tether.providers.gemini import GeminiProvider
from tether.providers.http import RetryPolicy
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.openai_responses import OpenAIResponsesProvider
from tether.tools.base import Tool

SEED = int(os.environ.get("TETHER_CHAOS_SEED", "20261123"))
RUNS = 2000
CONCURRENCY = 50
KEY_MARK = "sk-chaos-"
"""Every key starts so; nothing else the server sends contains it."""
PROMPT = "Look up the capital of France, then answer in one word."
LIMITS = Limits(max_turns=3, request_timeout=1.0, step_timeout=30.0, tool_timeout=5.0, invalid_response_retries=1)
"""Short waits so stalls end fast; a step timeout long enough never to cut a request that is answering."""
RETRY = RetryPolicy(max_retries=1, base_delay=0.0, max_delay=0.01)
CODES = frozenset(typing.get_args(ErrorCode))
PROVIDER_CODES = frozenset({"rate_limited", "auth_failed", "bad_request", "context_overflow", "provider_unavailable"})
FAILED = frozenset({StopReason.ERROR, StopReason.TIMEOUT, StopReason.INVALID_RESPONSE})
NEVER = frozenset({StopReason.CANCELLED, StopReason.BUDGET})
"""Nothing in this workload cancels a run or sets a budget."""
TRACEBACK = re.compile(r"Traceback \(most recent call last\)|File \"[^\"]+\", line \d+")


# --- the workload -------------------------------------------------------------------------------------------


def plan(run: int) -> tuple[str, bool]:
    """The family a run speaks and whether it streams: every combination gets an equal share."""
    return FAMILIES[run % len(FAMILIES)], (run // len(FAMILIES)) % 2 == 0


def key_for(seed: int, run: int) -> str:
    return f"{KEY_MARK}{seed}-{run:04d}-" + hashlib.sha256(f"{seed}/{run}".encode()).hexdigest()[:16]


def lookup_tool() -> Tool:
    """The one tool: takes whatever arguments a recorded call carries, so valid calls succeed."""
    schema = {"type": "object", "additionalProperties": True}
    return Tool.from_schema(TOOL_NAME, "Look something up.", schema, lambda arguments: f"found: {sorted(arguments)}")


def response_limits() -> dict[str, Any]:
    """Small response limits (``tether.providers.http.body.ResponseLimits``) where the providers take them: far
    above any recorded answer (200 KB at most, events of 7 KB), far below what the server oversizes to."""
    try:
        body = importlib.import_module("tether.providers.http.body")
    except ImportError:
        return {}
    limits = body.ResponseLimits(max_body_bytes=256 * 1024, max_event_bytes=64 * 1024, max_stream_bytes=512 * 1024)
    return {"response_limits": limits}


def provider_for(family: str, streamed: bool, base: str, key: str) -> Provider:
    """A provider of ``family`` whose API lives at ``base`` (the run's prefix on the chaos server)."""
    options: dict[str, Any] = {"api_key": key, "stream": streamed, "retry": RETRY, **response_limits()}
    if family == "openai_chat":
        return OpenAIChatProvider("gpt-4o-mini", base_url=f"{base}/v1", **options)
    if family == "openai_responses":
        return OpenAIResponsesProvider("gpt-4o-mini", base_url=f"{base}/v1", **options)
    if family == "anthropic":
        return AnthropicProvider("claude-sonnet-4-5", base_url=f"{base}/v1", **options)
    return GeminiProvider("gemini-2.5-flash", base_url=f"{base}/v1beta", **options)


@dataclass(slots=True)
class Outcome:
    """What one run came to, kept small (the runs themselves are dropped as they end)."""

    run: int
    family: str
    streamed: bool
    stop: str = ""
    code: str | None = None
    """``result.error.code``, or the error's type name when it is not a ``TetherError``."""
    detail: str = ""
    tool_results: int = 0
    """Tool calls that ran and succeeded."""
    largest: int = 0
    """Characters of the largest message the run kept."""
    problems: list[tuple[str, str, str]] = field(default_factory=list)
    """``(part of the guarantee, cause, detail)``."""

    @property
    def label(self) -> str:
        return self.stop + (f"/{self.code}" if self.code else "")

    def problem(self, part: str, cause: str, detail: str = "") -> None:
        self.problems.append((part, cause, detail[-1500:]))


def cause_of(error: BaseException) -> str:
    """Where an exception began (the first of its chain) and, if another ended it, where that one was raised:
    ``TypeError at accumulator.py:build -> AssertionError at engine.py:_failed_turn``."""
    chain = [error]
    while (earlier := chain[-1].__cause__ or chain[-1].__context__) is not None and earlier not in chain:
        chain.append(earlier)

    def where(exception: BaseException) -> str:
        frames = traceback.extract_tb(exception.__traceback__)
        return f"{type(exception).__name__} at {Path(frames[-1].filename).name}:{frames[-1].name}" if frames else ""

    first, last = where(chain[-1]), where(error)
    return first if first == last else f"{first} -> {last}"


async def one_run(url: str, seed: int, run: int) -> Outcome:
    family, streamed = plan(run)
    key = key_for(seed, run)
    outcome = Outcome(run, family, streamed)
    agent = Agent(provider_for(family, streamed, f"{url}/chaos/{run}", key), tools=[lookup_tool()], limits=LIMITS)
    events: list[RunEvent] = []
    try:
        async for event in agent.stream(PROMPT):
            events.append(event)
    except Exception as error:  # noqa: BLE001 - the very thing under test: a run must never raise
        outcome.problem("result", f"stream() raised {cause_of(error)}", traceback.format_exc())
    last = events[-1] if events else None
    if not isinstance(last, RunCompleted):
        outcome.problem("result", "no RunCompleted", f"last event: {last!r}"[:300])
        return outcome
    check_result(outcome, last.result)
    check_events(outcome, events, last.result)
    check_secrets(outcome, events, last.result)
    return outcome


def check_result(outcome: Outcome, result: RunResult) -> None:
    """Typed: a stop reason this workload can give, and any error a ``TetherError`` with a stable code."""
    error = result.error
    outcome.stop, outcome.detail = str(result.stop_reason), result.detail[:300]
    outcome.code = error.code if isinstance(error, TetherError) else (type(error).__name__ if error else None)
    if result.stop_reason in NEVER:
        outcome.problem("typed", f"stop reason {result.stop_reason}", result.detail)
    if error is not None and not isinstance(error, TetherError):
        outcome.problem("typed", f"untyped: {cause_of(error)}", "".join(traceback.format_exception(error)))
    elif isinstance(error, TetherError) and error.code not in CODES:
        outcome.problem("typed", f"code {error.code!r} is not in ErrorCode", str(error))
    if result.stop_reason in (StopReason.ERROR, StopReason.TIMEOUT) and error is None:
        outcome.problem("typed", f"stopped with {result.stop_reason} and no error", result.detail)
    for name, text in (("detail", result.detail), ("text", result.text), ("error", str(error or ""))):
        if TRACEBACK.search(text):
            outcome.problem("typed", f"a traceback in result.{name}", text)


def check_events(outcome: Outcome, events: list[RunEvent], result: RunResult) -> None:
    """ARCHITECTURE.md §4: the order of events, one start and one end, and a valid transcript."""
    try:
        check_order(events)
    except AssertionError as error:
        outcome.problem("events", "events out of order", str(error))
    starts = sum(type(event) is RunStarted for event in events)
    ends = sum(type(event) is RunCompleted for event in events)
    if starts != 1 or ends != 1:
        outcome.problem("events", "not one RunStarted and one RunCompleted", f"{starts} and {ends}")
    if problems := transcript_problems(result.messages):
        outcome.problem("events", "invalid transcript", repr(problems))
    outcome.tool_results = sum(isinstance(e, ToolResultReceived) and not e.result.is_error for e in events)
    outcome.largest = max((len(repr(message)) for message in result.messages), default=0)


def _texts_of(error: BaseException | None) -> Iterable[str]:
    """Everything an error says, its causes included."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield str(error)
        yield repr(error)
        yield repr(getattr(error, "details", ""))
        yield str(getattr(error, "provider_message", ""))
        error = error.__cause__ or error.__context__


def check_secrets(outcome: Outcome, events: list[RunEvent], result: RunResult) -> None:
    """The key appears in no event (the result included) and nowhere in the error and its causes."""
    where = [type(event).__name__ for event in events if KEY_MARK in repr(event)]
    where += ["the error"] if any(KEY_MARK in text for text in _texts_of(result.error)) else []
    if where:
        outcome.problem("secrets", "the key in what the run returned", f"in {', '.join(dict.fromkeys(where))}")


def rss_bytes() -> int:
    """The resident set size of this process now (0 where /proc is not there)."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


@dataclass(slots=True)
class Chaos:
    """The workload's outcomes, what the server served and received, and the memory it took."""

    seed: int
    outcomes: list[Outcome]
    served: dict[int, list[dict[str, Any]]]
    elsewhere: list[dict[str, Any]]
    server_errors: list[str]
    loop_errors: list[str]
    """What reached the event loop's exception handler while the runs went on: nothing should."""
    rss_start: int
    rss_peak: int

    def __repr__(self) -> str:
        return f"Chaos(seed={self.seed}, {len(self.outcomes)} runs)"

    def faults_of(self, run: int) -> str:
        return ", ".join(f"{e['fault']}({e['variant']})" if e["variant"] else e["fault"] for e in self.served[run])

    def describe(self, outcome: Outcome) -> str:
        mode = "streamed" if outcome.streamed else "whole"
        return (
            f"seed={self.seed} run={outcome.run} {outcome.family} {mode} -> {outcome.label}; "
            f"faults: [{self.faults_of(outcome.run) if outcome.run in self.served else ''}]"
        )


async def run_workload(
    seed: int, runs: Iterable[int], concurrency: int, on_outcome: Callable[[Outcome], None] | None = None
) -> Chaos:
    """Every run of ``runs`` against a fresh chaos server, ``concurrency`` at a time."""
    queue = list(runs)[::-1]
    outcomes: list[Outcome] = []
    rss_start = rss_peak = rss_bytes()

    async def worker(url: str) -> None:
        nonlocal rss_peak
        while queue:
            outcome = await one_run(url, seed, queue.pop())
            outcomes.append(outcome)
            rss_peak = max(rss_peak, rss_bytes())
            if on_outcome is not None:
                on_outcome(outcome)

    loop_errors: list[str] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: loop_errors.append(_context(context)))
    async with running(seed) as (url, _elsewhere, report):
        async with asyncio.TaskGroup() as group:
            for _ in range(concurrency):
                group.create_task(worker(url))
        served = await report()
    by_run = {int(run): entries for run, entries in served["served"].items()}
    outcomes.sort(key=lambda outcome: outcome.run)
    return Chaos(seed, outcomes, by_run, served["elsewhere"], served["errors"], loop_errors, rss_start, rss_peak)


def _context(context: dict[str, Any]) -> str:
    """What the event loop reported: an exception no one retrieved, a callback that raised, ..."""
    error = context.get("exception")
    where = f": {cause_of(error)}: {error}" if isinstance(error, BaseException) else ""
    return f"{context.get('message', '')}{where}"


# --- the guarantee ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chaos() -> Chaos:
    return asyncio.run(run_workload(SEED, range(RUNS), CONCURRENCY))


def failures(chaos: Chaos, part: str, *, detailed: int = 3, listed: int = RUNS) -> str:
    """The runs that broke ``part`` of the guarantee, grouped by cause with a count: the first ``detailed``
    with the end of their detail, then up to ``listed`` as one line each (seed, run, family, faults)."""
    by_cause: dict[str, list[tuple[Outcome, str]]] = defaultdict(list)
    for outcome in chaos.outcomes:
        for problem_part, cause, detail in outcome.problems:
            if problem_part == part:
                by_cause[cause].append((outcome, detail))
    lines = []
    for cause, cases in sorted(by_cause.items(), key=lambda item: -len(item[1])):
        lines.append(f"{len(cases)} runs: {cause}")
        for number, (outcome, detail) in enumerate(cases[:listed]):
            lines.append(f"    {chaos.describe(outcome)}")
            if number < detailed:
                lines += [f"        {line}" for line in detail.splitlines()[-3:]]
    return "\n".join(lines)


def test_every_run_ends_with_one_result(chaos: Chaos) -> None:
    assert len(chaos.outcomes) == RUNS
    assert sorted(outcome.run for outcome in chaos.outcomes) == list(range(RUNS))
    if broken := failures(chaos, "result"):
        pytest.fail(broken, pytrace=False)


def test_every_failure_is_typed_with_a_stable_code(chaos: Chaos) -> None:
    if broken := failures(chaos, "typed"):
        pytest.fail(broken, pytrace=False)


def test_every_run_keeps_the_event_contract(chaos: Chaos) -> None:
    if broken := failures(chaos, "events"):
        pytest.fail(broken, pytrace=False)


def test_the_key_never_leaves_for_another_origin(chaos: Chaos) -> None:
    """A redirect must not be followed: the server it points to receives nothing, least of all the key."""
    leaks = [record for record in chaos.elsewhere if KEY_MARK in repr(record)]
    lines = [f"{len(chaos.elsewhere)} requests reached the redirect target, {len(leaks)} of them with the key"]
    for record in chaos.elsewhere:
        run = int(record["path"].split("/")[2])
        carried = sorted(name for name, value in record["headers"].items() if KEY_MARK in value)
        body = f", {len(record['body'])} characters of body" if record["body"] else ""
        lines.append(f"    seed={chaos.seed} run={run}: {record['method']} {record['path']}, key in {carried}{body}")
    if chaos.elsewhere:
        pytest.fail("\n".join(lines), pytrace=False)


def test_the_key_never_appears_in_what_a_run_returns(chaos: Chaos) -> None:
    if broken := failures(chaos, "secrets"):
        pytest.fail(broken, pytrace=False)


def test_nothing_escapes_to_the_event_loop(chaos: Chaos) -> None:
    """No task, callback or connection of a run fails unseen (an exception never retrieved, a callback that
    raised): every failure is in a result."""
    if chaos.loop_errors:
        counts = Counter(chaos.loop_errors)
        pytest.fail("\n".join(f"{count} times: {text}" for text, count in counts.most_common(10)), pytrace=False)


def test_no_oversized_answer_is_accepted(chaos: Chaos) -> None:
    """An answer, event or stream past the size limits is refused, never kept in full: a run's largest
    message stays below the size the server oversizes to."""
    accepted = [outcome for outcome in chaos.outcomes if outcome.largest > OVERSIZE // 2]
    lines = [f"{len(accepted)} runs kept a message of more than {OVERSIZE // 2} characters"]
    lines += [f"    {chaos.describe(outcome)}: {outcome.largest} characters" for outcome in accepted[:5]]
    if accepted:
        pytest.fail("\n".join(lines), pytrace=False)


def expected_codes(entry: dict[str, Any]) -> frozenset[str] | None:
    """The codes a run may fail with when ``entry`` was the last answer it got; ``None``: not judged."""
    fault, variant = entry["fault"], entry["variant"]
    if fault in ("wrong_type", "wrong_event_type") and entry["streamed"]:
        # A broken event may be the one that closes the stream (or says how it finished): the stream then
        # looks cut short, which a client cannot tell from a connection dropped between two events.
        return frozenset({"invalid_response", "transport"})
    if fault in ("not_json", "truncated_json", "wrong_type", "wrong_event_type", "invalid_utf8", "bom", "empty_body"):
        return frozenset({"invalid_response"})
    if fault in ("oversized_body", "oversized_line"):
        return frozenset({"invalid_response"})
    if fault == "stall":
        return frozenset({"timeout"})
    if fault == "cut_stream":
        return frozenset({"transport", "invalid_response"})
    if fault == "error_event":
        return PROVIDER_CODES | {"invalid_response"}
    if fault == "redirect":
        return PROVIDER_CODES | {"transport", "invalid_response"}
    if fault == "error_status":
        status, body, kind = variant.split()
        codes = {code_for_status(int(status))} | ({"context_overflow"} if status in ("400", "413", "422") else set())
        if body in ("plain", "echo_key", "wrong_type"):  # the body names the error too: either may be believed
            codes.add(CODE_FOR_KIND[kind])
        return frozenset(codes)
    return None


CODE_FOR_KIND = {
    **dict.fromkeys(
        ("rate_limit_exceeded", "insufficient_quota", "rate_limit_error", "RESOURCE_EXHAUSTED"), "rate_limited"
    ),
    **dict.fromkeys(("invalid_api_key", "authentication_error", "PERMISSION_DENIED"), "auth_failed"),
    **dict.fromkeys(
        ("server_error", "overloaded_error", "api_error", "UNAVAILABLE", "INTERNAL"), "provider_unavailable"
    ),
    "context_length_exceeded": "context_overflow",
    "INVALID_ARGUMENT": "bad_request",
}
"""The code an error body's own name for the error stands for."""


def code_for_status(status: int) -> str:
    """The code errors.py documents for an HTTP status."""
    if status in (401, 403):
        return "auth_failed"
    if status == 408:
        return "timeout"
    if status == 429:
        return "rate_limited"
    return "provider_unavailable" if status >= 500 else "bad_request"


def misnamed(chaos: Chaos, *, listed: int = RUNS) -> str:
    """The failed runs whose code does not name the fault of the last answer they got, grouped by cause with
    a count, the first with its detail, up to ``listed`` as one line each ("" when there is none). Any answer
    may also come too late on a busy machine, so ``timeout`` is accepted for every fault (judging otherwise
    would judge time)."""
    by_cause: dict[str, list[Outcome]] = defaultdict(list)
    for outcome in chaos.outcomes:
        if outcome.stop not in FAILED or outcome.run not in chaos.served:
            continue
        last = chaos.served[outcome.run][-1]
        allowed = expected_codes(last)
        code = outcome.code or outcome.stop
        if allowed is not None and code not in allowed | {"timeout"}:
            by_cause[f"{last['fault']} ended as {code} (expected {' or '.join(sorted(allowed))})"].append(outcome)
    lines = []
    for cause, cases in sorted(by_cause.items(), key=lambda item: -len(item[1])):
        lines += [f"{len(cases)} runs: {cause}", f"        {cases[0].detail}"]
        lines += [f"    {chaos.describe(outcome)}" for outcome in cases[:listed]]
    return "\n".join(lines)


def test_a_failure_names_its_cause(chaos: Chaos) -> None:
    """A run that failed did so with the code of the last answer it got: a stall is a timeout, a malformed
    body is invalid_response, an HTTP status has its documented code."""
    if report := misnamed(chaos):
        pytest.fail(report, pytrace=False)


def test_the_server_was_hostile_in_every_way(chaos: Chaos) -> None:
    """The workload is what it claims: every fault met every family, streamed and whole, without the server
    failing itself; and valid answers did take runs through their tool to an answer."""
    assert not chaos.server_errors, "\n".join(chaos.server_errors[:3])
    served = {(e["family"], e["streamed"], e["fault"]) for entries in chaos.served.values() for e in entries}
    missing = {(f, s, fault) for f in FAMILIES for s in (True, False) for fault in FAULTS} - served
    assert not missing, f"never served: {sorted(missing)}"
    assert any(outcome.stop == StopReason.COMPLETE for outcome in chaos.outcomes)
    assert sum(outcome.tool_results for outcome in chaos.outcomes) > 0


# --- the chaos server's own promises ------------------------------------------------------------------------


@functools.cache
def recorded() -> Material:
    """The server's material, loaded once (a plain function, not a fixture: hypothesis would print it)."""
    return Material.load()


def test_the_faults_of_a_run_depend_on_the_seed_and_the_run_alone() -> None:
    """Replaying a run alone meets the faults it met among 2,000 others; another seed meets others."""
    first = [choose_fault(die(SEED, 17, n)) for n in range(1, 40)]
    random.seed(1)  # the global generator plays no part
    assert [choose_fault(die(SEED, 17, n)) for n in range(1, 40)] == first
    assert [choose_fault(die(SEED + 1, 17, n)) for n in range(1, 40)] != first


@settings(max_examples=80, deadline=None)
@given(family=st.sampled_from(FAMILIES), seed=st.integers(0, 2**32 - 1), streamed=st.booleans())
def test_a_wrongly_typed_answer_is_the_recorded_one_with_one_field_retyped(
    family: str, seed: int, streamed: bool
) -> None:
    material = recorded()
    rng = random.Random(seed)
    if streamed:
        frames = [frame for stream in material.streams[family] for frame in stream if frame.data.startswith("{")]
        document = rng.choice(frames).json()
    else:
        document = json.loads(rng.choice(material.whole[family]))
    changed, path = retype(document, rng)
    assert path, "a recorded answer always has fields"
    assert type(get_path(changed, path)) is not type(get_path(document, path))
    get_path(changed, path[:-1])[path[-1]] = get_path(document, path)
    assert changed == document, "nothing but the one field changed"


@settings(max_examples=40, deadline=None)
@given(family=st.sampled_from(FAMILIES), seed=st.integers(0, 2**32 - 1))
def test_a_body_with_bad_bytes_is_otherwise_the_recorded_one(family: str, seed: int) -> None:
    material = recorded()
    rng = random.Random(seed)
    body = rng.choice(material.whole[family])
    broken = insert_bad_utf8(body, rng)
    with pytest.raises(UnicodeDecodeError):
        broken.decode()
    decoded = json.loads(broken.decode(errors="replace"))  # the bad bytes are inside a string (a key or a value)
    assert len(json_paths(decoded)) == len(json_paths(json.loads(body))), "only the encoding is broken"


def test_every_recorded_tool_call_is_renamed_to_the_one_tool() -> None:
    """Valid answers call the client's tool, so runs go on past their first turn."""
    material = recorded()
    calls = 0
    for family in FAMILIES:
        for body in material.whole[family]:
            for name in re.findall(r'"name": "([^"]+)"', body.decode()):
                calls += name == TOOL_NAME
    assert calls > 10
