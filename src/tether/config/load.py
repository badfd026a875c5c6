"""Find the configuration, merge it, validate it, and say where every value came from.

Layers, lowest precedence first; a higher layer wins key by key (tables merge, a list or a value is
replaced whole):

1. defaults (the schema's);
2. the user's file: ``$XDG_CONFIG_HOME/tether/config.toml``, ``~/.config/tether/config.toml`` when
   ``XDG_CONFIG_HOME`` is unset (or not an absolute path, as the XDG spec says);
3. the project's file: ``agent.toml`` in the working directory, or instead the file named by ``--config``
   (``load(config_file=...)``) or else by the variable ``TETHER_CONFIG``; a file named so must exist
   (:func:`project_file`);
4. environment variables: ``TETHER_MODEL`` is ``runtime.model``; ``TETHER_<SECTION>__<KEY>[__<KEY>...]``
   is the dotted key with ``__`` for the dots, lower-cased (``TETHER_RUNTIME__LIMITS__MAX_TURNS=5``,
   ``TETHER_TOOLS__DENY='["shell"]'``, ``TETHER_PROVIDERS__OLLAMA__BASE_URL=...``). The value is read as a
   TOML value when it is one (``5``, ``true``, ``["a"]``, ``"text"``, ``{ a = "b" }``), else taken as a
   string. Empty variables are ignored; ``TETHER_*`` names without ``__`` (other than ``TETHER_MODEL``)
   are not configuration and are ignored too (``TETHER_PROBE_API_KEY`` belongs to a command);
5. flags: a mapping of dotted keys to values (``{"runtime.model": "ollama:qwen3"}``), ``None`` meaning
   "not given".

A file written in the older layout (:mod:`tether.config.older`) is read key by key as tether's, with one
notice per file (:attr:`Loaded.notices`).

A problem is reported with its key and where it was set: the file and line, the variable or the flag.
``${VAR}`` in values is never expanded here (MCP ``env`` values are expanded when a server starts).

Whatever a file holds, loading ends quickly with a configuration or a ``config_invalid`` error, never a
traceback: values nested more than :data:`~tether.config.positions.DEPTH_LIMIT` levels deep are refused
(naming the key and line) before anything recurses into them, and the work grows linearly with the file:
however many problems it has, the first :data:`~tether.config.issues.MAX_ISSUES` (in file order) are
described and the rest counted.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tether.bounded import read_bounded
from tether.config import issues as _issues
from tether.config import older
from tether.config.issues import MAX_ISSUES, Issue, Loc, fail
from tether.config.positions import DEPTH_LIMIT, deep_key_line, key_lines, line_of, nesting_line
from tether.config.redact import Redactor, secret_values
from tether.config.schema import Config
from tether.errors import ConfigInvalid
from tether.keys import ALL_KEY_VARIABLES
from tether.providers import registry
from tether.providers.registry import PROFILES
from tether.tools.mcp_spec import HTTP_ONLY, STDIO_ONLY, duplicate_ids, server_problems

PROJECT_FILE = "agent.toml"
ENV_PREFIX = "TETHER_"
ENV_SEPARATOR = "__"
MODEL_VARIABLE = "TETHER_MODEL"
CONFIG_VARIABLE = "TETHER_CONFIG"
"""Names the file read instead of ``./agent.toml``; not configuration itself (it has no ``__``)."""
CONFIG_FLAG = "--config"

_TOML_LINE = re.compile(r" ?\(at line (\d+), column (\d+)\)$")


def project_path(cwd: str | os.PathLike[str]) -> Path:
    """``agent.toml`` in ``cwd``."""
    return Path(cwd) / PROJECT_FILE


@dataclass(frozen=True, slots=True)
class ProjectFile:
    """The file read as the project's configuration, and who named it."""

    path: Path
    given_by: str | None = None
    """``"--config"`` or ``"TETHER_CONFIG"``: the file was named, so it must exist; ``None``: ``./agent.toml``,
    read when it is there."""


def project_file(
    cwd: str | os.PathLike[str], env: Mapping[str, str], explicit: str | os.PathLike[str] | None = None
) -> ProjectFile:
    """The project's file: ``explicit`` (``--config``), else ``TETHER_CONFIG``, else ``./agent.toml``; a
    relative path is taken from ``cwd``. The one rule the library and every command follow."""
    if explicit is not None and str(explicit):
        return ProjectFile(Path(cwd) / explicit, CONFIG_FLAG)
    variable = env.get(CONFIG_VARIABLE, "")
    if variable:
        return ProjectFile(Path(cwd) / variable, CONFIG_VARIABLE)
    return ProjectFile(project_path(cwd))


def user_path(env: Mapping[str, str]) -> Path:
    """The user's config file, following the XDG base directory spec."""
    xdg = env.get("XDG_CONFIG_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "tether" / "config.toml"
    home = env.get("HOME")
    return (Path(home) if home else Path.home()) / ".config" / "tether" / "config.toml"


@dataclass(eq=False)
class Layer:
    """One source of settings: a file, the environment or the command line, as a plain nested dict."""

    label: str
    """What the user calls it: the file's path, ``environment`` or ``command line``."""
    data: dict[str, Any]
    path: Path | None = None
    text: str | None = None
    """The file's text (files only), for line numbers."""
    names: dict[Loc, str] = field(default_factory=dict)
    """For the environment and flags: key path -> the variable or flag that set it."""
    moves: list[older.Move] = field(default_factory=list)
    """For a file in the older layout: its keys read as tether's."""
    problems: list[tuple[Loc, str]] = field(default_factory=list)
    """What reading the older layout found wrong, by key as written; reported with the schema's problems."""

    @cached_property
    def lines(self) -> dict[Loc, int]:
        """Key path as written -> line (a key read from the older layout is found through :meth:`written`)."""
        return key_lines(self.text) if self.text is not None else {}

    @cached_property
    def _older_keys(self) -> dict[Loc, Loc]:
        return {move.new: move.old for move in self.moves}

    def written(self, loc: Sequence[str | int]) -> Loc:
        """``loc`` as the file writes it: under the older key when an older key set it (found in the time of a
        look-up per level, however many keys moved)."""
        if self.moves:
            for end in range(len(loc), 0, -1):
                old = self._older_keys.get(tuple(loc[:end]))
                if old is not None:
                    return (*old, *loc[end:])
        return tuple(loc)

    def where(self, loc: Sequence[str | int]) -> tuple[str, int | None]:
        """Where ``loc`` was set in this layer: (origin, line); for a key read from the older layout, the line of
        the older key."""
        if self.path is not None:
            return str(self.path), line_of(self.lines, self.written(loc))
        for end in range(len(loc), 0, -1):
            name = self.names.get(tuple(loc[:end]))
            if name is not None:
                return name, None
        within = sorted(name for key, name in self.names.items() if key[: len(loc)] == tuple(loc))
        return (", ".join(within) if within else self.label), None


@dataclass(frozen=True, eq=False)
class Loaded:
    """A validated configuration and the layers it was merged from (lowest precedence first)."""

    config: Config
    layers: tuple[Layer, ...]
    notices: tuple[str, ...] = ()
    """Things to tell the user once (on stderr): a file read through the older layout, one line per file."""

    def origin(self, loc: Sequence[str | int]) -> str | None:
        """Where the value at ``loc`` was set: ``"/path/agent.toml line 3"``, ``"environment variable
        TETHER_MODEL"``, ``"command line (runtime.model)"``, ``"/path/agent.toml line 2 (as
        runtime.default_model)"`` for a key of the older layout; ``None`` for a default."""
        layer = layer_of(self.layers, loc, exact=True)
        if layer is None:
            return None
        origin, line = layer.where(loc)
        written = layer.written(loc)
        origin = origin if line is None else f"{origin} line {line}"
        return origin if written == tuple(loc) else f"{origin} (as {_issues.dotted(written)})"

    @property
    def files(self) -> list[Path]:
        return [layer.path for layer in self.layers if layer.path is not None]


def load(
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, object] | None = None,
    *,
    config_file: str | os.PathLike[str] | None = None,
) -> Loaded:
    """Read, merge and validate every layer; raises :class:`~tether.errors.ConfigInvalid` naming key and
    place. ``cwd`` defaults to the working directory, ``env`` to ``os.environ``; ``config_file`` (what
    ``--config`` gives) is read instead of ``./agent.toml``."""
    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else Path(cwd)
    project = project_file(cwd, env, config_file)
    files = [read_file(user_path(env)), read_file(project.path, given_by=project.given_by)]
    return loaded_from(files, cwd, env, flags)


def loaded_from(
    files: Sequence[Layer | None], cwd: Path, env: Mapping[str, str], flags: Mapping[str, object] | None
) -> Loaded:
    """The configuration of the file layers already read (the user's, the project's; ``None``: no such file),
    with the environment's and the flags' on top: what :func:`load` returns once it has read the files."""
    layers = [layer for layer in (*files, env_layer(env), flag_layer(flags or {})) if layer is not None]
    notices = tuple(
        older.notice(layer.path, layer.moves, named=layer.path != project_path(cwd))
        for layer in layers
        if layer.path is not None and layer.moves
    )
    return Loaded(validate(layers, env), tuple(layers), notices)


def load_config(
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, object] | None = None,
    *,
    config_file: str | os.PathLike[str] | None = None,
) -> Config:
    """The effective configuration (see the module docstring for the layers and their precedence)."""
    return load(cwd, env, flags, config_file=config_file).config


MAX_CONFIG_BYTES = 1024 * 1024
"""The largest configuration file read: a file past it (or a symlink to a device) is refused, not read on."""


def read_file(path: Path, *, given_by: str | None = None) -> Layer | None:
    """The layer of a TOML file, ``None`` when there is no such file, unless it was named (``given_by``
    ``--config`` or ``TETHER_CONFIG``): then its absence is an error naming it."""
    try:
        raw = read_bounded(path, MAX_CONFIG_BYTES)
    except FileNotFoundError:
        if given_by is None:
            return None
        raise fail([Issue("", f"no such file (named by {given_by})", str(path))]) from None
    except OSError as error:
        named = f" (named by {given_by})" if given_by else ""
        raise fail([Issue("", f"cannot be read: {error.strerror}{named}", str(path))]) from None
    return parse_text(raw, path)


def parse_text(raw: bytes, path: Path) -> Layer:
    """The layer of a file's bytes; a file that is not UTF-8 or not TOML is an error naming the line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise fail([Issue("", "is not UTF-8 text", str(path), raw[: error.start].count(b"\n") + 1)]) from None
    _refuse_deep_keys(text, path)
    try:
        data = tomllib.loads(text)
    except RecursionError:
        problem = f"nests arrays or inline tables more than {DEPTH_LIMIT} levels deep"
        raise fail([Issue("", problem, str(path), nesting_line(text))]) from None
    except tomllib.TOMLDecodeError as error:
        message = str(error).rstrip()
        match = _TOML_LINE.search(message)
        line = int(match.group(1)) if match else None
        if match:
            message = f"{message[: match.start()]} (column {match.group(2)})"
        raise fail([Issue("", f"is not valid TOML: {message}", str(path), line)]) from None
    layer = Layer(str(path), data, path=path, text=text)
    reading = older.read(data, lambda loc: line_of(layer.lines, loc))
    layer.moves, layer.problems = reading.moves, reading.problems
    return layer


def _refuse_deep_keys(text: str, path: Path) -> None:
    """``config_invalid`` for a key written with more dotted parts than the depth limit allows."""
    deep = deep_key_line(text)
    if deep is not None:
        key, line = deep
        problem = f"a key of more than {DEPTH_LIMIT} dotted parts nests tables more than {DEPTH_LIMIT} levels deep"
        shown = key if len(key) <= _issues.SHOWN else f"{key[: _issues.SHOWN]}…"
        raise fail([Issue(shown, problem, str(path), line)])


def parse_value(text: str) -> Any:
    """``text`` as a TOML value when it is one (``5``, ``true``, ``["a", "b"]``, ``"x"``), else as a string."""
    try:
        document = tomllib.loads(f"value = {text}")
    except (tomllib.TOMLDecodeError, RecursionError):
        return text
    return document["value"] if list(document) == ["value"] else text


def split_key(key: str) -> list[str]:
    """A dotted TOML key (``runtime.limits.max_turns``, ``providers."my.box".base_url``) -> its parts."""
    parts: list[str] = []
    zero: Any
    one: Any
    try:
        zero, one = tomllib.loads(f"{key} = 0"), tomllib.loads(f"{key} = 1")
    except tomllib.TOMLDecodeError:
        zero = one = {}
    while isinstance(zero, dict) and isinstance(one, dict) and len(zero) == 1 and list(zero) == list(one):
        (name,) = zero
        parts.append(name)
        zero, one = zero[name], one[name]
    if not parts or zero != 0 or one != 1:
        raise ConfigInvalid(f"{key!r} is not a dotted key such as 'runtime.limits.max_turns'")
    return parts


def env_layer(env: Mapping[str, str]) -> Layer | None:
    """The ``TETHER_*`` variables that are configuration (see the module docstring)."""
    found: list[tuple[list[str], str, Any]] = []
    problems: list[Issue] = []
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX) or not raw:
            continue
        rest = name[len(ENV_PREFIX) :]
        if name == MODEL_VARIABLE:
            found.append((["runtime", "model"], name, raw))
        elif ENV_SEPARATOR in rest:
            parts = rest.lower().split(ENV_SEPARATOR)
            if not all(parts):
                problems.append(Issue("", "has an empty key between '__'", f"environment variable {name}"))
                continue
            found.append((parts, name, parse_value(raw)))
    if problems:
        raise fail(problems)
    if not found:
        return None
    # Wider settings first, so that TETHER_A__B__C lands inside TETHER_A__B; TETHER_MODEL last of all.
    found.sort(key=lambda item: (item[1] == MODEL_VARIABLE, len(item[0]), item[1]))
    layer = Layer("environment", {})
    for parts, name, value in found:
        _set_path(layer.data, parts, value)
        layer.names[tuple(parts)] = f"environment variable {name}"
    return layer


def flag_layer(flags: Mapping[str, object]) -> Layer | None:
    """Command-line settings: dotted key -> value (``None``: the flag was not given)."""
    given = {key: value for key, value in flags.items() if value is not None}
    if not given:
        return None
    layer = Layer("command line", {})
    for key, value in sorted(given.items(), key=lambda item: len(split_key(item[0]))):
        parts = split_key(key)
        _set_path(layer.data, parts, value)
        layer.names[tuple(parts)] = f"command line ({key})"
    return layer


def _set_path(data: dict[str, Any], parts: Sequence[str], value: Any) -> None:
    node = data
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[parts[-1]] = value


def merge(layers: Sequence[Layer]) -> dict[str, Any]:
    """The layers' data merged: tables key by key, everything else replaced by the higher layer."""
    merged: dict[str, Any] = {}
    for layer in layers:
        _merge_into(merged, layer.data)
    return merged


def _merge_into(base: dict[str, Any], over: Mapping[str, Any]) -> None:
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge_into(base[key], value)
        elif isinstance(value, dict):
            base[key] = {}
            _merge_into(base[key], value)
        else:
            base[key] = value


def layer_of(layers: Sequence[Layer], loc: Sequence[str | int], *, exact: bool = False) -> Layer | None:
    """The layer whose value is in effect at ``loc``: the one that holds most of the path, the higher on ties.

    A list is replaced whole, so the search stops at one, unless ``exact``: then only a layer holding the
    whole path (list elements included) counts, and ``None`` means the value is a default.
    """
    best: Layer | None = None
    best_depth = 0
    for layer in layers:
        node: Any = layer.data
        depth = 0
        for part in loc:
            in_table = isinstance(node, dict) and part in node
            in_list = exact and isinstance(node, list) and isinstance(part, int) and part < len(node)
            if not (in_table or in_list):
                break
            node = node[part]
            depth += 1
        if depth and depth >= best_depth and (depth == len(loc) or not exact):
            best, best_depth = layer, depth
    return best


def validate(layers: Sequence[Layer], env: Mapping[str, str] | None = None) -> Config:
    """Merge and check the layers; every problem found is reported at once (the first
    :data:`~tether.config.issues.MAX_ISSUES` of them in file order, and how many more), with key and place."""
    too_deep = [_placed(layers, loc, message) for layer in layers for loc, message in _too_deep(layer)]
    if too_deep:
        raise fail(too_deep)
    older_problems = [_older_problem(layer, loc, message) for layer in layers for loc, message in layer.problems]
    redactor = Redactor(secret_values(env or {}, _key_variables(layers)))
    try:
        config = Config.model_validate(merge(layers))
    except ValidationError as error:
        details = error.errors(include_url=False)
        places = sorted(
            ((*_where(layers, tuple(detail["loc"])), index) for index, detail in enumerate(details)),
            key=lambda place: (place[0] or "", place[1] or 0, place[2]),
        )
        first = [details[index] for _, _, index in places[:MAX_ISSUES]]
        found = [_issues.describe(detail, redactor) for detail in first]
        issues = [_placed(layers, loc, message) for loc, message in found]
        raise fail([*older_problems, *issues], more=len(details) - len(first)) from None
    if older_problems:
        raise fail(older_problems)
    problems = cross_checks(config)
    if problems:
        raise fail([_placed(layers, loc, message) for loc, message in problems])
    return config


def _too_deep(layer: Layer) -> list[tuple[Loc, str]]:
    """The first key path of ``layer`` that nests more than ``DEPTH_LIMIT`` levels, found without recursion."""
    stack: list[tuple[Loc, Any]] = [((), layer.data)]
    while stack:
        loc, node = stack.pop()
        if len(loc) > DEPTH_LIMIT:
            return [(loc, f"nests tables or lists more than {DEPTH_LIMIT} levels deep")]
        if isinstance(node, dict):
            stack.extend(((*loc, key), value) for key, value in node.items() if isinstance(value, dict | list))
        elif isinstance(node, list):
            stack.extend(((*loc, index), value) for index, value in enumerate(node) if isinstance(value, dict | list))
    return []


def _where(layers: Sequence[Layer], loc: Loc) -> tuple[str | None, int | None]:
    layer = layer_of(layers, loc)
    return (None, None) if layer is None else layer.where(loc)


def _placed(layers: Sequence[Layer], loc: Loc, message: str) -> Issue:
    """The issue at ``loc``, named as the layer that set it writes it (an older key by its older name)."""
    layer = layer_of(layers, loc)
    if layer is None:
        return Issue(_issues.dotted(loc), message)
    origin, line = layer.where(loc)
    return Issue(_issues.dotted(layer.written(loc)), message, origin, line)


def _older_problem(layer: Layer, loc: Loc, message: str) -> Issue:
    """A problem of the older layout, at ``loc`` as the file writes it."""
    return Issue(_issues.dotted(loc), message, layer.label, line_of(layer.lines, loc))


def _key_variables(layers: Sequence[Layer]) -> set[str]:
    """Every ``api_key_env`` the layers name, and the providers' own key variables."""
    names = set(ALL_KEY_VARIABLES)
    for layer in layers:
        providers = layer.data.get("providers")
        if isinstance(providers, dict):
            for provider in providers.values():
                if isinstance(provider, dict) and isinstance(provider.get("api_key_env"), str):
                    names.add(provider["api_key_env"])
    return names


def builtin_prefixes() -> frozenset[str]:
    """The model-string prefixes tether knows without configuration."""
    return registry.prefixes()


def cross_checks(config: Config) -> list[tuple[Loc, str]]:
    """What the schema cannot see key by key: references between sections, required pairs, duplicates."""
    problems: list[tuple[Loc, str]] = []
    builtin = builtin_prefixes()
    model = config.runtime.model
    for each in [model] if isinstance(model, str) else model or ():
        prefix = each.partition(":")[0]
        known = builtin | set(config.providers)
        if prefix not in known:
            problems.append(
                (
                    ("runtime", "model"),
                    f"unknown provider {prefix!r} in {each!r}{_issues.suggestion(prefix, known)}"
                    " (a [providers.NAME] table adds one)",
                )
            )
    for name, provider in config.providers.items():
        if provider.api_version is not None and (provider.profile or name) != "azure":
            problems.append((("providers", name, "api_version"), "only an Azure OpenAI provider takes an api_version"))
        if ":" in name:
            problems.append((("providers", name), "a provider's name cannot contain ':'"))
        elif name in builtin and provider.profile not in (None, name):
            problems.append(
                (("providers", name, "profile"), f"{name!r} is built in; only a provider you name takes a profile")
            )
        elif name not in builtin:
            profile = PROFILES[provider.profile or "openai-compatible"]
            if provider.base_url is None and profile.base_url is None:
                problems.append(
                    (("providers", name, "base_url"), f"is required: profile {profile.name!r} has no default URL")
                )
    problems.extend(_mcp_checks(config))
    problems.extend(_compaction_checks(config))
    problems.extend(_session_checks(config))
    return problems


def _session_checks(config: Config) -> list[tuple[Loc, str]]:
    """``url`` for the postgres store only (and required there), ``path`` for the others."""
    section = config.session
    if section.store != "postgres":
        return [
            (("session", key), "is only for store 'postgres'")
            for key in ("url", "db_schema")
            if key in section.model_fields_set
        ]
    problems: list[tuple[Loc, str]] = []
    if section.url is None:
        problems.append((("session", "url"), "is required for store 'postgres' (postgresql://user@host:5432/dbname)"))
    elif not section.url.startswith(("postgresql://", "postgres://")):
        problems.append((("session", "url"), "must be a postgresql:// URL"))
    if section.path is not None:
        problems.append((("session", "path"), "is not for store 'postgres' (its sessions live on the server)"))
    return problems


def _compaction_checks(config: Config) -> list[tuple[Loc, str]]:
    """``keep_recent`` below ``threshold``, blamed on the one of them that was set (``keep_recent`` if both)."""
    section = config.compaction
    if section.keep_recent < section.threshold:
        return []
    key = "keep_recent" if "keep_recent" in section.model_fields_set else "threshold"
    return [
        (
            ("compaction", key),
            f"keep_recent ({section.keep_recent:g}) must be below threshold ({section.threshold:g}): otherwise "
            "a compaction could keep everything and free nothing",
        )
    ]


def _mcp_checks(config: Config) -> list[tuple[Loc, str]]:
    """The rules of :mod:`tether.tools.mcp_spec` that look across a server's keys and across the servers."""
    servers = config.mcp.servers
    problems: list[tuple[Loc, str]] = [
        (("mcp", "servers", index, "id"), problem) for index, problem in duplicate_ids(s.id for s in servers)
    ]
    for index, server in enumerate(servers):
        given = {key: getattr(server, key) for key in server.model_fields_set if key in (*STDIO_ONLY, *HTTP_ONLY)}
        problems += [
            (("mcp", "servers", index, key), problem) for key, problem in server_problems(server.transport, given)
        ]
    return problems
