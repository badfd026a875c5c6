"""What frozen hot values cost a step: tether's instructions per step as it is and with its hot values unfrozen,
against the floor's.

DESIGN.md (section 5) makes the hot data types (messages, parts, events, usage, the request) frozen slotted
dataclasses: a value once made never changes, which the transcript's caches rely on (a message's JSON is encoded
once, ``tether/message_memo.py``). A frozen class cannot store a field with a plain attribute store, so
``tether/quickinit.py`` fills a value slot by slot through the slots' descriptors (about 580 instructions a field
more than a plain store) or, from four fields, through an unfrozen twin class (about 1,800 more a value); a tool
step makes about 60 such values of 150 fields. This script puts a figure on that choice. It copies
``src/`` to a temporary directory, makes every class ``quick_init`` is applied to a plain slotted dataclass there
(``@dataclass(unsafe_hash=True, slots=True)``: the same fields, slots, equality and hash, assignment allowed) and
``quick_init`` a no-op, and counts both trees and the floor under callgrind as ``instructions.py`` does.

The unfrozen copy is a measurement, not a configuration tether supports: its messages can be changed after
their JSON was kept.

Run: .venv/bin/python bench/frozen.py [SCENARIO ...]      (needs valgrind; about three minutes a scenario)
     .venv/bin/python bench/frozen.py --values              (what one six-field value costs to make, four ways)

Scenarios: ``sequential``, ``streaming``, ``parallel-calls`` (20 and 60 runs, as ``instructions.py``) and
``concurrent-N`` (N and 3N runs, N at a time); by default ``parallel-calls`` and ``concurrent-200``.

``--values`` counts what making one value of six fields costs: a frozen dataclass's generated ``__init__``,
``quick_init``'s with each slot set through its descriptor, ``quick_init``'s through an unfrozen twin (what it
does from four fields: the value is turned into a twin class with the same slots, filled with plain stores and
turned back), and a plain slotted dataclass.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from instructions import LOOP_ONLY, ROOT, STEPS_BETWEEN, per_step
from run import HERE, PYTHON, start_server

STEPS_PER_RUN = 6
FROZEN_HOT_CLASS = re.compile(r"^@quick_init\n@dataclass\(frozen=True, ", re.MULTILINE)


def unfrozen_copy(into: Path) -> Path:
    """``src/`` copied under ``into`` with every ``quick_init`` class unfrozen; checked before it is measured."""
    src = into / "src"
    shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("__pycache__"))
    rewritten = 0
    for module in (src / "tether").rglob("*.py"):
        text = module.read_text()
        new, count = FROZEN_HOT_CLASS.subn("@quick_init\n@dataclass(unsafe_hash=True, ", text)
        if count:
            module.write_text(new)
            rewritten += count
    quickinit = src / "tether" / "quickinit.py"
    quickinit.write_text(quickinit.read_text() + "\n\ndef quick_init(cls):  # noqa\n    return cls\n")
    check = (
        "from tether.messages import Message; from tether.events import ToolCallStarted; "
        "from tether.usage import Usage; from tether.providers.base import Request; "
        "assert not any(c.__dataclass_params__.frozen for c in (Message, ToolCallStarted, Usage, Request))"
    )
    subprocess.run([PYTHON, "-c", check], check=True, env={"PYTHONPATH": str(src)})
    print(f"unfrozen copy: {rewritten} classes", file=sys.stderr, flush=True)
    return src


VALUES = """
import sys
from dataclasses import dataclass
from tether import quickinit

@dataclass(frozen=True, slots=True)
class Generated:
    a: int; b: int; c: int; d: int; e: int; f: int = 0

twin_from, quickinit.TWIN_FROM_FIELDS = quickinit.TWIN_FROM_FIELDS, 10**9

@quickinit.quick_init
@dataclass(frozen=True, slots=True)
class BySlot:
    a: int; b: int; c: int; d: int; e: int; f: int = 0

quickinit.TWIN_FROM_FIELDS = twin_from

@quickinit.quick_init
@dataclass(frozen=True, slots=True)
class Twinned:
    a: int; b: int; c: int; d: int; e: int; f: int = 0

@dataclass(slots=True)
class Plain:
    a: int; b: int; c: int; d: int; e: int; f: int = 0

made = {"generated": Generated, "slot by slot": BySlot, "twin": Twinned, "unfrozen": Plain}[sys.argv[1]]
value = made(1, 2, 3, 4, 5, 6)
assert type(value) is made and (value.a, value.f) == (1, 6)
for number in range(int(sys.argv[2])):
    made(number, 2, 3, 4, 5, 6)
"""


def values() -> None:
    """What making one six-field value costs, each way (21,000 values less 1,000)."""
    print("| a six-field value made by | instructions |\n|---|---|")
    for way in ("generated", "slot by slot", "twin", "unfrozen"):
        script = [PYTHON, "-c", VALUES, way]
        print(f"| {way} | {per_step([*script, '1000'], [*script, '21000'], steps=20_000):,.0f} |")


def commands(scenario: str, url: str, impl: str) -> tuple[list[str], list[str], int]:
    """The smaller and the larger client of ``scenario``, and the steps the larger makes more."""
    workload = [PYTHON, str(HERE / "workload.py"), impl]
    if scenario.startswith("concurrent-"):
        runs = int(scenario.removeprefix("concurrent-"))
        small, large = [*workload, scenario, url, str(runs)], [*workload, scenario, url, str(3 * runs)]
        return small, large, 2 * runs * STEPS_PER_RUN
    return [*workload, f"{scenario}-20", url], [*workload, f"{scenario}-60", url], STEPS_BETWEEN


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", default=["parallel-calls", "concurrent-200"])
    parser.add_argument("--values", action="store_true", help="what one value costs to make, four ways")
    options = parser.parse_args()
    if options.values:
        values()
        return
    with tempfile.TemporaryDirectory(prefix="tether-unfrozen-") as scratch:
        unfrozen = unfrozen_copy(Path(scratch))
        trees = {"tether": ROOT / "src", "unfrozen": unfrozen}
        rows: list[tuple[str, float | None, float, float]] = []
        server, port = start_server()
        try:
            url = f"http://127.0.0.1:{port}/v1"
            for scenario in options.scenarios:
                floor = per_step(*commands(scenario, url, "floor"))
                figures = {name: per_step(*commands(scenario, url, "tether"), src=src) for name, src in trees.items()}
                rows.append((scenario, floor, figures["tether"], figures["unfrozen"]))
                print(f"done: {scenario}", file=sys.stderr, flush=True)
        finally:
            server.terminate()
            server.wait()
        script = [PYTHON, "-c", LOOP_ONLY]
        loop = {name: per_step([*script, "20"], [*script, "60"], src=src) for name, src in trees.items()}
        rows.append(("loop alone (no transport)", None, loop["tether"], loop["unfrozen"]))
    print("Client instructions per step, callgrind (the larger client less the smaller, over the steps between)\n")
    print("| scenario | floor | tether | ratio | unfrozen | ratio |\n|---|---|---|---|---|---|")
    for name, floor, frozen, plain in rows:
        shown = f"{floor:,.0f}" if floor else ""
        ratios = (f"{frozen / floor:.2f}x", f"{plain / floor:.2f}x") if floor else ("", "")
        print(f"| {name} | {shown} | {frozen:,.0f} | {ratios[0]} | {plain:,.0f} | {ratios[1]} |")


if __name__ == "__main__":
    main()
