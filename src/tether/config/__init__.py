"""Configuration: ``agent.toml``, the user's ``config.toml``, ``TETHER_*`` variables and flags.

Building an agent from it::

    from tether.config import load_config, build_provider

    config = load_config(cwd, os.environ, {"runtime.model": model_flag})
    agent = Agent(
        build_provider(config),
        limits=config.runtime.limits.to_limits(),
        compaction=config.compaction.to_compaction(),
    )

``config.tools`` (mode, deny, ``bash``), ``config.mcp.servers`` and ``config.session`` are for the tool registry,
the MCP client and the session store. See :mod:`tether.config.load` for the layers and their precedence,
:mod:`tether.config.edit` for editing files. A program that reads its configuration often, or changes it, holds a
:class:`~tether.config.service.ConfigService`: reads cached until a file changes, updates that never lose a
key to a concurrent one.
"""

from __future__ import annotations

from tether.config.load import Loaded, load, load_config, parse_value, project_path, user_path
from tether.config.schema import (
    AgentConfig,
    BashConfig,
    CacheConfig,
    CliConfig,
    CompactionConfig,
    Config,
    LimitsConfig,
    McpConfig,
    McpServerConfig,
    ProviderConfig,
    RuntimeConfig,
    SessionConfig,
    ToolsConfig,
)
from tether.config.service import ConfigService
from tether.config.target import ModelTarget, build_provider, model_target

__all__ = [
    "AgentConfig",
    "BashConfig",
    "CacheConfig",
    "CliConfig",
    "CompactionConfig",
    "Config",
    "ConfigService",
    "LimitsConfig",
    "Loaded",
    "McpConfig",
    "McpServerConfig",
    "ModelTarget",
    "ProviderConfig",
    "RuntimeConfig",
    "SessionConfig",
    "ToolsConfig",
    "build_provider",
    "load",
    "load_config",
    "model_target",
    "parse_value",
    "project_path",
    "user_path",
]
