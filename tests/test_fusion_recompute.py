"""The fusion planner stores a tensor that one kernel would recompute at several indices when
the recomputation costs too much (``fusion.RECOMPUTE_BOUND``), instead of inlining a copy of its
expression at each index.

The derivative of a cumulative product (and of cummax, cummin, cumlogsumexp) is a log-depth
chain ``e_k = e_{k-1} * pad(e_{k-1}, 2**k)``: each level reads the one below at ``i`` and
``i - 2**k``, so inlining doubled the expression per level (tests/fuzz/found.md #2: jit(grad)
of a 300-element cumprod built one kernel of ~150000 nodes and did not compile in 200 s).
Bounds here are on the planned kernels' expression nodes, never on times: the nodes must grow
at most about linearly (in practice logarithmically) with the length, and the values match
eager. Elementwise fusion read at one index, and rows read along a reduction (softmax, a
normalisation), stay one kernel as before."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.ir import passes
from fungrad.lowering import fusion
from fungrad.lowering.cpu.policy import CpuPolicy
from fungrad.test_util import check_grads

CUMULATIVE = {
    "cumprod": lambda x, reverse: fnp.flip(fnp.cumprod(fnp.flip(x))) if reverse else fnp.cumprod(x),
    "cummax": lambda x, reverse: lax.cummax(x, reverse=reverse),
    "cummin": lambda x, reverse: lax.cummin(x, reverse=reverse),
    "cumlogsumexp": lambda x, reverse: lax.cumlogsumexp(x, reverse=reverse),
}


def _plan(f, *args, policy=None):
    return fusion.plan(
        passes.optimize(fg.make_jaxpr(f)(*args)), policy=CpuPolicy() if policy is None else policy
    )


def _kernels(prog):
    return [k for k in prog.steps if isinstance(k, fusion.Kernel)]


def _nodes(prog) -> int:
    """Expression nodes of the planned kernels (each kernel's distinct nodes, summed)."""
    return sum(
        len(
            fusion._walk([x for s in k.stores for x in (s.value, s.index, s.mask) if x is not None])
        )
        for k in _kernels(prog)
    )


def _cumulative_loss(name, n, reverse=False):
    w = np.cos(np.arange(n)).astype(np.float32)
    return lambda x: fnp.sum(CUMULATIVE[name](x, reverse) * w)


def _inputs(n, seed=0, dtype=np.float32):
    # products of values near 1 stay finite for any length
    return np.random.default_rng(seed).uniform(0.8, 1.25, n).astype(dtype)


@pytest.mark.parametrize("name", sorted(CUMULATIVE))
def test_derivative_of_a_cumulative_op_plans_a_near_linear_number_of_nodes(name):
    """Nodes of jit(grad(sum(cumop(x) * w))) for n = 50, 100, 200: before, they grew as n**2
    (cumprod 8400 at 64, 132000 at 256; cummax 1.1 million at 256); now a few hundred,
    growing with log n. The bound allows linear growth from n = 50."""
    counts = [_nodes(_plan(fg.grad(_cumulative_loss(name, n)), _inputs(n))) for n in (50, 100, 200)]
    assert counts[0] < 1500, counts
    assert counts[2] <= 4 * counts[0], counts
    assert counts[1] <= 2 * counts[0] and counts[2] <= 2 * counts[1], counts


def test_derivative_of_a_300_element_cumprod_compiles_and_matches_eager():
    """The found.md #2 repro (it never finished compiling): values against eager's grad."""
    n = 300
    x = np.random.default_rng(0).uniform(-2, 2, n).astype(np.float32)

    def f(x):
        return fnp.sum(fnp.cumprod(x) * fnp.cos(fnp.arange(n, dtype=x.dtype)))

    prog = _plan(fg.grad(f), x)
    assert _nodes(prog) < 2000
    got, want = np.asarray(fg.jit(fg.grad(f))(x)), np.asarray(fg.grad(f)(x))
    scale = np.abs(want).max()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * scale)


@settings(max_examples=8, deadline=None)
@given(
    name=st.sampled_from(sorted(CUMULATIVE)),
    n=st.sampled_from([0, 1, 2, 3, 17, 40, 64]),
    reverse=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_jit_of_cumulative_derivatives_matches_eager(name, n, reverse, seed):
    """jit(grad) against eager grad for the cumulative ops, both directions, lengths around
    the chain's powers of two (and empty, 0 levels)."""
    x = _inputs(n, seed)
    if name in ("cummax", "cummin"):  # distinct values: the derivative is defined
        x = x + np.arange(n, dtype=np.float32)[np.random.default_rng(seed).permutation(n)]
    f = fg.grad(_cumulative_loss(name, n, reverse))
    got, want = np.asarray(fg.jit(f)(x)), np.asarray(f(x))
    scale = max(1.0, np.abs(want).max(initial=0.0))
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5 * scale)


def test_jit_of_cumprod_derivative_against_finite_differences(x64):
    """The compiled first and second derivatives against finite differences (float64)."""
    n = 40
    x = _inputs(n, 3, np.float64)
    w = np.cos(np.arange(n))
    check_grads(fg.jit(lambda x: fnp.sum(fnp.cumprod(x) * w)), (x,), order=2, modes=("rev",))


def test_gpu_planner_bounds_the_cumprod_derivative_too():
    """The planner with the GPU's policy keeps the bound: planning needs no adapter."""
    from fungrad.lowering.gpu.policy import GpuPolicy

    counts = [
        _nodes(_plan(fg.grad(_cumulative_loss("cumprod", n)), _inputs(n), policy=GpuPolicy()))
        for n in (50, 200)
    ]
    assert counts[1] <= 2 * counts[0] < 3000, counts


def test_gpu_runs_the_derivative_of_a_long_cumprod(gpu):
    """found.md #2 on the GPU: a 40-element cumprod's derivative took 86 s through lavapipe."""
    n = 100
    f = fg.grad(_cumulative_loss("cumprod", n))
    x = _inputs(n, 5)
    got, want = np.asarray(fg.jit(f, backend="gpu")(x)), np.asarray(f(x))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


# -- siblings: other ways one tensor is read at several index maps -------------------------------

N = 64
PERM = np.random.default_rng(1).permutation(N)


def _pad_step(a, k):  # the scan's own shape: a shifted copy of itself
    return a * fnp.pad(a, (2 ** (k % 6), 0), constant_values=1.0)[:N] * 0.5 + 0.5


def _roll_step(a, k):  # concatenate of two slices of one tensor
    s = 2 ** (k % 6)
    return a * fnp.concatenate([a[s:], a[:s]]) * 0.5 + 0.5


def _rev_step(a, k):
    return a * a[::-1] * 0.5 + 0.5


def _slice_step(a, k):  # slices of the same tensor, shrinking
    return a[1:] * a[:-1] * 0.5 + 0.5


def _gather_step(a, k):
    return a * a[PERM[: a.shape[0]]] * 0.5 + 0.5


def _flip2d_step(a, k):
    return a * fnp.flip(a, 0) * 0.25 + fnp.flip(a, 1) * 0.25 + 0.5


SIBLINGS = {
    "pad": (_pad_step, (N,)),
    "concatenate": (_roll_step, (N,)),
    "rev": (_rev_step, (N,)),
    "slices": (_slice_step, (N,)),
    "gather": (_gather_step, (N,)),
    "rev2d": (_flip2d_step, (8, 8)),
}


def _chain(step, depth):  # values stay near 1: x * y / 2 + 1 / 2 contracts there
    def f(a):
        for k in range(depth):
            a = step(a, k)
        return a

    return f


def _numpy_chain(name, x, depth):
    a = x.astype(np.float64)
    for k in range(depth):
        if name == "pad":
            s = 2 ** (k % 6)
            a = a * np.concatenate([np.ones(s), a[: N - s]]) * 0.5 + 0.5
        elif name == "concatenate":
            s = 2 ** (k % 6)
            a = a * np.roll(a, -s) * 0.5 + 0.5
        elif name == "rev":
            a = a * a[::-1] * 0.5 + 0.5
        elif name == "slices":
            a = a[1:] * a[:-1] * 0.5 + 0.5
        elif name == "gather":
            a = a * a[PERM[: a.shape[0]]] * 0.5 + 0.5
        else:
            a = a * a[::-1] * 0.25 + a[:, ::-1] * 0.25 + 0.5
    return a


@pytest.mark.parametrize("name", sorted(SIBLINGS))
def test_chains_reading_a_tensor_at_several_index_maps_stay_small(name):
    """A chain where each step reads the previous one at two index maps (a pad, a
    concatenate of its slices, a reversal, overlapping slices, a gather, 2-D flips): nodes
    grow about linearly with the depth (pad and concatenate doubled per step: 5986 and 313897
    nodes at depth 10), and the values match numpy."""
    step, shape = SIBLINGS[name]
    x = np.random.default_rng(2).uniform(0.9, 1.1, shape).astype(np.float32)
    counts = [_nodes(_plan(_chain(step, d), x)) for d in (6, 12, 24)]
    assert counts[2] <= 5 * counts[0] + 200, counts
    f = _chain(step, 24)
    np.testing.assert_allclose(
        np.asarray(fg.jit(f)(x)), _numpy_chain(name, x, 24), rtol=1e-4, atol=1e-6
    )


# -- what stays fused ---------------------------------------------------------------------------


def test_elementwise_read_at_one_index_stays_one_kernel():
    x = np.linspace(-3, 3, 1000, dtype=np.float32)
    prog = _plan(lambda x: fnp.tanh(x) * 0.5 + fnp.exp(-x * x) - fnp.sin(x) / (1 + x * x), x)
    assert len(prog.steps) == 1 and not prog.temps


def test_two_cheap_reads_stay_fused_and_a_costly_stencil_is_stored_once():
    """``t[1:] - t[:-1]`` of ``t = tanh(x)`` recomputes one tanh: one kernel. Nine shifted
    reads of it would recompute eight: tanh is stored by a kernel of its own and the stencil
    kernel computes no tanh."""
    x = np.random.default_rng(0).normal(size=100).astype(np.float32)
    diff = _plan(lambda x: fnp.tanh(x)[1:] - fnp.tanh(x)[:-1], x)
    assert len(diff.steps) == 1

    def stencil(x):
        t = fnp.tanh(x)
        return sum(t[i : i + 92] for i in range(9))

    prog = _plan(stencil, x)
    kernels = _kernels(prog)
    assert len(kernels) == 2
    tanhs = [
        sum(e.op == "tanh" for e in fusion._walk([s.value for s in k.stores])) for k in kernels
    ]
    assert tanhs == [1, 0]
    t = np.tanh(x.astype(np.float64))
    np.testing.assert_allclose(
        np.asarray(fg.jit(stencil)(x)), sum(t[i : i + 92] for i in range(9)), rtol=1e-5, atol=1e-5
    )


def test_rows_read_along_a_reduction_stay_one_kernel():
    """A costly row read elementwise and inside its own row mean (``y - mean(y)``), and a
    layer normalisation's derivative: one kernel each, as before (the reads differ only by
    the reduction's variable)."""
    x = np.random.default_rng(0).normal(size=(8, 32)).astype(np.float32)

    def centred(x):
        y = fnp.log1p(fnp.exp(-fnp.abs(x))) + fnp.maximum(x, 0) * fnp.tanh(x)
        return y - y.mean(1, keepdims=True)

    def layernorm(x):
        mu, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
        return fnp.sum(fnp.tanh((x - mu) / fnp.sqrt(var + 1e-5)))

    for f in (centred, fg.grad(layernorm)):
        assert len(_plan(f, x).steps) == 1
        np.testing.assert_allclose(np.asarray(fg.jit(f)(x)), np.asarray(f(x)), rtol=1e-5, atol=1e-5)


def test_recompute_cost_counts_arithmetic_not_views():
    """The cost measure: loads and index arithmetic are free (a view of a stored array costs
    nothing to read again), a transcendental weighs 20, and the walk stops past the bound."""
    prog = _plan(lambda x: fnp.tanh(x[::-1]) * 2.0, np.ones(8, np.float32))
    value = _kernels(prog)[0].stores[0].value
    assert fusion._recompute_cost(value, 1000) == 21
    assert 5 < fusion._recompute_cost(value, 5) <= 21  # stops once past the bound
    load = next(e for e in fusion._walk([value]) if e.op == "load")
    assert fusion._recompute_cost(load, 1000) == 0
