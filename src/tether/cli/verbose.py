"""Where the ``tether`` command sends tether's log records: stderr, always; how much of them, ``-v`` says.

The library is silent unless its host configures logging (``tether/_logging.py``); the command is a host, and
configures it so:

* without ``-v``: tether's warnings (a session file restored from its backup, an MCP server restarted,
  bash running without a sandbox) as bare lines, as before. The records of the run itself
  (``tether.telemetry.logs``: retries, a run's error) are left out: the command shows those its own way;
  so are the durable engine's (``tether.durable.engine``), which are its own business.
* ``-v``: every record at INFO and above, the run's included, one compact line each::

      12:03:04.512 INFO    tether.loop [3f2a1b2c] run 3f2a1b2c started: openai:gpt-4o-mini

* ``-vv``: DEBUG too: every provider call (``turn``) and tool call.

Records go to stderr, never stdout, which carries the answer or ``--json``. The stream is looked up at each
record, so a spinner that redirects stderr while it runs keeps its lines in order.
"""

from __future__ import annotations

import logging
import sys

from tether._logging import get_logger

ENGINE = "tether.durable.engine"
"""The durable engine's logger (``tether.durable.dbos_launch``): shown with ``-v`` only."""
_FORMAT = "%(asctime)s.%(msecs)03d %(levelname)-7s %(name)s%(context)s %(message)s"
_handler: logging.Handler | None = None


class StderrHandler(logging.Handler):
    """Writes each record on the current ``sys.stderr``."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = sys.stderr
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:  # noqa: BLE001 - logging must never break the command
            self.handleError(record)


class CompactFormatter(logging.Formatter):
    """``time level logger [run/turn] message``; the bracket only on records of a run."""

    def __init__(self) -> None:
        super().__init__(_FORMAT, datefmt="%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        run_id = getattr(record, "run_id", None)
        turn = getattr(record, "turn", None)
        context = ""
        if run_id:
            context = f" [{str(run_id)[:8]}{f'/{turn}' if turn is not None else ''}]"
        record.context = context
        return super().format(record)


def _not_of_a_run(record: logging.LogRecord) -> bool:
    """Keeps records that are not the run's own (those carry an ``event``), nor the durable engine's
    (``tether.durable.engine``: DBOS's own, for ``-v``)."""
    return not hasattr(record, "event") and not record.name.startswith(ENGINE)


def configure_logging(verbosity: int) -> logging.Handler:
    """Send tether's records to stderr as ``verbosity`` (the count of ``-v``) says; replaces an earlier call's
    handler. Returns the handler."""
    global _handler
    logger = get_logger("tether")
    if _handler is not None:
        logger.removeHandler(_handler)
    handler = StderrHandler()
    if verbosity <= 0:
        handler.setLevel(logging.WARNING)
        handler.setFormatter(logging.Formatter("%(message)s"))
        handler.addFilter(_not_of_a_run)
        logger.setLevel(logging.NOTSET)
    else:
        handler.setFormatter(CompactFormatter())
        logger.setLevel(logging.INFO if verbosity == 1 else logging.DEBUG)
    logger.addHandler(handler)
    _handler = handler
    return handler
