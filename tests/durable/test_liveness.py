"""The heartbeat table (``tether.durable.liveness``) on a real SQLite file and a real PostgreSQL database: an id
held by a live process is refused, a dead one is claimed by exactly one of many claimers, a process gone from
this host is dead at once, and a reader never makes a database."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tether.durable.liveness import Heartbeat, Table, claim_dead, inherit_claims, unique_id
from tether.errors import WorkerAlive

_opened: list[Table] = []


@pytest.fixture(autouse=True)
def _close_tables() -> Iterator[None]:
    yield
    while _opened:
        _opened.pop().close()


def T(url: str) -> Table:  # noqa: N802 - a table closed after the test
    table = Table(url)
    _opened.append(table)
    return table


def test_unique_ids_differ_in_one_process() -> None:
    first, second = unique_id("worker"), unique_id("worker")
    assert first != second
    assert first.startswith("worker-")
    assert first.split("-")[-2].isdigit()


HOLD = """
import sys
from tether.durable.liveness import Heartbeat, Table
beat = Heartbeat(Table(sys.argv[1]), "w1", kind="worker", queues=["jobs"], dead_after=30)
beat.claim()
beat.start()
print("held", flush=True)
sys.stdin.read()
beat.stop()
"""


def test_an_id_held_by_a_live_process_is_refused_and_taken_once_it_stopped(db_url: str) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, db_url], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        again = Heartbeat(T(db_url), "w1", kind="worker", dead_after=30)
        with pytest.raises(WorkerAlive) as refused:
            again.claim()
    finally:
        holder.communicate("", timeout=60)  # its stdin closed: it stops and marks its row stopped
    assert refused.value.code == "worker_alive"
    assert "'w1' is held by a live process" in refused.value.message
    stopped = again.table.row("w1")
    assert stopped is not None
    assert stopped.state == "stopped"
    again.claim()  # stopped: the id is free
    row = again.table.row("w1")
    assert row is not None
    assert row.state == "alive"
    assert row.alive
    again.stop()


def test_an_id_whose_lease_ran_out_is_taken(db_url: str) -> None:
    Heartbeat(T(db_url), "w2", kind="worker", dead_after=0.2).claim()  # claimed, never beats
    table = T(db_url)
    deadline = time.monotonic() + 30
    while (row := table.row("w2")) is not None and row.alive:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert row is not None
    assert row.health() == "dead"
    Heartbeat(T(db_url), "w2", kind="worker").claim()
    table.close()


def test_a_process_gone_from_this_host_is_dead_at_once(db_url: str, tmp_path: Path) -> None:
    script = (
        "import sys; from tether.durable.liveness import Heartbeat, Table; "
        "Heartbeat(Table(sys.argv[1]), 'w3', kind='worker').claim()"
    )
    subprocess.run([sys.executable, "-c", script, db_url], check=True, timeout=60)
    table = T(db_url)
    row = table.row("w3")
    assert row is not None
    assert row.state == "alive"
    assert row.age < row.dead_after
    assert not row.alive
    assert row.health() == "dead"
    Heartbeat(T(db_url), "w3", kind="worker").claim()  # so its id is free now
    table.close()


def test_of_many_claimers_of_a_dead_worker_exactly_one_wins(db_url: str) -> None:
    Heartbeat(T(db_url), "dead", kind="worker", dead_after=0.1).claim()
    time.sleep(0.3)
    wins: list[str] = []
    start = threading.Barrier(8)

    def claim(claimer: str) -> None:
        table = T(db_url)
        start.wait()
        if claim_dead(table, "dead", claimer):
            wins.append(claimer)

    threads = [threading.Thread(target=claim, args=(f"live-{n}",)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(wins) == 1, wins
    table = T(db_url)
    row = table.row("dead")
    assert row is not None
    assert row.state == "recovering"
    assert row.recovered_by == wins[0]
    assert inherit_claims(table, wins[0], "heir") == ["dead"]  # the claimer died: its heir takes its claims
    table.close()


def test_a_worker_that_keeps_no_row_is_claimed_once(db_url: str) -> None:
    T(db_url).create()
    assert claim_dead(T(db_url), "local", "a")
    assert not claim_dead(T(db_url), "local", "b")


def test_a_live_worker_recovers_a_dead_one_and_only_once(db_url: str) -> None:
    Heartbeat(T(db_url), "gone", kind="worker", dead_after=0.1).claim()
    time.sleep(0.3)
    recovered: list[tuple[str, str]] = []

    def recoverer(name: str) -> Callable[[str], None]:
        return lambda dead: recovered.append((name, dead))

    live = [Heartbeat(T(db_url), name, kind="worker", recover=recoverer(name)) for name in ("a", "b")]
    for beat in live:
        beat.claim()
    assert [beat.recover_dead() for beat in live] in (
        [["gone"], []],
        [[], ["gone"]],
    )
    assert len(recovered) == 1
    row = live[0].table.row("gone")
    assert row is not None
    assert row.state == "recovered"
    for beat in live:
        beat.stop()


def test_a_reader_never_makes_a_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.sqlite"
    table = Table.of(path, None, read_only=True)
    assert table.rows(["w"]) == []
    assert table.rows() == []
    assert not path.exists()


def test_an_id_left_on_this_host_with_this_processs_pid_is_taken_at_once(db_url: str) -> None:
    """A container restarted: the new process has the old one's host name and pid (1), the old one's lease
    has not run out, but the old process is certainly gone, since this one has its pid."""
    Heartbeat(T(db_url), "w4", kind="worker", dead_after=30).claim()  # "the old process": never stopped
    again = Heartbeat(T(db_url), "w4", kind="worker", dead_after=30)
    again.claim()
    row = again.table.row("w4")
    assert row is not None
    assert row.alive
