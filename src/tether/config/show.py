"""The effective configuration as ``tether config show`` prints it: secrets hidden, origins named.

The text form is TOML that would load to the same configuration (a limit or the tool-output cache switched
off reads ``"off"``; a setting with no value is left out), each value followed by a comment saying where it
came from. The JSON form is the configuration alone, ``null`` for settings with no value. Both go through
:class:`~tether.config.redact.Redactor` first (see that module for what counts as a secret).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import tomlkit
from tomlkit.items import AoT, Table

from tether.config.load import Loaded
from tether.config.redact import Redactor, secret_values
from tether.config.schema import OFF
from tether.keys import ALL_KEY_VARIABLES

_LEAF_TABLES = frozenset({"headers", "env"})
"""Tables shown inline, as one value (their keys are names, not settings)."""
_SWITCHED_OFF = frozenset({"cache_tool_outputs"})
"""Settings outside ``[runtime.limits]`` whose ``None`` means "off" (not "not set")."""


def redacted_data(loaded: Loaded, env: Mapping[str, str]) -> dict[str, Any]:
    """The configuration as plain data with every secret replaced by ``***``."""
    key_variables = set(ALL_KEY_VARIABLES)
    key_variables |= {p.api_key_env for p in loaded.config.providers.values() if p.api_key_env}
    redactor = Redactor(secret_values(env, key_variables))
    data: dict[str, Any] = redactor.data(loaded.config.model_dump(mode="json"))
    return data


def render_json(loaded: Loaded, env: Mapping[str, str]) -> str:
    return json.dumps(redacted_data(loaded, env), indent=2)


def render_toml(loaded: Loaded, env: Mapping[str, str]) -> str:
    """TOML with a comment after each value naming its origin (a file and line, a variable, a flag)."""
    document = tomlkit.document()
    document.add(tomlkit.comment("The effective tether configuration (secrets hidden as ***)."))
    files = ", ".join(str(path) for path in loaded.files) or "none"
    document.add(tomlkit.comment(f"Files read, lowest precedence first: {files}"))
    for key, value in redacted_data(loaded, env).items():
        document.add(tomlkit.nl())
        document.add(key, _table(loaded, (key,), value))
    return document.as_string()


def _table(loaded: Loaded, loc: tuple[str | int, ...], data: Mapping[str, Any]) -> Table:
    table = tomlkit.table(is_super_table=not any(_is_leaf(k, v) for k, v in data.items()))
    for key, value in data.items():
        here = (*loc, key)
        if not _is_leaf(key, value):
            if isinstance(value, dict):
                table.add(key, _table(loaded, here, value))
            else:
                array = AoT([_table(loaded, (*here, i), item) for i, item in enumerate(value)])
                table.add(key, array)
            continue
        if value is None:
            if loc[-1] != "limits" and key not in _SWITCHED_OFF:
                continue
            value = OFF
        item = tomlkit.item(value)
        if isinstance(value, dict):
            item = tomlkit.inline_table()
            item.update(value)
        item.comment(loaded.origin(here) or "default")
        table.add(key, item)
    return table


def _is_leaf(key: str, value: Any) -> bool:
    """A value, not a table or an array of tables."""
    if isinstance(value, dict):
        return key in _LEAF_TABLES
    if isinstance(value, list):
        return not value or not all(isinstance(item, dict) for item in value)
    return True
