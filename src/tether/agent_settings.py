"""The settings of an agent that can change between its runs: telemetry, secrets, mode, approve
(and record_exchanges, read only). Each is kept in the agent's run spec, so the next run takes it."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from tether.errors import ConfigInvalid
from tether.providers.base import Provider, ServedProvider
from tether.secrets import Masker
from tether.telemetry import DISABLED, Telemetry, observer_for
from tether.tools.permissions import Approver, Mode, Permissions

if TYPE_CHECKING:
    from tether.loop.spec import RunSpec
    from tether.redaction import Redaction
    from tether.telemetry.observer import RunObserver


class AgentSettings:
    """The settable part of :class:`~tether.agent.Agent` (see the module docstring)."""

    _spec: RunSpec
    _telemetry: Telemetry
    provider: Provider
    name: str | None
    redaction: Redaction

    @property
    def record_exchanges(self) -> bool:
        """Whether runs in a session keep their exchanges (see ``record_exchanges=`` in the constructor)."""
        return self._spec.record_exchanges

    @property
    def secrets(self) -> Masker:
        """The known keys masked in every tool result of the next runs (see ``secrets=`` in the constructor)."""
        return self._spec.masker

    @secrets.setter
    def secrets(self, masker: Masker) -> None:
        if not isinstance(masker, Masker):
            raise ConfigInvalid(f"secrets must be a tether.secrets.Masker, not {type(masker).__name__}")
        self._spec = replace(self._spec, masker=masker)
        self.telemetry = self._telemetry  # its redaction masks the new keys

    @property
    def telemetry(self) -> Telemetry:
        """How the next runs are observed (see ``telemetry=`` in the constructor); settable."""
        return self._telemetry

    @telemetry.setter
    def telemetry(self, settings: Telemetry | bool | None) -> None:
        if settings is None or settings is True:
            settings = Telemetry()
        elif settings is False:
            settings = DISABLED
        elif not isinstance(settings, Telemetry):
            raise ConfigInvalid(f"telemetry must be a Telemetry or a bool, not {type(settings).__name__}")
        self._telemetry = settings
        redaction = settings.redaction(self._spec.masker)
        self.redaction = redaction
        """What spans, logs and the CLI may show of a run (``tether.redaction``)."""

        def observe() -> RunObserver | None:
            return observer_for(settings, redaction)

        self._spec = replace(
            self._spec,
            observe=observe,
            agent_name=settings.agent_name or self.name,
            server=self.provider.server if isinstance(self.provider, ServedProvider) else (None, None),
            redaction=redaction,
        )

    @property
    def mode(self) -> Mode:
        """The tool mode of the next runs; settable (``agent.mode = "read-only"``)."""
        return self._spec.permissions.mode

    @mode.setter
    def mode(self, mode: Mode | str) -> None:
        current = self._spec.permissions
        permissions = Permissions.of(mode, current.deny, current.can_use_tool, current.approve)
        self._spec = replace(self._spec, permissions=permissions)

    @property
    def approve(self) -> Approver | None:
        """What answers an ``Ask`` of the next runs (see ``approve=`` in the constructor); settable."""
        return self._spec.permissions.approve

    @approve.setter
    def approve(self, approve: Approver | None) -> None:
        current = self._spec.permissions
        permissions = Permissions.of(current.mode, current.deny, current.can_use_tool, approve)
        self._spec = replace(self._spec, permissions=permissions)
