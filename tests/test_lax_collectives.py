"""Collectives over named vmap axes (fungrad.lax.parallel): values against numpy formulas of
JAX's vmap semantics, derivatives with check_grads and against the known transposes, jit
against eager, nested names, and JAX's errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.testing import check_grads


def vm(f, name="i", **kw):
    return fg.vmap(f, axis_name=name, **kw)


X = np.arange(1.0, 5.0)  # 4 examples
M = (np.arange(16.0).reshape(4, 4) / 7).astype(np.float32)
rng = np.random.default_rng(0)


# -- values -------------------------------------------------------------------------------


def test_reductions_values():
    np.testing.assert_allclose(
        vm(lambda v: lax.psum(v, "i"))(M), np.tile(M.sum(0), (4, 1)), rtol=1e-6
    )
    np.testing.assert_allclose(
        vm(lambda v: lax.pmean(v, "i"))(M), np.tile(M.mean(0), (4, 1)), rtol=1e-6
    )
    np.testing.assert_array_equal(vm(lambda v: lax.pmax(v, "i"))(M), np.tile(M.max(0), (4, 1)))
    np.testing.assert_array_equal(vm(lambda v: lax.pmin(v, "i"))(M), np.tile(M.min(0), (4, 1)))
    # BatchNorm-style centring
    np.testing.assert_allclose(
        vm(lambda v: v - lax.pmean(v, "i"))(M), M - M.mean(0), rtol=1e-6, atol=1e-6
    )


def test_psum_pytree_unbatched_bool_and_groups():
    out = vm(lambda v: lax.psum({"a": v, "b": (2 * v, 1.0)}, "i"))(X)
    np.testing.assert_allclose(out["a"], [10] * 4)
    np.testing.assert_allclose(out["b"][0], [20] * 4)
    np.testing.assert_allclose(out["b"][1], [4] * 4)  # unbatched: value times axis size
    ints = vm(lambda v: lax.psum(1, "i"))(X)
    assert ints.dtype == np.int32 and list(np.asarray(ints)) == [4] * 4
    assert vm(lambda v: lax.psum(v > 2, "i"))(X).dtype == np.int32
    assert vm(lambda v: lax.pmean(fnp.int32(3), "i"))(X).dtype == np.float32
    g = vm(lambda v: lax.psum(v, "i", axis_index_groups=[[0, 3], [1, 2]]))(X)
    np.testing.assert_allclose(g, [5, 5, 5, 5])
    g = vm(lambda v: lax.pmax(v, "i", axis_index_groups=[[0, 1], [2, 3]]))(X)
    np.testing.assert_allclose(g, [2, 2, 4, 4])


def test_all_gather_values():
    np.testing.assert_array_equal(vm(lambda v: lax.all_gather(v, "i"))(X), np.tile(X, (4, 1)))
    A = np.arange(24.0).reshape(4, 2, 3)
    for axis in range(3):
        got = vm(lambda v, a=axis: lax.all_gather(v, "i", axis=a))(A)
        np.testing.assert_array_equal(
            got, np.broadcast_to(np.moveaxis(A, 0, axis), (4,) + np.moveaxis(A, 0, axis).shape)
        )
    got = vm(lambda v: lax.all_gather(v, "i", axis=1, tiled=True))(A)
    np.testing.assert_array_equal(got[2], np.concatenate(list(A), axis=1))
    # an unbatched operand is stacked n times
    np.testing.assert_array_equal(
        vm(lambda v: lax.all_gather(fnp.ones(2), "i"))(X), np.ones((4, 4, 2))
    )


def test_psum_scatter_values():
    A = rng.standard_normal((4, 4, 3)).astype(np.float32)
    s = A.sum(0)
    np.testing.assert_allclose(vm(lambda v: lax.psum_scatter(v, "i"))(A), s, rtol=1e-5)
    got = vm(lambda v: lax.psum_scatter(v, "i", scatter_dimension=1, tiled=True))(
        rng.standard_normal((4, 3, 8)).astype(np.float32)
    )
    assert got.shape == (4, 3, 2)
    B = rng.standard_normal((4, 3, 8)).astype(np.float32)
    got = vm(lambda v: lax.psum_scatter(v, "i", scatter_dimension=1, tiled=True))(B)
    want = np.stack([B.sum(0)[:, 2 * i : 2 * i + 2] for i in range(4)])
    np.testing.assert_allclose(got, want, rtol=1e-5)


def _all_to_all_ref(A, sa, ca, tiled):
    n = A.shape[0]
    if not tiled:
        return np.stack(
            [np.stack([np.take(A[k], j, axis=sa) for k in range(n)], axis=ca) for j in range(n)]
        )
    m = A.shape[1 + sa] // n
    return np.stack(
        [
            np.concatenate(
                [np.take(A[k], range(j * m, (j + 1) * m), axis=sa) for k in range(n)], axis=ca
            )
            for j in range(n)
        ]
    )


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.integers(0, 2), st.integers(0, 2), st.booleans(), st.integers(1, 3))
def test_all_to_all_matches_reference(n, sa, ca, tiled, m):
    shape = [2, 3, 2]
    shape[sa] = n * m if tiled else n
    A = np.arange(n * np.prod(shape), dtype=np.float32).reshape(n, *shape)
    got = vm(lambda v: lax.all_to_all(v, "i", sa, ca, tiled=tiled))(A)
    np.testing.assert_array_equal(got, _all_to_all_ref(A, sa, ca, tiled))


def test_ppermute_pshuffle_pbroadcast_pswapaxes():
    cyc = [(i, (i + 1) % 4) for i in range(4)]
    np.testing.assert_array_equal(vm(lambda v: lax.ppermute(v, "i", cyc))(X), np.roll(X, 1))
    # examples nobody sends to get zeros
    np.testing.assert_array_equal(
        vm(lambda v: lax.ppermute(v, "i", [(0, 2), (3, 1)]))(X), [0, 4, 1, 0]
    )
    np.testing.assert_array_equal(vm(lambda v: lax.pshuffle(v, "i", [3, 2, 1, 0]))(X), X[::-1])
    np.testing.assert_array_equal(vm(lambda v: lax.pbroadcast(v, "i", 2))(X), [3] * 4)
    np.testing.assert_array_equal(vm(lambda v: lax.pswapaxes(v, "i", 0))(M), M.T)


def test_axis_index_and_size():
    np.testing.assert_array_equal(vm(lambda v: lax.axis_index("i"))(X), [0, 1, 2, 3])
    sizes = []
    vm(lambda v: sizes.append(lax.axis_size("i")) or v)(X)
    assert sizes == [4] and type(sizes[0]) is int
    both = vm(vm(lambda v: lax.axis_index(("i", "j")), "j"), "i")(np.zeros((2, 3)))
    np.testing.assert_array_equal(both, np.arange(6).reshape(2, 3))
    assert (
        vm(vm(lambda v: lax.axis_size(("i", "j")) + 0 * v, "j"), "i")(np.zeros((2, 3))).tolist()
        == [[6.0] * 3] * 2
    )


# -- nesting, names, jit ---------------------------------------------------------------------


def test_nested_names():
    A = np.arange(6.0).reshape(2, 3)
    both = vm(vm(lambda v: lax.psum(v, ("i", "j")), "j"), "i")(A)
    np.testing.assert_allclose(both, np.full((2, 3), A.sum()))
    outer = vm(vm(lambda v: lax.psum(v, "i"), "j"), "i")(A)
    np.testing.assert_allclose(outer, np.tile(A.sum(0), (2, 1)))
    inner = vm(vm(lambda v: lax.pmean(v, "j"), "j"), "i")(A)
    np.testing.assert_allclose(inner, np.tile(A.mean(1, keepdims=True), (1, 3)))
    # an unnamed vmap in between treats the collective as data parallel
    mid = vm(fg.vmap(lambda v: lax.psum(v, "i")), "i")(A)
    np.testing.assert_allclose(mid, np.tile(A.sum(0), (2, 1)))
    # the same name nested: the inner axis shadows the outer one
    shadow = vm(vm(lambda v: lax.psum(v, "i"), "i"), "i")(A)
    np.testing.assert_allclose(shadow, np.tile(A.sum(1, keepdims=True), (1, 3)))


def test_jit_inside_and_outside():
    f = lambda v: v * lax.axis_index("i") - lax.pmean(v**2, "i")  # noqa: E731
    want = vm(f)(X)
    np.testing.assert_allclose(vm(fg.jit(f))(X), want, rtol=1e-6)
    np.testing.assert_allclose(fg.jit(vm(f))(X), want, rtol=1e-6)
    # a jitted function whose operands do not vary along the axis still sees its collective
    np.testing.assert_allclose(vm(lambda v: fg.jit(lambda: lax.psum(1.0, "i"))())(X), [4] * 4)
    np.testing.assert_allclose(vm(lambda v: fg.jit(lambda c: lax.psum(c, "i"))(2.0))(X), [8] * 4)
    # inside control flow
    g = lambda v: lax.cond(v > 2, lambda u: lax.psum(u, "i"), lambda u: u, v)  # noqa: E731
    np.testing.assert_allclose(vm(g)(X), [1, 2, 10, 10])
    h = lambda v: lax.fori_loop(0, 2, lambda k, c: c + lax.pmean(c, "i"), v)  # noqa: E731
    want_h = X.copy()
    for _ in range(2):
        want_h = want_h + want_h.mean()
    np.testing.assert_allclose(vm(h)(X), want_h, rtol=1e-6)


def test_sum_match_and_spmd_axis_name():
    out = fg.vmap(lambda v: v * 2, out_axes=None, sum_match=True)(X)
    np.testing.assert_allclose(out, 2 * X.sum())
    np.testing.assert_allclose(fg.vmap(lambda v: v + 1, spmd_axis_name="d")(X), X + 1)
    with pytest.raises(ValueError, match="out_axes None"):
        fg.vmap(lambda v: v * 2, out_axes=None)(X)


# -- derivatives -----------------------------------------------------------------------------


def test_grad_of_vmapped_collectives():
    A = rng.standard_normal((4, 3))
    fns = [
        lambda v: v - lax.pmean(v, "i"),
        lambda v: lax.psum(fnp.sin(v), "i") * v,
        lambda v: lax.all_gather(v, "i", axis=1) ** 2,
        lambda v: lax.psum_scatter(
            fnp.outer(v, v)[:, :1] * fnp.ones((3, 4)), "i", scatter_dimension=1
        ),
        lambda v: lax.all_to_all(fnp.outer(fnp.ones(4), v), "i", 0, 1),
        lambda v: lax.ppermute(fnp.cos(v), "i", [(0, 1), (1, 2), (2, 0)]),
        lambda v: lax.pmax(v**2, "i"),
    ]
    for f in fns:
        check_grads(vm(f), (A,), order=2, modes=("fwd", "rev"))


def test_vmap_of_grad_matches_jax_transposes():
    w = np.arange(4.0)
    # psum's transpose is psum: d/dv_i of psum(v^2) summed over the axis
    np.testing.assert_allclose(vm(fg.grad(lambda v: lax.psum(v**2, "i")))(X), 8 * X)
    # all_gather's transpose is psum_scatter
    got = vm(fg.grad(lambda v: (lax.all_gather(v, "i") ** 2 * w).sum()))(X)
    np.testing.assert_allclose(got, 4 * 2 * X * w)
    # ppermute's transpose is the inverse permutation
    cyc = [(i, (i + 1) % 4) for i in range(4)]
    got = vm(fg.grad(lambda v: (lax.ppermute(v, "i", cyc) ** 2 * w).sum()))(X)
    np.testing.assert_allclose(got, 2 * X * w.sum())
    # pmax differentiates as reduce_max: the winner gets everything
    np.testing.assert_allclose(vm(fg.grad(lambda v: lax.pmax(v**2, "i")))(X), [0, 0, 0, 4 * 8])
    # grad(vmap) and vmap(grad) agree where they should
    f = lambda v: fnp.sum(fnp.sin(v) * lax.pmean(v, "i"))  # noqa: E731
    per = vm(fg.grad(f))(M)
    whole = fg.grad(lambda m: vm(f)(m).sum() / 1.0)(M)
    assert per.shape == whole.shape


def test_jvp_under_vmap():
    t = np.ones(4)
    _, tan = fg.jvp(vm(lambda v: lax.psum(v**2, "i")), (X,), (t,))
    np.testing.assert_allclose(tan, [2 * X.sum()] * 4)


# -- errors ----------------------------------------------------------------------------------


def test_unbound_axis_name():
    with pytest.raises(NameError, match="unbound axis name: 'i'"):
        lax.psum(X, "i")
    with pytest.raises(NameError, match="unbound axis name"):
        fg.jit(lambda x: lax.all_gather(x, "i"))(X)
    with pytest.raises(NameError, match="'j'"):
        vm(lambda v: lax.pmean(v, "j"))(X)
    with pytest.raises(NameError):
        lax.axis_index("i")
    with pytest.raises(NameError):
        lax.axis_size("k")


def test_bad_arguments():
    with pytest.raises(ValueError, match="split_axis"):
        vm(lambda v: lax.all_to_all(v, "i", 0, 0))(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="repeated"):
        vm(lambda v: lax.ppermute(v, "i", [(0, 1), (2, 1)]))(X)
    with pytest.raises(ValueError, match="outside"):
        vm(lambda v: lax.ppermute(v, "i", [(0, 7)]))(X)
    with pytest.raises(ValueError, match="axis_index_groups"):
        vm(lambda v: lax.psum(v, "i", axis_index_groups=[[0, 1], [1, 2, 3]]))(X)
    with pytest.raises(ValueError, match="must be divisible by|must be equal to"):
        vm(lambda v: lax.psum_scatter(v, "i"))(np.zeros((4, 3)))
    with pytest.raises(TypeError, match="hashable"):
        fg.vmap(lambda v: v, axis_name=["i"])(X)


def test_jvp_inside_vmap():
    # each example's tangent is 1, and the all_gather gathers every example's tangent
    tan = vm(lambda v: fg.jvp(lambda u: lax.all_gather(u**2, "i").sum(), (v,), (1.0,))[1])(X)
    np.testing.assert_allclose(tan, [2 * X.sum()] * 4)
    tan = vm(lambda v: fg.jvp(lambda u: lax.pmin(u**2, "i"), (v,), (1.0,))[1])(X)
    np.testing.assert_allclose(tan, [2 * X[0]] * 4)


def test_compositions_with_higher_order_primitives():
    # scan / while bodies, checkpoint and custom_jvp see the axis (values as JAX gives)
    def body(c, x):
        c = c + lax.pmean(x * c, "i")
        return c, lax.psum(c, "i")

    c, ys = vm(lambda v: lax.scan(body, v, fnp.ones(3)))(X)
    want_c, want_ys = X.copy(), []
    for _ in range(3):
        want_c = want_c + want_c.mean()
        want_ys.append(want_c.sum())
    np.testing.assert_allclose(c, want_c, rtol=1e-6)
    np.testing.assert_allclose(ys, np.tile(want_ys, (4, 1)), rtol=1e-6)
    got = vm(
        lambda v: lax.while_loop(
            lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] + lax.psum(s[1], "i")), (0, v)
        )[1]
    )(X)
    want = X.copy()
    for _ in range(3):
        want = want + want.sum()
    np.testing.assert_allclose(got, want)
    got = vm(fg.checkpoint(lambda v: fnp.sin(v) - lax.pmean(fnp.sin(v), "i")))(X)
    np.testing.assert_allclose(got, np.sin(X) - np.sin(X).mean(), rtol=1e-5, atol=1e-6)

    @fg.custom_jvp
    def f(v):
        return lax.psum(v, "i") * v

    @f.defjvp
    def f_jvp(p, t):
        (v,), (tv,) = p, t
        return f(v), lax.psum(tv, "i") * v + lax.psum(v, "i") * tv

    np.testing.assert_allclose(vm(f)(X), X.sum() * X)
    # reverse mode: psum's transpose sums every example's cotangent
    np.testing.assert_allclose(vm(fg.grad(f))(X), [2 * X.sum()] * 4)
    np.testing.assert_allclose(fg.jit(vm(fg.grad(f)))(X), [2 * X.sum()] * 4)
    np.testing.assert_allclose(vm(fg.hessian(lambda v: lax.psum(v**3, "i")))(X), 24 * X)
    np.testing.assert_allclose(
        vm(lambda v: fg.jacfwd(lambda u: lax.all_gather(u**2, "i"))(v))(X), np.tile(2 * X, (4, 1))
    )


def test_same_jitted_function_under_two_names():
    g = fg.jit(lambda v: lax.psum(v, "i"))
    A = np.arange(16.0).reshape(4, 4)
    np.testing.assert_allclose(vm(g)(A[0]), [6.0] * 4)
    np.testing.assert_allclose(vm(vm(g, "k"), "i")(A), np.tile(A.sum(0), (4, 1)))
