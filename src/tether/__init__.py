"""tether: an agent loop that always ends, always answers and never corrupts a transcript.

Everything public is importable from here (the agent, its results and run events, the vocabulary, tools and
limits), or from a package's face (``tether.providers``, ``tether.tools``, ``tether.sessions``, ``tether.durable``,
``tether.telemetry``, ``tether.testing``), loaded on first use: ``import tether`` itself imports nothing but this
module, so a command line that only needs ``--help`` does not pay for pydantic or a provider.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "__version__": "tether._version",
    "Agent": "tether.agent",
    "Assistant": "tether.assistant",
    "ask": "tether.assistant",
    "ask_async": "tether.assistant",
    "RunHandle": "tether.run_handles",
    "RunStream": "tether.run_handles",
    "Limits": "tether.limits",
    "StopReason": "tether.limits",
    "Compaction": "tether.limits",
    "RunResult": "tether.events",
    "RunEvent": "tether.events",
    "RunStarted": "tether.events",
    "TurnStarted": "tether.events",
    "TextDelta": "tether.events",
    "PartialOutput": "tether.events",
    "ThinkingDelta": "tether.events",
    "ThinkingStarted": "tether.events",
    "ThinkingEnded": "tether.events",
    "ProviderRetry": "tether.events",
    "RateLimitWait": "tether.events",
    "FallbackTaken": "tether.events",
    "RateLimit": "tether.providers.http.ratelimit",
    "CallFailed": "tether.events",
    "ToolCallStarted": "tether.events",
    "ToolResultReceived": "tether.events",
    "TurnCompleted": "tether.events",
    "Compacted": "tether.events",
    "RunCompleted": "tether.events",
    "HandoffTaken": "tether.events",
    "Handoff": "tether.team.handoffs",
    "Guardrail": "tether.team.guardrails",
    "GuardrailResult": "tether.team.guardrails",
    "GuardrailVerdict": "tether.team.guardrails",
    "agent_guardrail": "tether.team.guardrails",
    "GuardrailBlocked": "tether.errors",
    "TurnRecord": "tether.events",
    "ToolCallRecord": "tether.events",
    "SubAgentEvent": "tether.events",
    "AgentTool": "tether.team",
    "JsonObject": "tether.messages",
    "Message": "tether.messages",
    "Text": "tether.messages",
    "Thinking": "tether.messages",
    "ToolCall": "tether.messages",
    "ToolResult": "tether.messages",
    "Attachment": "tether.messages",
    "Tool": "tether.tools.base",
    "tool": "tether.tools.base",
    "Done": "tether.tools.base",
    "RunContext": "tether.run_context",
    "ModelRetry": "tether.output",
    "OutputSchema": "tether.output",
    "InvalidOutput": "tether.errors",
    "Usage": "tether.usage",
    "Price": "tether.usage",
    "Tier": "tether.usage",
    "Cost": "tether.usage",
    "ModelSettings": "tether.providers.base",
    "Provider": "tether.providers.base",
    "ResponseCache": "tether.providers.response_cache",
    "TetherError": "tether.errors",
    "ToolError": "tether.errors",
    "Telemetry": "tether.telemetry",
    "HealthReport": "tether.health",
    "HealthCheck": "tether.health",
    "PendingCall": "tether.paused",
    "PausedRun": "tether.paused",
    "Approve": "tether.paused",
    "Reject": "tether.paused",
    "ExternalResult": "tether.paused",
    "Decisions": "tether.paused",
    "DecisionInvalid": "tether.errors",
}

__all__ = sorted(name for name in _EXPORTS if not name.startswith("__"))

if TYPE_CHECKING:
    from tether._version import __version__ as __version__
    from tether.agent import Agent as Agent
    from tether.assistant import Assistant as Assistant
    from tether.assistant import ask as ask
    from tether.assistant import ask_async as ask_async
    from tether.errors import DecisionInvalid as DecisionInvalid
    from tether.errors import GuardrailBlocked as GuardrailBlocked
    from tether.errors import InvalidOutput as InvalidOutput
    from tether.errors import TetherError as TetherError
    from tether.errors import ToolError as ToolError
    from tether.events import CallFailed as CallFailed
    from tether.events import Compacted as Compacted
    from tether.events import FallbackTaken as FallbackTaken
    from tether.events import HandoffTaken as HandoffTaken
    from tether.events import PartialOutput as PartialOutput
    from tether.events import ProviderRetry as ProviderRetry
    from tether.events import RateLimitWait as RateLimitWait
    from tether.events import RunCompleted as RunCompleted
    from tether.events import RunEvent as RunEvent
    from tether.events import RunResult as RunResult
    from tether.events import RunStarted as RunStarted
    from tether.events import SubAgentEvent as SubAgentEvent
    from tether.events import TextDelta as TextDelta
    from tether.events import ThinkingDelta as ThinkingDelta
    from tether.events import ThinkingEnded as ThinkingEnded
    from tether.events import ThinkingStarted as ThinkingStarted
    from tether.events import ToolCallRecord as ToolCallRecord
    from tether.events import ToolCallStarted as ToolCallStarted
    from tether.events import ToolResultReceived as ToolResultReceived
    from tether.events import TurnCompleted as TurnCompleted
    from tether.events import TurnRecord as TurnRecord
    from tether.events import TurnStarted as TurnStarted
    from tether.health import HealthCheck as HealthCheck
    from tether.health import HealthReport as HealthReport
    from tether.limits import Compaction as Compaction
    from tether.limits import Limits as Limits
    from tether.limits import StopReason as StopReason
    from tether.messages import Attachment as Attachment
    from tether.messages import JsonObject as JsonObject
    from tether.messages import (
        Message as Message,
    )
    from tether.messages import (
        Text as Text,
    )
    from tether.messages import (
        Thinking as Thinking,
    )
    from tether.messages import (
        ToolCall as ToolCall,
    )
    from tether.messages import (
        ToolResult as ToolResult,
    )
    from tether.output import ModelRetry as ModelRetry
    from tether.output import OutputSchema as OutputSchema
    from tether.paused import Approve as Approve
    from tether.paused import Decisions as Decisions
    from tether.paused import ExternalResult as ExternalResult
    from tether.paused import PausedRun as PausedRun
    from tether.paused import PendingCall as PendingCall
    from tether.paused import Reject as Reject
    from tether.providers.base import ModelSettings as ModelSettings
    from tether.providers.base import Provider as Provider
    from tether.providers.http.ratelimit import RateLimit as RateLimit
    from tether.providers.response_cache import ResponseCache as ResponseCache
    from tether.run_context import RunContext as RunContext
    from tether.run_handles import RunHandle as RunHandle
    from tether.run_handles import RunStream as RunStream
    from tether.team import AgentTool as AgentTool
    from tether.team.guardrails import Guardrail as Guardrail
    from tether.team.guardrails import GuardrailResult as GuardrailResult
    from tether.team.guardrails import GuardrailVerdict as GuardrailVerdict
    from tether.team.guardrails import agent_guardrail as agent_guardrail
    from tether.team.handoffs import Handoff as Handoff
    from tether.telemetry import Telemetry as Telemetry
    from tether.tools.base import Done as Done
    from tether.tools.base import Tool as Tool
    from tether.tools.base import tool as tool
    from tether.usage import Cost as Cost
    from tether.usage import Price as Price
    from tether.usage import Tier as Tier
    from tether.usage import Usage as Usage


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tether' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext tether``: add ``%ask`` and ``%%ask`` to an IPython shell (:mod:`tether.assistant.ipython`).

    Defined here because IPython looks for it in the module it loads; it imports IPython only when called.
    """
    from tether.assistant.ipython import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext tether``: take ``%ask`` and ``%%ask`` away again."""
    from tether.assistant.ipython import unload_ipython_extension as unload

    unload(ipython)
