"""Planned temporaries: how small the scratch area gets, without two live buffers sharing
memory.

* ``fusion.liveness_offsets`` places temporaries largest first at the lowest offset clear of
  the placed ones whose lives overlap (checked on random lifetimes: no live overlap, and never
  more than the sum of the sizes);
* ``ir.masks.masks_from_outputs`` makes a relu's backward mask read the relu's output, so the
  pre-activation dies in the forward pass (the jaxpr shape, and values at 0, -0, NaN, inf
  against numpy, eager and compiled);
* ``peephole.kernels_in_place``: a kernel's store written over the temporary it reads last,
  at the same element (``Buffer.alias``), and never where it reads other elements or another
  step reads the operand later; values against numpy;
* a relu MLP's training step fits the activations JAX keeps alive.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import core
from fungrad.ir import masks, passes
from fungrad.lowering import fusion
from fungrad.lowering.kernel import Buffer


class _Step:
    def __init__(self, reads, writes):
        self._r, self._w = set(reads), set(writes)

    def reads(self):
        return self._r

    def writes(self):
        return self._w


_LIVES = st.tuples(st.integers(0, 12), st.integers(0, 6), st.integers(1, 9))


@settings(max_examples=60, deadline=None)
@given(st.lists(_LIVES, min_size=1, max_size=20))
def test_offsets_never_overlap_live_buffers(lives):
    """Random (first step, length, size) lives: buffers alive at a common step occupy
    disjoint byte ranges; the area is at most the sum of the sizes and at least the largest
    set alive at once."""
    f32 = np.dtype(np.float32)
    bufs = [Buffer(i, (size * 16,), f32, "temp", f"t{i}") for i, (_, _, size) in enumerate(lives)]
    n_steps = max(f + d for f, d, _ in lives) + 1
    steps = [_Step([], []) for _ in range(n_steps)]
    for b, (f, d, _) in zip(bufs, lives):
        steps[f]._w.add(b)
        steps[f + d]._r.add(b)
    prog = fusion.Program("p", [], [], [], bufs, steps)
    offsets, top = fusion.liveness_offsets(prog, lambda b: b.nbytes)
    span = {b.id: (f, f + d) for b, (f, d, _) in zip(bufs, lives)}
    for i, a in enumerate(bufs):
        for b in bufs[i + 1 :]:
            (fa, la), (fb, lb) = span[a.id], span[b.id]
            if la < fb or lb < fa:
                continue
            oa, ob = offsets[a.id], offsets[b.id]
            assert oa + a.nbytes <= ob or ob + b.nbytes <= oa, (a, b, offsets)
    assert top <= sum(b.nbytes for b in bufs)
    peak = max(
        sum(b.nbytes for b in bufs if span[b.id][0] <= s <= span[b.id][1]) for s in range(n_steps)
    )
    assert top >= peak


def _mlp_loss(params, x, y):
    h = x
    for w, b in params[:-1]:
        h = fg.nn.relu(h @ w + b)
    w, b = params[-1]
    return fnp.mean((h @ w + b - y) ** 2)


def _mlp(sizes, batch, seed=0):
    rng = np.random.default_rng(seed)
    params = [
        (
            (rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32),
            (rng.standard_normal(b) * 0.1).astype(np.float32),
        )
        for a, b in zip(sizes[:-1], sizes[1:])
    ]
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.standard_normal((batch, sizes[-1])).astype(np.float32)
    return params, x, y


def test_relu_backward_mask_reads_the_relu_output():
    params, x, y = _mlp((16, 32, 8), 4)
    closed = passes.optimize(fg.make_jaxpr(fg.grad(_mlp_loss))(params, x, y))
    producer = {id(v): e for e in closed.jaxpr.eqns for v in e.outvars}
    selects = [e for e in closed.jaxpr.eqns if e.primitive.name == "select_n"]
    relu_outs = {id(e.outvars[0]) for e in selects if len(e.invars) == 3}
    late = [
        e
        for e in selects
        if (m := producer.get(id(e.invars[0]))) is not None and id(m.invars[0]) in relu_outs
    ]
    assert late, closed  # the backward select reads relu(x) > 0


def test_pass_leaves_other_programs_alone():
    """``maximum(x, 0)`` alone, a select with its cases the other way round: unchanged."""
    for f in (
        lambda x: fnp.sum(fnp.maximum(x, 0.0) * (x > 0)),
        lambda x: fnp.sum(fnp.where(x > 0, fnp.maximum(x, 0.0), x) * (x > 0)),
    ):
        closed = fg.make_jaxpr(f)(np.ones(3, np.float32))
        assert masks.masks_from_outputs(closed) is closed


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from([0.0, -0.0, 1.5, -2.0, np.nan, np.inf, -np.inf]), min_size=1,
                max_size=9))  # fmt: skip
def test_relu_gradient_at_special_values(values):
    """d/dx sum(relu(x) * c): c where x > 0, else 0 (0 at 0 and -0, 0 at NaN, as JAX)."""
    x = np.asarray(values, np.float32)
    c = np.arange(1, x.size + 1, dtype=np.float32)
    f = fg.grad(lambda x: fnp.sum(fg.nn.relu(x) * c))
    want = np.where(x > 0, c, 0).astype(np.float32)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(np.asarray(fg.jit(f)(x)), want)
        np.testing.assert_array_equal(np.asarray(f(x)), want)


def test_mlp_step_keeps_three_activations():
    """A 256-wide relu MLP's SGD step (batch 64: 64 KiB per activation) plans the three
    activations JAX keeps alive at once (h1 for the last weight gradient, the gradient flowing
    back, masked in place) and gives the eager step's numbers."""
    params, x, y = _mlp((64, 256, 256, 10), 64)

    def step(params, x, y):
        grads = fg.grad(_mlp_loss)(params, x, y)
        return fg.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)

    compiled = fg.jit(step).lower(params, x, y).compile()
    act = 64 * 256 * 4
    assert compiled.memory_analysis().temp_size_in_bytes <= 3 * act + 16384
    got = fg.tree_util.tree_leaves(compiled(params, x, y))
    want = fg.tree_util.tree_leaves(step(params, x, y))
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)


def test_masks_pass_output_typechecks():
    params, x, y = _mlp((8, 8, 2), 2)
    closed = masks.masks_from_outputs(fg.make_jaxpr(fg.grad(_mlp_loss))(params, x, y))
    assert isinstance(closed, core.ClosedJaxpr)
    core.typecheck_jaxpr(closed.jaxpr)


def _kernels(f, *args):
    from fungrad.lowering import compile_jaxpr

    args = [fnp.asarray(a) for a in args]
    exe = compile_jaxpr(fg.make_jaxpr(f)(*args), "cpu", "test")
    kernels = [s for s in exe.program.steps if isinstance(s, fusion.Kernel)]
    return exe, args, kernels


def _aliased(kernels):
    return [st.buffer for k in kernels for st in k.stores if st.buffer.alias is not None]


_RNG = np.random.default_rng(7)
_A, _B, _C = (
    _RNG.standard_normal(s).astype(np.float32) / 8 for s in ((32, 48), (48, 64), (64, 16))
)


def test_pointwise_kernel_writes_over_its_operand():
    """``tanh(a @ b)`` read by the next product: the tanh kernel writes over the product."""
    f = lambda a, b, c: fnp.tanh(a @ b) @ c  # noqa: E731
    exe, args, kernels = _kernels(f, _A, _B, _C)
    (out,) = _aliased(kernels)
    assert out.alias.shape == out.shape
    want = np.tanh(_A.astype(np.float64) @ _B) @ _C
    np.testing.assert_allclose(np.asarray(exe.call(args)[0]), want, rtol=1e-4, atol=1e-5)


def test_kernel_reading_other_elements_keeps_its_own_buffer():
    """A kernel reading the product reversed (other elements than it stores) or an operand
    another step reads afterwards: no alias, and the values stay right."""
    rev = lambda a, b, c: fnp.tanh((a @ b)[::-1]) @ c  # noqa: E731
    exe, args, kernels = _kernels(rev, _A, _B, _C)
    assert _aliased(kernels) == []
    want = np.tanh((_A.astype(np.float64) @ _B)[::-1]) @ _C
    np.testing.assert_allclose(np.asarray(exe.call(args)[0]), want, rtol=1e-4, atol=1e-5)

    def later(a, b, c):
        p = a @ b
        return (fnp.tanh(p) @ c, p.T @ a)  # p is read again by the second product

    exe, args, kernels = _kernels(later, _A, _B, _C)
    p = _A.astype(np.float64) @ _B
    got = exe.call(args)
    np.testing.assert_allclose(np.asarray(got[0]), np.tanh(p) @ _C, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(got[1]), p.T @ _A, rtol=1e-4, atol=1e-5)


def test_two_readers_of_the_operand():
    """Two arrays computed from the product (the planner stores them from two kernels): only
    the last reader writes over it, as the last store of its kernel, and both get the
    product's values from before. (A kernel with a second, accumulating store reading the
    operand: the masked gradient and the bias gradient of the MLP step above.)"""

    def f(a, b, c):
        p = a @ b
        return (fnp.maximum(p, 0.0) @ c) + (fnp.sin(p) * 2.0) @ c

    exe, args, kernels = _kernels(f, _A, _B, _C)
    p = _A.astype(np.float64) @ _B
    want = np.maximum(p, 0) @ _C + (np.sin(p) * 2) @ _C
    np.testing.assert_allclose(np.asarray(exe.call(args)[0]), want, rtol=1e-4, atol=1e-5)
    assert len(_aliased(kernels)) == 1
    for k in kernels:
        aliased = [i for i, st in enumerate(k.stores) if st.buffer.alias is not None]
        assert aliased in ([], [len(k.stores) - 1])


def test_output_kernels_run_once_their_operands_exist():
    """The loss (an output read from the logits) is stored right after the logits, not at
    the end of the backward pass, so the logits' buffer is free during it; output kernels
    reading only inputs keep their place; values equal the eager step."""
    params, x, y = _mlp((32, 64, 64, 10), 16)

    def step(params, x, y):
        loss, grads = fg.value_and_grad(_mlp_loss)(params, x, y)
        return loss, fg.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)

    def flat_step(*a):  # (compile_jaxpr takes flat arguments)
        return step(_pairs(a[:-2]), a[-2], a[-1])

    exe, args, _ = _kernels(flat_step, *[v for pair in params for v in pair], x, y)
    steps = exe.program.steps
    loss_at = next(
        i for i, s in enumerate(steps)
        if isinstance(s, fusion.Kernel) and any(st.buffer.name == "out0" for st in s.stores)
    )  # fmt: skip
    gemms = [i for i, s in enumerate(steps) if isinstance(s, fusion.Gemm)]
    assert loss_at < gemms[-1], exe.program.describe()
    got = [np.asarray(v) for v in exe.call(args)]
    want = [np.asarray(v) for v in fg.tree_util.tree_leaves(step(params, x, y))]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def _pairs(flat):
    return [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]
