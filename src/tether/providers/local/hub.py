"""GGUF files fetched from the Hugging Face Hub into its cache (``tether models pull``), with ``huggingface_hub``
(the ``hub`` extra), loaded on first use.

The contract
------------
* ``OWNER/NAME/FILE.gguf`` names the file; ``OWNER/NAME`` alone picks the repository's only GGUF file, else its
  ``Q4_K_M`` quantization (a common default: a quarter of the full size, close to its quality), else refuses
  with the candidates listed. Split files (``-00001-of-00003.gguf``) and vision projectors (``mmproj``) are
  never picked.
* The file is pinned to the commit the revision is at, and its SHA-256 is the one the Hub lists for that
  commit (``model_info(files_metadata=True)``: the file's LFS object). The file's own answer to a HEAD request
  (``X-Linked-Etag``) must agree; a file with no SHA-256 is refused.
* The bytes go to ``blobs/<sha256>.incomplete`` in the repository's cache folder (``pulled.py``), under the
  lock the Hub library takes for that blob.
  ``huggingface_hub`` itself downloads into a name unique to its process and deletes it when the download
  fails, so an interrupted pull would start over; a name derived from the content is found again by the next
  pull, which asks only for the rest (a ``Range`` request, through ``huggingface_hub``'s ``http_get``, which
  also retries a dropped connection from where it broke and draws the progress bar on a terminal).
* The whole file is hashed: a SHA-256 other than the Hub's deletes it and raises ``ChecksumMismatch``; the
  file whole and right becomes the blob, and ``hf_hub_download`` links it into the commit's snapshot (it
  finds the blob and downloads nothing). The revision's ref is written too, as the Hub library writes it.
* Failures are ``DownloadFailed`` (``download_failed``), bad names ``ConfigInvalid``; the library's own
  exceptions never escape.
"""

from __future__ import annotations

import hashlib
import importlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

from tether.atomic import replace_file
from tether.errors import ChecksumMismatch, ConfigInvalid, DownloadFailed
from tether.providers.local.pulled import SUFFIX, Pulled, hub_cache, model_name

INSTALL_HINT = "pulling a model needs the 'hub' extra: `pip install 'tether[hub]'`"
PREFERRED = ("Q4_K_M",)
"""Quantizations picked, in this order, when a repository has several GGUF files and none is named."""

_REPO = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")
_SHARD = re.compile(r"-\d{5}-of-\d{5}\.gguf$", re.IGNORECASE)
_COMMIT = re.compile(r"[0-9a-f]{40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class HubFile:
    """A GGUF file of a repository at one commit, as the Hub describes it."""

    repo: str
    filename: str
    commit: str
    sha256: str
    size: int


def parse_spec(spec: str) -> tuple[str, str | None]:
    """``OWNER/NAME[/PATH/FILE.gguf]`` -> (repository, file or ``None``); ``ConfigInvalid`` for anything else."""
    parts = spec.strip().strip("/").split("/")
    repo = "/".join(parts[:2])
    filename = "/".join(parts[2:]) or None
    if not _REPO.fullmatch(repo) or "--" in repo or ".." in repo or repo.endswith((".", "-")):
        raise ConfigInvalid(
            f"'{spec}' is not a Hugging Face repository: give OWNER/NAME or OWNER/NAME/FILE.gguf "
            "(for example Qwen/Qwen2.5-1.5B-Instruct-GGUF)"
        )
    if filename is not None and not filename.lower().endswith(SUFFIX):
        raise ConfigInvalid(f"'{filename}' is not a GGUF file: only .gguf files can be pulled")
    return repo, filename


def _pickable(filename: str) -> bool:
    base = filename.rsplit("/", 1)[-1].lower()
    return base.endswith(SUFFIX) and not base.startswith("mmproj") and not _SHARD.search(base)


def choose_file(repo: str, files: Iterable[str], wanted: str | None) -> str:
    """The file to pull: ``wanted`` if the repository has it; else its one GGUF file, else the first
    quantization of ``PREFERRED`` it has. ``ConfigInvalid`` lists the candidates when none can be chosen."""
    files = sorted(files)
    candidates = [name for name in files if _pickable(name)]
    listed = ", ".join(candidates) or "none"
    if wanted is not None:
        exact = [name for name in files if name.lower() == wanted.lower()]
        if not exact:
            raise ConfigInvalid(f"{repo} has no file '{wanted}'; its GGUF files: {listed}")
        if _SHARD.search(exact[0]):
            raise ConfigInvalid(f"'{wanted}' is one part of a split model, which tether cannot pull")
        return exact[0]
    if len(candidates) == 1:
        return candidates[0]
    for quantization in PREFERRED:
        pattern = re.compile(rf"(?<![A-Za-z0-9]){re.escape(quantization)}(?![A-Za-z0-9])", re.IGNORECASE)
        if matching := [name for name in candidates if pattern.search(name.rsplit("/", 1)[-1])]:
            return matching[0]
    if not candidates:
        raise ConfigInvalid(f"{repo} has no GGUF file that tether can pull (a single-file .gguf model)")
    raise ConfigInvalid(
        f"{repo} has {len(candidates)} GGUF files and none is {' or '.join(PREFERRED)}; name one: "
        f"tether models pull {repo}/FILE.gguf, with FILE.gguf one of: {listed}"
    )


def _hub() -> ModuleType:
    """``huggingface_hub``, imported on first use (``ConfigInvalid`` saying how to install it when it is not)."""
    try:
        return importlib.import_module("huggingface_hub")
    except ImportError:
        raise ConfigInvalid(INSTALL_HINT) from None


def _failure(action: str, error: Exception) -> DownloadFailed:
    """A ``huggingface_hub`` or transport error as ``DownloadFailed``, the Hub's words kept."""
    kind = type(error).__name__
    text = str(error).strip().splitlines()[0] if str(error).strip() else kind
    hint = ""
    if kind in {"GatedRepoError", "RepositoryNotFoundError"}:
        hint = " (a private or gated repository needs a token: export HF_TOKEN)"
    elif kind == "OfflineModeIsEnabled" and "HF_HUB_OFFLINE" not in text:
        hint = " (HF_HUB_OFFLINE is set)"
    return DownloadFailed(f"{action}: {text}{hint}", details={"error": kind})


def describe(repo: str, wanted: str | None, revision: str = "main") -> HubFile:
    """The file to pull, its commit and SHA-256, from the Hub's description of the repository."""
    hub = _hub()
    try:
        info = hub.HfApi().model_info(repo, revision=revision, files_metadata=True)
    except Exception as error:  # noqa: BLE001 - every failure of the Hub's client is reported the same way
        raise _failure(f"cannot read {repo}@{revision} on the Hugging Face Hub", error) from None
    siblings = {sibling.rfilename: sibling for sibling in info.siblings or []}
    filename = choose_file(repo, siblings, wanted)
    lfs = siblings[filename].lfs
    commit = info.sha or ""
    if lfs is None or not _SHA256.fullmatch(str(lfs.sha256)) or not _COMMIT.fullmatch(commit):
        raise DownloadFailed(f"the Hub gives no SHA-256 for {repo}/{filename}, so it cannot be verified")
    return HubFile(repo, filename, commit, str(lfs.sha256), int(lfs.size))


def storage_folder(repo: str, cache: Path | None = None) -> Path:
    """The repository's folder in the Hub's cache (the Hub library's layout)."""
    return (hub_cache() if cache is None else cache) / ("models--" + repo.replace("/", "--"))


def pull(spec: str, revision: str = "main") -> Pulled:
    """Fetch the GGUF file ``spec`` names (see the module docstring) and return it as found in the cache."""
    repo, wanted = parse_spec(spec)
    return fetch(describe(repo, wanted, revision), revision)


def fetch(file: HubFile, revision: str = "main") -> Pulled:
    """Download ``file`` (unless its blob is in the cache already), verify it, and link it into its snapshot;
    ``revision`` (what ``file`` was described at) is recorded as a ref to its commit."""
    repo = file.repo
    hub = _hub()
    storage = storage_folder(repo, Path(hub.constants.HF_HUB_CACHE))
    blob = storage / "blobs" / file.sha256
    try:
        if not blob.is_file():
            url = hub.hf_hub_url(repo, file.filename, revision=file.commit)
            metadata = hub.get_hf_file_metadata(url)
            if metadata.etag != file.sha256:
                raise DownloadFailed(
                    f"the Hub describes {repo}/{file.filename} in two ways (SHA-256 {file.sha256}, "
                    f"ETag {metadata.etag}); not downloaded"
                )
            _download(url, metadata.location, blob, file)
        path = Path(hub.hf_hub_download(repo, file.filename, revision=file.commit))
    except DownloadFailed:
        raise
    except Exception as error:  # noqa: BLE001 - the client's and the transport's errors, reported alike
        raise _failure(f"cannot download {repo}/{file.filename}", error) from None
    if revision != file.commit:
        ref = storage / "refs" / revision
        ref.parent.mkdir(parents=True, exist_ok=True)
        replace_file(ref, file.commit.encode())
    return Pulled(model_name(file.filename), repo, file.filename, path, path.stat().st_size)


def _download(url: str, location: str, blob: Path, file: HubFile) -> None:
    """The file's bytes into ``blob``, resumed from ``<blob>.incomplete`` if an earlier pull left one, verified."""
    # the parts of the Hub library used here, as modules: its faces re-export them only lazily
    http_get = importlib.import_module("huggingface_hub.file_download").http_get
    utils = importlib.import_module("huggingface_hub.utils")
    weak_lock, build_hf_headers = utils.WeakFileLock, utils.build_hf_headers

    partial = blob.with_name(blob.name + ".incomplete")
    partial.parent.mkdir(parents=True, exist_ok=True)
    # the lock the Hub library takes for this blob, so a pull and its downloads never write it at once
    storage = blob.parent.parent
    lock = storage.parent / ".locks" / storage.name / f"{blob.name}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    # the token goes to the Hub only, not to a storage host it redirects to (the Hub library does the same)
    same_host = urlsplit(location).netloc == urlsplit(url).netloc
    headers: dict[str, Any] = build_hf_headers(token=None if same_host else False)
    with weak_lock(lock):
        if blob.is_file():  # another pull finished it meanwhile
            return
        with partial.open("ab") as out:
            done = out.tell()
            if done > file.size:  # not a beginning of this file
                out.truncate(0)
                done = 0
            http_get(location, out, resume_size=done, headers=headers, expected_size=file.size,
                     displayed_filename=file.filename.rsplit("/", 1)[-1])  # fmt: skip
        digest = _sha256(partial)
        if digest != file.sha256:
            partial.unlink(missing_ok=True)
            raise ChecksumMismatch(
                f"{file.repo}/{file.filename} downloaded with SHA-256 {digest}, but the Hub lists {file.sha256}: "
                "the file was deleted; pull again",
                details={"expected": file.sha256, "actual": digest},
            )
        partial.replace(blob)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as data:
        while chunk := data.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
