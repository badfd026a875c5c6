"""What a durable run costs: a step of a run made a DBOS workflow, on SQLite and on PostgreSQL, against a plain run.

Run: .venv/bin/python bench/durable.py [--runs N] [--cpu-runs N] [--repeat N] [--postgres URL]   (needs valgrind)

The workload is ``run.py``'s ``sequential`` one: ``tools-5`` against ``bench/mock_server.py``, five turns with
one ``add`` call each and a final answer, six steps a run (a step is one model request and the tool call it
asks for). One client process per database runs it both ways: ``plain`` (``Agent.run``), before DBOS is
imported, then ``durable`` (``DurableAgent(agent).run``: a workflow whose provider calls and tool calls are
DBOS steps). The databases: a SQLite file in a temporary folder, and a fresh PostgreSQL database (made on the
server at ``--postgres``, default ``TETHER_BENCH_POSTGRES`` or ``postgresql://postgres@127.0.0.1:5432/postgres``,
dropped after); with no server reachable, the PostgreSQL rows are skipped and the reason printed.

Between the two the client measures what is paid once: importing DBOS (``tether.durable``'s first use),
making the ``DurableAgent`` (registering its workflow), ``launch()`` on the empty database (DBOS makes its
tables) and the first durable run (less the median durable run); after them, what DBOS's own threads spend
in a second when no run is under way. The client marks each of these, the start and end of each run, each
``TurnStarted`` and the ``RunCompleted``; a run's cost is divided by its six steps, and is also split into
its start (to the first turn), its middle steps (turn to turn: a model call and a tool call), the last
(the final answer's call) and the result (from ``RunCompleted`` to ``run()``'s return: the workflow's end and
the result read back from the database).

The figure of record is instructions: one client under ``valgrind --tool=callgrind --dump-before=getppid``
(each mark calls ``os.getppid()``, so each stretch between two marks is its own dump; ``PYTHONHASHSEED=0``),
``--runs`` runs of each kind; costs are medians over the runs. They count the client process only, all its
threads (DBOS's own among them): the database's work is not in them (PostgreSQL's processes, SQLite's waits
for the disk), nor is the mock server's. CPU time (user + system of the client, pinned to core 0, the mock
server on core 1) and wall time are the secondary figures, over ``--repeat`` processes of ``--cpu-runs`` runs
each; wall time is what a user waits, database included.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
KINDS = ("plain", "durable")
"""``plain``: ``Agent.run``, before DBOS is imported; ``durable``: ``DurableAgent.run``, after ``launch()``."""
STEPS = 6
"""Steps of a ``tools-5`` run: five tool-call turns and the final answer."""
ONCE = ("import", "register", "launch", "first_run", "idle")
IDLE_SECONDS = 5.0
"""How long the client waits, DBOS launched and no run under way, to see what DBOS does meanwhile."""
EXPECTED_END = "is done."


# --- the client process -----------------------------------------------------------------------------------------


class Marks:
    """Where the driver splits the client's time: (kind, what, turn, process CPU ns, wall ns) at each mark."""

    def __init__(self, dump: bool) -> None:
        self.dump = dump
        self.kind = ""
        self.marks: list[tuple[str, str, int, int, int]] = []

    def __call__(self, what: str, turn: int = 0) -> None:
        if self.dump:
            os.getppid()  # callgrind --dump-before=getppid: what was counted since the last mark goes to its own file
        self.marks.append((self.kind, what, turn, time.process_time_ns(), time.perf_counter_ns()))


async def client(database_url: str, base_url: str, runs: int) -> dict[str, Any]:
    """Run the workload ``runs`` times each way after the one-time marks; the marks, and the failed runs."""
    from tether import Agent, Limits, tool
    from tether.events import RunCompleted, RunEvent, TurnStarted
    from tether.providers.openai_chat import OpenAIChatProvider
    from tether.providers.registry import PROFILES

    @tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    provider = OpenAIChatProvider("tools-5", profile=PROFILES["openai-compatible"], base_url=base_url, stream=False)
    agent = Agent(provider, tools=[add], limits=Limits(max_turns=200, max_tool_calls=1000, request_timeout=600))
    mark = Marks(dump=os.environ.get("TETHER_BENCH_CALLGRIND") == "1")

    def on_event(event: RunEvent) -> None:
        kind = type(event)
        if kind is TurnStarted:
            mark("turn", event.turn)  # type: ignore[union-attr]
        elif kind is RunCompleted:
            mark("completed")

    async def one_run(kind: str) -> None:
        mark.kind = kind
        mark("start")
        ran = durable.run if kind == "durable" else agent.run
        texts.append((await ran("Add the numbers.", on_event=on_event)).text)
        mark("end")

    texts = [(await agent.run("Add the numbers.")).text]  # warm-up: imports, the connection, caches
    for _ in range(runs):
        await one_run("plain")
    mark.kind = "once"
    mark("begin")
    import tether.durable as tether_durable
    from tether.durable import dbos_engine

    mark("import")
    durable = dbos_engine.DurableAgent(agent, name="bench")
    mark("register")
    tether_durable.launch(system_database_url=database_url)
    mark("launch")
    texts.append((await durable.run("Add the numbers.")).text)
    mark("first_run")
    try:
        for _ in range(runs):
            await one_run("durable")
        mark.kind = "once"
        mark("idle_begin")
        await asyncio.sleep(IDLE_SECONDS)
        mark("idle")
    finally:
        tether_durable.shutdown()
    return {"marks": mark.marks, "failures": sum(not text.endswith(EXPECTED_END) for text in texts)}


# --- the driver -------------------------------------------------------------------------------------------------


def run_client(port: int, database_url: str, runs: int, callgrind: Path | None) -> dict[str, Any]:
    """One client process (under callgrind when ``callgrind`` names its output file); its figures, checked
    against the requests the mock server served."""
    from run import CLIENT_CORE, PYTHON, pinned, server_stats

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    wrap: list[str] = []
    if callgrind is not None:
        wrap = ["valgrind", "--tool=callgrind", "--dump-before=getppid", f"--callgrind-out-file={callgrind}"]
        env |= {"TETHER_BENCH_CALLGRIND": "1", "PYTHONHASHSEED": "0"}
    before = server_stats(port)["requests"]
    completed = subprocess.run(
        [*wrap, PYTHON, str(HERE / "durable.py"), "--client", database_url, f"http://127.0.0.1:{port}/v1", str(runs)],
        capture_output=True, text=True, check=False, cwd=HERE, env=env,
        preexec_fn=None if wrap else pinned(CLIENT_CORE),
    )  # fmt: skip
    if completed.returncode != 0:
        raise SystemExit(f"the client failed:\n{completed.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(completed.stdout)
    served = server_stats(port)["requests"] - before
    expected = (2 * runs + 2) * STEPS  # and the warm-up run and the first durable run
    if figures["failures"] or served != expected:
        raise SystemExit(f"{figures['failures']} failed runs, {served} requests served, {expected} expected")
    return figures


def instruction_costs(port: int, database_url: str, runs: int) -> tuple[list[Any], list[float]]:
    """The marks of one client under callgrind, and the instructions counted between each mark and the one
    before it."""
    with tempfile.TemporaryDirectory(prefix="tether-callgrind-") as scratch:
        out = Path(scratch) / "cg"
        marks = run_client(port, database_url, runs, out)["marks"]
        dumps = sorted(Path(scratch).glob("cg.*"), key=lambda path: int(path.suffix[1:]))
        if len(dumps) != len(marks):
            raise SystemExit(f"{len(dumps)} callgrind dumps for {len(marks)} marks")
        # dump k (from 1) holds what was counted until mark k - 1 (from 0): mark j's cost is in dump j + 1
        return marks, [0.0, *(_total(path) for path in dumps[1:])]


def _total(dump: Path) -> float:
    for line in dump.read_text().splitlines():
        if line.startswith("totals:"):
            return float(line.split()[1])
    raise SystemExit(f"no totals in {dump}")


PARTS = ("start", "middle", "last", "result", "run")
"""How a run is split (see :func:`split`)."""


def split(marks: Sequence[Sequence[Any]], costs: Sequence[float]) -> dict[str, dict[str, float]]:
    """Median costs by kind of run, ``costs[j]`` being what lies between mark ``j - 1`` and mark ``j``.

    Each kind has ``run`` (a whole run: from calling ``run()`` to its return), ``step`` (``run`` over the six
    steps), ``start`` (to the first turn), ``middle`` (the median of the five turn-to-turn stretches: a model
    call and a tool call each), ``last`` (the final answer's model call, to ``RunCompleted``), ``result`` (from
    ``RunCompleted`` to ``run()``'s return: for a durable run, the workflow's end and the result read back) and
    ``step_to_completed`` (``run`` less ``result``, over the six steps). ``once`` holds the one-time costs
    (``first_run`` less the median durable run) and ``idle``, what the process spends in a second with DBOS
    launched and no run under way."""
    runs: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
    once: dict[str, float] = {}
    for j, mark in enumerate(marks):
        kind, what = mark[0], mark[1]
        if kind == "once" and what in ONCE:
            once[what] = costs[j]
        elif what == "start":
            end = next(k for k in range(j + 1, len(marks)) if marks[k][1] == "end")
            parts = [costs[k] for k in range(j + 1, end + 1)]  # to turn 1, turn 1 to 2, ..., to RunCompleted, to end
            if [marks[k][1] for k in range(j + 1, end + 1)] != ["turn"] * STEPS + ["completed", "end"]:
                raise SystemExit(f"a {kind} run was marked {[marks[k][1:3] for k in range(j + 1, end + 1)]}")
            runs[kind].append({"start": parts[0], "middle": statistics.median(parts[1:STEPS]), "last": parts[STEPS],
                               "result": parts[STEPS + 1], "run": sum(parts)})  # fmt: skip
    figures = {kind: {part: statistics.median(run[part] for run in runs[kind]) for part in PARTS} for kind in KINDS}
    for kind in KINDS:
        figures[kind]["step"] = figures[kind]["run"] / STEPS
        figures[kind]["step_to_completed"] = statistics.median(run["run"] - run["result"] for run in runs[kind]) / STEPS
    once["first_run"] -= figures["durable"]["run"]
    once["idle"] /= IDLE_SECONDS
    figures["once"] = once
    return figures


@contextmanager
def database(backend: str, admin_url: str) -> Iterator[str]:
    """A workflow database no one else uses: a SQLite file in a temporary folder, or a fresh PostgreSQL
    database (dropped after)."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="tether-durable-bench-") as scratch:
            yield f"sqlite:///{Path(scratch) / 'runs.sqlite'}"
        return
    import psycopg

    name = f"tether_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield admin_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def postgres_problem(admin_url: str) -> str | None:
    """Why no PostgreSQL server answers at ``admin_url``, or None when one does."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install 'tether[durable]')"
    try:
        with psycopg.connect(admin_url, connect_timeout=3):
            return None
    except psycopg.Error as error:
        return f"no PostgreSQL server at {admin_url}: {' '.join(str(error).split())}"


def measure(backend: str, port: int, options: argparse.Namespace) -> dict[str, Any]:
    """One backend's figures: instructions (one client under callgrind), CPU ms and wall ms (each timed
    process's own medians, then the median over the processes)."""
    with database(backend, options.postgres) as url:
        marks, costs = instruction_costs(port, url, options.runs)
    counted = split(marks, costs)
    print(f"done: {backend}, callgrind", file=sys.stderr, flush=True)
    timed: dict[str, list[dict[str, dict[str, float]]]] = {"cpu": [], "wall": []}
    for _ in range(options.repeat):
        with database(backend, options.postgres) as url:
            marks = run_client(port, url, options.cpu_runs, None)["marks"]
        for unit, column in (("cpu", 3), ("wall", 4)):
            stretch = [0.0] + [(b[column] - a[column]) / 1e6 for a, b in itertools.pairwise(marks)]
            timed[unit].append(split(marks, stretch))
    print(f"done: {backend}, timed", file=sys.stderr, flush=True)
    return {"instructions": counted, **{unit: _median_of(processes) for unit, processes in timed.items()}}


def _median_of(processes: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    return {
        group: {part: statistics.median(p[group][part] for p in processes) for part in processes[0][group]}
        for group in processes[0]
    }


UNITS = {"instructions": ("instructions", ",.0f"), "cpu": ("CPU ms", ".3f"), "wall": ("wall ms", ".3f")}


def tables(results: dict[str, dict[str, Any]], skipped: dict[str, str]) -> str:
    """The per-step table, the table of a run's parts and the one-time table, as markdown."""
    rows = ["Cost per step (a run's cost over its 6 steps, median run; last column: the durable run up to its "
            "RunCompleted, without the result's way back)", "",
            "| database | unit | plain | durable | durable - plain | ratio | durable, to RunCompleted |",
            "|---|---|---|---|---|---|---|"]  # fmt: skip
    for backend, figures in results.items():
        for unit, (name, fmt) in UNITS.items():
            plain, durable = figures[unit]["plain"], figures[unit]["durable"]
            values = [plain["step"], durable["step"], durable["step"] - plain["step"]]
            ratio, to_completed = durable["step"] / plain["step"], durable["step_to_completed"]
            rows.append(f"| {backend} | {name} | " + " | ".join(f"{value:{fmt}}" for value in values) +
                        f" | {ratio:.1f}x | {to_completed:{fmt}} |")  # fmt: skip
    rows += [f"| {backend} | skipped: {reason} | | | | | |" for backend, reason in skipped.items()]
    rows += ["", "A run's parts (median run; middle step: the median turn-to-turn stretch, one model call and one "
             "tool call; last: the final answer's call; result: from RunCompleted to run()'s return)", "",
             "| database | unit | kind | start | middle step | last | result | whole run |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for backend, figures in results.items():
        for unit, (name, fmt) in UNITS.items():
            for kind in KINDS:
                cells = " | ".join(f"{figures[unit][kind][part]:{fmt}}" for part in PARTS)
                rows.append(f"| {backend} | {name} | {kind} | {cells} |")
    rows += ["", "Paid once per process (first run: less the median durable run), and what DBOS does in a second "
             "with no run under way", "",
             "| database | unit | import DBOS | DurableAgent() | launch() | first run | idle, per second |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for backend, figures in results.items():
        for unit, (name, fmt) in UNITS.items():
            once = figures[unit]["once"]  # a second of idle wall time is a second: no figure there
            cells = " | ".join("" if (unit, what) == ("wall", "idle") else f"{once[what]:{fmt}}" for what in ONCE)
            rows.append(f"| {backend} | {name} | {cells} |")
    return "\n".join(rows)


def main() -> None:
    from run import start_server

    options = _options()
    backends = ["sqlite", "postgres"]
    skipped: dict[str, str] = {}
    problem = postgres_problem(options.postgres)
    if problem is not None:
        print(f"skipping PostgreSQL: {problem}", file=sys.stderr, flush=True)
        skipped["postgres"] = problem
        backends.remove("postgres")
    server, port = start_server()
    try:
        results = {backend: measure(backend, port, options) for backend in backends}
    finally:
        server.terminate()
        server.wait()
    print(tables(results, skipped))
    if options.json:
        Path(options.json).write_text(json.dumps({"results": results, "skipped": skipped}, indent=1))


def _options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each kind under callgrind")
    parser.add_argument("--cpu-runs", type=int, default=20, help="runs of each kind in each timed process")
    parser.add_argument("--repeat", type=int, default=3, help="timed client processes per database")
    default_postgres = os.environ.get("TETHER_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--postgres", default=default_postgres, help="a PostgreSQL server's admin database URL")
    parser.add_argument("--json", help="also write the figures there")
    return parser.parse_args()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--client"]:
        db_url, chat_url, run_count = sys.argv[2:5]
        print(json.dumps(asyncio.run(client(db_url, chat_url, int(run_count)))))
    else:
        main()
