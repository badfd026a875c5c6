"""The checks of ``Agent``'s arguments, each returning the value a run uses or raising ``ConfigInvalid`` with what
to change: kept apart so that the agent reads as what it holds and does, not as the validation of its inputs."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from tether.errors import ConfigInvalid
from tether.limits import Compaction
from tether.providers.base import Provider, ServedProvider
from tether.tools.output_cache import MIN_THRESHOLD, READ_TOOL
from tether.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from tether.loop.spec import RunSpec
    from tether.providers.response_cache import ResponseCache
    from tether.skills import Skills
    from tether.team.guardrails import Guardrail
    from tether.team.handoffs import Handoff
    from tether.tools.base import Tool


def deps_checks(deps_type: Any, tools: ToolRegistry) -> tuple[tuple[Any, str], ...]:
    """What a run's ``deps`` is checked against when it starts: the agent's ``deps_type`` and the ``Deps`` of each
    tool's ``ctx: RunContext[Deps]``; ``ConfigInvalid`` now when a tool's cannot hold the agent's."""
    checks: list[tuple[Any, str]] = []
    if deps_type is not None:
        checks.append((deps_type, "this agent"))
    for tool in tools:
        declared = tool.deps_type
        if declared is None or declared is Any:
            continue
        expected, given = getattr(declared, "__origin__", declared), getattr(deps_type, "__origin__", deps_type)
        if isinstance(expected, type) and isinstance(given, type) and not issubclass(given, expected):
            raise ConfigInvalid(
                f"tool {tool.name!r} takes RunContext[{expected.__qualname__}] but the agent's deps_type is "
                f"{given.__qualname__}"
            )
        checks.append((declared, f"tool {tool.name!r}"))
    return tuple(checks)


def compaction_of(settings: Compaction | bool | None) -> Compaction | None:
    if settings is None or settings is True:
        return Compaction()
    if settings is False:
        return None
    if not isinstance(settings, Compaction):
        raise ConfigInvalid(f"compaction must be a tether.Compaction or a bool, not {type(settings).__name__}")
    return settings if settings.enabled else None


def check_output_cache(threshold: int | None, tools: ToolRegistry) -> None:
    """``cache_tool_outputs`` checked: ``None`` or a whole number of characters, and its tool's name free."""
    if threshold is None:
        return
    if type(threshold) is not int or threshold < MIN_THRESHOLD:
        raise ConfigInvalid(
            f"cache_tool_outputs must be a number of characters, at least {MIN_THRESHOLD}, or None to turn the "
            f"cache off; not {threshold!r}"
        )
    if READ_TOOL in tools:
        raise ConfigInvalid(
            f"a tool is named {READ_TOOL!r}, the name of the built-in reader of kept outputs: rename it, or "
            "pass cache_tool_outputs=None"
        )


def secret_strings(values: Iterable[str]) -> list[str]:
    """``values`` checked: a host passing one string (not a list of them) would otherwise mask its letters."""
    if isinstance(values, str | bytes):
        raise ConfigInvalid("secrets must be a list of strings, not one string: secrets=[value]")
    checked = list(values)
    if wrong := [type(v).__name__ for v in checked if not isinstance(v, str)]:
        raise ConfigInvalid(f"secrets must be strings; got {', '.join(sorted(set(wrong)))}")
    return checked


def tool_mode_of(asked: str, provider: Provider, tools: ToolRegistry) -> Literal["native", "json"]:
    """The tool mode a run uses: ``auto`` is native when the model can call tools (or there are none)."""
    if asked not in ("auto", "native", "json"):
        raise ConfigInvalid(f"tool_mode must be 'auto', 'native' or 'json', not {asked!r}")
    native = provider.info.supports_tools or not len(tools)
    if asked == "native" and not native:
        raise ConfigInvalid(
            f"model {provider.info.model_string!r} cannot call tools natively, and this agent has "
            f"{len(tools)}: use tool_mode='json' (or 'auto'), a model that supports tool calling, "
            "or remove the tools"
        )
    if asked == "auto":
        return "native" if native else "json"
    return "json" if asked == "json" else "native"


def response_cache_class() -> type[ResponseCache]:
    """The class of response caches, imported only by an agent given one (it brings sqlite3)."""
    from tether.providers.response_cache import ResponseCache

    return ResponseCache


@dataclass(frozen=True, slots=True)
class SkillSet:
    """An agent's skills and what they add to it: the ``load_skill`` tool (none without skills) and the
    instructions listing them."""

    skills: Skills | None = None
    tools: tuple[Tool, ...] = ()

    def equip(self, tools: Iterable[Tool | Callable[..., Any]]) -> list[Tool | Callable[..., Any]]:
        """``tools`` as the agent has them: the built-in ``bash`` tool (``tether.tools.shell.bash_tool``) made
        again with the skills' folders readable in its sandbox, so that their scripts run there (read-only:
        a script cannot change its skill), and the ``load_skill`` tool after them. The command line and a
        library's agent share this one rule; a tool of one's own named ``bash`` is left as it is."""
        if self.skills is None:
            return list(tools)
        from tether.tools.shell import BashTool

        folders = self.skills.folders
        return [*(tool.reading(folders) if isinstance(tool, BashTool) else tool for tool in tools), *self.tools]

    def instructions(self, bash: bool) -> str | None:
        """The block the system prompt gains (``bash``: the agent can run the skills' scripts)."""
        return self.skills.instructions(scripts=bash) if self.skills is not None else None


def skills_of(skills: Skills | Iterable[str | os.PathLike[str]]) -> SkillSet:
    """``Agent(skills=...)``: paths, read and checked now (``SkillInvalid``), or a ``Skills`` as it is. The skills
    package is imported only by an agent given some."""
    if isinstance(skills, tuple | list) and not skills:
        return SkillSet()
    from tether.skills import Skills

    found = skills if isinstance(skills, Skills) else Skills.load(skills)
    tool = found.tool()
    return SkillSet(found, (tool,) if tool is not None else ())


def checked_name(name: str | None) -> str | None:
    """``name=``: ``None``, or a name with something in it (a handoff's tool and ``result.last_agent`` use it)."""
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ConfigInvalid(f"name must be a non-empty string, not {name!r}")
    return name


Team = tuple["tuple[Handoff, ...]", "tuple[Guardrail, ...]", "tuple[Guardrail, ...]"]


def team_of(handoffs: Iterable[Any], input_guardrails: Iterable[Any], output_guardrails: Iterable[Any]) -> Team:
    """The agent's handoffs and guardrails, checked (``tether.team.relay``); three empty tuples, with
    ``tether.team`` never loaded, for an agent that has none."""
    handoffs, input_guardrails, output_guardrails = tuple(handoffs), tuple(input_guardrails), tuple(output_guardrails)
    if not (handoffs or input_guardrails or output_guardrails):
        return (), (), ()
    from tether.team.relay import team_of as checked_team

    return checked_team(handoffs, input_guardrails, output_guardrails)


OutputMode = Literal["tool", "native", "prompted"]


def checked_output_mode(mode: str | None) -> OutputMode | None:
    """``output_mode=`` checked: one of the three modes, or ``None`` (the model's best)."""
    if mode not in (None, "tool", "native", "prompted"):
        raise ConfigInvalid(f"output_mode must be 'tool', 'native' or 'prompted', not {mode!r}")
    return mode  # type: ignore[return-value]


def with_output(spec: RunSpec, output_type: Any, mode: OutputMode | None) -> RunSpec:
    """``spec`` asking for ``output_type`` (``str``: text), as ``mode`` says or as the model allows best: output
    tools for a model that calls tools natively, else its JSON Schema output, else the schema in the prompt."""
    from tether.output import OutputSpec

    output = OutputSpec.of(output_type)
    if output is None:
        return replace(spec, output=None) if spec.output is not None else spec
    info = spec.provider.info
    if mode is None:
        mode = "tool" if spec.tool_mode == "native" and info.supports_tools else "prompted"
        mode = "native" if mode == "prompted" and info.supports_output_schema else mode
    if mode == "tool" and (taken := sorted({c.name for c in output.choices} & set(spec.tools.names))):
        raise ConfigInvalid(f"a tool is named {taken[0]!r}, the name of an output tool: rename it")
    return replace(spec, output=output, output_mode=mode)


def provider_credentials(provider: Provider) -> tuple[str, ...]:
    """The secrets a provider sends (its API key), whatever their source (passed, read from the environment, or
    set on a provider built elsewhere); none for a provider that serves no model over the network."""
    return provider.credentials() if isinstance(provider, ServedProvider) else ()
