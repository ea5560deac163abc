"""The name a transformers model takes and returns its KV cache under.

transformers 5.24 renamed `past_key_values` to `cache`: in every model's forward, in
`generate` and in the output classes. The old name still works but warns on every
`generate` call, which filled the console's job logs. A forward loses the old name in
5.40. The project supports transformers >=5.2,<6, so the name comes from the model's
own forward signature.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any


@functools.lru_cache(maxsize=None)
def _keyword_of(cls: type) -> str:
    return "cache" if "cache" in inspect.signature(cls.forward).parameters else "past_key_values"


def cache_keyword(model: Any) -> str:
    """`cache` or `past_key_values`: what `model`'s forward and generate take. A PEFT
    model passes its cache through to its base model, which names it."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return _keyword_of(type(base))


def cache_kwargs(model: Any, cache: Any) -> dict[str, Any]:
    """`{name: cache}` to pass to `model(...)` or `model.generate(...)`."""
    return {cache_keyword(model): cache}


def output_cache(out: Any) -> Any:
    """The KV cache of a model output, under either name (None when it has none)."""
    if "cache" in getattr(type(out), "__dataclass_fields__", {}):
        return out.cache
    return getattr(out, "past_key_values", None)
