"""The boundary with llama-cpp-python: a ``Llama`` that says how much of each prompt it actually evaluated.

llama-cpp-python reuses the longest common prefix of a new prompt and the tokens already in the model's context
(``Llama.generate`` trims the KV cache to that prefix and evaluates only the rest), but does not say how many
tokens that was. The provider reports it as usage (``cache_read_tokens``), and the tests and the benchmark check
by it that every turn of a run evaluates only its new tokens. Imported only when a model is loaded: importing
llama_cpp loads the native library.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

import llama_cpp
from llama_cpp import Llama
from llama_cpp.llama_grammar import LlamaGrammar

from tether.providers.local_sampling import GrammarLastSampler


class CountingLlama(Llama):
    """``Llama`` recording, per generation, the prompt tokens evaluated and those reused from the context, and
    sampling under a grammar by checking the chosen token only."""

    prompt_evaluated: int = 0
    """Prompt tokens the last generation evaluated (after the prefix it could reuse)."""
    prompt_reused: int = 0
    """Prompt tokens the last generation took from the model's context without evaluating them."""
    _prompt_length: int | None = None

    def generate(self, tokens: Sequence[int], *args: Any, **kwargs: Any) -> Generator[int, Any, None]:
        # the first eval of a generation is its prompt (what is left of it after the reused prefix)
        self._prompt_length = len(tokens)
        self.prompt_evaluated = self.prompt_reused = 0
        return super().generate(tokens, *args, **kwargs)

    def eval(self, tokens: Sequence[int]) -> None:
        if self._prompt_length is not None:
            self.prompt_evaluated = len(tokens)
            self.prompt_reused = self._prompt_length - len(tokens)
            self._prompt_length = None
        super().eval(tokens)

    def _init_sampler(self, *args: Any, grammar: LlamaGrammar | None = None, **kwargs: Any) -> Any:
        # llama-cpp-python asks the grammar about every token of the vocabulary before each token; check only
        # the token chosen instead (local_sampling.py): the same tokens, at nearly the unconstrained speed
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


def counting_llama(*, model_path: str, n_ctx: int, n_threads: int | None) -> CountingLlama:
    """Load a GGUF file (llama.cpp's default thread counts unless ``n_threads`` is given)."""
    return CountingLlama(
        model_path=model_path, n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads, verbose=False
    )
