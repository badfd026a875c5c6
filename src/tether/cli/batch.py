"""``tether batch PROMPTS -o RESULTS``: every prompt of a JSON Lines file run as a durable run, the results
written as they finish, and a batch that was stopped (Ctrl-C, ``kill -9``, a reboot) taken up where it was.

Contract:

* Each item (:mod:`tether.cli.batch_files`) runs as a durable run of the agent ``agent.toml`` defines
  (``tether.durable``, on the database ``--db`` names: :mod:`tether.cli.runs_db`) under a workflow id derived
  from the prompts file and the item, at most ``--concurrency`` at a time. Tools that change things are
  refused unless ``--yes``, as anywhere without a terminal.
* Items already in the results file are not run again. An item whose run had finished (but whose line was not
  written) is not run again either: its kept result is written. An item whose run was under way goes on from
  its last finished step (``docs/durable.md``), here if the batch process that ran it is dead, there (its
  result written here) while it lives: each batch process has its own id and heartbeat
  (:mod:`tether.cli.batch_owners`), and never takes a live one's runs.
* A line is written as each run finishes (``batch_files.result_line``); a run that stopped without answering
  (an error, a limit) is written too, with its ``error``, and counts as failed.
* In a terminal, stderr shows a progress bar: done, failed, running, the cost so far (when the model's price
  is known). Otherwise one summary line at the end.
* Exit codes: 0 every item answered; 1 a configuration problem (a bad prompts line, a bad ``--db``); 4 some
  item failed; 130 interrupted (run the same command again to go on).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from tether.cli import exits
from tether.cli.batch_files import BatchItem, append_line, finished_ids, is_finished, read_prompts, result_line
from tether.cli.build import NoModel, Setup, close_store, config_problem, load_setup, mcp_tools
from tether.cli.render import make_console
from tether.cli.runs_db import RunsDatabase, runs_database
from tether.errors import ConfigInvalid, TetherError

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from tether.durable import DurableAgent
    from tether.events import RunResult

DURABLE_NAME = "batch"
"""The durable agent's name (its workflow is ``tether.run.batch``): the same in every batch process, so that
one recovers the runs another, dead, left (:mod:`tether.cli.batch_owners`)."""
_ANSWERED = ("complete", "done_tool", "ask_user")


@dataclass(frozen=True, slots=True)
class BatchOptions:
    """What ``tether batch`` was asked."""

    prompts: str
    output: str
    db: str | None = None
    concurrency: int = 4
    yes: bool = False
    model: str | None = None
    config_file: str | None = None


@dataclass(slots=True)
class Tally:
    """How the batch stands: items done (answered), failed, running, and the cost of those finished."""

    total: int
    done: int = 0
    failed: int = 0
    running: int = 0
    cost: float = 0.0
    priced: bool = False
    skipped: int = 0
    """Items already in the results file when this batch started."""

    def add(self, result: RunResult) -> None:
        if str(result.stop_reason) in _ANSWERED:
            self.done += 1
        else:
            self.failed += 1
        if result.cost is not None:
            self.cost += result.cost.total_usd
            self.priced = True

    def line(self) -> str:
        """``12 done · 1 failed · 4 running · $0.0123`` (the cost only when a price is known)."""
        parts = [f"{self.done} done", f"{self.failed} failed", f"{self.running} running"]
        parts.append(f"${self.cost:.4f}" if self.priced else "cost unknown")
        return " · ".join(parts)


def main(options: BatchOptions, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> int:
    """Run ``tether batch`` and return its exit code."""
    env = os.environ if env is None else env
    cwd = cwd or Path.cwd()
    err = make_console(stderr=True)
    try:
        items = read_prompts(cwd / options.prompts)
        output = cwd / options.output
        done = finished_ids(output)
        database = runs_database(options.db, cwd, env)
        setup = load_setup(cwd, env, {"runtime.model": options.model}, options.config_file)
    except (ConfigInvalid, NoModel) as error:
        err.print(Text(config_problem(error), style="red"))
        return exits.CONFIG
    pending = [item for item in items if not is_finished(item, done)]
    tally = Tally(len(items), skipped=len(items) - len(pending))
    if not pending:
        err.print(Text(f"all {len(items)} prompts already have results in {output}", style="dim"))
        return exits.OK
    err.print(Text(f"{len(pending)} of {len(items)} prompts to run; runs kept in {database.shown()}", style="dim"))
    try:
        return asyncio.run(_batch(setup, options, database, pending, output, tally, err))
    except KeyboardInterrupt:
        err.print(Text(f"interrupted: {tally.line()}; run the same command again to go on", style="yellow"))
        return exits.CANCELLED


async def _batch(
    setup: Setup,
    options: BatchOptions,
    database: RunsDatabase,
    pending: list[BatchItem],
    output: Path,
    tally: Tally,
    err: Console,
) -> int:
    """Launch the durable runs and write their results; the store is closed and DBOS shut down however it
    ends."""
    from tether.cli.batch_owners import launched
    from tether.durable import DurableAgent

    def say(line: str) -> None:
        err.print(Text(line, style="dim"))

    try:
        async with mcp_tools(setup) as connected:
            durable = DurableAgent(connected.agent(yes=options.yes, interactive=False, durable=True), name=DURABLE_NAME)
            async with launched(database, pending, say):  # a unique id, its heartbeat, dead batches' runs
                try:
                    with output.open("ab") as file:
                        await _run_all(durable, pending, file, tally, options.concurrency, err)
                finally:
                    await close_store(setup.store)  # before DBOS shuts down the loop's default executor
    except ConfigInvalid as error:
        err.print(Text(f"error: {error.message}", style="red"))
        return exits.CONFIG
    except TetherError as error:
        err.print(Text(f"error: {error.message}", style="red"))
        return exits.ERROR
    err.print(Text(f"{tally.line()}; results in {output}", style="dim"))
    return exits.OK if tally.failed == 0 else exits.ERROR


async def _run_all(
    durable: DurableAgent, pending: list[BatchItem], file: IO[bytes], tally: Tally, concurrency: int, err: Console
) -> None:
    """Run the pending items, ``concurrency`` at a time, writing each result as it comes."""
    slots = asyncio.Semaphore(concurrency)
    progress, task_id = _progress(err, tally)
    redaction = durable.agent.redaction

    async def one(item: BatchItem) -> None:
        async with slots:
            tally.running += 1
            _show(progress, task_id, tally)
            try:
                result = await durable.run(item.prompt, workflow_id=item.workflow_id)
            finally:
                tally.running -= 1
            append_line(file, result_line(item, result, redaction))
            tally.add(result)
            _show(progress, task_id, tally)

    try:
        if progress is not None:
            progress.start()
        await asyncio.gather(*(one(item) for item in pending))
    finally:
        if progress is not None:
            progress.stop()


def _progress(err: Console, tally: Tally) -> tuple[Progress | None, TaskID | None]:
    """A progress bar on a terminal (``None`` elsewhere)."""
    if not err.is_terminal:
        return None, None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("batch"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=err,
    )
    task_id = progress.add_task("batch", total=tally.total, completed=tally.skipped, status=tally.line())
    return progress, task_id


def _show(progress: Progress | None, task_id: TaskID | None, tally: Tally) -> None:
    if progress is not None and task_id is not None:
        finished = tally.skipped + tally.done + tally.failed
        progress.update(task_id, completed=finished, status=tally.line())
