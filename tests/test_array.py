"""Operators, methods and properties of fungrad.Array and of tracers (fungrad.numpy.array_methods).

Values are checked against numpy; dtypes against JAX's rules (Python scalars are weak, so
``x * 2.0`` keeps float32 and ``int32 array + 1`` stays int32, where numpy would follow value
based casting). The same operators run on tracers under ``fg.make_jaxpr``.
"""

from __future__ import annotations

import operator

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fungrad as fg
import fungrad.numpy as fnp
from tests.helpers import assert_array

F32, I32, U32, BOOL = (np.dtype(t) for t in (np.float32, np.int32, np.uint32, np.bool_))

# JAX's promotion of these dtypes without x64 (numpy: int32 + uint32 -> int64).
_PROMOTE = {
    frozenset([F32]): F32,
    frozenset([I32]): I32,
    frozenset([U32]): U32,
    frozenset([BOOL]): BOOL,
    frozenset([F32, I32]): F32,
    frozenset([F32, U32]): F32,
    frozenset([F32, BOOL]): F32,
    frozenset([I32, U32]): I32,
    frozenset([I32, BOOL]): I32,
    frozenset([U32, BOOL]): U32,
}

# operator -> (numpy function, kind) with kind as in test_numpy_ufuncs: arith keeps the
# promoted dtype, numeric maps bool to int32, inexact maps ints to float32, bool compares.
BINARY_OPERATORS = {
    operator.add: (np.add, "arith"),
    operator.sub: (np.subtract, "arith"),
    operator.mul: (np.multiply, "arith"),
    operator.truediv: (np.true_divide, "inexact"),
    operator.floordiv: (np.floor_divide, "numeric"),
    operator.mod: (np.mod, "numeric"),
    operator.eq: (np.equal, "bool"),
    operator.ne: (np.not_equal, "bool"),
    operator.lt: (np.less, "bool"),
    operator.le: (np.less_equal, "bool"),
    operator.gt: (np.greater, "bool"),
    operator.ge: (np.greater_equal, "bool"),
    operator.and_: (np.bitwise_and, "int_only"),
    operator.or_: (np.bitwise_or, "int_only"),
    operator.xor: (np.bitwise_xor, "int_only"),
}


def elements(dtype):
    if dtype == F32:
        return st.floats(-100, 100, width=32)
    if dtype == I32:
        return st.integers(-100, 100)
    if dtype == U32:
        return st.integers(0, 100)
    return st.booleans()


@pytest.mark.parametrize("op", list(BINARY_OPERATORS), ids=lambda op: op.__name__)
@given(data=st.data())
def test_binary_operators_match_numpy(op, data):
    np_fn, kind = BINARY_OPERATORS[op]
    d1, d2 = (data.draw(st.sampled_from([F32, I32, U32, BOOL])) for _ in range(2))
    p = _PROMOTE[frozenset([d1, d2])]
    assume(not (kind == "int_only" and p == F32))
    assume(not (op is operator.sub and p == BOOL))
    shapes = data.draw(
        hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3)
    )
    x1 = data.draw(hnp.arrays(d1, shapes.input_shapes[0], elements=elements(d1)))
    x2 = data.draw(hnp.arrays(d2, shapes.input_shapes[1], elements=elements(d2)))
    comp = {"inexact": F32, "numeric": I32 if p == BOOL else p}.get(kind, p)
    if kind == "numeric":
        x2 = np.where(x2 == 0, np.ones_like(x2), x2)  # x // 0 is tested in test_numpy_ufuncs
    got = op(fnp.asarray(x1), fnp.asarray(x2))
    with np.errstate(all="ignore"):
        expected = np_fn(x1.astype(comp), x2.astype(comp))
    assert_array(got, expected, dtype=BOOL if kind == "bool" else comp, rtol=1e-6)
    # the reflected operator, reached through a numpy array on the left
    got = op(x1, fnp.asarray(x2))
    assert isinstance(got, fg.Array)
    assert_array(got, expected, dtype=BOOL if kind == "bool" else comp, rtol=1e-6)


@given(
    hnp.arrays(
        I32, hnp.array_shapes(min_dims=0, max_dims=2, max_side=4), elements=st.integers(-20, 20)
    )
)
def test_operators_with_python_scalars(x):
    a = fnp.asarray(x)
    with np.errstate(all="ignore"):
        cases = [
            (a + 1, x + 1, I32),
            (1 + a, 1 + x, I32),
            (a - 2, x - 2, I32),
            (2 - a, 2 - x, I32),
            (a * 3, x * 3, I32),
            (3 * a, 3 * x, I32),
            (a / 2, x / np.float32(2), F32),
            (2.0 / (a + 100), np.float32(2) / (x + 100).astype(F32), F32),
            (a // 3, x // 3, I32),
            (7 // (a + 100), 7 // (x + 100), I32),
            (a % 3, x % 3, I32),
            (7 % (a + 100), 7 % (x + 100), I32),
            (a**2, x**2, I32),
            (2 ** (a % 5), 2 ** (x % 5), I32),
            (a * 2.5, x * np.float32(2.5), F32),
            (a & 6, x & 6, I32),
            (6 | a, 6 | x, I32),
            (a ^ 5, x ^ 5, I32),
            (a << 2, x << 2, I32),
            (1 << (a % 4), 1 << (x % 4), I32),
            (a >> 1, x >> 1, I32),
            (64 >> (a % 4), 64 >> (x % 4), I32),
            (-a, -x, I32),
            (+a, x, I32),
            (~a, ~x, I32),
            (abs(a), abs(x), I32),
            (a > 0, x > 0, BOOL),
            (0 <= a, 0 <= x, BOOL),
            (a == 3, x == 3, BOOL),
            (a != 3, x != 3, BOOL),
        ]
    for got, want, dtype in cases:
        assert_array(got, want.astype(dtype), dtype=dtype, rtol=1e-6)
    q, r = divmod(a, 3)
    assert_array(q, x // 3, dtype=I32)
    assert_array(r, x % 3, dtype=I32)
    q, r = divmod(7, a + 100)
    assert_array(q, 7 // (x + 100), dtype=I32)
    assert_array(r, 7 % (x + 100), dtype=I32)


def test_weak_types_through_operators():
    x = fnp.asarray(np.array([1.0, 2.0], np.float32))
    assert (x * 2.0).dtype == np.float32 and not (x * 2.0).weak_type
    assert (2.0 * x).dtype == np.float32
    assert (x + 1).dtype == np.float32
    i = fnp.asarray(np.array([1, 2], np.int32))
    assert_array(i + 1, [2, 3], dtype=I32, weak_type=False)
    assert_array(i / 2, [0.5, 1.0], dtype=F32)  # true division of ints is float32 (jnp)
    assert_array(i * 1.5, [1.5, 3.0], dtype=F32, weak_type=True)
    # jnp: the Python int wraps into int8 (1000 -> -24), so 1 + 1000 is -23
    assert_array(fnp.asarray(np.array([1], np.int8)) + 1000, [-23], dtype=np.int8)
    assert_array(fnp.asarray(np.array([200], np.uint8)) * 2, [144], dtype=np.uint8)
    assert_array(fnp.asarray(np.array([1.0], np.float16)) * 3.0, [3.0], dtype=np.float16)
    b = fnp.asarray(np.array([True, False]))
    assert_array(b + 1, [2, 1], dtype=I32, weak_type=True)
    assert_array(b & True, [True, False], dtype=BOOL)
    assert_array(i * True, [1, 2], dtype=I32)
    # numpy scalars on the left defer to the Array; they are not weak (float64 -> float32
    # only because x64 is off)
    assert_array(np.float32(2) * x, [2.0, 4.0], dtype=F32, weak_type=False)
    assert_array(np.float64(2) - x, [1.0, 0.0], dtype=F32, weak_type=False)
    assert_array(np.int32(3) + i, [4, 5], dtype=I32, weak_type=False)
    w = fnp.asarray(2.0)
    assert_array(w, 2.0, dtype=F32, weak_type=True)
    assert_array(w * 3, 6.0, dtype=F32, weak_type=True)


def test_unary_operators_round_and_pow():
    x = fnp.asarray(np.array([-1.5, 0.25, 2.5], np.float32))
    assert_array(-x, [1.5, -0.25, -2.5], dtype=F32)
    assert_array(+x, [-1.5, 0.25, 2.5], dtype=F32)
    assert_array(abs(x), [1.5, 0.25, 2.5], dtype=F32)
    assert_array(round(x), [-2, 0, 2], dtype=np.int32)  # halves to even; an int, as JAX
    assert_array(round(x, 1), [-1.5, 0.2, 2.5], dtype=F32)
    assert_array(x**2, [2.25, 0.0625, 6.25], dtype=F32)
    assert_array(2**x, 2 ** np.array([-1.5, 0.25, 2.5], np.float32), dtype=F32, rtol=1e-6)
    assert_array(~fnp.asarray(np.array([True, False])), [False, True], dtype=BOOL)
    with pytest.raises(TypeError, match="invert"):
        ~x  # noqa: B018
    with pytest.raises(TypeError, match="modulus"):
        pow(x, 2, 3)


def test_matmul_and_dot():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    x, y = fnp.asarray(a), fnp.asarray(b)
    assert_array(x @ y, a @ b, dtype=F32)
    assert_array(a @ y, a @ b, dtype=F32)  # __rmatmul__ through numpy
    assert_array(x.dot(y), a @ b, dtype=F32)


def test_foreign_operands_raise_type_error_naming_the_types():
    x = fnp.asarray(np.ones(3, np.float32))
    with pytest.raises(
        TypeError,
        match=r"unsupported operand type\(s\) for \+: 'Array' and "
        r"'str'",
    ):
        x + "a"
    with pytest.raises(TypeError, match="for -: 'str' and 'Array'"):
        "a" - x
    with pytest.raises(TypeError, match="unsupported operand"):
        x @ object()
    with pytest.raises(TypeError, match=r"for ==: 'Array' and 'list'"):
        x == [1.0, 1.0, 1.0]  # noqa: B015
    with pytest.raises(TypeError, match="'<' not supported between instances of 'Array' and 'str'"):
        x < "a"  # noqa: B015
    assert (x == None) is False  # noqa: E711 (Python's fallback: identity)
    assert (x != None) is True  # noqa: E711

    class Other:
        def __radd__(self, other):
            return "radd"

        def __rmul__(self, other):
            return "rmul"

    assert x + Other() == "radd"
    assert x * Other() == "rmul"


def test_item_assignment_is_an_error_pointing_to_at():
    x = fnp.asarray(np.zeros(3, np.float32))
    with pytest.raises(TypeError, match=r"\.at\[idx\]\.set"):
        x[0] = 1.0
    assert_array(x.at[0].set(1.0), [1.0, 0.0, 0.0], dtype=F32)
    assert_array(x.at[1:].add(2.0), [0.0, 2.0, 2.0], dtype=F32)


# ---------------------------------------------------------------------------------------------
# Methods and properties


def test_shape_methods():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = fnp.asarray(a)
    assert_array(x.reshape(6, 4), a.reshape(6, 4), dtype=F32)
    assert_array(x.reshape((4, 6)), a.reshape(4, 6), dtype=F32)
    assert_array(x.reshape([3, -1]), a.reshape(3, -1), dtype=F32)
    assert_array(x.reshape(-1), a.ravel(), dtype=F32)
    assert_array(x.transpose(), a.transpose(), dtype=F32)
    assert_array(x.transpose(1, 0, 2), a.transpose(1, 0, 2), dtype=F32)
    assert_array(x.transpose((2, 0, 1)), a.transpose(2, 0, 1), dtype=F32)
    assert_array(x.T, a.T, dtype=F32)
    assert_array(x.mT, np.swapaxes(a, -1, -2), dtype=F32)
    assert_array(x.flatten(), a.ravel(), dtype=F32)
    assert_array(x.ravel(), a.ravel(), dtype=F32)
    assert_array(x.swapaxes(0, 2), a.swapaxes(0, 2), dtype=F32)
    assert_array(x[:, :1].squeeze(), a[:, :1].squeeze(), dtype=F32)
    assert_array(x[:, :1].squeeze(1), a[:, :1].squeeze(1), dtype=F32)
    assert_array(x.repeat(2, axis=0), a.repeat(2, axis=0), dtype=F32)
    assert_array(x.take(fnp.asarray(np.array([0, 2])), axis=1), a.take([0, 2], axis=1), dtype=F32)
    assert_array(x[0].diagonal(), a[0].diagonal(), dtype=F32)
    assert_array(x[0].trace(), a[0].trace(), dtype=F32)
    assert_array(x[1, 2], a[1, 2], dtype=F32)
    assert_array(x[..., ::-2], a[..., ::-2], dtype=F32)
    assert x.copy() is x
    with pytest.raises(ValueError, match="mT"):
        fnp.asarray(np.ones(3)).mT  # noqa: B018
    with pytest.raises(TypeError, match="reshape"):
        x.reshape(2, "a")


def test_reduction_methods_match_numpy():
    a = np.array([[3.0, -1.0, 2.0], [0.5, 4.0, -2.0]], np.float32)
    x = fnp.asarray(a)
    assert_array(x.sum(), a.sum(), dtype=F32)
    assert_array(x.sum(axis=0, keepdims=True), a.sum(axis=0, keepdims=True), dtype=F32)
    assert_array(x.sum(1, where=fnp.asarray(a > 0)), a.sum(1, where=a > 0), dtype=F32)
    assert_array(x.prod(axis=1), a.prod(axis=1), dtype=F32)
    assert_array(x.mean(axis=-1), a.mean(axis=-1), dtype=F32)
    assert_array(x.max(), 4.0, dtype=F32)
    assert_array(x.min(axis=0), a.min(axis=0), dtype=F32)
    assert_array(x.argmax(), 4, dtype=I32)
    assert_array(x.argmin(axis=1), a.argmin(axis=1), dtype=I32)
    assert_array((x > 0).any(axis=0), (a > 0).any(axis=0), dtype=BOOL)
    assert_array((x > -3).all(), True, dtype=BOOL)
    assert_array(x.std(ddof=1), a.std(ddof=1), dtype=F32, rtol=1e-6)
    assert_array(x.var(axis=0), a.var(axis=0), dtype=F32, rtol=1e-6)
    assert_array(x.ptp(axis=1), np.ptp(a, axis=1), dtype=F32)
    assert_array(x.cumsum(axis=1), a.cumsum(axis=1), dtype=F32)
    assert_array(x.cumprod(), a.cumprod(), dtype=F32)
    assert_array(x.clip(0, 2), a.clip(0, 2), dtype=F32)
    assert_array(x.clip(max=1), a.clip(max=1), dtype=F32)
    assert_array(x.round(), a.round(), dtype=F32)
    assert_array(x.sort(axis=1), np.sort(a, axis=1), dtype=F32)
    assert_array(x.argsort(axis=0), np.argsort(a, axis=0), dtype=I32)
    rows, cols = (x > 1).nonzero()
    assert_array(rows, np.nonzero(a > 1)[0], dtype=I32)
    assert_array(cols, np.nonzero(a > 1)[1], dtype=I32)
    assert_array(x.astype(np.int32), a.astype(np.int32), dtype=I32)
    assert_array(x.astype(float), a, dtype=F32)  # float64 is canonicalised without x64
    assert_array(x.astype("bool"), a.astype(bool), dtype=BOOL)
    assert_array(x.conj(), a, dtype=F32)
    assert_array(x.conjugate(), a, dtype=F32)
    assert_array(x.real, a, dtype=F32)
    assert_array(x.imag, np.zeros_like(a), dtype=F32)
    assert x.item(1) == -1.0 and x.tolist() == a.tolist()
    assert 4.0 in x.ravel() and 5.0 not in x.ravel()  # (`in` needs a 1-d array, as JAX)
    assert len(x) == 2 and [r.shape for r in x] == [(3,), (3,)]


def test_array_repr():
    assert repr(fnp.asarray(np.array([1.0, 2.0], np.float32))) == "Array([1., 2.], dtype=float32)"
    assert repr(fnp.asarray(np.array([1, 2], np.int32))) == "Array([1, 2], dtype=int32)"
    assert repr(fnp.asarray(np.float32(3.5))) == "Array(3.5, dtype=float32)"
    assert repr(fnp.asarray(np.array([True]))) == "Array([ True], dtype=bool)"
    assert repr(fnp.asarray(2.0)) == "Array(2., dtype=float32, weak_type=True)"
    # JAX 0.10.2 prints the shape of every empty array, (0,) included
    assert repr(fnp.asarray(np.zeros((0,), np.float32))) == "Array([], shape=(0,), dtype=float32)"
    assert repr(fnp.asarray(np.zeros((2, 0), np.int32))) == "Array([], shape=(2, 0), dtype=int32)"
    assert repr(fnp.asarray(np.eye(2, dtype=np.float32)) * 2.0) == (
        "Array([[2., 0.],\n       [0., 2.]], dtype=float32)"
    )


# ---------------------------------------------------------------------------------------------
# Tracers


def test_operators_and_methods_on_tracers():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = fnp.asarray(a)

    def f(t):
        return (
            t * 2.0 + 1,
            3.0 - t,
            t / 2,
            t // 2,
            t % 2,
            t**2,
            -t,
            abs(t),
            t > 1.0,
            t == t,
            t @ t.T,
            t.T,
            t.mT,
            t.reshape(3, 2),
            t.sum(axis=0),
            t.mean(),
            t.max(axis=1, keepdims=True),
            t.argmax(axis=1),
            t.astype(np.int32) & 3,
            t[0],
            t[:, 1:],
            t.at[0, 0].set(9.0),
            t.clip(1, 4),
            t.cumsum(axis=1),
            round(t / 3, 1),
            t.flatten(),
            t.transpose(1, 0),
        )

    jaxpr = fg.make_jaxpr(f)(x)
    text = str(jaxpr)
    for s in (
        "mul a 2.0:f32[]",
        "sub 3.0:f32[]",
        "div",
        "transpose[permutation=(1, 0)]",
        "dot_general",
        "reshape",
        "reduce_sum[axes=(0,)]",
        "reduce_max[axes=(1,)]",
        "argmax[axes=(1,)",
        "and",
        "gt",
        "eq",
        "scatter",
        "clamp" if "clamp" in text else "max",
        "cumsum[axis=1 reverse=False]",
        "round",
    ):
        assert s in text, (s, text)
    eager = f(x)
    traced = jaxpr(x)
    assert len(traced) == len(eager)
    for got, want in zip(traced, eager):
        assert_array(got, np.asarray(want), dtype=want.dtype, weak_type=want.weak_type)


def test_weak_constants_stay_literals_under_tracing():
    x = fnp.asarray(np.ones(3, np.int32))
    jaxpr = fg.make_jaxpr(lambda t: (t + 1, t * 2.5))(x)
    text = str(jaxpr)
    assert "add a 1:i32[]" in text
    assert "convert_element_type[new_dtype=float32 weak_type=True]" in text
    assert jaxpr.out_avals[0] == fg.ShapedArray((3,), np.int32)
    assert jaxpr.out_avals[1] == fg.ShapedArray((3,), np.float32, weak_type=True)


def test_tracer_concretization_errors():
    x = fnp.asarray(np.ones(3, np.float32))
    with pytest.raises(fg.TracerArrayConversionError):
        fg.make_jaxpr(lambda t: t.item(0))(x)
    with pytest.raises(fg.TracerArrayConversionError):
        fg.make_jaxpr(lambda t: t.tolist())(x)
    with pytest.raises(fg.ConcretizationTypeError):
        fg.make_jaxpr(lambda t: t + 1 if t.sum() > 0 else t)(x)
    with pytest.raises(fg.ConcretizationTypeError):
        fg.make_jaxpr(lambda t: 1.0 in t)(x)
    with pytest.raises(TypeError, match="unsupported operand"):
        fg.make_jaxpr(lambda t: t + "a")(x)
    with pytest.raises(TypeError, match=r"\.at\["):
        fg.make_jaxpr(lambda t: t.__setitem__(0, 1.0))(x)
