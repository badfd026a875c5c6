"""The file ``tether config init`` writes: every setting, documented from the schema and commented out.

Because every value is commented out, a new file changes nothing (it loads to the defaults and does not
hide the user's own config). The section headers are live and each section's comments sit under its
header, so ``tether config set`` adds a key at the end of its own section.
"""

from __future__ import annotations

import textwrap
from typing import Any

import tomlkit
from pydantic import BaseModel

from tether.config.schema import (
    OFF,
    AgentConfig,
    BashConfig,
    CliConfig,
    CompactionConfig,
    LimitsConfig,
    RuntimeConfig,
    SessionConfig,
    ToolsConfig,
)

WIDTH = 100

HEADER = """\
# tether configuration.
#
# Where settings come from, the first one found winning: command-line flags, TETHER_* environment
# variables (TETHER_MODEL=ollama:qwen3, TETHER_RUNTIME__LIMITS__MAX_TURNS=5, TETHER_TOOLS__MODE=read-only),
# ./agent.toml (or the file --config or TETHER_CONFIG names), the user's ~/.config/tether/config.toml,
# then the defaults shown here.
#
# Every setting below is commented out and shows its default: remove the "# " in front of one to change
# it, or run `tether config set runtime.model ollama:qwen3`. `tether config show` prints the result.
# API keys never go in this file: name the environment variable that holds the key (api_key_env), or
# where to get it (api_key = "cmd:pass show openai", "file:~/.openai", "keyring:SERVICE/USER").
"""

_EXAMPLES: dict[tuple[str, str], str] = {
    ("runtime", "model"): '"openai:gpt-4o-mini"',
    ("session", "path"): '".tether/sessions.sqlite"',
    ("agent", "instructions"): '"Answer in French. Run the tests before you say a change is done."',
    ("compaction", "context_window"): "128000",
    ("compaction", "summary_tokens"): "2048",
    ("compaction", "instructions"): '"Summarize the conversation so far: goals, decisions, findings, next steps."',
}
"""Values shown for settings whose default is "not set"."""

PROVIDERS = """\
[providers]
# [providers.NAME]: where a provider is and how it authenticates. NAME is a model-string prefix: a
# built-in one (openai, anthropic, gemini, ollama, vllm, llamacpp, deepseek, zai, minimax, ...) to change
# its settings, or a name of your own with a profile, used as "NAME:model" in runtime.model.
#
# [providers.gpu]
# base_url = "http://gpu-box:8000/v1"    # the API up to and including its version
# profile = "vllm"                       # the compatibility profile it speaks (openai-compatible if not given)
# api_key_env = "GPU_BOX_API_KEY"        # the NAME of the variable holding the key, never the key
# api_key = "cmd:pass show gpu-box"      # or a reference: env:NAME, file:PATH, cmd:COMMAND, keyring:SERVICE/USER
# headers = { "X-Team" = "research" }    # extra HTTP headers for every request
#
# [providers.anthropic]
# prompt_cache = "5m"                    # cache breakpoints' TTL: "5m" (the default), "1h", or "off"
"""

MCP = """\
[mcp]
# [[mcp.servers]]: MCP servers whose tools the agent may use, one table each.
#
# [[mcp.servers]]
# id = "files"                # a short name, unique among the servers
# transport = "stdio"         # "stdio": tether starts `command`; "http": tether connects to `url`
# command = "npx"
# args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
# env = { GITHUB_TOKEN = "${GITHUB_TOKEN}" }   # ${VAR} is expanded when the server starts
# tool_timeout = 30           # seconds per call; [runtime.limits] tool_timeout if not given
#
# [[mcp.servers]]
# id = "search"
# transport = "http"
# url = "http://localhost:8931/mcp"
"""


def default_file() -> str:
    """The commented text of a new configuration file."""
    parts = [
        HEADER,
        _section("runtime", RuntimeConfig, skip={"limits"}),
        _section("runtime.limits", LimitsConfig),
        _section("agent", AgentConfig),
        _section("compaction", CompactionConfig),
        PROVIDERS,
        _section("tools", ToolsConfig, skip={"bash"}),
        _section("tools.bash", BashConfig),
        MCP,
        _section("session", SessionConfig),
        _section("cli", CliConfig),
    ]
    return "\n".join(parts)


def _section(name: str, model: type[BaseModel], *, skip: set[str] | frozenset[str] = frozenset()) -> str:
    about = (model.__doc__ or "").partition("``: ")[2]
    lines = [f"[{name}]", _comment(about[:1].upper() + about[1:])]
    for key, field in model.model_fields.items():
        if key in skip:
            continue
        lines.append(_comment(field.description or ""))
        default = field.get_default(call_default_factory=True)
        lines.append(f"# {key} = {_example(name, key, default)}")
    return "\n".join(lines) + "\n"


def _example(section: str, key: str, default: Any) -> str:
    example = _EXAMPLES.get((section.partition(".")[0], key))
    if default is None:
        return example if example is not None else f'"{OFF}"'
    return str(tomlkit.item(default).as_string())


def _comment(text: str) -> str:
    plain = " ".join(text.replace("``", "").split())
    lines = textwrap.wrap(plain, WIDTH, initial_indent="# ", subsequent_indent="# ", break_on_hyphens=False)
    return "\n".join(lines)
