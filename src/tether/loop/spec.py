"""What a run is given: the provider, the tools, the limits and the settings, fixed for the run's whole life.

:class:`RunSpec` is built by ``Agent`` (``agent.py``) from its own settings and a run's overrides, and read by
every part of a :class:`~tether.loop.engine.Run` (the engine, its provider calls, its executor); nothing
changes it while the run goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from tether.limits import Compaction, Limits
from tether.loop.executor import DEFAULT_MAX_OUTPUT, UnknownTool
from tether.providers.base import ModelSettings, Provider, ToolChoice, ToolDefinition
from tether.secrets import Masker
from tether.tools.output_cache import DEFAULT_THRESHOLD
from tether.tools.permissions import Permissions
from tether.tools.registry import ToolRegistry
from tether.usage import Price

if TYPE_CHECKING:
    from tether.output import OutputSpec, OutputValidator
    from tether.providers.response_cache import ResponseCache
    from tether.redaction import Redaction
    from tether.run_context import SystemFunction
    from tether.telemetry.observer import RunObserver


@dataclass(frozen=True, slots=True)
class RunSpec:
    """Everything a run needs that does not change while it runs."""

    provider: Provider
    tools: ToolRegistry
    system: str | None
    limits: Limits
    settings: ModelSettings
    price: Price | None
    concurrent_tools: bool = False
    max_concurrency: int = 8
    permissions: Permissions = field(default_factory=Permissions)
    max_tool_output: int | None = DEFAULT_MAX_OUTPUT
    cache_tool_outputs: int | None = DEFAULT_THRESHOLD
    """Characters above which a tool's output is kept whole and previewed (``tools/output_cache.py``);
    ``None``: cut to ``max_tool_output`` instead."""
    tool_mode: Literal["native", "json"] = "native"
    """``json``: the model acts through JSON actions in its text (``loop/actions.py``)."""
    tool_choice: ToolChoice = "auto"
    """The run's tool choice, already checked (``loop/choice.py``)."""
    masker: Masker = field(default_factory=Masker)
    """Known keys, masked in every tool result (``tether.secrets``)."""
    observe: Callable[[], RunObserver | None] | None = None
    """Makes the observer of a run (``tether.telemetry.observer_for``), or ``None`` when nothing watches."""
    agent_name: str | None = None
    """The agent's name, for its observers (``Telemetry.agent_name``)."""
    server: tuple[str | None, int | None] = (None, None)
    """Host and port of the provider's API, for its observers."""
    redaction: Redaction | None = None
    """What the loop's own messages may quote of a call's arguments (``tether.redaction``); ``None``:
    the default rules with ``masker``'s keys."""
    compaction: Compaction | None = field(default_factory=Compaction)
    """When and how the history is compacted (``loop/context/window.py``); ``None``: never."""
    system_function: SystemFunction | None = None
    """``system=`` given as a function of the run's context, evaluated when a run starts (``system`` is then
    ``None``); ``loop/progress.py``."""
    instructions: str | None = None
    """A run's own instructions, after what ``system_function`` gives (``run(..., instructions=...)``; with a
    plain ``system`` they are joined into it before the run)."""
    output: OutputSpec | None = None
    """The run's typed output (``output.py``); ``None``: the answer's text."""
    output_mode: Literal["tool", "native", "prompted"] = "tool"
    """How the typed output is asked for (``loop/offer.py``), already chosen for the model."""
    output_validators: tuple[OutputValidator, ...] = ()
    """Checks of a typed output after its type's (``@agent.output_validator``), in order."""
    save_errors: Literal["stop", "continue"] = "stop"
    """What a failed save of a run's session does (``saving.py``)."""
    record_exchanges: bool = False
    """Keep each provider call's request body and raw answer, masked, in the run's session
    (``tether.exchanges``)."""
    response_cache: ResponseCache | None = None
    """Answers replayed for identical requests (``providers/response_cache.py``); ``None``: every call is made."""
    unknown_tool: UnknownTool | None = None
    """What the model reads of a call to a tool that is not offered (``loop/executor.py``); ``None``: tether's
    message naming the tools there are."""
    deps_type: Any = None
    """The type a run's ``deps`` must be (``Agent(deps_type=...)``, or the one its tools' contexts declare),
    checked when a run starts; ``None``: not checked."""
    offered: tuple[ToolDefinition, ...] = field(init=False, repr=False, compare=False)
    """The definitions of the tools the model is shown (the permissions' mode and deny list allow them), made
    once per spec: every run of an agent shares them."""
    is_repeatable: Callable[[str], bool] = field(init=False, repr=False, compare=False)
    """``tools.is_repeatable``, bound once per spec rather than once per run (each run's guard asks it)."""
    takes_context: bool = field(init=False, repr=False, compare=False)
    """Some tool takes the run's context: a run makes its ``RunProgress``."""
    nests: bool = field(init=False, repr=False, compare=False)
    """Some tool runs an agent of its own (``Tool.nests``): a run relays its events (``nesting.py``)."""

    def __post_init__(self) -> None:
        offered = tuple(
            ToolDefinition(t.name, t.description, t.parameters) for t in self.tools if self.permissions.offers(t)
        )
        if self.output is not None and self.output_mode == "tool":
            offered += tuple(ToolDefinition(c.name, c.description, c.schema) for c in self.output.choices)
        object.__setattr__(self, "offered", offered)
        repeatable = self.tools.is_repeatable
        if self.output is not None and self.output_mode == "tool":  # the output may be asked for again and again
            names = frozenset(choice.name for choice in self.output.choices)

            def repeatable(name: str, tools: ToolRegistry = self.tools) -> bool:
                return name in names or tools.is_repeatable(name)

        object.__setattr__(self, "is_repeatable", repeatable)
        object.__setattr__(self, "takes_context", any(t.takes_context for t in self.tools))
        object.__setattr__(self, "nests", any(t.nests for t in self.tools))
