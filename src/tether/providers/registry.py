"""Model strings (``provider:model``) to providers.

Each prefix names the module that builds its provider, imported only when a model string uses it, so that
``import tether`` loads no provider code.
"""

from __future__ import annotations

import importlib

from tether.errors import ConfigInvalid
from tether.providers.base import Provider

_BUILDERS: dict[str, str] = {
    "scripted": "tether.providers.scripted:from_model_name",
}
"""prefix -> ``module:function``; the function takes the model name and returns a Provider."""


def resolve(model: str | Provider) -> Provider:
    """The provider for a model string, or the provider itself."""
    if not isinstance(model, str):
        if not isinstance(model, Provider):
            raise ConfigInvalid(f"a model is a 'provider:model' string or a Provider, not {type(model).__name__}")
        return model
    prefix, colon, name = model.partition(":")
    if not colon or not prefix or not name:
        raise ConfigInvalid(f"model {model!r} is not of the form 'provider:model' (for example 'scripted:echo')")
    target = _BUILDERS.get(prefix)
    if target is None:
        known = ", ".join(f"{p}:" for p in sorted(_BUILDERS))
        raise ConfigInvalid(f"unknown provider {prefix!r} in {model!r}; available: {known}")
    module_name, function_name = target.split(":")
    build = getattr(importlib.import_module(module_name), function_name)
    provider: Provider = build(name)
    return provider
