"""Tracing, the jaxpr printer, the typechecker, eval_jaxpr and tracing errors."""

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import core, lax
from fungrad.core import Jaxpr, JaxprEqn, ShapedArray, Var


def test_issue_example_prints_like_jax():
    x = fnp.linspace(0.0, 1.0, 5)
    jaxpr = fg.make_jaxpr(lambda x: fnp.sum(fnp.sin(x) * 2.0))(x)
    assert str(jaxpr) == (
        "{ lambda ; a:f32[5]. let\n"
        "    b:f32[5] = sin a\n"
        "    c:f32[5] = mul b 2.0:f32[]\n"
        "    d:f32[] = reduce_sum[axes=(0,)] c\n"
        "  in (d,) }"
    )
    (out,) = jaxpr(x)
    np.testing.assert_allclose(np.asarray(out), np.sum(np.sin(np.asarray(x)) * 2), rtol=1e-6)


def test_printer_constvars_literals_and_many_names():
    c = fg.Array(np.arange(3, dtype=np.float32))

    def f(x, y):
        for _ in range(27):
            x = lax.add(x, c)
        return x, lax.mul(y, 3)

    jaxpr = fg.make_jaxpr(f)(np.zeros(3, np.float32), np.int32(1))
    text = str(jaxpr)
    assert text.startswith("{ lambda a:f32[3]; b:f32[3] c:i32[]. let\n")
    assert "= mul c 3:i32[]" in text
    assert "ba:f32[3] = add" in text  # names continue a..z, ba, bb, ...
    assert text.endswith("in (bd, be) }")
    assert len(jaxpr.jaxpr.constvars) == 1  # the closed-over array is deduplicated


def test_eval_jaxpr_matches_eager():
    def f(x):
        return lax.exp(lax.neg(lax.mul(x, x)))

    x = fg.Array(np.linspace(-2, 2, 7, dtype=np.float32))
    closed = fg.make_jaxpr(f)(x)
    (out,) = core.eval_jaxpr(closed.jaxpr, closed.consts, x)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(f(x)))


def test_make_jaxpr_pytrees_kwargs_static_and_shapes():
    def f(params, x, *, scale, n):
        return {"y": lax.mul(params["w"], x), "n": [lax.mul(x, n)]}

    params = {"w": np.ones(2, np.float32)}
    x = np.ones(2, np.float32)
    jaxpr, shapes = fg.make_jaxpr(f, return_shape=True)(params, x, scale=1.0, n=3.0)
    assert [str(a.str_short()) for a in jaxpr.in_avals] == ["f32[2]", "f32[2]", "f32[]", "f32[]"]
    assert shapes["y"] == ShapedArray((2,), np.float32)

    def g(x, n):
        return lax.mul(x, float(n))  # n is static: a Python value

    text = str(fg.make_jaxpr(g, static_argnums=1)(x, 4))
    assert "mul a 4.0:f32[]" in text


def test_python_scalar_args_are_weak_and_x64_canonicalised():
    jaxpr = fg.make_jaxpr(lambda x: lax.mul(x, 2.0))(3.0)
    assert jaxpr.in_avals == [ShapedArray((), np.float32, weak_type=True)]
    assert jaxpr.out_avals[0].weak_type
    jaxpr = fg.make_jaxpr(lambda x: x)(np.zeros(2, np.float64))
    assert jaxpr.in_avals[0].dtype == np.float32


def test_x64_keeps_float64(x64):
    jaxpr = fg.make_jaxpr(lambda x: lax.sin(x))(np.zeros(2, np.float64))
    assert str(jaxpr.jaxpr.invars[0].aval.str_short()) == "f64[2]"


def test_python_if_on_tracer_is_a_concretization_error():
    def f(x):
        if lax.reduce_sum(x, (0,)) > 0:
            return x
        return lax.neg(x)

    with pytest.raises(fg.ConcretizationTypeError, match="lax.cond") as info:
        fg.make_jaxpr(f)(np.ones(3, np.float32))
    assert isinstance(info.value, TypeError)
    assert "bool[]" in str(info.value)  # the traced comparison result
    with pytest.raises(fg.ConcretizationTypeError, match="static_argnums"):
        fg.make_jaxpr(lambda x: float(x))(1.0)
    with pytest.raises(fg.TracerArrayConversionError, match="fungrad.numpy"):
        fg.make_jaxpr(lambda x: np.asarray(x))(1.0)


def test_escaped_tracer():
    leaked = []

    def f(x):
        leaked.append(x)
        return x

    fg.make_jaxpr(f)(1.0)
    with pytest.raises(fg.UnexpectedTracerError, match="escaped"):
        lax.add(leaked[0], 1.0)
    with pytest.raises(fg.UnexpectedTracerError):
        fg.make_jaxpr(lambda y: lax.add(y, leaked[0]))(1.0)


def test_nested_make_jaxpr_closes_over_outer_tracer():
    def outer(x):
        inner = fg.make_jaxpr(lambda y: lax.mul(x, y))(2.0)
        assert len(inner.jaxpr.constvars) == 1  # the outer tracer is a constvar
        (out,) = inner(3.0)
        return out

    jaxpr = fg.make_jaxpr(outer)(np.ones(3, np.float32))
    (val,) = jaxpr(np.full(3, 5.0, np.float32))
    np.testing.assert_array_equal(np.asarray(val), np.full(3, 15.0))


def test_bad_arguments_named():
    with pytest.raises(TypeError, match="str is not a valid fungrad type"):
        fg.make_jaxpr(lambda x: x)("hello")
    with pytest.raises(TypeError, match="returned a value of type str"):
        fg.make_jaxpr(lambda x: "out")(1.0)
    with pytest.raises(ValueError, match="argnum 3 is out of range"):
        fg.make_jaxpr(lambda x: x, static_argnums=3)(1.0)
    with pytest.raises(TypeError, match="add: expected an array, got a value of type str"):
        lax.add(fg.Array(np.float32(1)), "s")


def _jaxpr_with_eqn(out_aval, in_aval=ShapedArray((3,), np.float32)):
    a = Var(in_aval)
    b = Var(out_aval)
    return Jaxpr([], [a], [JaxprEqn(core.primitives["sin"], [a], {}, [b])], [b])


def test_typecheck_accepts_traced_jaxprs():
    closed = fg.make_jaxpr(lambda x: lax.reduce_sum(lax.sin(x), (0,)))(np.ones(3, np.float32))
    core.typecheck_jaxpr(closed.jaxpr)
    core.typecheck_jaxpr(_jaxpr_with_eqn(ShapedArray((3,), np.float32)))


def test_typecheck_rejects_ill_typed_jaxprs():
    with pytest.raises(core.JaxprTypeError, match="declared i32\\[3\\] but sin gives f32\\[3\\]"):
        core.typecheck_jaxpr(_jaxpr_with_eqn(ShapedArray((3,), np.int32)))
    with pytest.raises(core.JaxprTypeError, match="ill-typed.*sin does not accept dtype int32"):
        core.typecheck_jaxpr(
            _jaxpr_with_eqn(ShapedArray((3,), np.int32), ShapedArray((3,), np.int32))
        )
    a, b = Var(ShapedArray((), np.float32)), Var(ShapedArray((), np.float32))
    use_before_def = Jaxpr([], [a], [JaxprEqn(core.primitives["sin"], [b], {}, [a])], [a])
    with pytest.raises(core.JaxprTypeError, match="used before it is defined"):
        core.typecheck_jaxpr(use_before_def)
    twice = Jaxpr([], [a], [JaxprEqn(core.primitives["sin"], [a], {}, [a])], [a])
    with pytest.raises(core.JaxprTypeError, match="bound twice"):
        core.typecheck_jaxpr(twice)
    undefined_out = Jaxpr([], [a], [], [b])
    with pytest.raises(core.JaxprTypeError, match="never defined"):
        core.typecheck_jaxpr(undefined_out)


def test_primitive_registry_has_impl_and_abstract_eval():
    assert len(core.primitives) > 0
    for name, prim in core.primitives.items():
        assert prim.name == name
        assert callable(prim.impl), f"{name} has no impl"
        assert callable(prim.abstract_eval), f"{name} has no abstract_eval"


def test_duplicate_primitive_name_rejected():
    with pytest.raises(ValueError, match="already registered"):
        core.Primitive("sin")


def test_array_is_immutable_and_numpy_interop():
    x = fnp.arange(3)
    with pytest.raises(ValueError):
        np.asarray(x)[0] = 5
    assert np.asarray(x).tolist() == [0, 1, 2]
    assert repr(fnp.array([1.0, 2.0])) == "Array([1., 2.], dtype=float32)"
    assert repr(lax.mul(2.0, 3.0)) == "Array(6., dtype=float32, weak_type=True)"


def test_callers_numpy_arrays_stay_writeable():
    # Arrays freeze their buffer; a numpy argument must be copied, never frozen in place.
    for fn in (
        lambda v: lax.add(v, 1.0),
        lambda v: lax.reshape(v, (3,)),
        fnp.sin,
        lambda v: fg.grad(lambda a: fnp.sum(a * 2))(v),
        fg.vmap(lambda a: a * 2),
        lambda v: fg.make_jaxpr(lambda a: a + 1)(v)(v),
    ):
        x = np.ones(3, np.float32)
        fn(x)
        x[0] = 5.0  # would raise "assignment destination is read-only"


def test_short_jaxprs_print_on_one_line_and_sub_jaxprs_continue_the_names():
    # JAX 0.10.2's layout: a jaxpr whose one-line form fits in 80 columns is printed on one
    # line, and sub-jaxprs continue the enclosing jaxpr's names.
    jaxpr = fg.make_jaxpr(lambda x: fnp.sin(x) * 2)(1.0)
    assert (
        str(jaxpr) == "{ lambda ; a:f32[]. let b:f32[] = sin a; c:f32[] = mul b 2.0:f32[] in (c,) }"
    )
    assert str(fg.make_jaxpr(lambda x: x)(1.0)) == "{ lambda ; a:f32[]. let  in (a,) }"
    two = fg.make_jaxpr(lambda x, y: (x + y, x * y))(1.0, 2.0)
    assert str(two) == (
        "{ lambda ; a:f32[] b:f32[]. let c:f32[] = add a b; d:f32[] = mul a b in (c, d) }"
    )
    assert two.pretty_print(width=0).count("\n") == 3
    text = str(fg.make_jaxpr(lambda x: lax.cond(x > 0, fnp.sin, fnp.cos, x))(1.0))
    assert "{ lambda ; e:f32[]. let f:f32[] = cos e in (f,) }" in text
    assert "{ lambda ; g:f32[]. let h:f32[] = sin g in (h,) }" in text
