"""What every part of the DBOS engine needs: whether DBOS is launched here, run ids, awaiting a result."""

from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING, Any

from dbos import WorkflowHandleAsync
from dbos._error import DBOSAwaitedWorkflowCancelledError, DBOSNonExistentWorkflowError

from tether.errors import Cancelled, ConfigInvalid
from tether.events import RunResult

if TYPE_CHECKING:
    pass


_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def _launched() -> bool:
    from dbos import _dbos

    instance: Any = getattr(_dbos, "_dbos_global_instance", None)
    return instance is not None and bool(getattr(instance, "_launched", False))


def _require_launch() -> None:
    if not _launched():
        raise ConfigInvalid("durable runs need tether.durable.launch(...) first (it opens the workflow database)")


_RUN_ID = re.compile(r"[^\s\x00-\x1f\x7f](?:[^\x00-\x1f\x7f]{0,254}[^\s\x00-\x1f\x7f])?")
"""A run id: 1-256 characters, no control character, no white space at either end."""


def _run_id(workflow_id: str | None) -> str:
    """``workflow_id`` checked (``ConfigInvalid`` for what the workflow store would refuse with its own error), or
    a new id when none is given."""
    if workflow_id is None:
        return uuid.uuid4().hex
    if not isinstance(workflow_id, str) or not _RUN_ID.fullmatch(workflow_id):
        raise ConfigInvalid(
            f"a run id must be 1-256 characters with no control character and no space at either end, not "
            f"{workflow_id!r}"
        )
    return workflow_id


async def _awaited(handle: WorkflowHandleAsync[RunResult[Any]], run_id: str) -> RunResult[Any]:
    """The result a workflow handle gives, its errors told in tether's terms."""
    try:
        result: RunResult[Any] = await handle.get_result()
    except DBOSNonExistentWorkflowError:
        raise ConfigInvalid(f"there is no durable run with id {run_id!r}") from None
    except DBOSAwaitedWorkflowCancelledError:
        raise Cancelled(f"the durable run {run_id!r} was cancelled") from None
    return result
