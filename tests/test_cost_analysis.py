"""Compiled.cost_analysis / memory_analysis, jit(f).cache_info() and config log_compiles."""

import logging

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.config import config

PHASES = ("trace", "optimize", "plan", "render", "compile")


@settings(max_examples=6, deadline=None)
@given(
    b=st.integers(1, 3),
    m=st.integers(0, 5),
    k=st.integers(1, 6),
    n=st.integers(1, 4),
)
def test_batched_matmul_flops_and_sizes(b, m, k, n):
    f = fg.jit(lambda x, y: fnp.matmul(x, y))
    x = np.ones((b, m, k), np.float32)
    y = np.ones((b, k, n), np.float32)
    c = f.lower(x, y).compile()
    cost = c.cost_analysis()
    assert cost["flops"] == 2 * b * m * n * k
    assert cost["transcendentals"] == 0
    out_bytes = b * m * n * 4
    if m:
        assert cost["bytes accessed"] >= x.nbytes + y.nbytes + out_bytes
    mem = c.memory_analysis()
    assert mem.argument_size_in_bytes == x.nbytes + y.nbytes
    assert mem.output_size_in_bytes == out_bytes
    assert mem.alias_size_in_bytes == 0
    assert mem.temp_size_in_bytes >= 0


def test_elementwise_and_transcendental_counts_match_xla_model():
    # JAX (XLA) reports flops 132, transcendentals 12 for this function.
    f = fg.jit(lambda a, b: fnp.tanh(a @ b) + 1)
    cost = f.lower(np.ones((4, 5), np.float32), np.ones((5, 3), np.float32)).compile()
    cost = cost.cost_analysis()
    assert cost["flops"] == 2 * 4 * 3 * 5 + 12
    assert cost["transcendentals"] == 12
    assert cost["bytes accessed"] >= (20 + 15 + 12) * 4


@pytest.mark.parametrize("groups", [1, 2])
def test_conv_flops(groups):
    x = np.ones((2, 4, 7, 6), np.float32)
    w = np.ones((6, 4 // groups, 3, 2), np.float32)
    f = fg.jit(
        lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME", feature_group_count=groups)
    )
    c = f.lower(x, w).compile()
    out = c.out_avals[0]
    assert out.shape == (2, 6, 7, 6)
    assert c.cost_analysis()["flops"] == 2 * np.prod(out.shape) * (4 // groups) * 3 * 2
    mem = c.memory_analysis()
    assert mem.argument_size_in_bytes == x.nbytes + w.nbytes
    assert mem.output_size_in_bytes == np.prod(out.shape) * 4


def test_scan_body_counts_length_times():
    def f(x):
        return lax.scan(lambda c, _: (fnp.exp(c) * 2.0, None), x, None, length=5)[0]

    cost = fg.jit(f).lower(np.ones(3, np.float32)).compile().cost_analysis()
    assert cost["transcendentals"] == 5 * 3
    assert cost["flops"] == 5 * 3


def test_memory_analysis_of_zero_d_and_constants():
    k = np.arange(6.0, dtype=np.float32)
    c = fg.jit(lambda s: s * k).lower(np.float32(2)).compile()
    mem = c.memory_analysis()
    assert mem.argument_size_in_bytes == 4
    assert mem.output_size_in_bytes == 24
    assert mem.generated_code_size_in_bytes > 0


def test_cache_info_counts_traces_and_lookups():
    f = fg.jit(lambda x: fg.tree_util.tree_map(lambda v: v + 1, x))
    assert f.cache_info() == (0, 0, config.jit_cache_max_entries, 0)
    f(fnp.ones(3))
    assert f.cache_info().misses == 1 and f.cache_info().currsize == 1
    f({"a": fnp.ones(3)})  # a pytree: a new signature
    f({"a": fnp.ones(3)})  # found by the general path's lookup, or by the pytree hot path
    f(fnp.ones(4))
    info = f.cache_info()
    assert info.misses == 3 and info.currsize == 3 == f._cache_size()
    f.lower(fnp.ones(4))
    assert f.cache_info().hits == info.hits + 1
    f.clear_cache()
    assert f.cache_info().currsize == 0


@pytest.fixture
def log_compiles():
    config.update("jax_log_compiles", True)
    try:
        yield
    finally:
        config.update("log_compiles", False)


def test_log_compiles_one_record_per_compile_with_every_phase(caplog, log_compiles):
    f = fg.jit(lambda x, y: fnp.sin(x) * y, static_argnums=())
    with caplog.at_level(logging.WARNING, logger="fungrad"):
        f(fnp.ones(3), fnp.ones(3))
        f(fnp.ones(3), fnp.ones(3))  # cached: no compile
        f(fnp.ones((2, 2)), fnp.ones((2, 2)))
    records = [r for r in caplog.records if r.name.startswith("fungrad") and "Compiling" in r.msg]
    assert len(records) == 2
    for r in records:
        assert r.fungrad_function == "<lambda>"
        assert tuple(r.fungrad_phases) == PHASES
        assert all(v >= 0 for v in r.fungrad_phases.values())
        text = r.getMessage()
        assert "jit(<lambda>)" in text and all(p in text for p in PHASES)
    assert "x: f32[3]" in records[0].getMessage()
    assert "x: f32[2,2]" in records[1].getMessage()


def test_nothing_logged_when_off(caplog):
    assert not config.log_compiles
    with caplog.at_level(logging.DEBUG, logger="fungrad"):
        fg.jit(lambda x: x * 3)(fnp.ones(2))
    assert not [r for r in caplog.records if "Compiling" in r.getMessage()]
