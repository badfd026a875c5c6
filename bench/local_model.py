"""The embedded model's speed and the loop's cost around it, on the README's quick start.

Run: PYTHONPATH=src .venv/bin/python bench/local_model.py [--runs 5] [--json local.json]

``TETHER_BENCH_LOOP=uvloop`` runs it on uvloop, as the ``tether`` command runs when ``tether[speed]`` is installed
(``cli/eventloop.py``), instead of asyncio's own loop: the event-loop thread's CPU per step is mostly the loop's own
wake-up for each token the model's thread hands over.

The agent is the one ``examples/quickstart.py`` builds on ``local:smollm2`` (its ``add`` tool, "Be brief.",
five turns) asked "What is 17+25? Use the add tool.". What it prints:

- load: importing llama.cpp and loading the model, once per process;
- per turn of a run (cold: the first run after the load; warm: the median of the others): time to first token
  after the request, tokens per second after the first, prompt tokens evaluated and reused from the context;
- direct: the same requests, replayed in the same order by calling llama-cpp-python's
  ``create_chat_completion`` with the options the provider built (same prompt tokens, same grammar, same
  settings), so the model's own time and the time through tether can be compared turn by turn;
- the loop's overhead per step: the step's wall time outside the model call (tool, events, next request), the
  event-loop thread's CPU per step, and the provider call's time through tether less the direct call's;
- grammar-first: the same direct replay with llama-cpp-python's own sampler chain, which applies the action
  schema's grammar to the whole vocabulary before every token (tether checks the chosen token only, see
  ``providers/local/sampling.py``), and how many of tether's tokens the grammar rejected (sampled again under it);
- the prompt cache on disk: the model loaded again (as a new process loads it) and a run made, whose first call
  starts from the context the cold run's first call left in the cache (the script's cache is a new empty folder);
- the prompt cache in memory: turn 2's time to first token when the context still holds turn 1 (reused) and when the
  model was reset before it (everything evaluated again).

Wall time on a shared machine is noisy; the tether and direct runs alternate so that both see the same load.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

import itertools
import shutil
import tempfile

from quickstart import add
from workload import event_loop_runner

from tether import Agent, Limits
from tether.events import LlmEvent, RunCompleted, StreamEnd, TextDelta, TurnStarted
from tether.providers.base import Request
from tether.providers.local import provider as local
from tether.providers.local.sampling import GrammarLastSampler

PROMPT = "What is 17+25? Use the add tool."


@dataclass
class Call:
    """One model call: when it was asked for, its first and last token, and its prompt accounting."""

    request: Request
    started: float
    first: float | None = None
    last: float | None = None
    ended: float = 0.0
    tokens: int = 0
    evaluated: int = 0
    reused: int = 0

    @property
    def ttft_ms(self) -> float:
        return ((self.first or self.ended) - self.started) * 1000

    @property
    def tokens_per_s(self) -> float:
        span = (self.last or self.ended) - (self.first or self.ended)
        return (self.tokens - 1) / span if self.tokens > 1 and span > 0 else 0.0

    @property
    def total_ms(self) -> float:
        return (self.ended - self.started) * 1000


@dataclass
class RunFigures:
    calls: list[Call] = field(default_factory=list)
    steps_ms: list[float] = field(default_factory=list)
    loop_cpu_ms: float = 0.0


class Timed:
    """The local provider, with each call's request and token times recorded as the loop receives them."""

    def __init__(self, inner: local.LocalProvider) -> None:
        self.inner = inner
        self.info = inner.info
        self.calls: list[Call] = []

    async def stream(self, request: Request) -> AsyncIterator[LlmEvent]:
        call = Call(request, time.perf_counter())
        self.calls.append(call)
        async for event in self.inner.stream(request):
            if isinstance(event, TextDelta):
                call.last = time.perf_counter()
                call.first = call.first or call.last
                call.tokens += 1
            elif isinstance(event, StreamEnd):
                call.ended = time.perf_counter()
                call.evaluated, call.reused = event.usage.input_tokens, event.usage.cache_read_tokens
            yield event


async def tether_run(provider: local.LocalProvider) -> RunFigures:
    timed = Timed(provider)
    agent = Agent(timed, tools=[add], system="Be brief.", limits=Limits(max_turns=5))  # type: ignore[arg-type]
    figures = RunFigures()
    marks: list[float] = []
    cpu = time.thread_time()
    async for event in agent.stream(PROMPT):
        if isinstance(event, TurnStarted | RunCompleted):
            marks.append(time.perf_counter())
        if isinstance(event, RunCompleted):
            assert "42" in event.result.text, event.result.text
    figures.loop_cpu_ms = (time.thread_time() - cpu) * 1000  # the event loop's thread only: the model runs on a worker
    figures.calls = timed.calls
    figures.steps_ms = [(b - a) * 1000 for a, b in itertools.pairwise(marks)]
    return figures


GRAMMAR_CHECKS = [0, 0]
"""Over the direct replays: tokens sampled, and of those, how many the grammar rejected (sampled again under it)."""


def direct_call(llama: Any, options: dict[str, Any]) -> Call:
    """One call straight to llama-cpp-python, streamed and consumed in this thread."""
    call = Call(Request(()), time.perf_counter())
    for chunk in llama.create_chat_completion(**options):
        if chunk["choices"][0]["delta"].get("content"):
            call.last = time.perf_counter()
            call.first = call.first or call.last
            call.tokens += 1
    call.ended = time.perf_counter()
    call.evaluated, call.reused = llama.prompt_evaluated, llama.prompt_reused
    if isinstance(llama._sampler, GrammarLastSampler):
        GRAMMAR_CHECKS[0] += llama._sampler.sampled
        GRAMMAR_CHECKS[1] += llama._sampler.rejected
    return call


def direct_run(
    provider: local.LocalProvider,
    requests: list[Request],
    *,
    reset_before: int | None = None,
    grammar_first: bool = False,
) -> list[Call]:
    """The run's requests replayed in order; ``reset_before``: empty the model's context before that call;
    ``grammar_first``: with llama-cpp-python's own sampler chain (the grammar asked about every token)."""
    from llama_cpp import Llama

    loaded = provider.loaded()
    calls = []
    with loaded.lock:
        if grammar_first:  # the instance attribute hides CountingLlama's grammar-last sampler for these calls
            loaded.llama._init_sampler = functools.partial(Llama._init_sampler, loaded.llama)
        try:
            for index, request in enumerate(requests):
                if index == reset_before:
                    loaded.llama.reset()
                calls.append(direct_call(loaded.llama, provider._options(request)))
        finally:
            vars(loaded.llama).pop("_init_sampler", None)
    return calls


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def by_turn(runs: list[list[Call]], metric: Callable[[Call], float]) -> list[float]:
    turns = min(len(calls) for calls in runs)
    return [median([metric(calls[turn]) for calls in runs]) for turn in range(turns)]


def table(title: str, runs: list[list[Call]]) -> list[str]:
    lines = [f"{title}:", "  turn  first token ms  tokens/s  tokens  total ms  prompt evaluated / reused"]
    turns = min(len(calls) for calls in runs)
    for turn in range(turns):
        calls = [run[turn] for run in runs]
        lines.append(
            f"  {turn + 1:>4}  {median([c.ttft_ms for c in calls]):>14.1f}"
            f"  {median([c.tokens_per_s for c in calls]):>8.1f}"
            f"  {median([c.tokens for c in calls]):>6.0f}  {median([c.total_ms for c in calls]):>8.1f}"
            f"  {median([c.evaluated for c in calls]):>.0f} / {median([c.reused for c in calls]):.0f}"
        )
    return lines


T = TypeVar("T")


async def on_model_thread(provider: local.LocalProvider, function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` on the thread the provider runs the model's generations on: llama.cpp's threads belong
    to the thread that calls it (``local._Loaded``), so a replay elsewhere would not be the same computation."""
    return await asyncio.get_running_loop().run_in_executor(provider.loaded().worker, function, *args)


async def main(runs: int) -> dict[str, Any]:
    cache = Path(tempfile.mkdtemp(prefix="tether-bench-prompts-"))  # an empty prompt cache: a truly cold start
    provider = local.LocalProvider(prompt_cache=cache)
    start = time.perf_counter()
    await asyncio.to_thread(provider.loaded)
    load_ms = (time.perf_counter() - start) * 1000
    cold = await tether_run(provider)
    requests = [call.request for call in cold.calls]
    tether_runs: list[RunFigures] = []
    direct_runs: list[list[Call]] = []
    stock_runs: list[list[Call]] = []
    for _ in range(runs):  # alternate, so all see the same load; each starts from the other's final context
        tether_runs.append(await tether_run(provider))
        direct_runs.append(await on_model_thread(provider, direct_run, provider, requests))
        stock_runs.append(
            await on_model_thread(provider, functools.partial(direct_run, grammar_first=True), provider, requests)
        )
    warm = [figures.calls for figures in tether_runs]
    reuse, reset = [], []
    for _ in range(runs):
        reuse.append((await on_model_thread(provider, direct_run, provider, requests[:2]))[1])
        after_reset = functools.partial(direct_run, reset_before=1)
        reset.append((await on_model_thread(provider, after_reset, provider, requests[:2]))[1])

    local._close_all()  # as a new process would: the model loaded again, its first call from the prompt cache
    start = time.perf_counter()
    await asyncio.to_thread(provider.loaded)
    reload_ms = (time.perf_counter() - start) * 1000
    reloaded = await tether_run(provider)
    shutil.rmtree(cache, ignore_errors=True)

    steps = [step for figures in tether_runs for step in figures.steps_ms]
    model = [call.total_ms for figures in tether_runs for call in figures.calls]
    outside = [
        step - call.total_ms
        for figures in tether_runs
        for step, call in zip(figures.steps_ms, figures.calls, strict=False)
    ]
    loop_cpu = [figures.loop_cpu_ms / len(figures.calls) for figures in tether_runs]
    through = by_turn(warm, lambda c: c.total_ms)
    direct = by_turn(direct_runs, lambda c: c.total_ms)
    figures = {
        "threads": threads_in_use(provider),
        "load_ms": load_ms,
        "cold": [vars_of(call) for call in cold.calls],
        "reload_ms": reload_ms,
        "reloaded": [vars_of(call) for call in reloaded.calls],
        "warm_ttft_ms": by_turn(warm, lambda c: c.ttft_ms),
        "warm_tokens_per_s": by_turn(warm, lambda c: c.tokens_per_s),
        "direct_ttft_ms": by_turn(direct_runs, lambda c: c.ttft_ms),
        "direct_tokens_per_s": by_turn(direct_runs, lambda c: c.tokens_per_s),
        "grammar_first_ttft_ms": by_turn(stock_runs, lambda c: c.ttft_ms),
        "grammar_first_tokens_per_s": by_turn(stock_runs, lambda c: c.tokens_per_s),
        "grammar_checks_sampled_rejected": list(GRAMMAR_CHECKS),
        "tether_call_ms": through,
        "direct_call_ms": direct,
        "step_ms": median(steps),
        "model_ms": median(model),
        "outside_model_ms": median(outside),
        "loop_cpu_ms_per_step": median(loop_cpu),
        "turn2_ttft_reused_ms": median([c.ttft_ms for c in reuse]),
        "turn2_ttft_reset_ms": median([c.ttft_ms for c in reset]),
        "turn2_evaluated_reused_reset": [median([c.evaluated for c in reuse]), median([c.evaluated for c in reset])],
    }
    report(figures, cold.calls, warm, direct_runs, stock_runs, reloaded.calls)
    return figures


def threads_in_use(provider: local.LocalProvider) -> list[int]:
    """The threads llama.cpp computes with now (tokens, prompt): chosen before each generation unless fixed."""
    import llama_cpp

    context = provider.loaded().llama.ctx
    return [llama_cpp.llama_n_threads(context), llama_cpp.llama_n_threads_batch(context)]


def vars_of(call: Call) -> dict[str, float]:
    return {"ttft_ms": call.ttft_ms, "tokens_per_s": call.tokens_per_s, "total_ms": call.total_ms,
            "tokens": call.tokens, "evaluated": call.evaluated, "reused": call.reused}  # fmt: skip


def report(
    figures: dict[str, Any],
    cold: list[Call],
    warm: list[list[Call]],
    direct: list[list[Call]],
    stock: list[list[Call]],
    reloaded: list[Call],
) -> None:
    threads = figures["threads"]
    print(
        f"model loaded in {figures['load_ms']:.0f} ms (llama.cpp import included); "
        f"threads at the end {threads[0]} / batch {threads[1]}"
    )
    for line in [*table("cold run (first after the load)", [cold]), *table("warm runs, through tether", warm)]:
        print(line)
    for line in table("the same requests, llama-cpp-python called directly", direct):
        print(line)
    for line in table("the same, with llama-cpp-python's grammar-first sampling", stock):
        print(line)
    for line in table(f"loaded again ({figures['reload_ms']:.0f} ms), first run from the prompt cache", [reloaded]):
        print(line)
    sampled, rejected = figures["grammar_checks_sampled_rejected"]
    print(f"grammar-last sampling (direct replays): {rejected} of {sampled} tokens rejected and sampled again")
    model, outside, cpu = figures["model_ms"], figures["outside_model_ms"], figures["loop_cpu_ms_per_step"]
    differences = [t - d for t, d in zip(figures["tether_call_ms"], figures["direct_call_ms"], strict=False)]
    print(
        f"per step (median): {figures['step_ms']:.1f} ms, of which the model call {model:.1f} ms; outside it "
        f"{outside:.2f} ms ({outside / model:.2%} of the model's time); event-loop thread CPU {cpu:.2f} ms "
        f"({cpu / model:.2%})"
    )
    print("model call through tether - direct, per turn (ms): " + ", ".join(f"{d:+.1f}" for d in differences))
    evaluated = figures["turn2_evaluated_reused_reset"]
    print(
        f"turn 2 first token: {figures['turn2_ttft_reused_ms']:.1f} ms with turn 1 reused ({evaluated[0]:.0f} tokens "
        f"evaluated), {figures['turn2_ttft_reset_ms']:.1f} ms after a reset ({evaluated[1]:.0f} evaluated)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="warm runs (and direct replays) to take the median of")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    result = event_loop_runner()(main(args.runs))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
