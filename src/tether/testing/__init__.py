"""Testing agents and session stores the way tether tests its own.

- :mod:`tether.testing.runs`: run an agent and keep its events, one line per event, a transcript check.
- :mod:`tether.testing.plugin`: the pytest plugin (fixture ``tether_scripted``), loaded by pytest itself.
- :mod:`tether.testing.store_conformance`: the conformance suite every session store passes, to subclass.

Importing this package imports neither pytest nor a provider; see docs/testing.md.
"""

from __future__ import annotations

from tether.testing.runs import ScriptFactory, assert_valid_transcript, describe, result_of, run_events

__all__ = ["ScriptFactory", "assert_valid_transcript", "describe", "result_of", "run_events"]
