"""The jaxpr passes of fungrad.ir.passes: each rewrite is checked structurally (the equation
disappears, or stays when it is not an exact identity) and against the interpreter
(``core.eval_jaxpr`` of the rewritten program equals that of the original bit for bit)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import core, lax
from fungrad.ir import passes

F32 = np.float32


# -- helpers -------------------------------------------------------------------------------------


def prims(closed_or_jaxpr, recursive: bool = True) -> list[str]:
    """Names of the primitives of a jaxpr's equations (and of its sub-jaxprs')."""
    j = getattr(closed_or_jaxpr, "jaxpr", closed_or_jaxpr)
    names = []
    for e in j.eqns:
        names.append(e.primitive.name)
        if recursive:
            for v in e.params.values():
                subs = v if type(v) is tuple else (v,)
                for s in subs:
                    if isinstance(s, (core.ClosedJaxpr, core.Jaxpr)):
                        names += prims(s)
    return names


def run(closed: core.ClosedJaxpr, *args) -> list:
    return core.eval_jaxpr(closed.jaxpr, closed.consts, *[fg.Array(np.asarray(a)) for a in args])


def assert_same_bits(got, want):
    """Equal shape, dtype, weak type, NaN positions and the bits of every other element."""
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
    assert got.weak_type == want.weak_type
    if g.dtype.kind in "fc":
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        keep = ~np.isnan(g)
        g, w = g[keep], w[keep]
    assert g.tobytes() == w.tobytes(), (g, w)


def check_same_program(before: core.ClosedJaxpr, after: core.ClosedJaxpr, *args):
    core.typecheck_jaxpr(after.jaxpr)
    assert after.in_avals == before.in_avals
    assert after.out_avals == before.out_avals
    for g, w in zip(run(after, *args), run(before, *args), strict=True):
        assert_same_bits(g, w)


def jaxpr_of(f, *args) -> core.ClosedJaxpr:
    return fg.make_jaxpr(f)(*args)


def jaxpr_of_raw(f, *avals) -> core.ClosedJaxpr:
    """Trace without make_jaxpr's CSE/DCE, so identities reach the pass under test."""
    from fungrad.transforms.staging import trace_to_jaxpr

    return trace_to_jaxpr(lambda *xs: [f(*xs)], list(avals))


def aval(shape, dtype=F32, weak=False):
    return core.ShapedArray(shape, np.dtype(dtype), weak)


def bind(name: str, *args, **params):
    """Apply a primitive directly (lax's wrappers skip some identities before binding)."""
    return core.primitives[name].bind(*args, **params)


def live_prims(closed: core.ClosedJaxpr) -> list[str]:
    """prims() after DCE (fold_constants and simplify_algebra leave dead equations to it)."""
    return prims(passes.dce(closed.jaxpr))


X = np.array([1.5, -0.0, 0.0, np.nan, np.inf, -np.inf, -2.0], F32)


# -- dce / cse / simplify (existing behaviour) ---------------------------------------------------


def test_dce_drops_unused_equations_transitively():
    closed = jaxpr_of_raw(lambda x: (fnp.exp(fnp.sin(x)), x * 2.0)[1], aval((3,)))
    assert prims(passes.dce(closed.jaxpr)) == ["mul"]


def test_cse_merges_repeated_equations_but_not_different_zero_literals():
    closed = jaxpr_of_raw(lambda x: (x + 0.0) * (x + 0.0) + (x + -0.0), aval((3,)))
    assert prims(passes.cse(closed.jaxpr)).count("add") == 3  # x+0.0 once, x+-0.0, the sum
    out = passes.simplify(closed)
    check_same_program(closed, out, X[:3])


def test_simplify_drops_unused_consts():
    c, d = np.arange(3, dtype=F32), np.ones(3, F32)
    closed = jaxpr_of_raw(lambda x: (x * c, x * d)[0], aval((3,)))
    assert len(closed.consts) == 2
    out = passes.simplify(closed)
    assert len(out.consts) == 1 and out.consts[0] is closed.consts[0]


# -- inline_calls --------------------------------------------------------------------------------

C6 = np.linspace(-1, 1, 6, dtype=F32)


@fg.custom_jvp
def _cj(x):
    return fnp.sin(x) * C6


_cj.defjvp(lambda p, t: (_cj(*p), t[0]))


@fg.custom_vjp
def _cv(x):
    return x * 2.0 + C6


_cv.defvjp(lambda x: (_cv(x), ()), lambda r, ct: (ct,))


def _calls(x):
    y = fg.checkpoint(lambda z: fnp.cos(z) + C6 * 3.0)(x)
    return _cj(y) + _cv(y) + _cj(x)


def test_inline_calls_replaces_checkpoint_custom_jvp_and_custom_vjp_by_their_bodies():
    closed = jaxpr_of(_calls, C6)
    assert {"checkpoint", "custom_jvp_call", "custom_vjp_call"} <= set(prims(closed))
    out = passes.inline_calls(closed)
    names = prims(out)
    assert not {"checkpoint", "custom_jvp_call", "custom_vjp_call"} & set(names)
    assert names.count("sin") == 2  # _cj inlined twice, with fresh variables
    assert len(out.consts) >= 2  # the bodies' consts became constvars
    check_same_program(closed, out, X[:6])


def test_inline_calls_leaves_a_program_without_calls_unchanged():
    closed = jaxpr_of(lambda x: fnp.sin(x) * 2.0, X)
    assert passes.inline_calls(closed) is closed


def test_inline_calls_inlines_jit_recursively_with_body_consts():
    jit = fg.jit
    c = np.array([3.0, -1.0, 0.5], F32)
    inner = jit(lambda x: fnp.exp(x) * c)
    outer = jit(lambda x: inner(x) + inner(x * 2.0))
    closed = jaxpr_of(lambda x: outer(x) - 1.0, X[:3])
    assert "jit" in prims(closed)
    out = passes.inline_calls(closed)
    assert "jit" not in prims(out)
    assert prims(out).count("exp") == 2
    assert any(np.array_equal(np.asarray(k), c) for k in out.consts)
    core.typecheck_jaxpr(out.jaxpr)
    # The reference is numpy: evaluating ``closed`` itself would compile the jit calls.
    x = np.array([0.5, -1.0, 2.0], F32)
    (got,) = run(out, x)
    np.testing.assert_allclose(np.asarray(got), np.exp(x) * c + np.exp(x * 2) * c - 1, rtol=1e-6)


def test_inline_calls_inlines_jit_inside_a_scan_body():
    step = fg.jit(lambda c, x: (c * 2.0 + x, fnp.tanh(x)))
    closed = jaxpr_of(lambda xs: lax.scan(step, 0.5, xs), X[:4])
    out = passes.inline_calls(closed)
    assert "jit" in prims(closed) and "jit" not in prims(out)
    (body,) = [e.params["jaxpr"] for e in out.jaxpr.eqns if e.primitive.name == "scan"]
    core.typecheck_jaxpr(body.jaxpr)
    xs = np.array([1.0, -2.0, 0.25, 3.0], F32)
    carry, ys = run(out, xs)
    want = F32(0.5)
    for x in xs:
        want = F32(want * F32(2.0) + x)
    np.testing.assert_allclose(np.asarray(carry), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ys), np.tanh(xs), rtol=1e-6)


def _checkpoint_eqn_program(body: core.ClosedJaxpr, out_aval: core.ShapedArray):
    """``{ lambda ; x. let y = checkpoint[jaxpr=body] x in (y,) }`` with ``y`` declared
    ``out_aval`` (hand-built: tracing always declares the body's avals)."""
    x, y = core.Var(body.in_avals[0]), core.Var(out_aval)
    eqn = core.JaxprEqn(
        core.primitives["checkpoint"],
        [x],
        dict(
            jaxpr=body,
            prevent_cse=True,
            differentiated=False,
            policy=fg.checkpoint_policies.nothing_saveable,
        ),
        [y],
    )
    return core.ClosedJaxpr(core.Jaxpr([], [x], [eqn], [y]), [])


def test_inline_calls_converts_a_weak_body_result_to_the_declared_strong_type():
    a = core.Var(aval((), F32, weak=True))
    body = core.ClosedJaxpr(core.Jaxpr([], [a], [], [a]), [])
    out = passes.inline_calls(_checkpoint_eqn_program(body, aval((), F32)))
    assert prims(out) == ["convert_element_type"]
    assert out.out_avals == [aval((), F32)]
    core.typecheck_jaxpr(out.jaxpr)


def test_inline_calls_rejects_a_call_whose_body_has_another_type():
    a = core.Var(aval((3,)))
    body = core.ClosedJaxpr(core.Jaxpr([], [a], [], [a]), [])
    with pytest.raises(
        core.JaxprTypeError,
        match="checkpoint declares an output of type "
        r"i32\[3\] but its body returns f32\[3\]",
    ):
        passes.inline_calls(_checkpoint_eqn_program(body, aval((3,), np.int32)))


def test_inline_calls_inside_control_flow_bodies_keeps_them_closed():
    def body(carry, x):
        return carry + _cj(x), fg.checkpoint(fnp.tanh)(x) * C6

    closed = jaxpr_of(lambda xs: lax.scan(body, fnp.zeros(6), xs), np.stack([C6, -C6, X[:6]]))
    out = passes.inline_calls(closed)
    (scan_eqn,) = [e for e in out.jaxpr.eqns if e.primitive.name == "scan"]
    sub = scan_eqn.params["jaxpr"]
    assert type(sub) is core.ClosedJaxpr
    assert not {"custom_jvp_call", "checkpoint"} & set(prims(sub))
    assert len(sub.consts) >= 1  # C6 from _cj's body is a const of the scan body now
    core.typecheck_jaxpr(sub.jaxpr)
    check_same_program(closed, out, np.stack([C6, -C6, X[:6]]))


def test_inline_calls_in_cond_branches_and_while_bodies():
    def f(p, x):
        y = lax.cond(p, lambda v: _cj(v), lambda v: _cv(v), x)
        return lax.while_loop(
            lambda c: fnp.sum(c) < 100.0, lambda c: fg.checkpoint(lambda z: z * 2.0 + 1.0)(c), y
        )

    closed = jaxpr_of(f, True, np.abs(C6))
    out = passes.inline_calls(closed)
    assert not {"custom_jvp_call", "custom_vjp_call", "checkpoint"} & set(prims(out))
    assert {"cond", "while"} <= set(prims(out))
    for p in (True, False):
        check_same_program(closed, out, np.bool_(p), np.abs(C6))


# -- fold_constants -------------------------------------------------------------------------------


def test_fold_constants_folds_scalar_chains_to_a_literal_keeping_weak_type():
    closed = jaxpr_of_raw(
        lambda x: x + lax.sqrt(lax.convert_element_type(2.0, F32)) * 3.0, aval((), F32, weak=True)
    )
    out = passes.fold_constants(closed)
    assert live_prims(out) == ["convert_element_type", "add"]  # x + <strong> makes x strong
    (lit,) = [v for v in out.jaxpr.eqns[-1].invars if type(v) is core.Literal]
    assert lit.aval == core.ShapedArray((), np.dtype(F32), False)  # convert made it strong
    assert np.asarray(lit.val).dtype == F32
    check_same_program(closed, out, F32(1.25))


def test_fold_constants_keeps_integer_and_bool_dtypes():
    closed = jaxpr_of_raw(
        lambda x: (
            x
            + lax.convert_element_type(lax.gt(np.int8(7), np.int8(3)), np.int8)
            * np.int8(100)
            * np.int8(2)
        ),
        aval((4,), np.int8),
    )
    out = passes.fold_constants(closed)
    assert live_prims(out) == ["add"]
    (lit,) = [v for v in out.jaxpr.eqns[-1].invars if type(v) is core.Literal]
    assert lit.aval.dtype == np.int8 and int(lit.val) == -56  # 200 wraps in int8
    check_same_program(closed, out, np.arange(4, dtype=np.int8))


def test_fold_constants_small_arrays_become_consts_large_ones_stay_computations():
    small = np.array([1.0, -0.0, np.nan, 4.0], F32)
    big = np.arange(65, dtype=F32)
    closed = jaxpr_of_raw(lambda x: (x + fnp.exp(small) * 2.0, fnp.exp(big))[0] + x, aval((4,)))
    out = passes.fold_constants(closed)
    assert live_prims(out) == ["add", "add"]
    assert any(np.asarray(c).shape == (4,) and np.isnan(np.asarray(c)[2]) for c in out.consts)
    check_same_program(closed, out, X[:4])

    closed_big = jaxpr_of_raw(lambda x: x + fnp.exp(big), aval((65,)))
    assert "exp" in prims(passes.fold_constants(closed_big))


def test_fold_constants_propagates_exact_ops_on_broadcast_scalars_of_any_size():
    closed = jaxpr_of_raw(lambda x: x + (fnp.full((1000,), -0.0) * 3.0 - 1.0), aval((1000,)))
    out = passes.fold_constants(closed)
    assert live_prims(out) == ["broadcast_in_dim", "add"]
    (lit,) = passes.dce(out.jaxpr).eqns[0].invars
    assert float(lit.val) == -1.0 and lit.aval.weak_type is False
    check_same_program(closed, out, np.linspace(-3, 3, 1000, dtype=F32))


def test_fold_constants_leaves_transcendentals_of_large_broadcasts_alone():
    closed = jaxpr_of_raw(lambda x: x + fnp.exp(fnp.full((1000,), 0.5)), aval((1000,)))
    assert "exp" in prims(passes.fold_constants(closed))


def test_fold_constants_uniform_small_result_becomes_a_broadcast_literal():
    closed = jaxpr_of_raw(lambda x: x * lax.reduce_sum(fnp.ones((3, 4)) * 2.0, (1,)), aval((3,)))
    out = passes.fold_constants(closed)
    assert live_prims(out) == ["broadcast_in_dim", "mul"]
    assert float(passes.dce(out.jaxpr).eqns[0].invars[0].val) == 8.0
    check_same_program(closed, out, X[:3])


def test_fold_constants_never_folds_control_flow_or_iota():
    closed = jaxpr_of_raw(
        lambda x: x + lax.cond(True, lambda: 1.0, lambda: 2.0) + lax.iota(np.int32, 3).astype(F32),
        aval((3,)),
    )
    out = passes.fold_constants(closed)
    assert {"cond", "iota"} <= set(prims(out, recursive=False))
    check_same_program(closed, out, X[:3])


def test_fold_constants_folds_inside_sub_jaxprs():
    closed = jaxpr_of_raw(
        lambda xs: lax.scan(lambda c, x: (c + x * (lax.sqrt(4.0) - 1.0), x), 0.0, xs)[0], aval((5,))
    )
    out = passes.fold_constants(closed)
    assert "sqrt" in prims(closed) and "sqrt" not in prims(out)
    check_same_program(closed, out, np.linspace(0, 1, 5, dtype=F32))


# -- simplify_algebra: identities ------------------------------------------------------------------

IDENTITIES = [
    ("x + -0.0", lambda x: x + -0.0, "add"),
    ("-0.0 + x", lambda x: -0.0 + x, "add"),
    ("x - 0.0", lambda x: x - 0.0, "sub"),
    ("x * 1", lambda x: x * 1.0, "mul"),
    ("1 * x", lambda x: 1.0 * x, "mul"),
    ("x * ones", lambda x: x * fnp.ones(x.shape), "mul"),
    ("x * ones const", lambda x: x * np.ones(x.shape, F32), "mul"),
    ("x / 1", lambda x: x / 1.0, "div"),
    ("neg neg", lambda x: lax.neg(lax.neg(x)), "neg"),
    ("stop_gradient", lax.stop_gradient, "stop_gradient"),
    (
        "convert same",
        lambda x: bind("convert_element_type", x, new_dtype=np.dtype(F32), weak_type=False),
        "convert_element_type",
    ),
    ("reshape same", lambda x: bind("reshape", x, new_sizes=(7,), dimensions=None), "reshape"),
    ("reshape undone", lambda x: x.reshape(7, 1).reshape(1, 7, 1).reshape(7), "reshape"),
    ("expand + squeeze", lambda x: lax.squeeze(x[None], (0,)), "squeeze"),
    ("transpose twice", lambda x: x.reshape(7, 1).T.T.reshape(7), "transpose"),
    (
        "slice all",
        lambda x: bind("slice", x, start_indices=(0,), limit_indices=(7,), strides=None),
        "slice",
    ),
    ("dynamic_slice all", lambda x: lax.dynamic_slice(x, (3,), (7,)), "dynamic_slice"),
    ("rev size 1", lambda x: lax.rev(x.reshape(7, 1), (1,)).reshape(7), "rev"),
    ("pad nothing", lambda x: lax.pad(x, 5.0, ((0, 0, 0),)), "pad"),
    ("concatenate one", lambda x: bind("concatenate", x, dimension=0), "concatenate"),
    (
        "concatenate of covering slices",
        lambda x: lax.concatenate([x[:2], x[2:3], x[3:]], 0),
        "concatenate",
    ),
    ("reduce_max no axes", lambda x: bind("reduce_max", x, axes=()), "reduce_max"),
    ("reduce_prod no axes", lambda x: bind("reduce_prod", x, axes=()), "reduce_prod"),
    ("integer_pow 1", lambda x: lax.integer_pow(x, 1), "integer_pow"),
    ("integer_pow 2", lambda x: lax.integer_pow(x, 2), "integer_pow"),
    ("select_n literal", lambda x: lax.select_n(True, x * 2.0, x), "select_n"),
    ("select_n splat", lambda x: lax.select_n(fnp.full(x.shape, False), x, x * 2.0), "select_n"),
    ("select_n same cases", lambda x: lax.select_n(x > 0, x, x), "select_n"),
    ("max x x", lambda x: lax.max(x, x), "max"),
    (
        "dynamic_update_slice all",
        lambda x: lax.dynamic_update_slice(x * 2.0, x, (1,)),
        "dynamic_update_slice",
    ),
    ("cond constant index", lambda x: lax.switch(1, [fnp.sin, fnp.cos], x), "cond"),
]


@pytest.mark.parametrize("name,f,prim", IDENTITIES, ids=[i[0] for i in IDENTITIES])
def test_simplify_algebra_removes_identity(name, f, prim):
    closed = jaxpr_of_raw(f, aval((7,)))
    assert prim in prims(closed)
    out = passes.optimize(closed)
    assert prim not in prims(out), str(out)
    check_same_program(closed, out, X)


def test_simplify_algebra_alone_removes_identities_in_one_pass():
    closed = jaxpr_of_raw(lambda x: lax.neg(lax.neg(x * 1.0 - 0.0)) / 1.0 + -0.0, aval((7,)))
    out = passes.simplify_algebra(closed)
    assert prims(out) == ["neg", "neg"] or not prims(passes.dce(out.jaxpr))
    assert out.jaxpr.outvars[0] is closed.jaxpr.invars[0]
    check_same_program(closed, out, X)


def test_simplify_algebra_integer_identities():
    closed = jaxpr_of_raw(
        lambda i: bind("reduce_sum", lax.div((i + 0) * 1 - 0, 1) & -1 | 0 ^ 0, axes=()),
        aval((5,), np.int32),
    )
    out = passes.optimize(closed)
    assert out.jaxpr.outvars[0] is out.jaxpr.invars[0]
    check_same_program(closed, out, np.array([0, -1, 7, 2**31 - 1, -(2**31)], np.int32))


def test_simplify_algebra_bool_identities():
    closed = jaxpr_of_raw(lambda b: lax.not_(lax.not_(b & True | False)), aval((3,), bool))
    out = passes.optimize(closed)
    assert not prims(out)
    check_same_program(closed, out, np.array([True, False, True]))


def test_simplify_algebra_composes_transposes_and_reshapes():
    closed = jaxpr_of_raw(
        lambda x: (
            x.reshape(2, 3, 4).transpose(1, 0, 2).transpose(2, 1, 0).reshape(24).reshape(6, 4)
        ),
        aval((24,)),
    )
    out = passes.optimize(closed)
    assert prims(out) == ["reshape", "transpose", "reshape"]
    check_same_program(closed, out, np.arange(24, dtype=F32))


# -- simplify_algebra: non-identities stay ---------------------------------------------------------

NON_IDENTITIES = [
    ("x * 0", lambda x: x * 0.0, "mul"),
    ("x + 0.0", lambda x: x + 0.0, "add"),
    ("x + zeros", lambda x: x + fnp.zeros(x.shape), "add"),
    ("x - -0.0", lambda x: x - -0.0, "sub"),
    ("x - x", lambda x: x - x, "sub"),
    ("x / x", lambda x: x / x, "div"),
    ("x * -1", lambda x: x * -1.0, "mul"),
    ("integer_pow 3", lambda x: lax.integer_pow(x, 3), "integer_pow"),
    ("transpose", lambda x: x.reshape(7, 1).T, "transpose"),
    ("rev", lambda x: lax.rev(x, (0,)), "rev"),
    ("pad", lambda x: lax.pad(x, 5.0, ((1, -1, 0),)), "pad"),
    ("select_n", lambda x: lax.select_n(x > 0, x, x * 2.0), "select_n"),
    (
        "concatenate of slices with a gap",
        lambda x: lax.concatenate([x[:2], x[3:]], 0),
        "concatenate",
    ),
    (
        "concatenate of reordered slices",
        lambda x: lax.concatenate([x[3:], x[:3]], 0),
        "concatenate",
    ),
    (
        "concatenate of strided slices",
        lambda x: lax.concatenate([x[0:7:2], x[1:7:2]], 0)[:7],
        "concatenate",
    ),
    ("reshape with dimensions", lambda x: lax.reshape(x.reshape(7, 1), (1, 7), (1, 0)), "reshape"),
]


@pytest.mark.parametrize("name,f,prim", NON_IDENTITIES, ids=[i[0] for i in NON_IDENTITIES])
def test_simplify_algebra_keeps_non_identity(name, f, prim):
    closed = jaxpr_of_raw(f, aval((7,)))
    out = passes.optimize(closed)
    assert prim in prims(out)
    check_same_program(closed, out, X)


def test_simplify_algebra_keeps_identity_that_would_change_the_aval():
    # A weak x times a strong 1.0 is strong: replacing the product by x would make it weak.
    x = core.Var(aval((3,), F32, weak=True))
    one = core.Literal(F32(1.0), aval(()))
    y = core.Var(aval((3,)))
    closed = core.ClosedJaxpr(
        core.Jaxpr([], [x], [core.JaxprEqn(core.primitives["mul"], [x, one], {}, [y])], [y]), []
    )
    core.typecheck_jaxpr(closed.jaxpr)
    out = passes.optimize(closed)
    assert "mul" in prims(out)
    check_same_program(closed, out, X[:3])
    # A 0-d x plus a broadcast -0.0 has the broadcast's shape.
    closed = jaxpr_of_raw(lambda x: x + fnp.full((3,), -0.0), aval(()))
    out = passes.optimize(closed)
    assert "add" in prims(out)
    check_same_program(closed, out, F32(-0.0))
    # Converting to the same dtype but strong is not the identity on a weak value.
    closed = jaxpr_of_raw(lambda x: lax.convert_element_type(x, F32), aval((3,), F32, True))
    assert "convert_element_type" in prims(passes.optimize(closed))
    # A float sum over no axes: fungrad's impl turns -0.0 into 0.0 (see _reduce_rule).
    closed = jaxpr_of_raw(lambda x: bind("reduce_sum", x, axes=()), aval((7,)))
    out = passes.optimize(closed)
    assert "reduce_sum" in prims(out)
    check_same_program(closed, out, X)


def test_simplify_algebra_rewrites_inside_control_flow_bodies():
    closed = jaxpr_of_raw(
        lambda x: lax.while_loop(lambda c: c[0] < 10.0, lambda c: (c * 1.0 + 1.0) - 0.0, x),
        aval((2,)),
    )
    out = passes.optimize(closed)
    (w,) = out.jaxpr.eqns
    assert prims(w.params["body_jaxpr"]) == ["add"]
    check_same_program(closed, out, np.array([0.5, -0.0], F32))


# -- optimize --------------------------------------------------------------------------------------


def test_optimize_reaches_a_fixed_point_and_is_idempotent():
    closed = jaxpr_of_raw(
        lambda x: fnp.sin(x * (fnp.ones(7) * lax.sqrt(1.0))) + 0.0 * 2.0 - 0.0, aval((7,))
    )
    out = passes.optimize(closed)
    assert prims(out) == ["sin", "add"]  # sin(x) + 0.0: the 0.0 * 2.0 folded, the rest gone
    again = passes.optimize(out)
    assert prims(again) == prims(out)
    check_same_program(closed, out, X)


def test_optimize_inlines_then_simplifies_across_the_call_boundary():
    closed = jaxpr_of(lambda x: fg.checkpoint(lambda y: y * 1.0)(x) + -0.0, X)
    out = passes.optimize(closed)
    assert not prims(out) and out.jaxpr.outvars[0] is out.jaxpr.invars[0]
    assert not out.consts
    check_same_program(closed, out, X)


def test_optimize_folds_and_drops_consts_inside_sub_jaxprs():
    c = np.arange(4, dtype=F32)
    closed = jaxpr_of(
        lambda xs: lax.scan(lambda s, x: (s + x * fnp.sum(fnp.asarray(c) * 0.0 + 1.0), x), 0.0, xs)[
            0
        ],
        c,
    )
    (body,) = [e.params["jaxpr"] for e in closed.jaxpr.eqns if e.primitive.name == "scan"]
    assert len(body.consts) == 1
    out = passes.optimize(closed)
    (body,) = [e.params["jaxpr"] for e in out.jaxpr.eqns if e.primitive.name == "scan"]
    assert body.consts == [] and prims(body) == ["mul", "add"]  # x * 4.0 + s
    check_same_program(closed, out, c)


def test_optimize_keeps_a_shared_body_shared_so_cse_merges_its_calls():
    closed = jaxpr_of_raw(
        lambda i, x: lax.switch(i, [lambda v: v * 1.0 + 2.0, fnp.sin], x),
        aval((), np.int32),
        aval((3,)),
    )
    (cond,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "cond"]
    twin = core.JaxprEqn(cond.primitive, cond.invars, cond.params, [core.Var(aval((3,)))])
    j = closed.jaxpr
    closed = core.ClosedJaxpr(
        core.Jaxpr(j.constvars, j.invars, j.eqns + [twin], j.outvars + twin.outvars), closed.consts
    )
    out = passes.optimize(closed)
    assert prims(out, recursive=False).count("cond") == 1
    assert "mul" not in prims(out)  # the branch was simplified (once, for both equations)
    for i in (0, 1):
        check_same_program(closed, out, np.int32(i), X[:3])


def test_optimize_merges_and_drops_equations_inside_bodies():
    closed = jaxpr_of_raw(
        lambda x: lax.fori_loop(0, 3, lambda i, s: (fnp.sin(s) + fnp.sin(s), fnp.exp(s))[0], x),
        aval((3,)),
    )
    out = passes.optimize(closed)
    assert prims(out).count("sin") == 1 and "exp" not in prims(out)
    check_same_program(closed, out, X[:3])


def test_optimize_of_a_grad_program_equals_the_original():
    def loss(w, x):
        return fnp.sum(fnp.tanh(x @ w) * 1.0 + 0.0)

    w = np.linspace(-1, 1, 12, dtype=F32).reshape(4, 3)
    x = np.linspace(-2, 2, 8, dtype=F32).reshape(2, 4)
    closed = jaxpr_of(fg.grad(loss), w, x)
    out = passes.optimize(closed)
    assert len(out.jaxpr.eqns) <= len(closed.jaxpr.eqns)
    check_same_program(closed, out, w, x)


# -- optimize on random programs (hypothesis) ------------------------------------------------------

SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.0, 0.5, np.nan, np.inf, -np.inf]


def _const_operand(kind: int, value: float, shape):
    """A constant in one of the forms programs hold them: a Python scalar (weak Literal), a
    strong 0-d Literal, a broadcast of a Literal, a const array."""
    if kind == 0:
        return value
    if kind == 1:
        return F32(value)
    if kind == 2:
        return fnp.full(shape, value, F32)
    return np.full(shape, value, F32)


@fg.custom_jvp
def _cj6(x):
    return fnp.where(fnp.isnan(x), 1.0, x) * 1.0


_cj6.defjvp(lambda p, t: (_cj6(*p), t[0]))


def _program(ops):
    """A function of (x, y) (float32 arrays of one shape) and i (int32, same shape) applying a
    chain of elementwise / shape / reduction ops to a growing list of values."""

    def f(x, y, i):
        vals = [x, y]
        ints = [i]
        for op, a, b, kind, ci in ops:
            u, v = vals[a % len(vals)], vals[b % len(vals)]
            c = _const_operand(kind, SPECIAL[ci % len(SPECIAL)], u.shape)
            shape = u.shape
            if op == 0:
                r = u + c
            elif op == 1:
                r = u - c
            elif op == 2:
                r = u * c
            elif op == 3:
                r = u / c
            elif op == 4:
                r = c + u * v
            elif op == 5:
                r = lax.neg(lax.neg(u)) - v
            elif op == 6:
                r = fnp.where(ci % 2 == 0, u, v)
            elif op == 7:
                r = lax.integer_pow(u, ci % 4)
            elif op == 8:
                r = fnp.reshape(fnp.reshape(u, (-1,)), shape)
            elif op == 9:
                r = fnp.transpose(fnp.transpose(u))
            elif op == 10:
                r = fnp.squeeze(fnp.expand_dims(u, 0), 0)
            elif op == 11:
                r = lax.reduce_sum(u, ()) + fnp.sum(v, keepdims=True)
            elif op == 12:
                r = fnp.maximum(u, u) + lax.stop_gradient(v)
            elif op == 13:
                r = lax.convert_element_type(u, F32) * lax.sqrt(fnp.full((), 4.0, F32))
            elif op == 14:
                r = lax.select_n(u > c, u, v)
            elif op == 15:
                r = lax.cond(ci % 2 == 0, lambda p, q: p * 1.0, lambda p, q: q - 0.0, u, v)
            elif op == 16:
                k = ints[a % len(ints)]
                k2 = (k + 0) * 1 - int(ci) // 1
                ints.append(k2)
                r = u + lax.convert_element_type(k2 & -1, F32)
            elif op == 17:
                r = fnp.exp(c) * u + fnp.sin(fnp.zeros(shape)) - (u * 0.0)
            elif op == 18:  # a scan body with identities and a constant inside
                r = lax.scan(lambda s, _, c=c: (s * 1.0 + (c - 0.0), None), u, None, length=2)[0]
            elif op == 19:  # calls to inline, nested
                r = fg.checkpoint(lambda p, q: _cj6(p * 1.0) - q)(u, v)
            else:  # a while loop with a constant trip count
                r = lax.fori_loop(0, ci % 3, lambda k, s: lax.neg(lax.neg(s)) + -0.0, u)
            vals.append(r)
        return vals[-3:] + ints[-1:]

    return f


program_ops = st.lists(
    st.tuples(
        st.integers(0, 20),
        st.integers(0, 30),
        st.integers(0, 30),
        st.integers(0, 3),
        st.integers(0, 30),
    ),
    min_size=1,
    max_size=12,
)
special_f32 = st.one_of(
    st.sampled_from([0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, -1.0]), st.floats(width=32)
)


@given(
    ops=program_ops,
    shape=hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3),
    data=st.data(),
)
def test_optimize_preserves_random_programs_bit_for_bit(ops, shape, data):
    x = data.draw(hnp.arrays(F32, shape, elements=special_f32))
    y = data.draw(hnp.arrays(F32, shape, elements=special_f32))
    i = data.draw(hnp.arrays(np.int32, shape, elements=st.integers(-(2**31), 2**31 - 1)))
    f = _program(ops)
    from fungrad.transforms.staging import trace_to_jaxpr

    closed = trace_to_jaxpr(f, [aval(shape), aval(shape), aval(shape, np.int32)])
    out = passes.optimize(closed)
    assert len(prims(out)) <= len(prims(closed))  # inlining moves equations, never adds any
    check_same_program(closed, out, x, y, i)
