"""From the configuration to a ready agent: the model, the workspace tools, the permissions, the session store.

Settings come from flags > ``TETHER_*`` variables > ``./agent.toml`` (or the ``--config`` file) > the user's
config > defaults (:mod:`tether.config.load`); when no model is configured,
:func:`~tether.providers.default_model.choose_model` picks one.
The tools are the file tools and ``bash``, rooted at the working directory, offered as ``tools.mode`` and
``tools.deny`` say; ``bash`` runs in a sandbox as ``[tools.bash]`` says. Write-type tools (every tool not
marked ``read_only``) go through :class:`WriteGate`: allowed with ``--yes``, asked about in a terminal,
refused otherwise. A run's history is compacted as ``[compaction]`` says.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.agent import Agent
from tether.bounded import read_bounded
from tether.cli.paths import cache_dir, default_session_path
from tether.config import AgentConfig, CacheConfig, Config, SessionConfig, build_provider
from tether.config.service import ConfigService
from tether.errors import ConfigInvalid
from tether.messages import ToolCall
from tether.providers.default_model import READ_ONLY_TOOLS, ModelChoice, choose_model, embedded_notice
from tether.secrets import Masker
from tether.telemetry import DISABLED
from tether.tools.base import Tool
from tether.tools.calculator import calculator_tool
from tether.tools.files import file_tools
from tether.tools.permissions import Allow, Approver, Ask, Decision, Deny
from tether.tools.shell import bash_tool
from tether.tools.workspace import Workspace

if TYPE_CHECKING:
    from tether.providers.response_cache import ResponseCache
    from tether.sessions import SessionStore
    from tether.skills import Skills
    from tether.telemetry import Telemetry
    from tether.tools.mcp_spec import MCPServerConfig

SYSTEM = (
    "You are tether, an assistant working in {where}. With your tools you can read, write and "
    "edit files there, run bash commands and calculate exactly. Look before you change anything, do what was "
    "asked and no more, and answer briefly."
)

LISTED_ENTRIES = 40
"""Entries of the working directory named in the system prompt; the rest are counted."""


def system_prompt(root: Path, *, durable: bool = False) -> str:
    """The agent's system prompt: who it is, where it works, and what that directory holds at the start.

    Naming the files costs a few tokens and saves a model a listing call, or a guess: a small model asked
    about ``notes.txt`` reads ``notes.txt`` once it has seen the name among the files, not a path it made up.
    ``durable``: a durable agent's prompt names neither the directory nor its files. The prompt is part of its
    deploy version, which every worker of one deployment and every process that enqueues for them must share
    wherever they were started, and which must not change when a file appears (the workflow database itself);
    its runs start later anyway.
    """
    if durable:
        return SYSTEM.format(where="its working directory")
    return SYSTEM.format(where=f"the directory {root}") + "\n" + directory_overview(root)


AGENTS_MD = "AGENTS.md"
"""The instructions file coding agents share, read from the workspace's root."""
MAX_AGENTS_MD = 32_000
"""Characters of AGENTS.md put in the system prompt; a longer file is cut there, and the prompt says so."""


def instructions(root: Path, agent: AgentConfig, *, durable: bool = False) -> str:
    """The command's system prompt: :func:`system_prompt`, then the workspace's AGENTS.md (unless
    ``agent.agents_md`` is false), then ``[agent] instructions`` (or ``--system``), each after a blank line."""
    parts = [system_prompt(root, durable=durable)]
    if agent.agents_md and (project := agents_md(root)) is not None:
        parts.append(project)
    if agent.instructions:
        parts.append(agent.instructions.strip())
    return "\n\n".join(parts)


def agents_md(root: Path, limit: int = MAX_AGENTS_MD) -> str | None:
    """The workspace's AGENTS.md as the system prompt quotes it; ``None`` when there is none (or it is empty, or
    not a file that can be read)."""
    try:  # its head: a file of any size (or a symlink to a device) costs a bounded read
        text = read_bounded(root / AGENTS_MD, 4 * limit + 4, head=True).decode("utf-8", errors="replace").strip()
    except OSError:
        return None
    if not text:
        return None
    if len(text) > limit:
        text = f"{text[:limit]}\n[AGENTS.md is cut here: it is longer than {limit:,} characters.]"
    return f"The workspace's AGENTS.md (its instructions for agents working in it):\n\n{text}"


def directory_overview(root: Path, limit: int = LISTED_ENTRIES) -> str:
    """One line naming the directory's entries (directories with a ``/``, hidden ones left out), sorted."""
    try:
        with os.scandir(root) as scan:
            entries = sorted(f"{e.name}/" if e.is_dir() else e.name for e in scan if not e.name.startswith("."))
    except OSError:
        return "Its entries could not be listed."
    if not entries:
        return "The directory is empty."
    more = f" (and {len(entries) - limit} more)" if len(entries) > limit else ""
    return f"The directory holds: {', '.join(entries[:limit])}{more}."


NOT_INTERACTIVE = (
    "{name} needs approval (--yes allows it): it can change files or run commands, and no one can be asked "
    "since stdin is not a terminal"
)


MCP_TOOL_TIMEOUT = 300.0
"""Seconds an MCP tool call may take when neither its server nor ``[runtime.limits]`` says."""


class NoModel(Exception):
    """No model is configured and none could be chosen; the message says what to do (two lines)."""


@dataclass(frozen=True, slots=True)
class Setup:
    """The loaded configuration and what every run of this command shares."""

    config: Config
    choice: ModelChoice
    store: SessionStore
    workspace: Workspace
    env: Mapping[str, str]
    extra_tools: Sequence[Tool] = field(default=())
    """Tools from the configured MCP servers, once connected (:func:`mcp_tools`)."""
    notices: tuple[str, ...] = ()
    """What loading the configuration has to tell the user, once, on stderr (``Loaded.notices``)."""
    telemetry: Telemetry | None = None
    """How the agents' runs are observed (``cli/otlp.py`` sets it when spans are exported); ``None``: the
    defaults (log records as ``-v`` says)."""
    settings: ConfigService | None = None
    """The configuration the setup was loaded from, for commands that change it (the chat's ``--save``)."""
    skills: Skills | None = None
    """The skills the agent has (:func:`find_skills`); ``None`` when there are none."""
    python: Agent[Any, Any] | None = None
    """The agent ``--agent MODULE:ATTR`` named (:func:`load_python_setup`): every run is its, and the
    configuration gives only the command's own settings."""

    @property
    def model(self) -> str:
        assert self.choice.model is not None
        return self.choice.model

    def tools(self) -> list[Tool]:
        """The workspace tools (``read``, ``write``, ``edit``, ``bash`` as ``[tools.bash]`` says), ``calculate``
        (``tools/calculator.py``: exact arithmetic, which small models cannot do) and the MCP servers' tools."""
        bash = self.config.tools.bash
        shell = bash_tool(
            self.workspace,
            sandbox=bash.sandbox,
            network=bash.network,
            bwrap=bash.bwrap,
            pass_env=bash.pass_env,
            read_only_paths=bash.read_only_paths,
            masker=Masker.from_environment(self.env),
        )
        return [*file_tools(self.workspace), shell, calculator_tool(), *self.extra_tools]

    def tool_mode(self, model: str, *, yes: bool) -> str:
        """``tools.mode``, except for the embedded model tether chose itself (:attr:`ModelChoice.read_only`):
        read-only unless ``tools.mode`` was set (file, variable or ``--mode``) or ``--yes`` was given."""
        if self.python is not None:
            return str(self.python.mode)
        tools = self.config.tools
        if self.choice.read_only and model == self.choice.model and not yes and "mode" not in tools.model_fields_set:
            return "read-only"
        return tools.mode

    def notice(self, *, yes: bool) -> str | None:
        """What to say on stderr about the model tether chose (``None``: the user chose it). For the embedded
        model, the tools it is actually given: read-only ones, or every tool with changes asked about first,
        or allowed (``--yes``)."""
        if not self.choice.read_only:
            return self.choice.notice
        if self.tool_mode(self.model, yes=yes) == "read-only":
            return embedded_notice(READ_ONLY_TOOLS)
        if yes:
            return embedded_notice("every tool, changes allowed without asking (--yes)")
        return embedded_notice("every tool, each change asked about first")

    def agent(
        self,
        *,
        model: str | None = None,
        mode: str | None = None,
        yes: bool = False,
        interactive: bool = False,
        approve: Approver | None = None,
        durable: bool = False,
    ) -> Agent:
        """An agent on ``model`` (the chosen one by default) with the workspace tools and this setup's store; or
        the Python agent (:meth:`python_agent`). ``durable``: for a ``DurableAgent``, its prompt without the
        directory's path and files (:func:`system_prompt`), so that every process of one setup has one deploy
        version wherever it was started."""
        if self.python is not None:
            return self.python_agent(model=model, mode=mode, yes=yes, approve=approve)
        config = self.config
        if model is not None or not isinstance(config.runtime.model, list):  # a fallback's list is kept whole
            config = with_model(config, model or self.model)
        tools = self.tools()
        return Agent(
            build_provider(config, self.env),
            tools=tools,
            system=instructions(self.workspace.root, config.agent, durable=durable),
            limits=config.runtime.limits.to_limits(),
            mode=mode or self.tool_mode(model or self.model, yes=yes),
            deny=config.tools.deny,
            can_use_tool=WriteGate(tools, yes=yes, interactive=interactive),
            approve=approve,
            store=self.store,
            telemetry=self.telemetry,
            compaction=config.compaction.to_compaction(),
            cache_tool_outputs=config.tools.cache_tool_outputs,
            record_exchanges=config.session.record_exchanges,
            cache=response_cache(config.cache, self.workspace.root, self.env),
            skills=self.skills or (),
        )

    def python_agent(
        self, *, model: str | None, mode: str | None, yes: bool, approve: Approver | None
    ) -> Agent[Any, Any]:
        """The agent of ``--agent``, with ``mode`` (``--mode``, ``/mode``) when given; an ``Ask`` of its
        ``can_use_tool``, and a call of an ``approval=True`` tool, is answered by its own ``approve``, else yes with
        ``--yes``, else by ``approve`` (the terminal's question; ``None``: the run pauses for a decision).
        When the command exports spans (``self.telemetry``) and the agent has no tracer provider of its own, its
        runs export theirs too. ``ConfigInvalid`` for another ``model``: its model is its own."""
        agent = self.python
        assert agent is not None
        if model is not None and model != self.model:
            raise ConfigInvalid(f"the --agent agent runs on {self.model}; its model is set in its Python code")
        if mode is not None:
            agent.mode = mode
        if agent.approve is None:
            agent.approve = _yes if yes else approve
        if self.telemetry is not None and agent.telemetry is not DISABLED and agent.telemetry.tracer_provider is None:
            agent.telemetry = dataclasses.replace(  # the command's exporters (``cli/otlp.py``); sub-agents' spans nest
                agent.telemetry,
                tracer_provider=self.telemetry.tracer_provider,
                meter_provider=agent.telemetry.meter_provider or self.telemetry.meter_provider,
            )
        return agent


def _yes(call: ToolCall, reason: str) -> bool:
    """``--yes``: every ``Ask`` is answered yes."""
    return True


def load_python_setup(spec: str, cwd: Path, env: Mapping[str, str], config_file: str | None = None) -> Setup:
    """The setup of ``--agent MODULE:ATTR`` (:mod:`tether.cli.python_agent`): its runs are the Python agent's
    (model, tools, instructions, limits, permissions, store), and of the configuration only the command's own
    settings are used: ``[cli]``, and ``[session]`` for an agent without a store of its own."""
    from tether.cli.python_agent import plain_agent

    settings = ConfigService(cwd, env, config_file=config_file)
    loaded = settings.load({})
    agent = plain_agent(spec, cwd)
    if agent.store is None:
        agent.store = open_store(loaded.config.session, cwd, env)
    choice = ModelChoice(agent.provider.info.model_string)
    return Setup(
        loaded.config, choice, agent.store, Workspace(cwd), env, notices=loaded.notices, settings=settings, python=agent
    )


def load_setup(cwd: Path, env: Mapping[str, str], flags: Mapping[str, object], config_file: str | None = None) -> Setup:
    """Load the configuration (``config_file``: ``--config``) with ``flags`` on top; ``ConfigInvalid`` or
    :class:`NoModel` when it cannot run."""
    settings = ConfigService(cwd, env, config_file=config_file)
    loaded = settings.load(flags)
    config = loaded.config
    choice = choose_model(config.runtime.first_model, env)
    if choice.model is None:
        raise NoModel(choice.problem or "no model")
    if choice.base_url is not None:
        config = with_server(config, choice.model, choice.base_url)
    skills = find_skills(config.agent, cwd, env)
    store = open_store(config.session, cwd, env)
    workspace = Workspace(cwd)
    return Setup(
        config, choice, store, workspace, env, notices=loaded.notices, settings=settings, skills=skills or None
    )


PROJECT_SKILLS = Path(".tether") / "skills"
"""The project's skills, in the working directory."""


def user_skills(env: Mapping[str, str]) -> Path:
    """The user's skills: ``skills/`` beside their ``config.toml`` (``$XDG_CONFIG_HOME/tether/skills``, else
    ``~/.config/tether/skills``)."""
    from tether.config.load import user_path

    return user_path(env).parent / "skills"


def find_skills(agent: AgentConfig, cwd: Path, env: Mapping[str, str]) -> Skills:
    """The command's skills: ``[agent] skills`` (relative to ``cwd``; each must exist), then, unless
    ``agent.discover_skills`` is false, the project's ``.tether/skills/`` and the user's (:func:`user_skills`);
    a skill of an earlier one shadows a skill of the same name in a later one. ``SkillInvalid`` (a
    ``ConfigInvalid``) for a malformed one of ``[agent] skills``; one found is skipped with a warning
    (``Skills.broken``)."""
    from tether.skills import Skills

    explicit = [cwd / Path(path).expanduser() for path in agent.skills]
    if not agent.discover_skills:
        return Skills.discover(explicit)
    return Skills.discover(explicit, [cwd / PROJECT_SKILLS], [user_skills(env)])


@asynccontextmanager
async def mcp_tools(setup: Setup) -> AsyncIterator[Setup]:
    """``setup`` with the tools of the ``[[mcp.servers]]`` it configures, connected for the block.

    Without servers, or for a Python agent (``--agent``: its tools are its own), nothing is imported or
    started. A server that cannot start raises ``ConfigInvalid`` (a bad command or variable) or the transport
    error that stopped it.
    """
    if not setup.config.mcp.servers or setup.python is not None:
        yield setup
        return
    from tether.tools.mcp import MCPTools

    async with MCPTools(mcp_server_configs(setup.config, setup.workspace.root)) as connected:
        yield dataclasses.replace(setup, extra_tools=tuple(connected.tools))


def mcp_server_configs(config: Config, root: Path) -> list[MCPServerConfig]:
    """The ``[[mcp.servers]]`` of ``config`` as the library takes them; stdio servers start in ``root``."""
    from tether.tools.mcp_spec import MCPServerConfig

    return [
        MCPServerConfig(
            server.id,
            transport=server.transport,
            command=server.command,
            args=server.args,
            env=server.env,
            url=server.url,
            cwd=root if server.transport == "stdio" else None,
            tool_timeout=server.tool_timeout or config.runtime.limits.tool_timeout or MCP_TOOL_TIMEOUT,
        )
        for server in config.mcp.servers
    ]


def agent_flags(*, system: str | None, no_agents_md: bool, no_discover_skills: bool = False) -> dict[str, object]:
    """The ``[agent]`` keys ``--system``, ``--no-agents-md`` and ``--no-discover-skills`` set (``None``: not
    given)."""
    return {
        "agent.instructions": system,
        "agent.agents_md": False if no_agents_md else None,
        "agent.discover_skills": False if no_discover_skills else None,
    }


def session_flags(*, record_exchanges: bool) -> dict[str, object]:
    """The ``[session]`` keys ``--record-exchanges`` sets (``None``: not given)."""
    return {"session.record_exchanges": True if record_exchanges else None}


def cache_flags(cache: str | None) -> dict[str, object]:
    """The ``[cache]`` keys ``--cache`` and ``--cache-path`` set: ``cache`` is ``None`` (not given), ``""``
    (``--cache``: the configured or default file) or the file of ``--cache-path``."""
    return {"cache.enabled": None if cache is None else True, "cache.path": cache or None}


def response_cache(settings: CacheConfig, cwd: Path, env: Mapping[str, str]) -> ResponseCache | None:
    """The command's response cache as ``[cache]`` says, or ``None`` when it is off. Every temperature is
    cached: the command line sends none, leaving the provider's default."""
    if not settings.enabled:
        return None
    from tether.providers.response_cache import POSTGRES_SCHEMES, ResponseCache

    if settings.path is not None and settings.path.startswith(POSTGRES_SCHEMES):  # a database, not a file
        return ResponseCache(settings.path, ttl=settings.ttl, any_temperature=True)
    path = cwd / Path(settings.path).expanduser() if settings.path is not None else cache_dir(env) / "responses.db"
    return ResponseCache(path, ttl=settings.ttl, any_temperature=True)


def compaction_flags(*, no_compact: bool, context_window: int | None) -> dict[str, object]:
    """The ``[compaction]`` keys ``--no-compact`` and ``--context-window`` set (``None``: not given)."""
    return {"compaction.enabled": False if no_compact else None, "compaction.context_window": context_window}


def with_model(config: Config, model: str) -> Config:
    """``config`` with ``runtime.model`` replaced."""
    return config.model_copy(update={"runtime": config.runtime.model_copy(update={"model": model})})


def with_server(config: Config, model: str, base_url: str) -> Config:
    """``config`` with ``[providers.PREFIX] base_url`` set for ``model``'s prefix, unless already configured:
    where a local server found running serves the model."""
    from tether.config.schema import ProviderConfig

    prefix = model.partition(":")[0]
    current = config.providers.get(prefix)
    if current is not None and current.base_url is not None:
        return config
    table = current.model_copy(update={"base_url": base_url}) if current else ProviderConfig(base_url=base_url)
    return config.model_copy(update={"providers": {**config.providers, prefix: table}})


def open_store(settings: SessionConfig, cwd: Path, env: Mapping[str, str]) -> SessionStore:
    """The store ``[session]`` describes; its path is relative to ``cwd``, by default in the XDG data dir.

    ``ConfigInvalid`` for the postgres store when ``url`` is missing or the ``postgres`` extra is not installed.
    """
    from tether.sessions import FileSessionStore, MemorySessionStore, SQLiteSessionStore

    if settings.store == "memory":
        return MemorySessionStore()
    if settings.store == "postgres":
        return _postgres_store(settings)
    path = Path(os.path.expanduser(settings.path)) if settings.path else default_session_path(settings.store, env)
    path = path if path.is_absolute() else cwd / path
    if settings.store == "files":
        return FileSessionStore(path)
    return SQLiteSessionStore(path)


def _postgres_store(settings: SessionConfig) -> SessionStore:
    import importlib.util

    if settings.url is None:
        raise ConfigInvalid("session.url is required for store 'postgres' (postgresql://user@host:5432/dbname)")
    if importlib.util.find_spec("psycopg") is None or importlib.util.find_spec("psycopg_pool") is None:
        raise ConfigInvalid("session.store is 'postgres', which needs psycopg: pip install 'tether[postgres]'")
    from tether.sessions import PostgresSessionStore

    return PostgresSessionStore(settings.url, schema=settings.db_schema)


def store_failures(store: SessionStore) -> tuple[type[BaseException], ...]:
    """What the store's database raises when it fails (not its data): a database file locked or out of
    space, a server out of reach. The command line reports these in one line instead of a traceback."""
    import sqlite3
    import sys

    failures: tuple[type[BaseException], ...] = (sqlite3.OperationalError,)
    postgres = sys.modules.get("tether.sessions.postgres")  # loaded only when that store was made
    if postgres is not None and isinstance(store, postgres.PostgresSessionStore):
        import psycopg

        failures += (psycopg.OperationalError,)
    return failures


async def close_store(store: SessionStore) -> None:
    """Close a store that holds connections (SQLite, PostgreSQL)."""
    aclose = getattr(store, "aclose", None)
    if aclose is not None:
        await aclose()


class WriteGate:
    """The permission hook of the command line: read-only tools run; the others run with ``--yes``, are asked
    about when someone can answer (``interactive``), and are refused with a message saying why otherwise."""

    def __init__(self, tools: list[Tool], *, yes: bool, interactive: bool) -> None:
        from tether.tools.output_cache import READ_TOOL

        self.read_only = {tool.name for tool in tools if tool.read_only}
        if READ_TOOL not in {tool.name for tool in tools}:
            self.read_only.add(READ_TOOL)  # the agent's built-in reader of kept outputs
        self.yes = yes
        self.interactive = interactive

    def __call__(self, call: ToolCall) -> Decision:
        if call.name in self.read_only or self.yes:
            return Allow()
        if self.interactive:
            return Ask(f"{call.name} can change files or run commands")
        return Deny(NOT_INTERACTIVE.format(name=call.name))


async def pick_session(store: SessionStore, session: str | None, continue_last: bool) -> tuple[str, str | None]:
    """The session to run in and a note for the user: ``session`` as given (checked), the most recent one for
    ``continue_last`` (a new one, with a note, when there is none), else a new id."""
    from tether.sessions import check_session_id, new_session_id

    if session is not None:
        return check_session_id(session), None
    if continue_last:
        summaries = await store.list()
        if summaries:
            return summaries[0].id, None
        return new_session_id(), "tether: no earlier session to continue; starting a new one"
    return new_session_id(), None


def config_problem(error: ConfigInvalid | NoModel) -> str:
    """The message for a configuration problem, as printed before exiting with 1."""
    if isinstance(error, NoModel):
        return str(error)
    return f"error: {error.message}"
