"""The run's tool choice: what the host asked for, checked before the run starts, and what each request sends.

The contract
------------
* ``"auto"`` (the default): the model decides, every turn.
* ``"none"``: for the whole run no tool can be called, so the model can only answer. Every request says so
  (natively ``tool_choice="none"``; in JSON action mode the request that allows a final answer alone), and
  tool calls a model sends anyway are dropped, as on the loop's own tools-off calls.
* ``"required"`` or a tool's name (:class:`~tether.providers.base.ForceTool`): the model must call a tool
  (that tool) until it has called one in this run; from then on the run is ``"auto"``. Held for the whole
  run, the model could never give an answer and the run could never end but on a limit.
* The loop's own tools-off calls (the summary after a step limit, the answer asked for after a repeated call)
  are ``"none"`` whatever the run's choice.
* Checked when the run starts, with ``ConfigInvalid``: a name no offered tool has, ``"required"`` or a name
  while no tool is offered, and a choice the model cannot be made to keep (``ModelInfo.tool_choices``; in JSON
  action mode the protocol's request asks for every choice, see ``actions.py``). The strings ``"auto"``, ``"none"`` and
  ``"required"`` are the modes: force a tool with one of those names with ``ForceTool(name)``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TypeAlias

from tether.errors import ConfigInvalid
from tether.providers.base import ForceTool, ModelInfo, ToolChoice

ToolChoiceOption: TypeAlias = str | ForceTool
"""What a host passes: ``"auto"``, ``"none"``, ``"required"``, a tool's name, or a :class:`ForceTool`."""


def resolve_tool_choice(
    option: ToolChoiceOption, offered: Collection[str], info: ModelInfo, *, native: bool = True
) -> ToolChoice:
    """``option`` as the run's :data:`ToolChoice`, checked against the tools ``offered`` and what the model
    can keep (``native``: tools are called natively, not through JSON actions); raises ``ConfigInvalid``."""
    choice: ToolChoice
    if isinstance(option, ForceTool):
        choice = option
    elif not isinstance(option, str):
        raise ConfigInvalid(
            f"tool_choice must be 'auto', 'none', 'required', a tool's name or a ForceTool, not {type(option).__name__}"
        )
    elif option == "auto" or option == "none":
        return "auto" if option == "auto" else "none"
    else:
        choice = "required" if option == "required" else ForceTool(option)
    if not offered:
        raise ConfigInvalid(f"tool_choice={_shown(choice)} needs a tool to call, and this agent offers none")
    if isinstance(choice, ForceTool) and choice.name not in offered:
        raise ConfigInvalid(
            f"tool_choice names {choice.name!r}, which is not a tool this agent offers "
            f"(offered: {', '.join(sorted(offered))})"
        )
    needed = "tool" if isinstance(choice, ForceTool) else "required"
    if native and needed not in info.tool_choices:
        raise ConfigInvalid(
            f"model {info.model_string!r} cannot be made to call a tool (tool_choice={_shown(choice)}): it keeps only "
            f"{', '.join(sorted(info.tool_choices))}. Use 'auto', or tool_mode='json', whose protocol asks for the call"
        )
    return choice


def choice_for_turn(choice: ToolChoice, called: bool) -> ToolChoice:
    """The tool choice of a request of the run: ``choice``, or ``"auto"`` once the model has ``called`` a tool
    in this run where ``choice`` required one (see the module docstring)."""
    if called and (choice == "required" or isinstance(choice, ForceTool)):
        return "auto"
    return choice


def _shown(choice: ToolChoice) -> str:
    return f"ForceTool({choice.name!r})" if isinstance(choice, ForceTool) else repr(choice)
