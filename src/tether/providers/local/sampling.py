"""Grammar-constrained sampling that checks the grammar on the chosen token only, as llama.cpp's own tools do.

llama-cpp-python puts the grammar first in its sampler chain: before every token it is asked about the whole
vocabulary (49,152 tokens for SmolLM2), each token's text run through the grammar's parser. For a small model
that costs more than the model itself: the bundled model makes about 110 tokens a second unconstrained and 65
under a JSON action schema (``bench/local_model.py``). llama.cpp's ``common_sampler`` (its CLI and server)
samples without the grammar first, asks the grammar about that one token, and only when the grammar rejects
it samples again with the grammar applied to every token. A model writing the JSON it was asked for is
rejected rarely, so nearly every token costs one check instead of 49,152.

The result is the same token: greedy decoding (tether's default) picks the most likely token, and when the
grammar allows it, it is also the most likely allowed one. Plain temperature sampling keeps the constrained
distribution as well (a rejection sampler); with top-k/top-p truncation the candidates are cut before the
grammar rather than after, the approximation llama.cpp makes.

Imported only with a loaded model (it needs numpy and llama_cpp, both there with the ``local`` extra).
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

import llama_cpp
import numpy as np
from llama_cpp._internals import LlamaContext

_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)], align=True)
"""``llama_token_data`` as a numpy record, so a whole vocabulary of candidates is filled without a Python loop."""


class GrammarLastSampler:
    """Stands where llama-cpp-python keeps its sampler chain (``Llama._sampler``): ``sample`` picks a token with
    the chain alone, checks it against the grammar, falls back to grammar-then-chain over every token when it
    is rejected, and tells both the chosen token."""

    def __init__(self, chain: Any, grammar: Any, vocab: Any, n_vocab: int) -> None:
        """
        Args:
            chain: the request's sampler chain (llama-cpp-python's ``LlamaSampler``), built without the grammar.
            grammar: the request's ``LlamaGrammar`` (its GBNF text and root rule).
            vocab: the model's ``llama_vocab`` the grammar matches token texts against.
            n_vocab: the number of logits per position.
        """
        self._chain = chain
        self._grammar = llama_cpp.llama_sampler_init_grammar(
            vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8")
        )
        if not self._grammar:
            raise ValueError("llama.cpp could not parse the grammar")
        self._n_vocab = n_vocab
        self._ids = np.arange(n_vocab, dtype=np.int32)
        self._candidates = np.zeros(n_vocab, dtype=_TOKEN_DATA)
        self.sampled = 0
        """Tokens chosen so far."""
        self.rejected = 0
        """Of those, how many the chain's first choice was not allowed by the grammar (sampled again under it)."""

    def sample(self, ctx: LlamaContext, idx: int = -1) -> int:
        """The next token from the logits at ``idx`` (negative: from the end of the last batch)."""
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx.ctx, idx), shape=(self._n_vocab,))
        token = self._choose(logits, constrained=False)
        if not self.allows(token):
            self.rejected += 1
            token = self._choose(logits, constrained=True)
        self.sampled += 1
        llama_cpp.llama_sampler_accept(self._grammar, token)
        self._chain.accept(token)
        return token

    def allows(self, token: int) -> bool:
        """Whether the grammar, in its present state, allows ``token`` next."""
        one = llama_cpp.llama_token_data(token, 0.0, 0.0)
        array = llama_cpp.llama_token_data_array(data=ctypes.pointer(one), size=1, selected=-1, sorted=False)
        llama_cpp.llama_sampler_apply(self._grammar, ctypes.byref(array))
        return not math.isinf(one.logit)

    def _choose(self, logits: np.ndarray[Any, Any], *, constrained: bool) -> int:
        candidates = self._candidates
        candidates["id"] = self._ids
        candidates["logit"] = logits
        candidates["p"] = 0.0
        array = llama_cpp.llama_token_data_array(
            data=candidates.ctypes.data_as(llama_cpp.llama_token_data_p),
            size=self._n_vocab,
            selected=-1,
            sorted=False,
        )
        if constrained:
            llama_cpp.llama_sampler_apply(self._grammar, ctypes.byref(array))
        llama_cpp.llama_sampler_apply(self._chain.sampler, ctypes.byref(array))
        return int(array.data[array.selected].id)

    def close(self) -> None:
        """Free the grammar and the chain (before the model they refer to is freed)."""
        if self._grammar:
            llama_cpp.llama_sampler_free(self._grammar)
            self._grammar = None
        self._chain.close()

    def __del__(self) -> None:
        self.close()
