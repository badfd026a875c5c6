"""``tether batch``'s files and database argument: the prompts' ids and workflow ids, bad lines, a results
file whose last line was cut short, and ``--db`` with its password kept off the screen."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.cli.batch_files import finished_ids, is_finished, read_prompts
from tether.cli.runs_db import runs_database
from tether.errors import ConfigInvalid


def test_items_take_their_id_or_their_line_number(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('"plain"\n\n{"prompt": "named", "id": "x"}\n{"prompt": "numbered", "id": 7}\n')
    items = read_prompts(path)
    assert [(item.id, item.prompt) for item in items] == [("line-1", "plain"), ("x", "named"), ("7", "numbered")]
    assert len({item.workflow_id for item in items}) == 3


def test_workflow_ids_are_the_same_for_the_same_file_and_differ_for_another_or_a_changed_line(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('"a"\n{"prompt": "b", "id": "k"}\n')
    first = read_prompts(path)
    assert read_prompts(path) == first
    path.write_text('"changed"\n{"prompt": "b2", "id": "k"}\n')
    changed = read_prompts(path)
    assert changed[0].workflow_id != first[0].workflow_id, "a numbered line whose prompt changed is a new run"
    assert changed[1].workflow_id == first[1].workflow_id, "an item with an id keeps its run"
    other = tmp_path / "q.jsonl"
    other.write_text('"a"\n')
    assert read_prompts(other)[0].workflow_id != first[0].workflow_id


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json\n", "p.jsonl:1: not JSON"),
        ('"ok"\n{"prompt": ""}\n', "p.jsonl:2: the prompt must be a non-empty string"),
        ('{"prompt": "a", "extra": 1}\n', "unknown key 'extra'"),
        ('{"prompt": "a", "id": true}\n', "'id' must be a non-empty string or an integer"),
        ('{"prompt": "a", "id": "line-3"}\n', "must not start with 'line-'"),
        ('{"prompt": "a", "id": "d"}\n{"prompt": "b", "id": "d"}\n', "p.jsonl:2: id 'd' was already given on line 1"),
        ("\n\n", "no prompts"),
        ("[1]\n", "the prompt must be a non-empty string"),
    ],
)
def test_a_bad_prompts_file_is_config_invalid_naming_the_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(text)
    with pytest.raises(ConfigInvalid) as raised:
        read_prompts(path)
    assert message in raised.value.message
    assert raised.value.code == "config_invalid"


def test_finished_ids_drops_a_last_line_cut_short(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    assert finished_ids(path) == set()
    path.write_bytes(json.dumps({"id": "a"}).encode() + b"\n" + b'{"id": "b", "te')
    assert finished_ids(path) == {"a"}
    assert path.read_bytes() == json.dumps({"id": "a"}).encode() + b"\n"


def test_a_results_file_of_something_else_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("hello\n")
    with pytest.raises(ConfigInvalid, match="not a result line"):
        finished_ids(path)
    path.write_text('{"no": "id"}\n')
    with pytest.raises(ConfigInvalid, match="without an 'id'"):
        finished_ids(path)


def test_db_defaults_to_a_file_in_the_state_directory(tmp_path: Path) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    database = runs_database(None, tmp_path, env)
    assert database.path == tmp_path / "state" / "tether" / "runs.sqlite"
    assert database.launch_arguments() == {"database": database.path}


def test_db_takes_a_file_a_sqlite_url_or_a_postgresql_url(tmp_path: Path) -> None:
    assert runs_database("runs.db", tmp_path, {}).path == tmp_path / "runs.db"
    assert runs_database(f"sqlite:///{tmp_path}/x.db", tmp_path, {}).path == tmp_path / "x.db"
    url = "postgresql://tether:s3cret-pw@db.example:5432/runs"
    database = runs_database(url, tmp_path, {})
    assert database.launch_arguments() == {"system_database_url": url}
    assert "s3cret-pw" not in database.shown()
    assert database.shown().startswith("postgresql://tether:")


def test_db_of_another_kind_is_refused_without_printing_its_password(tmp_path: Path) -> None:
    with pytest.raises(ConfigInvalid, match="postgresql://") as raised:
        runs_database("mysql://root:pa55word-x@host/db", tmp_path, {})
    assert "pa55word-x" not in raised.value.message


# --- any text, any line separator ---------------------------------------------------------------------------

SEPARATORS = ["\u2028", "\u2029", "\u0085", "\x1c", "\x1d", "\x1e", "\x0b", "\x0c", "\r"]


@settings(max_examples=150, deadline=None)
@given(
    prompts=st.lists(
        st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(SEPARATORS), min_size=1).filter(str.strip),
        min_size=1,
        max_size=5,
    )
)
def test_any_text_round_trips_through_prompts_and_results_files(prompts: list[str]) -> None:
    """Raw U+2028 (and every other character ``str.splitlines`` splits at) in a prompt or an answer is valid
    JSON Lines: the files are split at line feeds only."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "p.jsonl"
        lines = [json.dumps({"id": f"i{n}", "prompt": p}, ensure_ascii=False) for n, p in enumerate(prompts)]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        assert [item.prompt for item in read_prompts(path)] == prompts
        results = Path(folder) / "r.jsonl"
        answers = [json.dumps({"id": f"i{n}", "text": p}, ensure_ascii=False) for n, p in enumerate(prompts)]
        results.write_text("\n".join(answers) + "\n", encoding="utf-8")
        assert finished_ids(results) == {f"i{n}" for n in range(len(prompts))}


def test_a_file_that_is_not_a_results_file_keeps_its_last_line_when_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"some notes\nlast line, no line end")
    with pytest.raises(ConfigInvalid, match="not a result line"):
        finished_ids(path)
    assert path.read_bytes() == b"some notes\nlast line, no line end"


def test_a_line_nested_too_deeply_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('"first"\n{"prompt": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    with pytest.raises(ConfigInvalid, match=r"p\.jsonl:2: JSON nested too deeply"):
        read_prompts(path)
    results = tmp_path / "r.jsonl"
    results.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ConfigInvalid, match="not a result line"):
        finished_ids(results)


def test_an_edited_line_without_an_id_is_a_new_run_and_an_item_with_an_id_is_not(tmp_path: Path) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('"Say A"\n{"prompt": "Say C", "id": "c"}\n')
    first = read_prompts(prompts)
    results = tmp_path / "r.jsonl"
    results.write_text("".join(json.dumps({"id": i.id, "text": "ok", "run_id": i.workflow_id}) + "\n" for i in first))
    done = finished_ids(results)
    assert all(is_finished(item, done) for item in first)
    prompts.write_text('"Say B"\n{"prompt": "Say D", "id": "c"}\n')
    edited = read_prompts(prompts)
    assert [is_finished(item, done) for item in edited] == [False, True], "line-1 is a new run; 'c' has its result"
