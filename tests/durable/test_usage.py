"""A recovered run's usage and records say what its calls used when a model call was interrupted by ``kill -9``.

Real worker processes (``worker.py``), a model over HTTP that counts 100 input tokens a message, SQLite and
PostgreSQL. The call killed mid-stream is made again on recovery: the usage counts the call made again (what the
server counted for it) and the records say that its first attempt was interrupted and is not counted (the
provider never said what it used). Before, the result read as an uninterrupted run's: nothing said a call had
been made twice.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import tether
from tests.durable.test_recovery import Files, finished, kill, wait_until, worker
from tests.e2e.mock_llm import Call, MockLLM, Say, Step
from tether.usage import NO_USAGE, Usage


def test_a_recovered_runs_usage_counts_the_call_made_again_and_its_records_name_the_interrupted_one(
    db_url: str, tmp_path: Path
) -> None:
    files = Files(tmp_path / "killed")
    script: list[Step] = [Call("append", {"text": "one"}), Say("all done", stall=True), Say("all done")]
    with MockLLM(list(script)) as server:
        first = worker(db_url, server, files, "run-usage")
        wait_until(server.stalled.is_set, "the model's answer started streaming", first)
        kill(first)
        server.release()
        finished(worker(db_url, server, files, "run-usage", recover=True))
        assert len(server.requests) == 3
        counted = [100 * len(server.messages(index)) for index in range(3)]
    text, stop, _, usage, _ = files.result()
    turn_usage, records = pickle.loads(Path(f"{files.out}.records").read_bytes())
    assert (text, stop) == ("all done", tether.StopReason.COMPLETE)
    made_again = Usage(input_tokens=counted[2], output_tokens=10, requests=1)
    assert turn_usage == (Usage(input_tokens=counted[0], output_tokens=10, requests=1), NO_USAGE, made_again)
    assert usage == turn_usage[0] + made_again  # the call made again is counted, its interrupted attempt is not
    assert [(r.turn, r.error) for r in records] == [(1, None), (2, "interrupted"), (2, None)]
    assert "not counted" in (records[1].rejected or "")
    assert records[2].text == "all done"
