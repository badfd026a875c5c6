"""``tether run --schema``: a typed output from the command line (``tether.output``).

``--schema`` takes a JSON Schema, as JSON text or as a file holding it, or a type importable as ``module:Name``
(a pydantic model, a dataclass, a ``TypedDict``): the run's output is then validated against it, retried with
the errors as the library does, and printed as JSON.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path
from typing import Any

from tether.bounded import read_bounded
from tether.errors import ConfigInvalid

MAX_SCHEMA_BYTES = 1024 * 1024
"""The largest schema file read."""
_IMPORTABLE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


def output_type_of(value: str, cwd: Path) -> Any:
    """The output type ``--schema VALUE`` names: a file's JSON Schema, JSON text, or ``module:Name`` (imported
    with ``cwd`` on the path, as ``python -m`` would). ``ValueError`` says why it cannot be used."""

    path = Path(value).expanduser()
    if not value.lstrip().startswith("{") and (cwd / path).exists():
        try:
            text = read_bounded(cwd / path, MAX_SCHEMA_BYTES).decode("utf-8")
        except (OSError, UnicodeDecodeError) as error:
            reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
            raise ValueError(f"cannot read {value!r}: {reason}") from None
        return _schema(text, f"the file {value!r}")
    if value.lstrip().startswith("{"):
        return _schema(value, "the JSON")
    if _IMPORTABLE.fullmatch(value):
        return _imported(value, cwd)
    raise ValueError(f"{value!r} is neither a file, nor a JSON Schema, nor module:Name")


def _schema(text: str, source: str) -> Any:
    from tether.output import OutputSchema

    try:
        schema = json.loads(text)
    except ValueError as error:
        raise ValueError(f"{source} is not JSON: {error}") from None
    try:
        return OutputSchema(schema)
    except ConfigInvalid as error:
        raise ValueError(f"{source}: {error.message}") from None


def _imported(value: str, cwd: Path) -> Any:
    module_name, _, attribute = value.partition(":")
    if str(cwd) not in sys.path:
        sys.path.insert(0, str(cwd))
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001 - the user's module: whatever stops its import is the answer
        raise ValueError(f"cannot import {module_name!r}: {type(error).__name__}: {error}") from None
    for name in attribute.split("."):
        if not hasattr(target, name):
            raise ValueError(f"{module_name!r} has no {attribute!r}")
        target = getattr(target, name)
    return target
