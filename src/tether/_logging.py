"""tether's loggers: every module that logs gets its logger here, so that tether stays silent by default.

Python prints a record that no handler takes through its last-resort handler (warnings and above, on
stderr). A library must not: an application that configured no logging should see nothing from tether. So
the ``tether`` logger gets a ``logging.NullHandler`` the first time any tether logger is made, which is
before any tether module can emit a record. ``import tether`` itself does not import ``logging`` (it costs
several milliseconds); the modules that log do, through :func:`get_logger`.

An application that configures logging (``logging.basicConfig``, a handler on ``tether`` or on the root)
gets every record as usual: the NullHandler takes nothing from anyone.
"""

from __future__ import annotations

import logging

ROOT = "tether"

_root = logging.getLogger(ROOT)
if not any(type(handler) is logging.NullHandler for handler in _root.handlers):
    _root.addHandler(logging.NullHandler())


def get_logger(name: str) -> logging.Logger:
    """The logger ``name`` (``tether.loop``, ``tether.sessions``, ...), with tether kept silent by default."""
    if name != ROOT and not name.startswith(ROOT + "."):
        raise ValueError(f"tether's loggers are named tether.*, not {name!r}")
    return logging.getLogger(name)


class _Adopted(logging.Handler):
    """Hands each record of another library's logger to one of tether's, renamed, so that it follows tether's
    logging (silent unless the host configures it)."""

    def __init__(self, target: str) -> None:
        super().__init__()
        self.target = target

    def emit(self, record: logging.LogRecord) -> None:
        logger = get_logger(self.target)
        if logger.isEnabledFor(record.levelno):
            copy = logging.makeLogRecord(record.__dict__)
            copy.name = self.target
            logger.handle(copy)


def adopt(library: str, target: str, *, drop: str | None = None) -> None:
    """Send the records of the library's logger ``library`` to tether's logger ``target`` instead of wherever the
    library writes them (its handler named ``drop``, if any, is removed: a library that writes on stderr
    whatever the host wants); idempotent."""
    source = logging.getLogger(library)
    for handler in list(source.handlers):
        if drop is not None and handler.name == drop:
            source.removeHandler(handler)
    if not any(isinstance(handler, _Adopted) and handler.target == target for handler in source.handlers):
        source.addHandler(_Adopted(target))
    source.propagate = False
