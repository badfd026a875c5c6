"""The embedded local model (llama.cpp in this process), loaded on first use (docs/local.md).

* ``provider.py``: ``LocalProvider``, the model file found and loaded, generation on a worker thread;
* ``llama.py``: the llama.cpp model with the counts the provider reads;
* ``prompt_cache.py``: the evaluated prompt kept on disk between processes;
* ``sampling.py``: grammar-constrained sampling that checks only the chosen token;
* ``threads.py``: how many threads generation gets;
* ``pulled.py``: GGUF files pulled from the Hugging Face Hub, found in its cache (``local:NAME``);
* ``hub.py``: ``tether models pull``, which fetches one (the ``hub`` extra, imported only when pulling).
"""

from tether.providers.local.provider import LocalProvider, from_model_name, resolve_model_path

__all__ = ["LocalProvider", "from_model_name", "resolve_model_path"]
