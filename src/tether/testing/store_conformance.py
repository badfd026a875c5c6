"""The session-store conformance suite: the contract of :mod:`tether.sessions.base`, as tests any store can run.

Subclass :class:`SessionStoreConformance` in a test module and give it an ``open_store`` fixture: a function
that opens a new store object on the same storage each time it is called (for a store kept in memory, the
same object). Every test then runs against your store, as tether's own stores run it::

    from tether.sessions import MemorySessionStore
    from tether.testing.store_conformance import SessionStoreConformance

    class TestMyStore(SessionStoreConformance):
        @pytest.fixture
        def open_store(self, tmp_path):
            return lambda: MyStore(tmp_path / "sessions.db")

The tests are coroutines: the suite needs ``pytest-asyncio`` (in either mode). Stores with an ``aclose()``
are closed when each test ends. :mod:`tether.testing.store_properties` adds property-based tests (Hypothesis).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, cast

import pytest
import pytest_asyncio

from tether.errors import SessionInvalid
from tether.messages import Message, Text, Thinking, ToolCall, ToolResult
from tether.sessions import OutputStore, Session, SessionNotFound, SessionStore
from tether.sessions.base import output_ref
from tether.usage import Usage

__all__ = ["OUTPUT", "REF", "T0", "SessionStoreConformance", "Stores", "conversation", "session"]

T0 = datetime(2026, 3, 15, 14, 22, 33, 123456, tzinfo=UTC)
OUTPUT = "".join(f"{i:06d} ünïcödé ✓ \x00 output line\n" for i in range(40_000))  # about 1.3 MB
REF = output_ref(OUTPUT)


def conversation() -> tuple[Message, ...]:
    """A transcript with every kind of part, provider data and a parallel tool call."""
    return (
        Message.system("Be brief."),
        Message("user", (Text("Add 2 and 3, then read a.txt"),), provider_data={"cache": "ephemeral"}),
        Message(
            "assistant",
            (
                Thinking("add, then read", signature="sig-1"),
                Text("Working on it."),
                ToolCall("c1", "add", {"a": 2, "b": 3}, '{"a": 2, "b": 3}'),
                ToolCall("c2", "read", None, "{not json", provider_data={"thought_signature": "xyz"}),
            ),
            provider_data={"response_id": "r-1"},
        ),
        Message(
            "tool",
            (ToolResult("c1", "add", "5"), ToolResult("c2", "read", "bad arguments", True, "invalid_arguments")),
        ),
        Message("assistant", (Text("2 + 3 = 5; ünïcödé ✓ and a NUL \x00 byte"),)),
    )


def session(session_id: str = "s1", *, messages: tuple[Message, ...] | None = None, **changes: object) -> Session:
    """A session holding :func:`conversation` (or ``messages``), with any field changed by keyword."""
    base = Session(
        id=session_id,
        messages=conversation() if messages is None else messages,
        usage=Usage(input_tokens=120, output_tokens=45, cache_read_tokens=7, reasoning_tokens=3, requests=2),
        model="openai:gpt-4o-mini",
        title="Adding numbers",
        created_at=T0,
        updated_at=T0 + timedelta(minutes=5),
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def tree(root: Path) -> list[Path]:
    return sorted(root.rglob("*"))


class Stores:
    """Store objects opened on one storage, as several processes would open it, closed together at the end."""

    def __init__(self, open_store: Callable[[], SessionStore]) -> None:
        self._open_store = open_store
        self._opened: list[SessionStore] = []

    def open(self) -> SessionStore:
        """A store object on the storage: a new one for stores kept outside the process."""
        store = self._open_store()
        self._opened.append(store)
        return store

    async def close(self) -> None:
        """Close (``aclose()``) every store opened so far, once each; the next :meth:`open` starts afresh."""
        opened, self._opened = self._opened, []
        for store in {id(store): store for store in opened}.values():
            aclose = getattr(store, "aclose", None)
            if aclose is not None:
                await aclose()


class SessionStoreConformance:
    """The conformance tests; a subclass defines the ``open_store`` fixture (see the module docstring)."""

    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def open_store(self) -> Callable[[], SessionStore]:
        """Override: a function opening a new store object on the test's storage each time it is called."""
        raise NotImplementedError(f"{type(self).__name__} must define an open_store fixture")

    @pytest_asyncio.fixture
    async def stores(self, open_store: Callable[[], SessionStore]) -> AsyncIterator[Stores]:
        opened = Stores(open_store)
        yield opened
        await opened.close()

    @pytest.fixture
    def store(self, stores: Stores) -> SessionStore:
        return stores.open()

    async def test_every_store_is_a_session_store(self, store: SessionStore) -> None:
        assert isinstance(store, SessionStore)

    async def test_a_saved_session_loads_back_with_messages_usage_model_title_and_timestamps(
        self, stores: Stores
    ) -> None:
        saved = session()
        await stores.open().save(saved)

        for store in (stores.open(), stores.open()):  # and again from storage opened anew
            loaded = await store.load("s1")
            assert loaded.messages == saved.messages
            assert (loaded.usage, loaded.model, loaded.title) == (saved.usage, saved.model, saved.title)
            assert (loaded.created_at, loaded.updated_at) == (T0, T0 + timedelta(minutes=5))
            assert loaded.updated_at.tzinfo is UTC
            assert loaded == saved

    async def test_loading_an_unknown_id_raises_session_not_found_naming_the_id(self, store: SessionStore) -> None:
        await store.save(session("known"))
        with pytest.raises(SessionNotFound, match="'unknown'") as raised:
            await store.load("unknown")
        assert raised.value.code == "session_invalid"
        assert raised.value.details["session_id"] == "unknown"

    async def test_an_empty_store_lists_nothing(self, store: SessionStore) -> None:
        assert await store.list() == []

    async def test_list_gives_a_summary_of_each_session_newest_first(self, stores: Stores) -> None:
        store = stores.open()
        await store.save(session("old", updated_at=T0 + timedelta(hours=1), title="Old", model="a:x"))
        await store.save(session("new", updated_at=T0 + timedelta(hours=3), title="New", messages=conversation()[:2]))
        await store.save(session("mid", updated_at=T0 + timedelta(hours=2), messages=()))
        await store.save(session("tie-a", updated_at=T0))
        await store.save(session("tie-b", updated_at=T0))

        summaries = await stores.open().list()

        assert [s.id for s in summaries] == ["new", "mid", "old", "tie-b", "tie-a"]
        new, mid, old = summaries[:3]
        assert (new.title, new.model, new.message_count, new.updated_at) == (
            "New",
            "openai:gpt-4o-mini",
            2,
            T0 + timedelta(hours=3),
        )
        assert (old.title, old.model, old.message_count, old.created_at) == ("Old", "a:x", 5, T0)
        assert mid.message_count == 0

    async def test_saving_again_replaces_title_model_usage_and_timestamps(self, stores: Stores) -> None:
        store = stores.open()
        await store.save(session())
        changed = session(
            title="Renamed",
            model="anthropic:claude-haiku-4-5",
            usage=Usage(input_tokens=1, requests=1),
            created_at=T0 - timedelta(days=1),
            updated_at=T0 + timedelta(days=1),
        )
        await store.save(changed)

        assert await stores.open().load("s1") == changed
        [summary] = await store.list()
        assert (summary.title, summary.updated_at) == ("Renamed", T0 + timedelta(days=1))

    async def test_messages_appended_across_saves_all_load_back(self, stores: Stores) -> None:
        store = stores.open()
        full = conversation()
        current = session(messages=full[:2])
        await store.save(current)
        for end in (3, 4, 5):
            current = current.updated(messages=full[:end], usage=current.usage + Usage(requests=1))
            await store.save(current)
            assert await store.load("s1") == current
        more = (*full, Message.user("And now?"), Message.assistant("Done."))
        current = current.updated(messages=more)
        await store.save(current)

        assert (await stores.open().load("s1")).messages == more

    async def test_a_loaded_session_extended_and_saved_loads_back_whole(self, stores: Stores) -> None:
        await stores.open().save(session(messages=conversation()[:4]))
        store = stores.open()
        loaded = await store.load("s1")
        extended = loaded.updated(messages=(*loaded.messages, Message.assistant("five")))
        await store.save(extended)

        assert await stores.open().load("s1") == extended

    @pytest.mark.parametrize(
        "rewritten",
        [
            pytest.param(conversation()[:2], id="shorter"),
            pytest.param((Message.user("A different start"), Message.assistant("ok")), id="different-start"),
            pytest.param((*conversation()[:4], Message.assistant("another ending")), id="different-end"),
            pytest.param((), id="emptied"),
        ],
    )
    async def test_a_rewritten_history_replaces_the_stored_one(
        self, stores: Stores, rewritten: tuple[Message, ...]
    ) -> None:
        store = stores.open()
        await store.save(session())
        await store.save(session(messages=rewritten))

        assert (await store.load("s1")).messages == rewritten
        assert (await stores.open().load("s1")).messages == rewritten
        [summary] = await store.list()
        assert summary.message_count == len(rewritten)

    async def test_delete_removes_only_that_session_and_a_second_delete_does_nothing(self, stores: Stores) -> None:
        store = stores.open()
        await store.save(session("gone"))
        await store.save(session("kept"))

        await store.delete("gone")
        await store.delete("gone")
        await store.delete("never-existed")

        with pytest.raises(SessionNotFound):
            await stores.open().load("gone")
        assert [s.id for s in await store.list()] == ["kept"]
        assert await store.load("kept") == session("kept")

    async def test_a_deleted_id_can_be_saved_again(self, store: SessionStore) -> None:
        await store.save(session())
        await store.delete("s1")
        again = session(messages=(Message.user("fresh"),))
        await store.save(again)

        assert await store.load("s1") == again

    async def test_concurrent_saves_of_two_sessions_both_land(self, stores: Stores) -> None:
        store = stores.open()
        one, two = session("one"), session("two", messages=conversation()[:2], title="Two")

        await asyncio.gather(store.save(one), store.save(two))

        reopened = stores.open()
        assert await reopened.load("one") == one
        assert await reopened.load("two") == two
        assert {s.id for s in await reopened.list()} == {"one", "two"}

    async def test_concurrent_saves_of_the_same_session_leave_one_whole_version(self, stores: Stores) -> None:
        store = stores.open()
        versions = [session(messages=conversation()[:n], title=f"v{n}") for n in (1, 2, 4, 5)]

        await asyncio.gather(*(store.save(v) for v in versions))

        loaded = await stores.open().load("s1")
        assert loaded in versions
        assert loaded.title == f"v{len(loaded.messages)}"

    @pytest.mark.parametrize(
        "bad_id", ["../escape", "a/b", "a\\b", "/abs", "", ".hidden", "-flag", "x" * 129, "nul\x00", "sp ace", "é"]
    )
    async def test_ids_that_are_not_safe_file_names_are_refused_by_every_method(
        self, store: SessionStore, tmp_path: Path, bad_id: str
    ) -> None:
        before = tree(tmp_path)
        with pytest.raises(SessionInvalid, match="session id"):
            await store.save(session(bad_id))
        with pytest.raises(SessionInvalid, match="session id"):
            await store.load(bad_id)
        with pytest.raises(SessionInvalid, match="session id"):
            await store.delete(bad_id)
        assert tree(tmp_path) == before
        assert not (tmp_path.parent / "escape.json").exists()

    async def test_tool_calls_left_without_results_at_the_end_are_stored_as_they_are(self, stores: Stores) -> None:
        stopped = session(messages=conversation()[:3])  # the calls of message 2 have no results yet
        partly = session(
            "partly", messages=(*conversation()[:3], Message("tool", (ToolResult("c1", "add", "5"),)))
        )  # one of two answered
        store = stores.open()
        await store.save(stopped)
        await store.save(partly)

        assert await stores.open().load("s1") == stopped
        assert await stores.open().load("partly") == partly

    async def test_two_user_messages_in_a_row_load_merged_into_one(self, store: SessionStore) -> None:
        failed_then_asked_again = (
            Message.user("first question"),  # the run failed before the model answered
            Message("user", (Text("second question"),), provider_data={"k": 1}),
            Message.assistant("an answer to both"),
            Message.user("third"),
        )
        await store.save(session(messages=failed_then_asked_again))

        loaded = await store.load("s1")

        assert loaded.messages == (
            Message("user", (Text("first question"), Text("second question")), provider_data={"k": 1}),
            Message.assistant("an answer to both"),
            Message.user("third"),
        )

    @pytest.mark.parametrize(
        ("messages", "problem"),
        [
            pytest.param((Message.assistant("hi"),), "starts with 'assistant'", id="starts-with-assistant"),
            pytest.param(
                (Message.user("q"), Message("tool", (ToolResult("zz", "f", "r"),))), "unknown", id="result-without-call"
            ),
            pytest.param(
                (*conversation()[:3], Message.user("next")), "calls without results", id="call-without-result"
            ),
        ],
    )
    async def test_an_invalid_transcript_is_refused_on_save_and_the_stored_version_kept(
        self, stores: Stores, messages: tuple[Message, ...], problem: str
    ) -> None:
        store = stores.open()
        await store.save(session())

        with pytest.raises(SessionInvalid, match=problem):
            await store.save(session(messages=messages, title="bad"))
        with pytest.raises(SessionInvalid, match=problem):
            await store.save(session("new-bad", messages=messages))

        assert await stores.open().load("s1") == session()
        assert [s.id for s in await store.list()] == ["s1"]

    async def test_timestamps_in_other_time_zones_load_as_the_same_instant_in_utc(self, store: SessionStore) -> None:
        india = timezone(timedelta(hours=5, minutes=30))
        await store.save(session(created_at=T0.astimezone(india), updated_at=T0.astimezone(india)))

        loaded = await store.load("s1")

        assert loaded.created_at == T0
        assert loaded.created_at.tzinfo is UTC
        assert loaded.updated_at.isoformat() == T0.isoformat()

    # --- outputs (OutputStore) ----------------------------------------------------------------------------------

    async def test_every_store_is_an_output_store(self, store: SessionStore) -> None:
        assert isinstance(store, OutputStore)

    async def test_an_output_saved_loads_back_exactly_also_from_storage_opened_anew(self, stores: Stores) -> None:
        store = cast(OutputStore, stores.open())
        await store.save_output("s1", REF, OUTPUT)

        assert await store.load_output("s1", REF) == OUTPUT
        assert await cast(OutputStore, stores.open()).load_output("s1", REF) == OUTPUT

    async def test_an_unknown_ref_or_session_loads_none(self, stores: Stores) -> None:
        store = cast(OutputStore, stores.open())
        await store.save_output("s1", REF, OUTPUT)

        assert await store.load_output("s1", output_ref("other")) is None
        assert await store.load_output("s2", REF) is None  # a session reads only its own outputs

    async def test_saving_a_ref_again_keeps_it_once_and_unchanged(self, stores: Stores) -> None:
        store = cast(OutputStore, stores.open())
        await store.save_output("s1", REF, OUTPUT)
        await store.save_output("s1", REF, OUTPUT)
        await asyncio.gather(*(store.save_output("s1", REF, OUTPUT) for _ in range(3)))

        assert await store.load_output("s1", REF) == OUTPUT

    @pytest.mark.parametrize(
        ("session_id", "ref", "content", "problem"),
        [
            pytest.param(
                "s1", output_ref("other text"), OUTPUT, "the ref is not the content's address", id="wrong-ref"
            ),
            pytest.param("s1", "out-XYZ", OUTPUT, "output ref 'out-XYZ' is not valid", id="malformed-ref"),
            pytest.param("s1", "../../etc/passwd", OUTPUT, "is not valid", id="path-as-ref"),
            pytest.param("../up", REF, OUTPUT, "session id", id="bad-session-id"),
            pytest.param("s1", "out-" + "0" * 16, "a \ud800 surrogate", "lone surrogate", id="surrogate"),
            pytest.param("s1", REF, b"bytes", "content must be a string", id="bytes"),
        ],
    )
    async def test_an_output_that_cannot_be_stored_is_refused_and_nothing_is_written(
        self, stores: Stores, tmp_path: Path, session_id: str, ref: str, content: Any, problem: str
    ) -> None:
        store = cast(OutputStore, stores.open())
        await stores.open().save(session())
        before = tree(tmp_path)

        with pytest.raises(SessionInvalid, match=re.escape(problem)):
            await store.save_output(session_id, ref, content)

        assert tree(tmp_path) == before
        with contextlib.suppress(SessionInvalid):  # an invalid id or ref cannot even be looked up
            assert await store.load_output(session_id, ref) is None

    @pytest.mark.parametrize(("session_id", "ref"), [("../up", REF), ("s1", "out-1"), ("s1", "")])
    async def test_loading_with_an_invalid_id_or_ref_is_session_invalid(
        self, store: SessionStore, session_id: str, ref: str
    ) -> None:
        with pytest.raises(SessionInvalid):
            await cast(OutputStore, store).load_output(session_id, ref)

    async def test_delete_removes_the_sessions_outputs_even_those_saved_before_the_session(
        self, stores: Stores
    ) -> None:
        store = stores.open()
        outputs = cast(OutputStore, store)
        other = output_ref("another output")
        await outputs.save_output("s1", REF, OUTPUT)
        await store.save(session())
        await outputs.save_output("orphan", REF, OUTPUT)  # its session was never saved
        await outputs.save_output("kept", other, "another output")

        await store.delete("s1")
        await store.delete("orphan")

        reopened = cast(OutputStore, stores.open())
        assert await reopened.load_output("s1", REF) is None
        assert await reopened.load_output("orphan", REF) is None
        assert await reopened.load_output("kept", other) == "another output"
        await outputs.save_output("s1", REF, OUTPUT)  # and the id can keep outputs again
        assert await reopened.load_output("s1", REF) == OUTPUT
