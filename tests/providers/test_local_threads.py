"""The embedded model's thread count: the physical cores (read from a fake sysfs tree here), less the cores
other processes keep busy (read from fake ``/proc/stat`` and ``/proc/self/stat`` files)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tether.providers.local.threads import MIN_WINDOW_TICKS, FreeCores, physical_cores


def topology(root: Path, cpus: dict[int, tuple[int, int]]) -> Path:
    """A sysfs-like tree: cpu number -> (package, core)."""
    for cpu, (package, core) in cpus.items():
        folder = root / f"cpu{cpu}" / "topology"
        folder.mkdir(parents=True)
        (folder / "physical_package_id").write_text(f"{package}\n")
        (folder / "core_id").write_text(f"{core}\n")
    return root


def test_two_hardware_threads_of_one_core_count_as_one_core(tmp_path: Path) -> None:
    root = topology(tmp_path, {0: (0, 0), 1: (0, 1), 2: (0, 0), 3: (0, 1)})  # SMT: cpu2, cpu3 are siblings
    assert physical_cores({0, 1, 2, 3}, root) == 2
    assert physical_cores({0, 2}, root) == 1  # the affinity allows one core's two threads


def test_every_cpu_its_own_core_counts_each(tmp_path: Path) -> None:
    root = topology(tmp_path, {0: (0, 0), 1: (0, 1), 2: (1, 0), 3: (1, 1)})  # two packages, same core ids
    assert physical_cores({0, 1, 2, 3}, root) == 4


def test_an_unreadable_topology_leaves_the_choice_to_llama_cpp(tmp_path: Path) -> None:
    assert physical_cores({0, 1}, tmp_path) is None


class Machine:
    """Fake ``/proc/stat`` and ``/proc/self/stat`` whose counters the test advances."""

    def __init__(self, root: Path, cpus: int) -> None:
        self.cpus = cpus
        self.stat, self.own_stat = root / "stat", root / "self_stat"
        self.busy = self.idle = self.own = 0
        self.write()

    def advance(self, *, others: int, own: int, idle: int) -> None:
        """Ticks summed over every CPU: busy with other processes, busy with this one, idle."""
        self.busy += others + own
        self.own += own
        self.idle += idle
        self.write()

    def write(self) -> None:
        self.stat.write_text(f"cpu  {self.busy} 0 0 {self.idle} 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n")
        fields = ["S", *["0"] * 10, str(self.own), "0", *["0"] * 30]  # utime is field 14 of the line
        self.own_stat.write_text(f"123 (python (odd) name) {' '.join(fields)}\n")


def test_an_idle_machine_gets_a_thread_per_core_and_a_busy_one_fewer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    machine = Machine(tmp_path, cpus=4)
    chooser = FreeCores(4, machine.stat, machine.own_stat)
    machine.advance(others=0, own=300, idle=100)  # only this process worked: its threads do not count
    assert chooser.threads() == 4
    machine.advance(others=200, own=0, idle=200)  # other processes kept two of the four cores busy
    assert chooser.threads() == 2
    machine.advance(others=400, own=0, idle=0)  # all four busy elsewhere: still one thread
    assert chooser.threads() == 1
    machine.advance(others=0, own=0, idle=MIN_WINDOW_TICKS)  # too short a look: the last answer stands
    assert chooser.threads() == 1
    machine.advance(others=0, own=0, idle=400)  # measured from the earlier look, the machine is idle again
    assert chooser.threads() == 4


def test_unreadable_load_keeps_the_last_answer(tmp_path: Path) -> None:
    chooser = FreeCores(2, tmp_path / "missing", tmp_path / "missing_too")
    assert not chooser.readable
    assert chooser.threads() == 2
