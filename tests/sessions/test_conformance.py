"""Every store of tether's keeps the contract of ``tether/sessions/base.py``: the conformance suite of
``tether.testing`` (the one users run against their own stores), on each store of ``conftest.py``.

A store-specific behaviour belongs in that store's own test module, not in the suite.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tether.sessions import SessionStore
from tether.testing.store_properties import SessionStoreProperties


class TestEveryStore(SessionStoreProperties):
    @pytest.fixture
    def open_store(self, open_store: Callable[[], SessionStore]) -> Callable[[], SessionStore]:
        return open_store  # conftest.py's, over every kind of store
