"""``fungrad.clear_caches`` (jax.clear_caches): every jit forgets its traces and executables,
the derived-jaxpr memos and the eager tape's staging cache empty; functions still work after
and trace again (counted by the trace counter)."""

from __future__ import annotations

import numpy as np

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.transforms import jit_primitive, tape


def test_clear_caches_forgets_every_trace_and_compiled_program():
    traces = []

    def f(x):
        traces.append(x.shape)
        return fnp.sin(x) * 2

    jf = fg.jit(f)
    g = fg.jit(fg.grad(lambda x: fnp.sum(jf(x))))
    x = np.linspace(0, 1, 5, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(g(x)), 2 * np.cos(x), rtol=1e-6)
    jf(x)
    fg.grad(lambda x: fnp.sum(fnp.tanh(x)))(x)  # eager: the tape's staging cache
    before = len(traces)
    assert jf._cache_size() == 1 and len(jit_primitive._memo._entries) > 0

    fg.clear_caches()
    assert jf._cache_size() == 0 and g._cache_size() == 0
    assert len(jit_primitive._memo._entries) == 0 and len(tape._linearized_cache) == 0

    np.testing.assert_allclose(np.asarray(jf(x)), 2 * np.sin(x), rtol=1e-6)
    assert len(traces) == before + 1  # traced again
    np.testing.assert_allclose(np.asarray(g(x)), 2 * np.cos(x), rtol=1e-6)
