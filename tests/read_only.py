"""A command run with a directory read-only, whoever runs the tests (root ignores file modes, not a read-only
mount): the command runs in a user and mount namespace of its own where the directory is bound read-only."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

_MOUNT = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'


def run_with_read_only(
    directory: Path, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``argv`` run with ``directory`` read-only; skips the test where namespaces cannot be made."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"no user namespaces here: {probe.stderr.decode(errors='replace').strip()}")
    command = ["unshare", "-rm", "sh", "-c", _MOUNT, "sh", str(directory), *argv]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=120, check=False, env=dict(env) if env else None, cwd=cwd
    )
