"""The shape of ``agent.toml``: one pydantic model per section, every key documented where it is declared.

These models check each value on its own (types, ranges, names); :func:`tether.config.load.validate` adds
the checks that look across sections (the model's provider is known, MCP server ids are unique) and turns
every failure into a message that names the key and the line. Unknown keys are errors everywhere.

TOML has no ``null``, so a limit is switched off with ``"off"`` (or ``false``): ``run_timeout = "off"``.
API keys never live here: a provider names the environment variable that holds its key (``api_key_env``), or a
reference to it (``api_key = "cmd:pass show openai"``, :mod:`tether.secret_refs`).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from tether.limits import (
    ALWAYS_ON,
    CHOICES,
    COUNTS,
    MIN_TOKENS,
    Compaction,
    Limits,
    compaction_problem,
    is_int,
    is_number,
    limit_problem,
)
from tether.providers.registry import PROFILES
from tether.tools.mcp_spec import id_problem, timeout_problem
from tether.tools.sandbox import DEFAULT_BWRAP, SandboxMode

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""What an environment variable's name looks like (``api_key_env``)."""

KEY_REFERENCES = ("env:", "file:", "cmd:", "keyring:")
"""What ``[providers.NAME] api_key`` may begin with: a reference, never a key (``literal:`` is refused here)."""

OFF = "off"
"""The TOML spelling of "no limit" (``None`` in :class:`~tether.limits.Limits`)."""

_DEFAULTS = Limits()
_COMPACTION = Compaction()

CACHE_TOOL_OUTPUTS = 8_000
"""``tools.cache_tool_outputs`` when not set: characters above which a tool's output is kept whole and the
model shown a preview (``Agent(cache_tool_outputs=...)``)."""
MIN_CACHE_TOOL_OUTPUTS = 1_000
"""The smallest threshold the tool-output cache takes."""
MIN_CONTEXT_WINDOW = MIN_TOKENS["context_window"]
"""The smallest ``compaction.context_window`` (``tether.Compaction`` refuses less)."""
MIN_SUMMARY_TOKENS = MIN_TOKENS["summary_tokens"]
"""The smallest ``compaction.summary_tokens`` (``tether.Compaction`` refuses less)."""

DEFAULT_RETRIES = 3
"""``runtime.retries`` when not set: the default of ``tether.providers.http.RetryPolicy.max_retries``."""


class Section(BaseModel):
    """Base of every section: strict types (``"5"`` is not a number), unknown keys refused, immutable."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, use_attribute_docstrings=True)


def _number_or_off(name: str, value: object) -> int | float | str | None:
    """``"off"``/``false`` -> ``None``; otherwise the rules of :func:`tether.limits.limit_problem` (a time or
    a cost is kept as a float; a choice is its word, and cannot be off)."""
    if name in CHOICES:
        if (problem := limit_problem(name, value)) is not None:
            raise ValueError(problem)
        return str(value)
    if name not in ALWAYS_ON and (value is False or value == OFF):
        return None
    if (problem := limit_problem(name, value, off=f'"{OFF}"')) is not None:
        raise ValueError(problem)
    if not is_number(value):
        return None  # only None passes the rules without being a number
    return value if name in COUNTS or name in ALWAYS_ON else float(value)


class LimitsConfig(Section):
    """``[runtime.limits]``: the guards of every run (``tether.Limits``). Times in seconds."""

    max_turns: int | None = _DEFAULTS.max_turns
    """Model turns before the run stops (it then asks once more, without tools, for an answer)."""
    max_tool_calls_per_turn: int | None = _DEFAULTS.max_tool_calls_per_turn
    """Tool calls run from one turn; the excess get an error result."""
    max_tool_calls: int | None = _DEFAULTS.max_tool_calls
    """Tool calls in the whole run."""
    max_consecutive_errors: int | None = _DEFAULTS.max_consecutive_errors
    """Turns in a row whose tool calls all failed before the run stops."""
    request_timeout: float | None = _DEFAULTS.request_timeout
    """Wait for a provider's first byte and between chunks, per attempt."""
    step_timeout: float | None = _DEFAULTS.step_timeout
    """One provider call from request to its last event."""
    tool_timeout: float | None = _DEFAULTS.tool_timeout
    """One tool call, unless the tool sets its own."""
    run_timeout: float | None = _DEFAULTS.run_timeout
    """The whole run, tools and model calls included."""
    invalid_response_retries: int = _DEFAULTS.invalid_response_retries
    """Corrective re-prompts after an empty or unusable answer (cannot be "off")."""
    output_retries: int = _DEFAULTS.output_retries
    """Times a typed output that failed validation is sent back with the errors (cannot be "off")."""
    answer_continuations: int = _DEFAULTS.answer_continuations
    """Calls asking the model to go on with an answer cut off at the output limit (0: none; cannot be "off")."""
    max_cost_usd: float | None = _DEFAULTS.max_cost_usd
    """Stop once the run has cost this many dollars; needs a known price for the model."""
    max_history_messages: int | None = _DEFAULTS.max_history_messages
    """Send at most this many recent messages to the model."""
    excess_tool_calls: Literal["refuse", "stop"] = _DEFAULTS.excess_tool_calls
    """A turn's tool calls past max_tool_calls_per_turn: "refuse" answers them with an error and the run goes on;
    "stop" answers them the same way, then stops the run with max_tool_calls."""
    approval_timeout: float | None = _DEFAULTS.approval_timeout
    """Seconds a paused run's calls wait for their decisions, from the pause; later, they are rejected."""

    @field_validator("*", mode="before")
    @classmethod
    def _check(cls, value: object, info: ValidationInfo) -> object:
        return _number_or_off(info.field_name or "", value)

    def to_limits(self) -> Limits:
        """The :class:`~tether.limits.Limits` these settings describe, for ``Agent(limits=...)``."""
        return Limits(**self.model_dump())


class RuntimeConfig(Section):
    """``[runtime]``: which model runs, and how far a run may go."""

    model: str | list[str] | None = None
    """The model, as ``"provider:model"`` (``"openai:gpt-4o-mini"``, ``"ollama:llama3.2"``); the prefix is a
    built-in provider or a ``[providers.NAME]`` of this file. A list (``["anthropic:...", "openai:..."]``, or
    one string of models joined by commas, as ``--model a,b`` and ``TETHER_MODEL=a,b`` give it) is a fallback:
    the next model is asked when one is down, overloaded, rate-limited, times out or loses its connection
    before its answer begins."""
    retries: int = DEFAULT_RETRIES
    """Retries of a provider request that failed for a passing reason (rate limit, server error, lost
    connection), after the first attempt; 0 never retries."""
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    """The guards (``[runtime.limits]``)."""

    @property
    def first_model(self) -> str | None:
        """The model asked first: ``model``, or the first of its list (what the command line shows and checks)."""
        return self.model[0] if isinstance(self.model, list) else self.model

    @field_validator("retries", mode="before")
    @classmethod
    def _retries(cls, value: object) -> object:
        if is_int(value) and value >= 0:
            return value
        raise ValueError("must be a whole number >= 0")

    @field_validator("model", mode="before")
    @classmethod
    def _model_list(cls, value: object) -> object:
        """``"a:x,b:y"`` (``--model``, ``TETHER_MODEL``, a string in the file) is the list ``["a:x", "b:y"]``."""
        if isinstance(value, str) and "," in value:
            return [part.strip() for part in value.split(",")]
        return value

    @field_validator("model")
    @classmethod
    def _model_string(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list) and not value:
            raise ValueError("must name at least one model")
        for model in [value] if isinstance(value, str) else value or ():
            prefix, colon, name = model.partition(":")
            if not (prefix and colon and name):
                raise ValueError("must be 'provider:model', for example 'openai:gpt-4o-mini'")
        return value


class ProviderConfig(Section):
    """``[providers.NAME]``: where a provider is and how it authenticates. NAME is a model-string prefix: a
    built-in one (``ollama``, ``openai``, ...) to change its settings, or a new one with a ``profile``."""

    base_url: str | None = None
    """The API's URL, up to and including its version (``http://gpu-box:8000/v1``)."""
    api_key_env: str | None = None
    """The NAME of the environment variable that holds the API key (never the key itself)."""
    api_key: str | None = None
    """A reference to the API key, resolved when the provider is built (:mod:`tether.secret_refs`):
    ``env:NAME``, ``file:PATH``, ``cmd:COMMAND`` or ``keyring:SERVICE/USER``; never the key itself."""
    profile: str | None = None
    """For a provider of your own naming: the compatibility profile it speaks (``vllm``, ``ollama``, ...);
    ``openai-compatible`` when not given."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Extra HTTP headers sent with every request."""
    api_version: str | None = None
    """Azure OpenAI only: the dated ``api-version`` (``2024-10-21``) of the deployments route; ``v1`` or none:
    the v1 route (``tether.providers.azure``)."""
    prompt_cache: Literal["off", "5m", "1h"] | None = None
    """``anthropic`` only: the TTL of the cache breakpoints placed in every request, or ``"off"``; ``"5m"`` when
    not given (``tether.providers.anthropic_cache``)."""
    rpm: int | None = Field(default=None, ge=1)
    """Requests per minute this process sends to the provider's API, key and model, all runs together; the
    requests past it wait (client-side, before they are sent)."""
    tpm: int | None = Field(default=None, ge=1)
    """Tokens per minute (input and output, estimated before a request, corrected by its usage), likewise."""

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not ENV_NAME.fullmatch(value):
            raise ValueError(
                "must be the name of an environment variable (letters, digits, '_'); "
                "put the key itself in that variable, never in this file"
            )
        return value

    @field_validator("api_key")
    @classmethod
    def _key_reference(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(KEY_REFERENCES):
            raise ValueError(
                "must be a reference to the key (env:NAME, file:PATH, cmd:COMMAND or keyring:SERVICE/USER), "
                "never the key itself"
            )
        return value

    @field_validator("profile")
    @classmethod
    def _profile(cls, value: str | None) -> str | None:
        if value is not None and value not in PROFILES:
            raise ValueError(f"must be one of {', '.join(repr(name) for name in PROFILES)}")
        return value


class BashConfig(Section):
    """``[tools.bash]``: how the ``bash`` tool runs commands (``tether.tools.sandbox`` has the details)."""

    sandbox: SandboxMode = "auto"
    """``"auto"``: in a bubblewrap sandbox when bwrap is usable here (only the workspace writable, no home, no
    network), unconfined with a warning otherwise; ``"required"``: refuse to run commands without it;
    ``"off"``: never confined."""
    network: bool = False
    """Let sandboxed commands use the network."""
    bwrap: str = DEFAULT_BWRAP
    """The bubblewrap program: a name looked up on PATH, or a path."""
    pass_env: list[str] = Field(default_factory=list)
    """Names of environment variables commands get besides the basic ones (PATH, HOME, LANG, LC_*, TERM, ...);
    nothing else of tether's environment reaches them."""
    read_only_paths: list[str] = Field(default_factory=list)
    """More host paths a sandboxed command may read (absolute), such as a toolchain outside /usr."""

    @field_validator("bwrap")
    @classmethod
    def _program(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name the bubblewrap program (bwrap) or its path")
        return value

    @field_validator("pass_env")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not the name of an environment variable (letters, digits, '_')")
        return value

    @field_validator("read_only_paths")
    @classmethod
    def _absolute(cls, value: list[str]) -> list[str]:
        for path in value:
            if not path.startswith("/"):
                raise ValueError(f"{path!r} is not an absolute path")
        return value


class ToolsConfig(Section):
    """``[tools]``: which tools the model may use."""

    mode: Literal["read-only", "full"] = "full"
    """``"read-only"`` offers only tools that never change anything; ``"full"`` offers every tool."""
    deny: list[str] = Field(default_factory=list)
    """Tools never offered and never run, by name."""
    cache_tool_outputs: int | None = CACHE_TOOL_OUTPUTS
    """Characters above which a tool's output is kept whole for the run (and in the session) while the model
    is shown its head and tail and pages through the rest with ``read_tool_output``; ``false``: every output
    goes to the model as it is (up to the last-resort cap)."""
    bash: BashConfig = Field(default_factory=BashConfig)
    """The ``bash`` tool (``[tools.bash]``)."""

    @field_validator("cache_tool_outputs", mode="before")
    @classmethod
    def _cache(cls, value: object) -> object:
        if value is None or value is False or value == OFF:
            return None
        if is_int(value) and value >= MIN_CACHE_TOOL_OUTPUTS:
            return value
        raise ValueError(f"must be a whole number of characters >= {MIN_CACHE_TOOL_OUTPUTS:,}, or false")


class CompactionConfig(Section):
    """``[compaction]``: how a long run's history is compacted to fit the model's context window
    (``tether.Compaction``). Fractions are of the window."""

    enabled: bool = _COMPACTION.enabled
    """Compact before a request would pass ``threshold`` of the window, and once after the provider says the
    context overflowed; ``false``: never (a run that outgrows the window stops with ``context_overflow``)."""
    context_window: int | None = _COMPACTION.context_window
    """The model's context window in tokens; when not set, the model's known window (a model whose window
    is unknown is compacted only after an overflow)."""
    threshold: float = _COMPACTION.threshold
    """Compact when the next request is estimated above this fraction of the window."""
    keep_recent: float = _COMPACTION.keep_recent
    """At most this fraction of the window is kept verbatim after a compaction (the most recent turns, and
    at least the last one); below ``threshold``."""
    summary_tokens: int | None = _COMPACTION.summary_tokens
    """The most tokens the summary may take; when not set, an eighth of the window, at most 4,096."""
    trim_tool_outputs: bool = _COMPACTION.trim_tool_outputs
    """At a compaction, kept tool outputs that the tool-output cache holds whole are shown to the model by
    reference only (except the last turn's)."""
    instructions: str | None = _COMPACTION.instructions
    """The request for a summary, instead of tether's own."""
    after_answer: Literal["session", "always", "never"] = _COMPACTION.after_answer
    """After a run's answer, compact if the conversation is then over threshold, so that the next run starts
    from it ready: "session" (runs in a session), "always" or "never"."""

    @field_validator("context_window", "summary_tokens", mode="before")
    @classmethod
    def _tokens(cls, value: object, info: ValidationInfo) -> object:
        if (problem := compaction_problem(info.field_name or "", value)) is not None:
            raise ValueError(problem)
        return value

    @field_validator("threshold", "keep_recent", mode="before")
    @classmethod
    def _fraction(cls, value: object, info: ValidationInfo) -> object:
        problem = compaction_problem(info.field_name or "", value)
        if problem is not None or not is_number(value):
            raise ValueError(problem)
        return float(value)

    @field_validator("instructions")
    @classmethod
    def _text(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must say what the summary should hold (leave it out for tether's own request)")
        return value

    def to_compaction(self) -> Compaction:
        """The :class:`~tether.limits.Compaction` these settings describe, for ``Agent(compaction=...)``."""
        return Compaction(**self.model_dump())


class McpServerConfig(Section):
    """``[[mcp.servers]]``: one MCP server whose tools the agent may use."""

    id: str
    """A short name for the server, unique among the servers."""
    transport: Literal["stdio", "http"] = "stdio"
    """``"stdio"``: tether starts ``command``; ``"http"``: tether connects to ``url``."""
    command: str | None = None
    """The program to start (stdio)."""
    args: list[str] = Field(default_factory=list)
    """Its arguments (stdio)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment for the program (stdio); ``${VAR}`` in a value is expanded when it starts, so a
    secret can stay in the environment."""
    url: str | None = None
    """The server's URL (http)."""
    tool_timeout: float | None = None
    """Seconds one of its tool calls may take; ``[runtime.limits] tool_timeout`` when not given."""

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if (problem := id_problem(value)) is not None:
            raise ValueError(problem)
        return value

    @field_validator("tool_timeout", mode="before")
    @classmethod
    def _timeout(cls, value: object) -> object:
        if value is False or value == OFF:
            return None
        if (problem := timeout_problem(value)) is not None or not is_number(value):
            raise ValueError(f'{problem}, or "{OFF}"')
        return float(value)


class McpConfig(Section):
    """``[mcp]``: the MCP servers."""

    servers: list[McpServerConfig] = Field(default_factory=list)
    """The servers, one ``[[mcp.servers]]`` table each."""


PG_SCHEMA = re.compile(r"[a-z_][a-z0-9_]{0,62}")
"""A PostgreSQL schema name that needs no quoting (the store checks the same)."""


class SessionConfig(Section):
    """``[session]``: where conversations are kept between runs."""

    store: Literal["sqlite", "files", "memory", "postgres"] = "sqlite"
    """``"sqlite"`` (one database file), ``"files"`` (one JSON file per session), ``"memory"`` (nothing
    kept after the process ends) or ``"postgres"`` (a PostgreSQL server, shared by many machines; needs
    ``url`` and the ``tether[postgres]`` extra)."""
    path: str | None = None
    """The database file (sqlite) or directory (files), as written (relative to the working directory);
    the store's own default when not given."""
    url: str | None = None
    """The PostgreSQL server (postgres): ``postgresql://user@host:5432/dbname``. Leave the password to
    ``PGPASSWORD`` or ``~/.pgpass``; one written here is hidden by ``tether config show``."""
    db_schema: str = "tether"
    """The PostgreSQL schema holding tether's tables (postgres), created on first use; lowercase letters,
    digits and ``_``."""
    record_exchanges: bool = False
    """Keep each model request's body and the model's raw answer in the session, masked like telemetry
    (``tether.exchanges``); off, nothing is copied."""

    @field_validator("db_schema")
    @classmethod
    def _schema(cls, value: str) -> str:
        if not PG_SCHEMA.fullmatch(value):
            raise ValueError("must be 1-63 lowercase letters, digits or '_', not starting with a digit")
        return value


class CacheConfig(Section):
    """``[cache]``: model answers kept in a SQLite file (or PostgreSQL) and replayed for an identical request
    (``tether.ResponseCache``), for development loops, tests and evaluations. The command line sends no
    temperature, so its cache keeps every answer (``any_temperature``): a replay is one sampled answer."""

    enabled: bool = False
    """Answer an identical request from the cache (``--cache`` for one command)."""
    path: str | None = None
    """The cache's SQLite file, as written (relative to the working directory); ``responses.db`` in
    ``$XDG_CACHE_HOME/tether`` (else ``~/.cache/tether``) when not given (``--cache-path`` for one command). A
    ``postgresql://`` URL keeps the answers in that database instead (table ``tether_responses``;
    ``tether[postgres]``), shared by every machine that reaches it."""
    ttl: float | None = Field(default=None, gt=0)
    """Seconds an answer is replayed for; an older one is asked for again. Not set: no expiry."""


class AgentConfig(Section):
    """``[agent]``: what the command's agent is told to do, besides what tether tells it of its workspace."""

    instructions: str | None = None
    """Instructions added to tether's own system prompt (where the agent works, with which tools) for every run:
    what this project wants of the agent. ``--system`` gives them for one command."""
    agents_md: bool = True
    """Read the workspace's AGENTS.md (the instructions file coding agents share) into the system prompt;
    ``false`` leaves it out (``--no-agents-md`` for one command)."""
    skills: list[str] = Field(default_factory=list)
    """Folders of skills in the Agent Skills layout (each a skill's folder, holding a SKILL.md, or a folder of
    them), relative to the working directory; they win over the project's .tether/skills/ and the user's skills/
    folder beside config.toml, which are read too (unless discover_skills is false). The model sees each skill's
    name and description and loads the rest when it needs it."""
    discover_skills: bool = True
    """Read the skills of the project's .tether/skills/ and of the user's skills/ folder too (a broken one there
    is skipped with a warning); ``false`` reads only those listed in skills (``--no-discover-skills`` for one
    command)."""

    @field_validator("instructions")
    @classmethod
    def _instructions(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty: remove the key for no instructions")
        return value

    @field_validator("skills")
    @classmethod
    def _skills(cls, value: list[str]) -> list[str]:
        for path in value:
            if not path.strip():
                raise ValueError("a path must not be empty")
        return value


class CliConfig(Section):
    """``[cli]``: how the ``tether`` command shows a run."""

    stream: bool = True
    """``tether run`` prints the answer as the model writes it; ``false`` prints each answer whole, once the
    model has finished writing it."""


class Config(Section):
    """The whole configuration: ``agent.toml``, the user's config, ``TETHER_*`` variables and flags, merged."""

    runtime: RuntimeConfig = Field(default_factory=RuntimeConfig)
    """``[runtime]``"""
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)
    """``[compaction]``"""
    providers: dict[str, ProviderConfig] = Field(default_factory=dict)
    """``[providers.NAME]``"""
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    """``[tools]``"""
    mcp: McpConfig = Field(default_factory=McpConfig)
    """``[mcp]``"""
    session: SessionConfig = Field(default_factory=SessionConfig)
    """``[session]``"""
    cli: CliConfig = Field(default_factory=CliConfig)
    """``[cli]``"""
    agent: AgentConfig = Field(default_factory=AgentConfig)
    """``[agent]``"""
    cache: CacheConfig = Field(default_factory=CacheConfig)
    """``[cache]``"""
