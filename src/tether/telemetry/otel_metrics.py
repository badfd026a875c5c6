"""The OpenTelemetry instruments of a run, made once per meter and shared by every run that uses it.

Names, units and attributes follow the GenAI semantic conventions (see ``otel.py`` for the full list); the
``tether.*`` instruments cover what the conventions have no name for. Provider calls are measured in one of two
layouts: by default the established ``gen_ai.client.token.usage`` / ``gen_ai.client.operation.duration`` /
``gen_ai.client.operation.time_to_first_chunk`` histograms that dashboards expect; with
``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``, the newest ``gen_ai.client.inference.*`` family
instead (never both, as the conventions' transition plan asks). Only ``opentelemetry-api`` is used here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

    from tether.events import RunResult, ToolCallRecord, TurnRecord
    from tether.usage import Usage

_SECONDS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]
"""The conventions' bucket boundaries for inference and tool durations."""
_AGENT_SECONDS = [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 102.4, 204.8, 409.6]
_COUNTS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
_TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0]

_TOKEN_COUNTS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864]
"""The conventions' bucket boundaries for ``gen_ai.client.token.usage``."""
OPT_IN_VARIABLE = "OTEL_SEMCONV_STABILITY_OPT_IN"
LATEST = "gen_ai_latest_experimental"


def wants_latest(value: str | None) -> bool:
    """Whether ``OTEL_SEMCONV_STABILITY_OPT_IN``'s ``value`` asks for the latest experimental GenAI conventions."""
    return LATEST in {part.strip() for part in (value or "").split(",")}


_TOKENS = (
    ("input_tokens", "gen_ai.client.inference.usage.input_tokens", "Input (prompt) tokens, cached ones included."),
    ("output_tokens", "gen_ai.client.inference.usage.output_tokens", "Output tokens, reasoning included."),
    ("cache_read", "gen_ai.client.inference.usage.cache_read.input_tokens", "Input tokens read from the cache."),
    ("cache_write", "gen_ai.client.inference.usage.cache_write.input_tokens", "Input tokens written to the cache."),
    ("reasoning", "gen_ai.client.inference.usage.reasoning.output_tokens", "Output tokens spent on reasoning."),
)


class Instruments:
    """Every instrument a run records to, made from one meter."""

    __slots__ = (
        "agent_duration", "agent_inference_calls", "agent_tool_calls", "cost", "errors", "inference_duration",
        "latest", "requests", "retries", "token_usage", "tokens", "tool_duration", "ttft",
    )  # fmt: skip

    def __init__(self, meter: Any, *, latest: bool = False) -> None:
        histogram = meter.create_histogram
        self.latest = latest
        """The ``gen_ai.client.inference.*`` layout (opted in), else ``gen_ai.client.operation.*`` and
        ``gen_ai.client.token.usage``."""
        family = "gen_ai.client.inference" if latest else "gen_ai.client.operation"
        self.inference_duration = histogram(
            f"{family}.duration", unit="s", description="GenAI client inference operation duration.",
            explicit_bucket_boundaries_advisory=_SECONDS,
        )  # fmt: skip
        self.ttft = histogram(
            f"{family}.time_to_first_chunk", unit="s",
            description="Time from the request to the first chunk of the streamed answer.",
            explicit_bucket_boundaries_advisory=_TTFT,
        )  # fmt: skip
        self.tokens: dict[str, Any] = {}
        self.token_usage: Any = None
        if latest:
            self.tokens = {key: meter.create_counter(name, unit="{token}", description=text)
                           for key, name, text in _TOKENS}  # fmt: skip
        else:
            self.token_usage = histogram(
                "gen_ai.client.token.usage", unit="{token}", description="Input and output tokens used per call.",
                explicit_bucket_boundaries_advisory=_TOKEN_COUNTS,
            )  # fmt: skip
        self.agent_duration = histogram(
            "gen_ai.invoke_agent.duration", unit="s", description="Duration of an agent run.",
            explicit_bucket_boundaries_advisory=_AGENT_SECONDS,
        )  # fmt: skip
        self.agent_inference_calls = histogram(
            "gen_ai.invoke_agent.inference_calls", unit="{inference_call}",
            description="Model calls one agent run made, failed ones included.",
            explicit_bucket_boundaries_advisory=_COUNTS,
        )  # fmt: skip
        self.agent_tool_calls = histogram(
            "gen_ai.invoke_agent.tool_calls", unit="{tool_call}", description="Tool calls one agent run made.",
            explicit_bucket_boundaries_advisory=_COUNTS,
        )  # fmt: skip
        self.tool_duration = histogram(
            "gen_ai.execute_tool.duration", unit="s", description="Duration of a tool's execution.",
            explicit_bucket_boundaries_advisory=_SECONDS,
        )  # fmt: skip
        counter = meter.create_counter
        self.requests = counter("tether.client.requests", unit="{request}", description="Provider calls made.")
        self.retries = counter(
            "tether.client.retries", unit="{retry}", description="Provider calls tried again, by error code."
        )
        self.errors = counter(
            "tether.client.errors", unit="{error}", description="Provider calls that failed, by error code."
        )
        self.cost = counter("tether.client.cost", unit="USD", description="What runs cost, when the price is known.")

    def call(self, record: TurnRecord, attributes: Mapping[str, Any]) -> None:
        """Record one provider call: its duration, time to first chunk, tokens, and its failure if it failed."""
        attributes = dict(attributes)
        if record.model:
            attributes["gen_ai.response.model"] = record.model
        if record.error is not None:
            attributes["error.type"] = record.error
            self.errors.add(1, attributes)
        self.requests.add(1, attributes)
        self.inference_duration.record(record.duration_ms / 1000.0, attributes)
        if record.ttft_ms is not None:
            self.ttft.record(record.ttft_ms / 1000.0, attributes)
        attributes.pop("error.type", None)
        self._tokens(record.usage, attributes)

    def _tokens(self, usage: Usage, attributes: dict[str, Any]) -> None:
        if not self.latest:
            self.token_usage.record(input_tokens(usage), {**attributes, "gen_ai.token.type": "input"})
            self.token_usage.record(usage.output_tokens, {**attributes, "gen_ai.token.type": "output"})
            return
        attributes["gen_ai.token.modality"] = "text"  # tether's messages carry text only
        tokens = self.tokens
        tokens["input_tokens"].add(input_tokens(usage), attributes)
        tokens["output_tokens"].add(usage.output_tokens, attributes)
        if usage.cache_read_tokens:
            tokens["cache_read"].add(usage.cache_read_tokens, attributes)
        if usage.cache_write_tokens:
            tokens["cache_write"].add(usage.cache_write_tokens, attributes)
        if usage.reasoning_tokens:
            tokens["reasoning"].add(usage.reasoning_tokens, attributes)

    def retry(self, code: str, attributes: Mapping[str, Any]) -> None:
        self.retries.add(1, {**attributes, "error.type": code})

    def tool(self, record: ToolCallRecord, tool_type: str) -> None:
        """Record one tool call that ran (a refused or unknown call has no duration and is not recorded)."""
        if record.duration_ms is None:
            return
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": record.name,
                      "gen_ai.tool.type": tool_type}  # fmt: skip
        if record.is_error:
            attributes["error.type"] = record.code or "tool_failed"
        self.tool_duration.record(record.duration_ms / 1000.0, attributes)

    def run(self, result: RunResult, attributes: Mapping[str, Any], error_type: str | None, tool_calls: int) -> None:
        """Record the run: its duration, how many model and tool calls it made, what it cost."""
        attributes = dict(attributes)
        self.agent_inference_calls.record(len(result.turn_records), attributes)
        self.agent_tool_calls.record(tool_calls, attributes)
        if result.cost is not None:
            self.cost.add(result.cost.total_usd, attributes)
        if error_type is not None:
            attributes["error.type"] = error_type
        self.agent_duration.record(result.duration_ms / 1000.0, attributes)


def input_tokens(usage: Usage) -> int:
    """Input tokens as the conventions count them: cache reads and writes included (tether counts them apart)."""
    return usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
