"""Property-based conformance tests (Hypothesis): any valid session a run can store comes back equal.

:class:`SessionStoreProperties` is :class:`~tether.testing.store_conformance.SessionStoreConformance` plus
these tests; subclass it instead when Hypothesis is installed. The strategies (:func:`transcripts`,
:func:`sessions`) generate the shapes a run can store, for your own properties too.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.messages import Message, Part, Text, Thinking, ToolCall, ToolResult
from tether.sessions import Session
from tether.testing.store_conformance import SessionStoreConformance, Stores
from tether.usage import Usage

__all__ = ["SessionStoreProperties", "sessions", "transcripts"]

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(st.text(max_size=6), json_values, max_size=3)
provider_data = st.none() | json_objects
texts = st.builds(Text, text=st.text(), provider_data=provider_data)
thoughts = st.builds(Thinking, text=st.text(), signature=st.none() | st.text(), provider_data=provider_data)


@st.composite
def transcripts(draw: st.DrawFn) -> list[Message]:
    """A valid transcript: an optional system prompt, then exchanges of a user message and assistant turns
    whose tool calls are all answered, possibly ending in a turn whose calls have no results yet."""
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append(Message("system", (Text(draw(st.text())),)))
    calls_made = 0
    exchanges = draw(st.integers(0, 3))
    for exchange in range(exchanges):
        messages.append(Message("user", tuple(draw(st.lists(texts, min_size=1, max_size=2))), draw(provider_data)))
        last = exchange == exchanges - 1
        for _ in range(draw(st.integers(0 if last else 1, 3))):
            calls = [
                ToolCall(
                    f"call_{calls_made + i}",
                    draw(st.text(min_size=1, max_size=10)),
                    draw(st.none() | json_objects),
                    draw(st.none() | st.text()),
                    draw(provider_data),
                )
                for i in range(draw(st.integers(0, 3)))
            ]
            calls_made += len(calls)
            said: list[Part] = draw(st.lists(texts | thoughts, max_size=2))
            messages.append(Message("assistant", (*said, *calls), draw(provider_data)))
            results = [
                ToolResult(c.id, c.name, draw(st.text()), draw(st.booleans()), draw(st.none() | st.text(max_size=8)))
                for c in calls
            ]
            if results:
                split = draw(st.integers(1, len(results)))
                messages.append(Message("tool", tuple(results[:split])))
                if results[split:]:
                    messages.append(Message("tool", tuple(results[split:])))
    if draw(st.booleans()) and messages and messages[-1].role == "tool":
        # a run stopped mid-turn: drop the results of the last calls (a resumed run closes them)
        while messages[-1].role == "tool":
            messages.pop()
    return messages


timestamps = st.datetimes(
    min_value=datetime(1970, 1, 1),
    max_value=datetime(2200, 1, 1),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))]),
)
usages = st.builds(
    Usage,
    *(st.integers(0, 2**53) for _ in range(6)),
)


@st.composite
def sessions(draw: st.DrawFn, session_id: str = "prop") -> Session:
    """A whole session (id ``session_id``) with a valid transcript, any usage, text and time zone."""
    return Session(
        id=session_id,
        messages=tuple(draw(transcripts())),
        usage=draw(usages),
        model=draw(st.text()),
        title=draw(st.text()),
        created_at=draw(timestamps),
        updated_at=draw(timestamps),
    )


class SessionStoreProperties(SessionStoreConformance):
    """The conformance tests and the property-based ones; define ``open_store`` as for the base class."""

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(saved=sessions())
    async def test_any_valid_session_saved_and_loaded_comes_back_equal(self, stores: Stores, saved: Session) -> None:
        try:
            await stores.open().save(saved)

            assert await stores.open().load(saved.id) == saved
        finally:
            await stores.close()

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(versions=st.lists(sessions(), min_size=2, max_size=3))
    async def test_any_sequence_of_versions_saved_through_one_store_loads_back_as_the_last(
        self, stores: Stores, versions: list[Session]
    ) -> None:
        try:
            store = stores.open()
            for version in versions:  # appended, shortened or rewritten: whatever changed between them
                await store.save(version)
                assert await store.load(version.id) == version

            assert await stores.open().load("prop") == versions[-1]
        finally:
            await stores.close()
