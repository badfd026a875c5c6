"""Ctrl-C while the embedded model loads: ``tether run`` ends at once with the cancelled exit code, without
waiting for the load. The load is made slow (it never ends within the test) by a stand-in for the model's
loading, below the boundary under test: the run, its cancellation and the process's exit are the real ones."""

from __future__ import annotations

import io
import sys

import pexpect

from tests.e2e.conftest import TIMEOUT, Project, screen
from tether.cli import exits

SLOW_LOAD = """
import sys, time
from tether.providers.local import provider

def load_that_takes_ten_minutes(self):
    print("(loading the model)", file=sys.stderr, flush=True)
    time.sleep(600)

provider.LocalProvider.loaded = load_that_takes_ten_minutes
from tether.cli.app import main
main(sys.argv[1:], prog_name="tether")
"""


def test_ctrl_c_during_the_model_load_exits_130_before_the_load_ends(project: Project) -> None:
    model = project.cwd / "model.gguf"
    model.write_bytes(b"GGUF")
    child = pexpect.spawn(
        sys.executable,
        ["-c", SLOW_LOAD, "run", "--model", f"local:{model}", "hello"],
        cwd=str(project.cwd),
        env=project.env(),
        encoding="utf-8",
        timeout=TIMEOUT,
        dimensions=(50, 200),
    )
    child.logfile_read = io.StringIO()
    try:
        child.expect_exact("(loading the model)")
        child.sendintr()
        child.expect(pexpect.EOF)  # within TIMEOUT (30 s), while the load has ten minutes to go
        child.close()
    finally:
        if child.isalive():
            child.terminate(force=True)

    assert child.exitstatus == exits.CANCELLED, screen(child)
    assert "[cancelled]" in screen(child)
