"""The tree of a run that ``tether run --trace`` and the chat's ``/trace`` print: what each provider call and
each tool call took.

It is drawn from ``RunResult.turn_records`` alone, so it needs no OpenTelemetry and shows the same numbers
whether or not spans are exported::

    run 3f2a1b2c · openai:gpt-4o-mini · complete · 1.4 s · 1,234 tokens (1,100 in, 134 out), 2 requests
    ├── turn 1 · 812 ms · ttft 240 ms · 600 in / 40 out · tool_calls
    │   ├── ✓ read · 0.4 ms
    │   └── ✗ bash · tool_failed · 12 ms
    └── turn 2 · 2.6 s · ttft 210 ms · 500 in / 94 out · stop · 1 retry after 2.0 s waiting

A call that asked for a summary to compact the history (``TurnRecord.compaction``) is labelled
``compaction``; the call made without tools after a limit, ``final``.
A tool call that ran an agent (``agent.as_tool()``) has that agent's provider calls as its branches, and so on
down (``ToolCallRecord.turn_records``).

What it shows passes through the agent's :class:`~tether.redaction.Redaction` (the reasons an answer
was rejected quote the model and the provider).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text
from rich.tree import Tree

from tether.cli.render import shorten, usage_line
from tether.loop.repeats import REPEATED
from tether.telemetry.logs import duration_text as duration

if TYPE_CHECKING:
    from tether.events import RunResult, ToolCallRecord, TurnRecord
    from tether.redaction import Redaction

SEP = " · "
_REJECTED_WIDTH = 80


def print_trace(console: Console, result: RunResult, model: str, redaction: Redaction | None = None) -> None:
    """Print the tree of ``result`` on ``console``, its long lines wrapped under their branch."""
    console.print(trace_tree(result, model, redaction), soft_wrap=False)


def trace_tree(result: RunResult, model: str, redaction: Redaction | None = None) -> Tree:
    """The run as a rich ``Tree``: the run, its provider calls, and under each the tool calls it asked for."""
    stop = str(result.stop_reason)
    label = Text()
    label.append(f"run {result.run_id[:8]}", style="bold")
    label.append(SEP + SEP.join([model, stop, duration(result.duration_ms), usage_line(result.usage, result.cost)]))
    if stop not in ("complete", "done_tool", "ask_user"):
        label.stylize("yellow" if stop != "error" else "red", len(f"run {result.run_id[:8]}"))
    tree = Tree(label, guide_style="dim")
    _add_turns(tree, result.turn_records, redaction)
    if not result.turn_records:
        tree.add(Text("no provider call", style="dim"))
    return tree


def _add_turns(tree: Tree, records: tuple[TurnRecord, ...], redaction: Redaction | None) -> None:
    """Each provider call under ``tree``, the tool calls it asked for under it, and under a call that ran an
    agent (``agent.as_tool()``), that agent's calls, as deep as they go."""
    for record in records:
        branch = tree.add(_turn_label(record, redaction))
        for call in record.tool_calls:
            _add_turns(branch.add(_tool_label(call)), call.turn_records, redaction)


def _turn_label(record: TurnRecord, redaction: Redaction | None) -> Text:
    head = f"turn {record.turn}" + (f" attempt {record.attempt}" if record.attempt > 1 else "")
    head += " compaction" if record.compaction else " final" if record.final else ""
    usage = record.usage
    parts = [duration(record.duration_ms)]
    if record.ttft_ms is not None:
        parts.append(f"ttft {duration(record.ttft_ms)}")
    parts.append(f"{usage.input_tokens:,} in / {usage.output_tokens:,} out")
    parts.append(f"error {record.error}" if record.error else record.finish_reason)
    if record.retries:
        waited = f" after {duration(record.retry_wait_ms)} waiting" if record.retry_wait_ms else ""
        parts.append(f"{record.retries} {'retry' if record.retries == 1 else 'retries'}{waited}")
    label = Text()
    label.append(head, style="bold")
    label.append(SEP + SEP.join(parts))
    if record.error:
        label.stylize("red", len(head))
    if record.rejected:
        why = redaction.text(record.rejected) if redaction is not None else record.rejected
        label.append(f"{SEP}rejected: {shorten(why, _REJECTED_WIDTH)}", style="yellow")
    return label


def _tool_label(call: ToolCallRecord) -> Text:
    mark, style = ("✗", "red") if call.is_error else ("↺", "dim") if call.code == REPEATED else ("✓", "green")
    parts = [call.name]
    if call.code:
        parts.append(call.code)
    parts.append(duration(call.duration_ms) if call.duration_ms is not None else "not run")
    label = Text()
    label.append(f"{mark} ", style=style)
    label.append(SEP.join(parts), style="red" if call.is_error else "")
    return label
