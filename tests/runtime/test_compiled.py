"""The bounded caches of compiled programs (``bnlab._runtime.compiled``)."""
import jax.numpy as jnp
import pytest

import bnlab
from bnlab._runtime.compiled import CompiledCache
from bnlab.engine.loop import get_engine


def test_least_recently_used_entries_are_dropped_beyond_maxsize():
    cache = CompiledCache(maxsize=2)
    built = []

    def build(k):
        built.append(k)
        return f"value {k}"

    assert cache.get("a", lambda: build("a")) == "value a"
    cache.get("b", lambda: build("b"))
    cache.get("a", lambda: build("a"))          # hit: 'a' becomes most recent
    cache.get("c", lambda: build("c"))          # evicts 'b', the least recent
    assert built == ["a", "b", "c"]
    assert "a" in cache and "c" in cache and "b" not in cache and len(cache) == 2
    cache.get("b", lambda: build("b"))          # rebuilt after eviction
    assert built == ["a", "b", "c", "b"]
    with pytest.raises(ValueError, match="maxsize"):
        CompiledCache(maxsize=0)


def test_clear_compiled_empties_engine_cache_and_engines_still_work():
    model = bnlab.GP(bnlab.kernels.RBF(), bnlab.likelihoods.Gaussian())
    X = jnp.linspace(0, 1, 5)[:, None]
    y = jnp.sin(X[:, 0])
    before = bnlab.infer(model, X, y, method="vi").log_marginal
    engine = get_engine(model, "vi")
    bnlab.clear_compiled()
    assert get_engine(model, "vi") is not engine       # rebuilt, old one dropped
    assert bnlab.infer(model, X, y, method="vi").log_marginal == pytest.approx(before, abs=1e-12)
