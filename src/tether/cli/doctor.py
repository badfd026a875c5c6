"""``tether doctor``: is everything a run needs here, and working? One line per check, with a hint when not.

The checks, in order (each a :class:`~tether.health.HealthCheck`, bounded by ``--timeout``, run by
:func:`tether.health.run_check`, so none raises):

* ``config``: the configuration loads (``agent.toml``, the user's file, ``TETHER_*``, the flags). When it
  does not, every other check is skipped: they all read it.
* ``model``: a model is configured (or one can be chosen), under a prefix tether knows.
* ``api_key``: the configured provider's key is in its variable (``providers.NAME.api_key_env``, else the
  table of :mod:`tether.keys`), or its reference (``providers.NAME.api_key``) resolves; shown by its source
  (the variable, or the reference: ``the command 'pass show openai'``) and length only, never its value.
  Skipped for a provider that takes no key, or whose key is optional and not set.
* ``provider``: the model's API reached and the key accepted, no token spent (``Agent.health()``'s check).
* For a fallback (``runtime.model`` a list, ``--model a,b``), these three for each of its models, named
  ``model:<model>``, ``api_key:<model>`` and ``provider:<model>``: a run may come to any of them.
* ``mcp:<id>``: each ``[[mcp.servers]]`` started (or reached), its handshake done, its tools listed; then
  closed. Each server on its own, so one that fails hides no other.
* ``store``: the session store writes, reads back and deletes a probe session (``Agent.health()``'s check).
* ``durable``: the workflow database of durable runs (``--db``, else ``runs.sqlite`` in the state directory
  when it exists): reachable and writable, without writing a row, and ``tether[durable]`` installed.
* ``sandbox``: ``bwrap`` found and able to start a sandbox here, as the ``bash`` tool would; skipped when
  ``tools.bash.sandbox`` is ``"off"``.
* ``skills``: the skills of ``[agent] skills``, ``.tether/skills/`` and the user's ``skills/`` read and checked,
  as a run reads them: failed (``skill_invalid``, naming the ``SKILL.md`` and what to change) for a broken one,
  also one a run would skip with a warning; skipped when there are none.

The first three run one after the other (each needs the one before); the others at once, so a report takes as
long as its slowest check. Exit codes (:mod:`tether.cli.exits`): 0 when no check failed (skipped ones are not
failures), 1 when one did, 2 for a usage error. ``--json`` prints the report (:meth:`HealthReport.to_dict`) and
nothing else on stdout.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sqlite3
import tempfile
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether.cli import exits
from tether.cli.build import mcp_server_configs, open_store
from tether.cli.runs_db import DEFAULT_FILE, RunsDatabase, runs_database
from tether.config import Config, load
from tether.config.target import NEED_KEY
from tether.errors import ConfigInvalid, ErrorCode, StoreUnavailable
from tether.health import HINTS, Check, HealthCheck, HealthReport, Skip, provider_check, run_check, store_check
from tether.keys import key_variables
from tether.secrets import Masker


@dataclass(frozen=True, slots=True)
class DoctorOptions:
    model: str | None = None
    config_file: str | None = None
    db: str | None = None
    timeout: float = 10.0


class Doctor:
    """The checks of one ``tether doctor``, against a working directory and an environment."""

    def __init__(self, options: DoctorOptions, cwd: Path, env: Mapping[str, str]) -> None:
        self.options, self.cwd, self.env = options, cwd, env
        self.masker = Masker.from_environment(env)
        self.checks: list[HealthCheck] = []
        self.config: Config | None = None
        """The configuration, once the ``config`` check has loaded it."""
        self.model = ""
        """The model, once the ``model`` check has found it."""

    async def report(self) -> HealthReport:
        await self._check("config", self._config, "config_invalid")
        config = self.config
        if config is None:
            for name in ("model", "api_key", "provider", "store", "durable", "sandbox", "skills"):
                await self._check(name, _skipped("the configuration does not load"), "config_invalid")
            return HealthReport(tuple(self.checks))
        model_list = config.runtime.model
        fallback = isinstance(model_list, list) and len(model_list) > 1
        providers = []
        for wanted in model_list if fallback and isinstance(model_list, list) else [config.runtime.first_model]:
            suffix = f":{wanted}" if fallback else ""  # each model of a fallback checked, named by its model
            self.model = ""
            model = await self._check("model" + suffix, self._model(config, wanted), "config_invalid")
            keyed = await self._check("api_key" + suffix, self._api_key(config, model.status == "ok"), "config_invalid")
            ready = model.status == "ok" and keyed.status != "failed"
            check = self._provider(config, ready, self.model)
            providers.append(self._run("provider" + suffix, check, "transport", HINTS["provider"]))
        servers = mcp_server_configs(config, self.cwd)
        parts = await asyncio.gather(  # apart from one another: at once, the report as slow as the slowest
            *providers,
            *(self._run(f"mcp:{server.id}", _server(server), "transport") for server in servers),
            self._run("store", self._store(config), "store_unavailable", HINTS["store"]),
            self._run("durable", self._durable, "store_unavailable"),
            self._run("sandbox", self._sandbox(config), "permission_denied"),
            self._run("skills", self._skills(config), "skill_invalid"),
        )
        self.checks.extend(parts)
        return HealthReport(tuple(self.checks))

    async def _check(
        self, name: str, check: Check, code: ErrorCode, hints: dict[str, str] | None = None
    ) -> HealthCheck:
        """Run a check and keep its line."""
        result = await self._run(name, check, code, hints)
        self.checks.append(result)
        return result

    def _run(
        self, name: str, check: Check, code: ErrorCode, hints: dict[str, str] | None = None
    ) -> Coroutine[Any, Any, HealthCheck]:
        """The check's run, with the hints of its kind (``mcp`` for ``mcp:<id>``) and ``hints``."""
        hints = {**(hints or {}), **_HINTS.get(name.partition(":")[0], {})}
        return run_check(name, check, timeout=self.options.timeout, masker=self.masker, code=code, hints=hints)

    # --- the checks -------------------------------------------------------------------------------------------

    async def _config(self) -> str:
        flags = {"runtime.model": self.options.model}
        loaded = await asyncio.to_thread(load, self.cwd, self.env, flags, config_file=self.options.config_file)
        self.config = loaded.config
        files = ", ".join(str(path) for path in loaded.files)
        return f"read {files}" if files else "no configuration file: the defaults and TETHER_* variables"

    def _model(self, config: Config, wanted: str | None) -> Check:
        """``wanted`` (one model of a fallback's list, or the configured one) found, or one chosen."""

        async def check() -> str:
            from tether.providers.default_model import choose_model
            from tether.providers.registry import prefixes

            choice = choose_model(wanted, self.env)
            if choice.model is None:
                raise ConfigInvalid((choice.problem or "no model is configured").replace("\n", " "))
            self.model = choice.model
            prefix = choice.model.partition(":")[0]
            if prefix not in prefixes() and prefix not in config.providers:
                known = ", ".join(sorted(prefixes()))
                raise ConfigInvalid(f"{choice.model!r}: tether knows no provider {prefix!r} (known: {known})")
            return choice.model if choice.notice is None else f"{choice.model} (chosen by tether: none is configured)"

        return check

    def _api_key(self, config: Config, model: bool) -> Check:
        async def check() -> str:
            if not model:
                raise Skip("no model to check the key of")
            reference = key_reference(config, self.model)
            if reference is not None:
                from tether.secret_refs import describe, resolve_secret

                value = await asyncio.to_thread(resolve_secret, reference)
                return f"from {describe(reference)} (***, {len(value)} characters)"
            variables, required = key_of(config, self.model)
            if not variables:
                prefix = self.model.partition(":")[0]
                raise Skip(SIGNED_OTHERWISE.get(prefix, f"{prefix} takes no key"))
            found = find_key_in(variables, self.env)
            if found is None:
                if not required:
                    raise Skip(f"{' or '.join(variables)} not set; {self.model} works without a key")
                raise ConfigInvalid(f"{' or '.join(variables)} is not set: {self.model} needs an API key")
            name, value = found
            return f"{name} is set (***, {len(value)} characters)"

        return check

    def _provider(self, config: Config, ready: bool, model: str) -> Check:
        async def check() -> str:
            if not ready:
                raise Skip("needs a model and its key")
            from tether.cli.build import with_model
            from tether.config import model_target

            provider = model_target(with_model(config, model), self.env).provider()
            return await provider_check(provider, self.options.timeout)()

        return check

    def _store(self, config: Config) -> Check:
        async def check() -> str:
            from tether.cli.build import close_store

            store = open_store(config.session, self.cwd, self.env)
            try:
                path = getattr(store, "path", None)
                where = config.session.store if path is None else f"{config.session.store} at {path}"
                await store_check(store)()
                return f"{where}: a probe session written, read back and deleted"
            except (OSError, sqlite3.Error) as error:
                raise StoreUnavailable(f"{config.session.store} store: {error}") from error
            finally:
                await close_store(store)

        return check

    async def _durable(self) -> str:
        database = runs_database(self.options.db, self.cwd, self.env)
        if self.options.db is None and database.path is not None and not database.path.exists():
            raise Skip(f"no workflow database yet (tether batch or a worker makes {DEFAULT_FILE}; --db names one)")
        if importlib.util.find_spec("dbos") is None:
            raise ConfigInvalid("durable runs need DBOS: pip install 'tether[durable]'")
        return await asyncio.to_thread(_writable, database)

    def _sandbox(self, config: Config) -> Check:
        async def check() -> str:
            from tether.tools.sandbox import INSTALL_HINT, bwrap_problem

            bash = config.tools.bash
            if bash.sandbox == "off":
                raise Skip('tools.bash.sandbox is "off": bash commands run unconfined')
            problem = await asyncio.to_thread(bwrap_problem, bash.bwrap, network=bash.network)
            if problem is not None:
                from tether.errors import PermissionDenied

                unconfined = "are refused" if bash.sandbox == "required" else "run unconfined"
                raise PermissionDenied(f"{problem}: bash commands {unconfined}; {INSTALL_HINT}")
            return f"bubblewrap starts a sandbox here (tools.bash.sandbox = {bash.sandbox!r})"

        return check

    def _skills(self, config: Config) -> Check:
        async def check() -> str:
            from tether.cli.build import find_skills
            from tether.skills import SkillInvalid

            found = await asyncio.to_thread(find_skills, config.agent, self.cwd, self.env)
            if found.broken:
                first, more = found.broken[0], len(found.broken) - 1
                also = f" (and {more} more broken: tether skills list)" if more else ""
                raise SkillInvalid(first.path, first.reason, f"{first.problem}; a run skips it{also}")
            if not found:
                raise Skip("no skills ([agent] skills, .tether/skills/, the user's skills/)")
            shadowed = f" ({len(found.shadowed)} shadowed)" if found.shadowed else ""
            return f"{len(found)} skill{'s' if len(found) != 1 else ''}: {', '.join(found.names)}{shadowed}"

        return check


_HINTS: dict[str, dict[str, str]] = {
    "config": {"config_invalid": "fix the key the message names (tether config show says where each is set)"},
    "model": {"config_invalid": "set runtime.model in agent.toml, TETHER_MODEL, or pass --model"},
    "api_key": {
        "config_invalid": "export the variable named, or name another with providers.NAME.api_key_env",
        "secret_unavailable": "fix the reference in providers.NAME.api_key (run its command by hand to see why)",
    },
    "mcp": {
        "config_invalid": "fix the server's command or variables in [[mcp.servers]]",
        "transport": "the server failed to start or answer: run its command by hand to see why",
        "timeout": "the server did not answer in time; a larger --timeout gives it longer",
    },
    "store": {"config_invalid": "fix [session] (store, path, url)"},
    "durable": {
        "config_invalid": "install the extra named",
        "store_unavailable": "check the path's permissions, or give --db another database",
    },
    "sandbox": {"permission_denied": 'or set tools.bash.sandbox = "off" to run bash commands unconfined knowingly'},
    "skills": {"skill_invalid": "fix the SKILL.md named (tether skills list reads them as a run does)"},
}


SIGNED_OTHERWISE = {
    "vertex": "vertex signs with Application Default Credentials (the provider check asks for a token)",
}
"""Providers over HTTP that take no key variable, and what they sign with instead."""


def key_of(config: Config, model: str) -> tuple[tuple[str, ...], bool]:
    """The variables ``model``'s key is read from, and whether the provider refuses to start without one: as
    ``config.target.model_target`` reads it (``providers.NAME.api_key_env``, else the profile's variables)."""
    from tether.providers.registry import PROFILES, prefixes

    prefix = model.partition(":")[0]
    settings = config.providers.get(prefix)
    profile = prefix
    variables = key_variables(prefix)
    if settings is not None:
        profile = prefix if prefix in prefixes() else (settings.profile or "openai-compatible")
        variables = (settings.api_key_env,) if settings.api_key_env else key_variables(profile)
    required = profile in NEED_KEY or (profile in PROFILES and PROFILES[profile].requires_key)
    return variables, required


def key_reference(config: Config, model: str) -> str | None:
    """The reference ``providers.NAME.api_key`` holds for ``model``'s provider (``cmd:pass show openai``), if any."""
    settings = config.providers.get(model.partition(":")[0])
    return None if settings is None else settings.api_key


def find_key_in(variables: tuple[str, ...], env: Mapping[str, str]) -> tuple[str, str] | None:
    return next(((name, env[name]) for name in variables if env.get(name)), None)


def _skipped(reason: str) -> Check:
    async def check() -> str:
        raise Skip(reason)

    return check


def _server(config: object) -> Check:
    async def check() -> str:
        from tether.tools.mcp import MCPTools

        async with MCPTools([config]) as connected:  # type: ignore[list-item]
            count = len(connected.tools)
            return f"started, {count} tool{'s' if count != 1 else ''} listed"

    return check


def _writable(database: RunsDatabase) -> str:
    """Whether the workflow database can be written, without writing to it: a SQLite file's write begun and
    rolled back (or, for a file not made yet, a file made and removed where it would be); a server reached and
    asked whether it takes writes (not a standby, not read-only)."""
    if database.url is not None:
        import psycopg

        with psycopg.connect(database.url, connect_timeout=10) as connection:
            row = connection.execute("SELECT pg_is_in_recovery(), current_setting('transaction_read_only')").fetchone()
        if row is None or row[0] or row[1] == "on":
            raise StoreUnavailable(f"{database.shown()}: the server takes no writes (a standby, or read-only)")
        return f"{database.shown()}: connected, takes writes"
    path = database.path
    assert path is not None
    try:
        if not path.exists():
            where = path.parent
            while not where.exists() and where != where.parent:  # the directory it would be made in
                where = where.parent
            with tempfile.NamedTemporaryFile(dir=where, prefix=".tether-doctor-"):
                pass
            return f"{path} does not exist yet; it can be made in {where}"
        db = sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=5.0, isolation_level=None)
        try:  # a write that is never committed: the journal (or log) is written, the database is not
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("CREATE TABLE tether_doctor_probe (x)")
            finally:
                db.execute("ROLLBACK")
        finally:
            db.close()
    except (OSError, sqlite3.Error) as error:
        raise StoreUnavailable(f"{path}: {error}") from error
    return f"{path}: writable"


async def diagnose(options: DoctorOptions, cwd: Path, env: Mapping[str, str]) -> HealthReport:
    """The report of ``tether doctor`` in ``cwd`` under ``env``."""
    return await Doctor(options, cwd, env).report()


def summary(report: HealthReport) -> str:
    """One line per check (status, name, detail) and an indented hint under a failure."""
    width = max((len(check.name) for check in report.checks), default=0)
    lines = []
    for check in report.checks:
        lines.append(f"{check.status:<7}  {check.name:<{width}}  {check.detail}".rstrip())
        if check.status == "failed" and check.hint:
            lines.append(f"{'':<7}  {'':<{width}}  hint: {check.hint}")
    failed = len(report.failed)
    lines.append("all checks passed" if not failed else f"{failed} check{'s' if failed != 1 else ''} failed")
    return "\n".join(lines)


def main(options: DoctorOptions, *, as_json: bool) -> int:
    """Run the checks, print them, and return the exit code."""
    import json

    import click

    report = asyncio.run(diagnose(options, Path.cwd(), os.environ))
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        click.echo(summary(report))
    return exits.OK if report.ok else exits.CONFIG
