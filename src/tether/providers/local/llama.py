"""The boundary with llama-cpp-python: a ``Llama`` that says how much of each prompt it actually evaluated.

llama-cpp-python reuses the longest common prefix of a new prompt and the tokens already in the model's context
(``Llama.generate`` trims the KV cache to that prefix and evaluates only the rest), but does not say how many
tokens that was. The provider reports it as usage (``cache_read_tokens``), and the tests and the benchmark check
by it that every turn of a run evaluates only its new tokens. Imported only when a model is loaded: importing
llama_cpp loads the native library.
"""

from __future__ import annotations

import ctypes
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

import llama_cpp
from llama_cpp import Llama
from llama_cpp.llama_grammar import LlamaGrammar

from tether._logging import get_logger
from tether.providers.local.prompt_cache import MIN_SAVED_TOKENS, PromptCache, Snapshot, model_key
from tether.providers.local.sampling import GrammarLastSampler

logger = get_logger(__name__)


class CountingLlama(Llama):
    """``Llama`` recording, per generation, the prompt tokens evaluated and those reused from the context, and
    sampling under a grammar by checking the chosen token only."""

    prompt_evaluated: int = 0
    """Prompt tokens the last generation evaluated (after the prefix it could reuse)."""
    prompt_reused: int = 0
    """Prompt tokens the last generation took from the model's context without evaluating them."""
    prompt_cache: PromptCache | None = None
    """Where the context after a long prompt is kept for the next process (``providers/local/prompt_cache.py``)."""
    _prompt_length: int | None = None
    _restore_pending = True

    def generate(self, tokens: Sequence[int], *args: Any, **kwargs: Any) -> Generator[int, Any, None]:
        if self._restore_pending:  # a newly loaded model: start from an earlier process's context if one fits
            self._restore_pending = False
            self._restore(tokens)
        # the first eval of a generation is its prompt (what is left of it after the reused prefix)
        self._prompt_length = len(tokens)
        self.prompt_evaluated = self.prompt_reused = 0
        return super().generate(tokens, *args, **kwargs)

    def eval(self, tokens: Sequence[int]) -> None:
        prompt = self._prompt_length is not None
        if self._prompt_length is not None:
            self.prompt_evaluated = len(tokens)
            self.prompt_reused = self._prompt_length - len(tokens)
            self._prompt_length = None
        super().eval(tokens)
        if prompt and self.prompt_evaluated >= MIN_SAVED_TOKENS and self.prompt_reused < self.prompt_evaluated:
            self._snapshot()

    def _restore(self, tokens: Sequence[int]) -> None:
        """Take the cached context that shares the longest prefix with ``tokens``, if there is one."""
        if self.prompt_cache is None or not (snapshot := self.prompt_cache.best(tokens)):
            return
        state = (ctypes.c_uint8 * len(snapshot.state)).from_buffer_copy(snapshot.state)
        if len(snapshot.tokens) > self._n_ctx or (
            llama_cpp.llama_state_set_data(self.ctx, state, len(snapshot.state)) != len(snapshot.state)
        ):
            logger.warning("the local model's prompt cache: llama.cpp refused a snapshot; evaluating the prompt")
            self.n_tokens = 0  # the next evaluation starts at position 0 and drops whatever the context holds
            return
        self.input_ids[: len(snapshot.tokens)] = snapshot.tokens
        self.n_tokens = len(snapshot.tokens)
        self._requires_eval = True  # the logits were not restored: the prompt's last token is evaluated again

    def _snapshot(self) -> None:
        """Hand the context (the prompt just evaluated) to the cache, which writes it on a thread of its own."""
        if self.prompt_cache is None:
            return
        size = llama_cpp.llama_state_get_size(self.ctx)
        state = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_get_data(self.ctx, state, size)
        tokens = tuple(int(token) for token in self.input_ids[: self.n_tokens])
        self.prompt_cache.save_later(Snapshot(tokens, bytes(state)[:written]))

    def _init_sampler(self, *args: Any, grammar: LlamaGrammar | None = None, **kwargs: Any) -> Any:
        # llama-cpp-python asks the grammar about every token of the vocabulary before each token; check only
        # the token chosen instead (providers/local/sampling.py): the same tokens, at nearly the unconstrained speed
        chain = super()._init_sampler(*args, **kwargs)
        if grammar is None:
            return chain
        return GrammarLastSampler(chain, grammar, self._model.vocab, self._n_vocab)

    def close(self) -> None:
        sampler, self._sampler = self._sampler, None
        if sampler is not None:  # it refers to the model: free it first
            sampler.close()
        super().close()

    def use_threads(self, threads: int) -> None:
        """Compute the next generations (prompt and tokens) with ``threads`` threads."""
        llama_cpp.llama_set_n_threads(self.ctx, threads, threads)


def counting_llama(*, model_path: str, n_ctx: int, n_threads: int | None, cache: Path | None) -> CountingLlama:
    """Load a GGUF file (llama.cpp's default thread counts unless ``n_threads`` is given), with its prompt cache
    in a folder of ``cache`` (``None``: none)."""
    llama = CountingLlama(
        model_path=model_path, n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads, verbose=False
    )
    if cache is not None:
        llama.prompt_cache = PromptCache(cache / model_key(Path(model_path), n_ctx, llama_cpp.__version__))
    return llama
