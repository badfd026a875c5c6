"""What a run offers the model (its tools, natively or as JSON actions) and the requests that carry the offer.

Every request of a run is made here: a turn's (the model's view of the transcript, shaped to
``Limits.max_history_messages``, with a correction after an unusable answer or the summary request after a
step limit) and a compaction's summary call. In native mode the tools go as definitions with the tool choice
the turn allows; in JSON action mode (``actions.py``) the protocol goes in the system prompt and the history as
text. The tool-output reader (``tools/output_cache.py``) joins the offer once there is something to read.

A typed output (``output.py``) is offered as its mode says: its output tools among the definitions (``tool``),
the answer asked for under its schema (``native``: ``Request.output``), or its schema in the system prompt with
the provider's JSON mode (``prompted``). In JSON action mode the ``final`` action carries it whatever the mode.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from tether.loop.actions import ActionProtocol
from tether.loop.choice import choice_for_turn
from tether.loop.context import shape_history
from tether.loop.context.tokens import fixed_chars
from tether.loop.spec import RunSpec
from tether.messages import Message
from tether.providers.base import ModelSettings, OnRetry, OnWait, OutputFormat, Request, ToolChoice, ToolDefinition


class Offer:
    """The tools a run shows the model and the requests that carry them (see the module docstring)."""

    __slots__ = (
        "_calls_read", "actions", "cache_key", "deadline", "definitions", "on_retry", "on_wait", "output", "run_id",
        "spec",
        "system_text",
    )  # fmt: skip

    def __init__(
        self, spec: RunSpec, system_text: str | None, run_id: str, on_retry: OnRetry, on_wait: OnWait | None = None
    ) -> None:
        self.spec = spec
        self.system_text: str | None = None
        self.output: OutputFormat | None = None
        """The answer as JSON, on every request of a run whose typed output is ``native`` or ``prompted``."""
        self._instructions(system_text)
        self.run_id = run_id
        self.on_retry = on_retry
        self.on_wait = on_wait
        """Told of every retry a provider makes (the run's records and observer)."""
        self.deadline: float | None = None
        """``loop.time()`` when the run must stop: providers cap their retries by it (set when the run starts)."""
        self.cache_key: str | None = None
        """The run's session id, on every request (``Request.cache_key``)."""
        self._calls_read = 0
        self.definitions: tuple[ToolDefinition, ...] = ()
        self.actions: ActionProtocol | None = None
        """The JSON action protocol, in JSON action mode; ``None``: native tool calls."""
        self.show(spec.offered)

    def _instructions(self, system_text: str | None) -> None:
        """The system prompt the requests carry, and how they ask for a typed output (see the module docstring):
        the ``prompted`` mode's schema joins the prompt."""
        output, mode = self.spec.output, self.spec.output_mode
        self.system_text = system_text
        if output is None or mode == "tool" or self.spec.tool_mode == "json":
            return
        if mode == "native":
            strict = output.strict
            self.output = OutputFormat(output.native_name, strict or output.native_schema, strict is not None)
            return
        self.output = OutputFormat(output.native_name)
        self.system_text = f"{system_text}\n\n{output.prompt()}" if system_text else output.prompt()

    def show(self, definitions: tuple[ToolDefinition, ...]) -> None:
        """The tools the model is shown from now on, natively or in the JSON action protocol."""
        self.definitions = definitions
        if self.spec.tool_mode == "json":
            schema = self.spec.provider.info.supports_json_schema
            output = self.spec.output.native_schema if self.spec.output is not None else None
            self.actions = ActionProtocol(
                self.system_text, definitions, use_schema=schema, call_id=self._call_id, output=output
            )

    def instruct(self, system_text: str | None) -> None:
        """The system prompt every request carries from now on (set before the first)."""
        self._instructions(system_text)
        self.show(self.definitions)

    def fixed_chars(self) -> int:
        """The characters every request carries whatever the history: the system prompt and the tools."""
        return fixed_chars(self.system_text, self.definitions)

    def turn(
        self, view: Sequence[Message], extra: Message | None, *, final: bool, called: bool, ask: Message | None = None
    ) -> tuple[Request, tuple[Message, ...] | None]:
        """A turn's request, and the history it sends when that is exactly the model's view (no ``extra``
        message): what the token gauge anchors on. ``final``: tools off, only an answer; ``called``: the run
        has used a turn, so a required tool choice has been kept; ``ask``: what a tools-off call asks for in place
        of JSON action mode's own request for an answer (natively, it is sent as ``extra`` is)."""
        spec = self.spec
        limits = spec.limits
        history = shape_history(view, limits.max_history_messages)
        choice: ToolChoice = "none" if final else choice_for_turn(spec.tool_choice, called=called)
        if self.actions is not None:
            request = self.actions.request(
                history, extra, final=final, ask=ask, choice=choice, settings=spec.settings,
                timeout=limits.request_timeout, deadline=self.deadline, on_retry=self.on_retry, on_wait=self.on_wait,
                cache_key=self.cache_key,
            )  # fmt: skip
        else:
            extra = extra if extra is not None else ask
            request = Request(
                messages=history if extra is None else (*history, extra), system=self.system_text,
                tools=self.definitions, tool_choice=choice, settings=spec.settings,
                timeout=limits.request_timeout, deadline=self.deadline, on_retry=self.on_retry, output=self.output,
                cache_key=self.cache_key, on_wait=self.on_wait,
            )  # fmt: skip
        return request, history if extra is None and ask is None else None

    def summary(self, summarized: tuple[Message, ...], ask: Message, settings: ModelSettings) -> Request:
        """The request of a compaction's summary call: ``summarized`` and the request ``ask``, tools off."""
        limits = self.spec.limits
        if self.actions is not None:
            return self.actions.request(
                summarized, None, final=True, ask=ask, settings=settings, timeout=limits.request_timeout,
                deadline=self.deadline, on_retry=self.on_retry, on_wait=self.on_wait, cache_key=self.cache_key,
            )  # fmt: skip
        return Request(
            messages=(*summarized, ask), system=self.system_text, tools=self.definitions, tool_choice="none",
            settings=settings, timeout=limits.request_timeout, deadline=self.deadline, on_retry=self.on_retry,
            cache_key=self.cache_key, on_wait=self.on_wait,
        )  # fmt: skip

    def _call_id(self) -> str:
        """The id of the next call read from a JSON action: the run id and a count, so unique in the run and
        the same when a durable run is executed again (its tool steps are named by call id)."""
        self._calls_read += 1
        digest = hashlib.sha256(f"{self.run_id}:{self._calls_read}".encode()).hexdigest()
        return f"call_{digest[:24]}"
