"""GGUF files pulled from the Hugging Face Hub, found in the Hub's cache: what ``local:NAME`` resolves to and
what ``tether models`` lists.

The cache is read as files, without importing ``huggingface_hub``: a model pulled once (by ``tether models
pull``, or by any tool that uses the Hub's cache, such as ``hf download``) runs with only the ``local`` extra
installed, and resolving a model string costs a directory listing, not an import.

The layout is the Hub library's: ``$HF_HUB_CACHE`` (else ``$HUGGINGFACE_HUB_CACHE``, else ``$HF_HOME/hub``,
else ``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub``) holds ``models--OWNER--NAME/``,
whose ``snapshots/COMMIT/`` hold the files of each commit (links into ``blobs/``) and ``refs/BRANCH`` the
commit a branch was at when it was last fetched.

A pulled model's name is its file name without ``.gguf`` (``Qwen2.5-1.5B-Instruct-Q4_K_M``), matched without
regard to case: the name the Hub shows, and unique in practice since it names the quantization too. A name
two repositories share is refused, with both listed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tether.errors import ConfigInvalid

SUFFIX = ".gguf"
_PREFIX = "models--"


@dataclass(frozen=True, slots=True)
class Pulled:
    """A GGUF file in the Hub's cache."""

    name: str
    """Its ``local:`` name: the file name without ``.gguf``."""
    repo: str
    """The repository it came from, ``OWNER/NAME``."""
    filename: str
    """Its path in the repository."""
    path: Path
    """The file in the snapshot (a link to the blob holding its bytes)."""
    size: int


def hub_cache(env: Mapping[str, str] | None = None) -> Path:
    """The Hub's cache folder, found from the environment as ``huggingface_hub`` finds it."""
    env = os.environ if env is None else env
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if value := env.get(variable):
            return Path(os.path.expandvars(value)).expanduser()
    if home := env.get("HF_HOME"):
        return Path(os.path.expandvars(home)).expanduser() / "hub"
    xdg = env.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(xdg) / "huggingface" / "hub"


def model_name(filename: str) -> str:
    """The ``local:`` name of a GGUF file of a repository: its base name without ``.gguf``."""
    base = filename.rsplit("/", 1)[-1]
    return base[: -len(SUFFIX)] if base.lower().endswith(SUFFIX) else base


def _referenced(storage: Path) -> set[str]:
    """The commits a branch or tag of this repository pointed at when it was last fetched."""
    refs = storage / "refs"
    commits: set[str] = set()
    if refs.is_dir():
        for ref in refs.rglob("*"):
            if ref.is_file():
                try:
                    commits.add(ref.read_text(encoding="utf-8").strip())
                except OSError:
                    continue
    return commits


def _repo_files(storage: Path) -> list[Pulled]:
    """The GGUF files of one repository's snapshots, one per file: the snapshot a ref points at first, else the
    newest. A link whose blob is gone (a removed download) is no model."""
    repo = storage.name[len(_PREFIX) :].replace("--", "/")
    snapshots = storage / "snapshots"
    if not snapshots.is_dir():
        return []
    referenced = _referenced(storage)
    ordered = sorted(
        (snapshot for snapshot in snapshots.iterdir() if snapshot.is_dir()),
        key=lambda snapshot: (snapshot.name in referenced, snapshot.stat().st_mtime),
        reverse=True,
    )
    found: dict[str, Pulled] = {}
    for snapshot in ordered:
        for file in sorted(snapshot.rglob("*")):
            if not file.name.lower().endswith(SUFFIX) or not file.is_file():  # is_file follows the link
                continue
            filename = file.relative_to(snapshot).as_posix()
            if filename not in found:
                found[filename] = Pulled(model_name(filename), repo, filename, file, file.stat().st_size)
    return list(found.values())


def pulled_models(cache: Path | None = None) -> list[Pulled]:
    """Every GGUF file in the Hub's cache (``cache``, else :func:`hub_cache`), by name."""
    root = hub_cache() if cache is None else cache
    if not root.is_dir():
        return []
    models: list[Pulled] = []
    for storage in sorted(root.iterdir()):
        if storage.name.startswith(_PREFIX) and storage.is_dir():
            models.extend(_repo_files(storage))
    return sorted(models, key=lambda model: (model.name.lower(), model.repo))


def find_pulled(name: str, cache: Path | None = None) -> Pulled | None:
    """The pulled model called ``name`` (any case, ``.gguf`` or not); ``None`` when there is none, and
    ``ConfigInvalid`` when repositories share the name (each is then named by its path)."""
    wanted = model_name(name).lower()
    matches = [model for model in pulled_models(cache) if model.name.lower() == wanted]
    if len(matches) > 1:
        paths = "; ".join(f"{model.repo}: local:{model.path}" for model in matches)
        raise ConfigInvalid(f"'local:{name}' names a file pulled from more than one repository; use a path: {paths}")
    return matches[0] if matches else None
