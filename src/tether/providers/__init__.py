"""Providers: the models tether speaks to, behind the Provider protocol of ``base.py`` (docs/providers.md).

This face hands on what a user of providers needs, loaded on first use (``import tether.providers`` loads no
provider): the protocol and its values, the events a provider streams (``LlmEvent`` and its kinds, ``Usage``),
model strings (``resolve``, ``PROFILES``), each wire protocol's provider, the embedded model, models tried in
order (``FallbackProvider``), the scripted model for tests, and the HTTP settings (``RetryPolicy``,
``ResponseLimits``, ``RateLimit``).

* ``base.py``: the Provider protocol and the values it speaks (``Request``, ``ModelInfo``, ...);
* ``registry.py``: model strings and the profiles of OpenAI-compatible servers; ``fallback.py``: models tried
  in order; ``default_model.py``: the model used when none is configured; ``windows.py``: known context
  windows; ``probe.py``: what a server serves;
* one module per wire protocol (``openai_chat.py``, ``openai_responses.py``, ``anthropic.py``, ``gemini.py``),
  each with its answers' decoder (``*_stream.py``), and the same protocols elsewhere (``azure.py``,
  ``vertex.py``); ``wire.py`` and ``decoding.py``: reading answers;
  ``memo.py``: request bodies made of kept JSON;
* ``http/``: the HTTP layer; ``local/``: the embedded model; ``scripted.py``: ``ScriptedProvider``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether._lazy import lazy_face

_EXPORTS: dict[str, str] = {
    "Provider": "tether.providers.base",
    "ServedProvider": "tether.providers.base",
    "Server": "tether.providers.base",
    "ModelInfo": "tether.providers.base",
    "ModelSettings": "tether.providers.base",
    "Request": "tether.providers.base",
    "ToolDefinition": "tether.providers.base",
    "ToolChoice": "tether.providers.base",
    "ForceTool": "tether.providers.base",
    "OnRetry": "tether.providers.base",
    "OnFallback": "tether.providers.base",
    "FallbackProvider": "tether.providers.fallback",
    "FALLBACK_ON": "tether.providers.fallback",
    "OnWait": "tether.providers.base",
    "LlmEvent": "tether.events",
    "StreamStart": "tether.events",
    "ThinkingDelta": "tether.events",
    "TextDelta": "tether.events",
    "ToolCallStart": "tether.events",
    "ToolCallDelta": "tether.events",
    "ToolCallEnd": "tether.events",
    "StreamEnd": "tether.events",
    "ProviderRetry": "tether.events",
    "RateLimitWait": "tether.events",
    "FallbackTaken": "tether.events",
    "FinishReason": "tether.events",
    "Usage": "tether.usage",
    "resolve": "tether.providers.registry",
    "PROFILES": "tether.providers.registry",
    "Profile": "tether.providers.registry",
    "OpenAIChatProvider": "tether.providers.openai_chat",
    "AzureOpenAIProvider": "tether.providers.azure",
    "BedrockProvider": "tether.providers.bedrock",
    "OpenAIResponsesProvider": "tether.providers.openai_responses",
    "AnthropicProvider": "tether.providers.anthropic",
    "GeminiProvider": "tether.providers.gemini",
    "VertexProvider": "tether.providers.vertex",
    "LocalProvider": "tether.providers.local",
    "RetryPolicy": "tether.providers.http.retry",
    "RateLimit": "tether.providers.http.ratelimit",
    "ResponseLimits": "tether.providers.http.body",
    "close_sessions": "tether.providers.http.pool",
    "ScriptedProvider": "tether.providers.scripted",
    "ScriptExhausted": "tether.providers.scripted",
    "call": "tether.providers.scripted",
    "reply": "tether.providers.scripted",
    "parallel": "tether.providers.scripted",
    "cut_off": "tether.providers.scripted",
    "empty": "tether.providers.scripted",
    "hang": "tether.providers.scripted",
    "fail": "tether.providers.scripted",
    "events": "tether.providers.scripted",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)

if TYPE_CHECKING:
    from tether.events import FallbackTaken as FallbackTaken
    from tether.events import FinishReason as FinishReason
    from tether.events import LlmEvent as LlmEvent
    from tether.events import ProviderRetry as ProviderRetry
    from tether.events import RateLimitWait as RateLimitWait
    from tether.events import StreamEnd as StreamEnd
    from tether.events import StreamStart as StreamStart
    from tether.events import TextDelta as TextDelta
    from tether.events import ThinkingDelta as ThinkingDelta
    from tether.events import ToolCallDelta as ToolCallDelta
    from tether.events import ToolCallEnd as ToolCallEnd
    from tether.events import ToolCallStart as ToolCallStart
    from tether.providers.anthropic import AnthropicProvider as AnthropicProvider
    from tether.providers.azure import AzureOpenAIProvider as AzureOpenAIProvider
    from tether.providers.base import ForceTool as ForceTool
    from tether.providers.base import ModelInfo as ModelInfo
    from tether.providers.base import ModelSettings as ModelSettings
    from tether.providers.base import OnFallback as OnFallback
    from tether.providers.base import OnRetry as OnRetry
    from tether.providers.base import OnWait as OnWait
    from tether.providers.base import Provider as Provider
    from tether.providers.base import Request as Request
    from tether.providers.base import ServedProvider as ServedProvider
    from tether.providers.base import Server as Server
    from tether.providers.base import ToolChoice as ToolChoice
    from tether.providers.base import ToolDefinition as ToolDefinition
    from tether.providers.bedrock import BedrockProvider as BedrockProvider
    from tether.providers.fallback import FALLBACK_ON as FALLBACK_ON
    from tether.providers.fallback import FallbackProvider as FallbackProvider
    from tether.providers.gemini import GeminiProvider as GeminiProvider
    from tether.providers.http.body import ResponseLimits as ResponseLimits
    from tether.providers.http.pool import close_sessions as close_sessions
    from tether.providers.http.ratelimit import RateLimit as RateLimit
    from tether.providers.http.retry import RetryPolicy as RetryPolicy
    from tether.providers.local import LocalProvider as LocalProvider
    from tether.providers.openai_chat import OpenAIChatProvider as OpenAIChatProvider
    from tether.providers.openai_responses import OpenAIResponsesProvider as OpenAIResponsesProvider
    from tether.providers.registry import PROFILES as PROFILES
    from tether.providers.registry import Profile as Profile
    from tether.providers.registry import resolve as resolve
    from tether.providers.scripted import ScriptedProvider as ScriptedProvider
    from tether.providers.scripted import ScriptExhausted as ScriptExhausted
    from tether.providers.scripted import call as call
    from tether.providers.scripted import cut_off as cut_off
    from tether.providers.scripted import empty as empty
    from tether.providers.scripted import events as events
    from tether.providers.scripted import fail as fail
    from tether.providers.scripted import hang as hang
    from tether.providers.scripted import parallel as parallel
    from tether.providers.scripted import reply as reply
    from tether.providers.vertex import VertexProvider as VertexProvider
    from tether.usage import Usage as Usage
