"""Workspace: every path is resolved against the root and refused when it leads out of it, tried for real on
disk (``..``, absolute paths, symlinked files and parents, symlinks swapped in after the check, devices,
FIFOs, sockets), and the record of what the agent has read."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.errors import ConfigInvalid, PermissionDenied, ToolError
from tether.tools.workspace import Workspace


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Workspace, Path]:
    """A workspace ``root`` with a file and a directory in it, and ``outside/secret.txt`` next to it."""
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "inside.txt").write_text("inside\n")
    (root / "sub" / "nested.txt").write_text("nested\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    return Workspace(root), outside


def test_a_relative_path_resolves_under_the_root(layout: tuple[Workspace, Path]) -> None:
    ws, _ = layout
    assert ws.resolve("sub/nested.txt") == ws.root / "sub" / "nested.txt"
    assert ws.resolve(".") == ws.root
    assert ws.resolve("sub/../inside.txt") == ws.root / "inside.txt", "a '..' that stays inside is fine"


@pytest.mark.parametrize("path", ["../outside/secret.txt", "sub/../../outside/secret.txt", "..", "../root2"])
def test_dotdot_escapes_are_refused(layout: tuple[Workspace, Path], path: str) -> None:
    ws, _ = layout
    with pytest.raises(PermissionDenied, match="outside the workspace"):
        ws.resolve(path)


def test_an_absolute_path_outside_is_refused_and_one_inside_is_accepted(layout: tuple[Workspace, Path]) -> None:
    ws, outside = layout
    with pytest.raises(PermissionDenied, match="outside the workspace"):
        ws.resolve(str(outside / "secret.txt"))
    with pytest.raises(PermissionDenied):
        ws.resolve("/etc/passwd")
    assert ws.resolve(str(ws.root / "inside.txt")) == ws.root / "inside.txt"


def test_a_sibling_directory_sharing_the_roots_prefix_is_outside(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    (tmp_path / "rootkit").mkdir()
    ws = Workspace(tmp_path / "root")
    with pytest.raises(PermissionDenied):
        ws.resolve(str(tmp_path / "rootkit" / "x"))


def test_a_symlink_to_a_file_outside_is_refused(layout: tuple[Workspace, Path]) -> None:
    ws, outside = layout
    (ws.root / "link.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(PermissionDenied, match="symlink that leads outside"):
        ws.resolve("link.txt")


def test_a_symlinked_parent_directory_outside_is_refused_for_existing_and_new_files(
    layout: tuple[Workspace, Path],
) -> None:
    ws, outside = layout
    (ws.root / "out").symlink_to(outside, target_is_directory=True)
    with pytest.raises(PermissionDenied, match="symlink"):
        ws.resolve("out/secret.txt")
    with pytest.raises(PermissionDenied, match="symlink"):
        ws.resolve("out/new-file.txt")


def test_a_symlink_inside_that_stays_inside_is_allowed_and_resolves_to_its_target(
    layout: tuple[Workspace, Path],
) -> None:
    ws, _ = layout
    (ws.root / "alias.txt").symlink_to("sub/nested.txt")
    (ws.root / "subalias").symlink_to(ws.root / "sub", target_is_directory=True)
    assert ws.resolve("alias.txt") == ws.root / "sub" / "nested.txt"
    assert ws.resolve("subalias/nested.txt") == ws.root / "sub" / "nested.txt"


def test_a_symlink_created_to_point_outside_after_the_fact_is_refused(layout: tuple[Workspace, Path]) -> None:
    ws, outside = layout
    assert ws.resolve("later.txt") == ws.root / "later.txt", "not there yet: fine"
    (ws.root / "later.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(PermissionDenied):
        ws.resolve("later.txt")


def test_a_symlink_loop_is_refused(layout: tuple[Workspace, Path]) -> None:
    ws, _ = layout
    (ws.root / "a").symlink_to(ws.root / "b")
    (ws.root / "b").symlink_to(ws.root / "a")
    for path in ("a", "a/x.txt"):
        with pytest.raises(PermissionDenied, match="loop"):
            ws.resolve(path)


def test_a_dotdot_after_a_symlink_loop_cannot_climb_out_through_a_symlink(layout: tuple[Workspace, Path]) -> None:
    # realpath stops at the loop and normalizes 'loop/../out/secret.txt' to 'out/secret.txt' without resolving
    # 'out', which leads outside (found by the property test below)
    ws, outside = layout
    (ws.root / "loop").symlink_to(ws.root / "loop")
    (ws.root / "out").symlink_to(outside, target_is_directory=True)
    with pytest.raises(PermissionDenied, match="loop"):
        ws.resolve("loop/../out/secret.txt")


def test_a_nonexistent_path_inside_is_fine_for_creating_it(layout: tuple[Workspace, Path]) -> None:
    ws, _ = layout
    assert ws.resolve("new/deeper/file.txt") == ws.root / "new" / "deeper" / "file.txt"


def test_dev_null_is_refused(layout: tuple[Workspace, Path]) -> None:
    ws, _ = layout
    with pytest.raises(PermissionDenied):
        ws.resolve("/dev/null")
    devices = Workspace("/dev")  # a device inside the root is refused for being a device
    with pytest.raises(PermissionDenied, match="character device"):
        devices.resolve("null")


def test_a_fifo_inside_the_workspace_is_refused(layout: tuple[Workspace, Path]) -> None:
    ws, _ = layout
    os.mkfifo(ws.root / "pipe")
    with pytest.raises(PermissionDenied, match="FIFO"):
        ws.resolve("pipe")


def test_a_socket_inside_the_workspace_is_refused(layout: tuple[Workspace, Path]) -> None:
    ws, _ = layout
    path = ws.root / "s.sock"
    if len(str(path)) > 100:
        pytest.skip("the path is too long for a unix socket")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        with pytest.raises(PermissionDenied, match="socket"):
            ws.resolve("s.sock")


def test_permission_denied_is_a_tool_error_with_its_code() -> None:
    assert issubclass(PermissionDenied, ToolError)
    assert PermissionDenied("x").code == "permission_denied"


def test_an_empty_path_is_an_error_saying_so(layout: tuple[Workspace, Path]) -> None:
    ws, _ = layout
    with pytest.raises(ToolError, match="empty"):
        ws.resolve("  ")


def test_the_root_must_be_an_existing_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigInvalid):
        Workspace(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigInvalid):
        Workspace(tmp_path / "file")


def test_a_root_reached_through_a_symlink_is_resolved(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "via").symlink_to(tmp_path / "real", target_is_directory=True)
    ws = Workspace(tmp_path / "via")
    assert ws.root == (tmp_path / "real").resolve()
    assert ws.resolve("x.txt") == ws.root / "x.txt"


# --- check-then-open: what happens when the path changes after the check -------------------------------------


def test_a_file_swapped_for_a_symlink_after_the_check_is_refused_when_opened(layout: tuple[Workspace, Path]) -> None:
    ws, outside = layout
    checked = ws.resolve("inside.txt")
    (ws.root / "inside.txt").unlink()
    (ws.root / "inside.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(PermissionDenied, match="became a symlink"):
        ws.open_file(checked)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the re-check after opening reads /proc")
def test_a_parent_swapped_for_a_symlink_after_the_check_is_refused_when_opened(
    layout: tuple[Workspace, Path],
) -> None:
    ws, outside = layout
    (outside / "nested.txt").write_text("outside\n")
    (outside / "inner").mkdir()
    (ws.root / "sub" / "inner").mkdir()
    checked = ws.resolve("sub/nested.txt")
    checked_dir = ws.resolve("sub/inner")
    (ws.root / "sub").rename(ws.root / "sub-moved")
    (ws.root / "sub").symlink_to(outside, target_is_directory=True)
    with pytest.raises(PermissionDenied, match="outside the workspace"):
        ws.open_file(checked)
    with pytest.raises(PermissionDenied, match="outside the workspace"):
        ws.open_directory(checked_dir)
    with pytest.raises(PermissionDenied, match="became a symlink"):
        ws.open_directory(checked.parent)


def test_a_fifo_swapped_in_after_the_check_is_refused_without_hanging(layout: tuple[Workspace, Path]) -> None:
    ws, _ = layout
    checked = ws.resolve("inside.txt")
    (ws.root / "inside.txt").unlink()
    os.mkfifo(ws.root / "inside.txt")
    with pytest.raises(PermissionDenied, match="FIFO"):
        ws.open_file(checked)


def test_an_opened_file_is_a_descriptor_to_the_checked_file(layout: tuple[Workspace, Path]) -> None:
    ws, _ = layout
    fd = ws.open_file(ws.resolve("inside.txt"))
    with os.fdopen(fd, "rb") as stream:
        assert stream.read() == b"inside\n"


# --- any path: inside or refused -------------------------------------------------------------------------------

_SEGMENTS = st.sampled_from(["..", ".", "sub", "nested.txt", "out", "in", "loop", "new", "/", "root"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(_SEGMENTS, min_size=1, max_size=8))
def test_any_path_resolves_inside_the_root_or_is_refused(layout: tuple[Workspace, Path], parts: list[str]) -> None:
    ws, outside = layout
    if not (ws.root / "out").is_symlink():
        (ws.root / "out").symlink_to(outside, target_is_directory=True)
        (ws.root / "in").symlink_to(ws.root / "sub", target_is_directory=True)
        (ws.root / "loop").symlink_to(ws.root / "loop")
    try:
        resolved = ws.resolve("/".join(parts).replace("//", "/"))
    except PermissionDenied:
        return
    except ToolError:  # a file used as a directory: refused, and nothing is opened
        return
    assert resolved == ws.root or ws.root in resolved.parents
    assert not any(p.is_symlink() for p in [resolved, *resolved.parents] if p != Path("/"))


# --- what the agent has read -----------------------------------------------------------------------------------


def test_reads_are_remembered_per_workspace_and_can_be_forgotten(layout: tuple[Workspace, Path]) -> None:
    ws, _ = layout
    other = Workspace(ws.root)
    path = ws.resolve("inside.txt")
    assert not ws.was_read(path)
    ws.note_read(path)
    assert ws.was_read(path)
    assert not other.was_read(path), "another workspace (another run) has its own record"
    ws.forget_reads()
    assert not ws.was_read(path)
