"""Models pulled from the Hugging Face Hub, found in its cache (providers/local/pulled.py) and resolved as
``local:NAME``; and the choices ``tether models pull`` makes before it downloads (providers/local/hub.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tether.errors import ConfigInvalid
from tether.providers.local import resolve_model_path
from tether.providers.local.hub import choose_file, describe, parse_spec
from tether.providers.local.pulled import find_pulled, hub_cache, pulled_models

OLD, NEW = "a" * 40, "b" * 40


def place(cache: Path, repo: str, filename: str, data: bytes, commit: str = NEW, ref: str | None = "main") -> Path:
    """A file laid out as the Hub's client lays it out: a blob, a link to it in the commit's snapshot, a ref."""
    storage = cache / ("models--" + repo.replace("/", "--"))
    blob = storage / "blobs" / f"{abs(hash((filename, data))):x}"
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(data)
    link = storage / "snapshots" / commit / filename
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(blob, link.parent))
    if ref is not None:
        (storage / "refs").mkdir(exist_ok=True)
        (storage / "refs" / ref).write_text(commit)
    return link


def test_the_cache_is_found_from_the_environment_as_the_hubs_client_finds_it(tmp_path: Path) -> None:
    assert hub_cache({"HF_HUB_CACHE": str(tmp_path / "a"), "HF_HOME": str(tmp_path / "b")}) == tmp_path / "a"
    assert hub_cache({"HUGGINGFACE_HUB_CACHE": str(tmp_path / "c")}) == tmp_path / "c"
    assert hub_cache({"HF_HOME": str(tmp_path / "b"), "XDG_CACHE_HOME": "/x"}) == tmp_path / "b" / "hub"
    assert hub_cache({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "huggingface" / "hub"


def test_pulled_files_are_listed_by_name_with_their_repository_and_size(tmp_path: Path) -> None:
    place(tmp_path, "Qwen/Qwen2.5-1.5B-Instruct-GGUF", "qwen2.5-1.5b-instruct-q4_k_m.gguf", b"x" * 10)
    place(tmp_path, "bartowski/Llama-3.2-3B-Instruct-GGUF", "sub/Llama-3.2-3B-Instruct-Q4_K_M.gguf", b"y" * 3)
    place(tmp_path, "bartowski/Llama-3.2-3B-Instruct-GGUF", "README.md", b"not a model")
    found = [(model.name, model.repo, model.filename, model.size) for model in pulled_models(tmp_path)]
    assert found == [
        (
            "Llama-3.2-3B-Instruct-Q4_K_M",
            "bartowski/Llama-3.2-3B-Instruct-GGUF",
            "sub/Llama-3.2-3B-Instruct-Q4_K_M.gguf",
            3,
        ),
        ("qwen2.5-1.5b-instruct-q4_k_m", "Qwen/Qwen2.5-1.5B-Instruct-GGUF", "qwen2.5-1.5b-instruct-q4_k_m.gguf", 10),
    ]


def test_the_snapshot_a_ref_points_at_is_the_one_used_and_a_removed_blob_is_no_model(tmp_path: Path) -> None:
    place(tmp_path, "o/r", "m.gguf", b"new", commit=NEW)
    place(tmp_path, "o/r", "m.gguf", b"old, but newer on disk", commit=OLD, ref=None)
    gone = place(tmp_path, "o/r", "gone.gguf", b"z")
    gone.resolve().unlink()
    (model,) = pulled_models(tmp_path)
    assert model.path.read_bytes() == b"new"


def test_local_name_resolves_to_a_pulled_file_in_any_case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.chdir(tmp_path)
    link = place(tmp_path / "hub", "o/r", "Tiny-Q4_K_M.gguf", b"GGUF")
    assert resolve_model_path("tiny-q4_k_m") == link
    assert resolve_model_path("Tiny-Q4_K_M.gguf") == link
    (tmp_path / "Tiny-Q4_K_M.gguf").write_bytes(b"a file of that name here")
    assert resolve_model_path("Tiny-Q4_K_M.gguf") == Path("Tiny-Q4_K_M.gguf"), "a path that is a file wins"
    with pytest.raises(ConfigInvalid, match=r"known names: local:smollm2, local:Tiny-Q4_K_M; .*tether models pull"):
        resolve_model_path("other")


def test_a_name_two_repositories_share_is_refused_with_both_paths(tmp_path: Path) -> None:
    first = place(tmp_path, "one/r", "same.gguf", b"1")
    second = place(tmp_path, "two/r", "same.gguf", b"2")
    with pytest.raises(ConfigInvalid, match="more than one repository") as raised:
        find_pulled("same", tmp_path)
    assert str(first) in str(raised.value)
    assert str(second) in str(raised.value)
    assert find_pulled("missing", tmp_path) is None


def test_a_pull_spec_is_a_repository_and_maybe_a_gguf_file_in_it() -> None:
    assert parse_spec("Qwen/Qwen2.5-1.5B-Instruct-GGUF") == ("Qwen/Qwen2.5-1.5B-Instruct-GGUF", None)
    assert parse_spec("o/r/sub/m.gguf") == ("o/r", "sub/m.gguf")
    for bad in ("qwen", "o/r--x", "../r", "o/r/README.md", "o /r"):
        with pytest.raises(ConfigInvalid):
            parse_spec(bad)


def test_a_repository_s_file_is_chosen_only_when_the_choice_is_clear() -> None:
    many = ["README.md", "m-Q8_0.gguf", "m-Q4_K_M.gguf", "m-IQ4_K_M2.gguf", "mmproj-m-f16.gguf"]
    assert choose_file("o/r", many, None) == "m-Q4_K_M.gguf", "the default quantization"
    assert choose_file("o/r", ["m-Q8_0.gguf", "mmproj-f16.gguf"], None) == "m-Q8_0.gguf", "the one model file"
    assert choose_file("o/r", many, "M-Q8_0.GGUF") == "m-Q8_0.gguf"
    with pytest.raises(ConfigInvalid, match=r"name one: .* one of: m-F16\.gguf, m-Q8_0\.gguf"):
        choose_file("o/r", ["m-Q8_0.gguf", "m-F16.gguf"], None)
    with pytest.raises(ConfigInvalid, match=r"no file 'x\.gguf'; its GGUF files: m-Q8_0\.gguf"):
        choose_file("o/r", ["m-Q8_0.gguf"], "x.gguf")
    with pytest.raises(ConfigInvalid, match="split model"):
        choose_file("o/r", ["m-Q4_K_M-00001-of-00002.gguf"], "m-Q4_K_M-00001-of-00002.gguf")
    with pytest.raises(ConfigInvalid, match="no GGUF file that tether can pull"):
        choose_file("o/r", ["m-Q4_K_M-00001-of-00002.gguf", "m-Q4_K_M-00002-of-00002.gguf"], None)


def test_pulling_without_the_hub_extra_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(ConfigInvalid, match=r"the 'hub' extra: `pip install 'tether\[hub\]'`"):
        describe("o/r", None)
