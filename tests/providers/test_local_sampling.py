"""Grammar-last sampling for the embedded model (providers/local/sampling.py), against llama.cpp itself: the bundled
SmolLM2-135M decoded under JSON schemas by llama-cpp-python's own grammar-first chain and by tether's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from llama_cpp import Llama
from llama_cpp.llama_grammar import LlamaGrammar

from tether.providers.local import resolve_model_path
from tether.providers.local.llama import CountingLlama
from tether.providers.local.sampling import GrammarLastSampler

ACTION = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["add", "final"]},
        "arguments": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
        "text": {"type": "string"},
    },
    "required": ["action"],
}
UNLIKELY = {  # nothing a poem about the sea would start with: the model's first choices are rejected often
    "type": "object",
    "properties": {"zebra_count": {"type": "integer"}, "colour": {"type": "string", "enum": ["mauve", "teal"]}},
    "required": ["zebra_count", "colour"],
}
NUMBERS = {"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 6}
PROMPTS = ("What is 17+25? Use the add tool.", "Write a poem about the sea.")


@pytest.fixture(scope="module")
def models() -> Iterator[tuple[Llama, CountingLlama]]:
    path = str(resolve_model_path("smollm2"))
    options: dict[str, Any] = {"model_path": path, "n_ctx": 1024, "n_threads": 2, "n_threads_batch": 2}
    options["verbose"] = False
    reference, ours = Llama(**options), CountingLlama(**options)
    yield reference, ours
    reference.close()
    ours.close()


def complete(llama: Any, prompt: str, schema: dict[str, Any], max_tokens: int = 48, **options: Any) -> str:
    grammar = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    llama.reset()
    reply: Any = llama.create_chat_completion(
        messages=[{"role": "user", "content": prompt}], grammar=grammar, max_tokens=max_tokens, **options
    )
    return str(reply["choices"][0]["message"]["content"])


def test_checking_only_the_chosen_token_decodes_what_llama_cpp_decodes_with_the_grammar_first(
    models: tuple[Llama, CountingLlama],
) -> None:
    """Greedy decoding: the most likely token, when the grammar allows it, is the most likely allowed token, so
    the output is llama.cpp's token for token, whether the chain's first choice was allowed or not."""
    reference, ours = models
    sampled = rejected = 0
    for schema in (ACTION, UNLIKELY, NUMBERS):
        for prompt in PROMPTS:
            expected = complete(reference, prompt, schema, temperature=0.0)
            assert complete(ours, prompt, schema, temperature=0.0) == expected
            sampler = ours._sampler
            assert isinstance(sampler, GrammarLastSampler), "a grammar request samples grammar-last"
            sampled += sampler.sampled
            rejected += sampler.rejected
    assert 0 < rejected < sampled, "both paths were taken: the token checked alone, and every token under the grammar"


def test_a_schema_the_model_would_not_write_is_still_followed(models: tuple[Llama, CountingLlama]) -> None:
    _, ours = models
    text = complete(ours, "Write a poem about the sea.", UNLIKELY, temperature=0.0)
    jsonschema.validate(json.loads(text), UNLIKELY)
    sampler = ours._sampler
    assert isinstance(sampler, GrammarLastSampler)
    assert sampler.rejected > 0, "the model's own first choices were refused and sampled again under the grammar"


def test_sampling_with_a_temperature_stays_within_the_grammar(models: tuple[Llama, CountingLlama]) -> None:
    _, ours = models
    bounded = {  # every document its grammar allows is short, so none is cut by max_tokens
        "type": "object",
        "properties": {
            "colour": {"type": "string", "enum": ["mauve", "teal"]},
            "calm": {"type": "boolean"},
            "size": {"enum": ["small", "large", None]},
        },
        "required": ["colour", "calm", "size"],
        "additionalProperties": False,
    }
    for seed in (1, 2, 3, 4):
        ours.set_seed(seed)
        text = complete(ours, "Write a poem about the sea.", bounded, temperature=0.9, top_p=0.95, max_tokens=160)
        jsonschema.validate(json.loads(text), bounded)


def test_without_a_grammar_llama_cpp_samples_as_it_always_does(models: tuple[Llama, CountingLlama]) -> None:
    reference, ours = models
    for llama in (reference, ours):
        llama.reset()  # type: ignore[no-untyped-call]
    options: dict[str, Any] = {"messages": [{"role": "user", "content": "Name a colour."}], "max_tokens": 8}
    plain: Any = reference.create_chat_completion(**options, temperature=0.0)
    counted: Any = ours.create_chat_completion(**options, temperature=0.0)
    assert counted["choices"][0]["message"]["content"] == plain["choices"][0]["message"]["content"]
    assert not isinstance(ours._sampler, GrammarLastSampler)
