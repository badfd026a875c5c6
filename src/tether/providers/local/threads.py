"""How many threads the embedded model computes with: the physical cores that are free now.

One token at a time is bound by memory and by how many cores do arithmetic: on an idle machine every physical
core is worth its thread (two cores generate about twice as fast as one). But llama.cpp's threads wait for each
other at every step of a token, so one thread that has no core (another process holds it) stalls them all: on a
busy machine, a thread per core generates several times slower than fewer threads. llama.cpp's own default, half
the logical CPUs, is the physical cores on a machine with two hardware threads per core and half of them on one
without, whatever the load.

So the thread count is decided before each generation, from the last moments' load: the physical cores this
process may run on (``/sys/devices/system/cpu/*/topology``, within its CPU affinity), less the cores that other
processes kept busy since the previous look (``/proc/stat`` less this process's own time in
``/proc/self/stat``, so the model's own threads never count against it), and at least one. Where these files
cannot be read (not Linux), llama.cpp's default stands.
"""

from __future__ import annotations

import os
from pathlib import Path

CPU_ROOT = Path("/sys/devices/system/cpu")
PROC_STAT = Path("/proc/stat")
SELF_STAT = Path("/proc/self/stat")
MIN_WINDOW_TICKS = 20
"""Clock ticks (per CPU) a look needs behind it to say how busy the machine was; a shorter one keeps the last
answer (the turns of a run follow each other within milliseconds)."""


def physical_cores(cpus: set[int] | None = None, root: Path = CPU_ROOT) -> int | None:
    """The physical cores among ``cpus`` (default: those this process may run on); ``None`` when the topology
    cannot be read."""
    if cpus is None:
        try:
            cpus = os.sched_getaffinity(0)
        except (AttributeError, OSError):
            return None
    cores: set[tuple[str, str]] = set()
    for cpu in cpus:
        topology = root / f"cpu{cpu}" / "topology"
        try:
            package = (topology / "physical_package_id").read_text().strip()
            core = (topology / "core_id").read_text().strip()
        except OSError:
            return None
        cores.add((package, core))
    return len(cores) or None


class FreeCores:
    """Says, before each generation, how many threads to compute with (see the module docstring)."""

    __slots__ = ("_cores", "_last", "_last_answer", "_proc_stat", "_self_stat")

    def __init__(self, cores: int, proc_stat: Path = PROC_STAT, self_stat: Path = SELF_STAT) -> None:
        self._cores = cores
        self._proc_stat = proc_stat
        self._self_stat = self_stat
        self._last = self._sample()
        self._last_answer = cores

    @property
    def readable(self) -> bool:
        """Whether the load can be read here (``/proc``)."""
        return self._last is not None

    def threads(self) -> int:
        """The physical cores less those other processes kept busy since the last call, at least one."""
        now = self._sample()
        last, self._last = self._last, now
        if now is None or last is None:
            return self._last_answer
        busy, total, own = (a - b for a, b in zip(now, last, strict=True))
        cpus = os.cpu_count() or 1
        if total < MIN_WINDOW_TICKS * cpus:
            self._last = last  # too short a look: keep measuring from the earlier one
            return self._last_answer
        others = max(busy - own, 0) * cpus / total  # cores' worth of other processes' work
        self._last_answer = max(1, min(self._cores, self._cores - round(others)))
        return self._last_answer

    def _sample(self) -> tuple[int, int, int] | None:
        """Busy and total clock ticks of every CPU, and this process's own: ``None`` when unreadable."""
        try:
            fields = self._proc_stat.read_text().split("\n", 1)[0].split()[1:]
            ticks = [int(value) for value in fields[:8]]
            own_fields = self._self_stat.read_text().rsplit(")", 1)[1].split()
            own = int(own_fields[11]) + int(own_fields[12])  # utime and stime: fields 14 and 15 of the line
        except (OSError, ValueError, IndexError):
            return None
        idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle and iowait
        total = sum(ticks)
        return total - idle, total, own


def free_cores() -> FreeCores | None:
    """The thread chooser for this process, or ``None`` (keep llama.cpp's default) where it cannot tell."""
    cores = physical_cores()
    if cores is None:
        return None
    chooser = FreeCores(cores)
    return chooser if chooser.readable else None
