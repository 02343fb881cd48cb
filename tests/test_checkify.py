"""fungrad.experimental.checkify against JAX 0.10.2's jax.experimental.checkify.

The expected messages are JAX's, recorded by running the same programs with JAX 0.10.2
(``err.get()`` strings, exception classes); values are checked against the unchecked
function and numpy.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax, tree_util
from fungrad.experimental import checkify

C = checkify


def positive(x):
    C.check(x > 0, "{x} needs to be positive!", x=x)
    return 1 / x


POSITIVE_MSG = "-3.0 needs to be positive! (`check` failed)"


# -- user checks ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "wrap",
    [
        lambda f: C.checkify(f),
        lambda f: fg.jit(C.checkify(f)),
        lambda f: C.checkify(fg.jit(f)),
    ],
    ids=["eager", "jit_of_checkify", "checkify_of_jit"],
)
def test_user_check_message_and_value(wrap):
    err, out = wrap(positive)(fnp.array(-3.0))
    assert err.get() == POSITIVE_MSG
    np.testing.assert_allclose(out, -1 / 3, rtol=1e-6)
    err, out = wrap(positive)(fnp.array(3.0))
    assert err.get() is None
    assert str(err) == "Error(None)"
    np.testing.assert_allclose(out, 1 / 3, rtol=1e-6)


def test_throw_raises_jax_runtime_error_naming_the_line():
    err, _ = C.checkify(positive)(fnp.array(-3.0))
    with pytest.raises(C.JaxRuntimeError, match="needs to be positive") as info:
        err.throw()
    assert isinstance(info.value, ValueError)  # as JAX's JaxRuntimeError
    assert "test_checkify.py" in info.value.__notes__[0]
    assert "(positive)" in info.value.__notes__[0]


def test_format_args_positional_and_integer():
    def h(x):
        C.check(x > 0, "bad {} and {}", x, x + 1)
        C.check(x > -10, "second")
        return x

    assert C.checkify(h)(fnp.array(-20.0))[0].get() == "bad -20.0 and -19.0 (`check` failed)"
    assert C.checkify(h)(fnp.array(-20, np.int32))[0].get() == "bad -20 and -19 (`check` failed)"
    assert C.checkify(h)(fnp.array(-5.0))[0].get() == "bad -5.0 and -4.0 (`check` failed)"


def test_check_outside_checkify():
    with pytest.raises(C.JaxRuntimeError) as info:
        positive(fnp.array(-3.0))
    assert str(info.value) == POSITIVE_MSG  # (pytest's match also reads the note of the line)
    positive(fnp.array(3.0))  # passes silently
    with pytest.raises(C.JaxRuntimeError, match="bad eager"):
        C.check(False, "bad eager")
    assert C.check(True, "ok") is None
    msg = (
        "Cannot abstractly evaluate a checkify.check which was not functionalized. This "
        "probably means you tried to stage (jit/scan/pmap/...) a `check` without "
        "functionalizing it through `checkify.checkify`."
    )
    with pytest.raises(ValueError) as info:
        fg.jit(positive)(fnp.array(3.0))
    assert str(info.value) == msg


def test_debug_check_runs_only_under_checkify():
    def d(x):
        C.debug_check(x != 0, "cannot be zero!")
        return x

    assert int(d(fnp.array(0))) == 0
    assert int(fg.jit(d)(fnp.array(0))) == 0
    assert C.checkify(d)(fnp.array(0))[0].get() == "cannot be zero! (`check` failed)"
    assert fg.jit(C.checkify(d))(fnp.array(1))[0].get() is None


def test_check_error_reraises_and_is_functionalized_again():
    def ff(x):
        C.check(x > 0, "must be positive!")
        return x

    def with_inner_jit(x):
        err, out = fg.jit(C.checkify(ff))(x)
        C.check_error(err)
        return out

    assert int(with_inner_jit(fnp.array(1))) == 1
    with pytest.raises(C.JaxRuntimeError, match="must be positive!"):
        with_inner_jit(fnp.array(-1))
    err, _ = C.checkify(with_inner_jit)(fnp.array(-1))
    assert err.get() == "must be positive! (`check` failed)"
    err, (inner, _) = C.checkify(C.checkify(ff))(fnp.array(-1))
    assert err.get() is None and inner.get() == "must be positive! (`check` failed)"


def test_argument_errors():
    with pytest.raises(TypeError, match="check takes a scalar pred as argument"):
        C.checkify(lambda x: C.check(x > 0, "m"))(fnp.ones(3))
    with pytest.raises(TypeError, match="debug_check takes a scalar pred"):
        C.debug_check(fnp.ones(3) > 0, "m")
    with pytest.raises(
        TypeError,
        match="Formatting arguments to checkify.check need to be PyTrees of arrays, but got 3 of "
        "type <class 'int'>.",
    ):
        C.check(True, "m", 3)
    with pytest.raises(
        TypeError, match="check_error takes an Error as argument, got type <class 'int'> instead."
    ):
        C.check_error(3)
    with pytest.raises(TypeError, match="checkify"):
        C.checkify(3)


# -- automatic checks -----------------------------------------------------------------------------

A3 = np.arange(3.0, dtype=np.float32)

# (name, function, arguments, its error kind, JAX 0.10.2's message)
PROGRAMS = [
    ("sin", fnp.sin, (np.float32(np.inf),), C.NaNError, "nan generated by primitive: sin."),
    ("div", lambda x, y: x / y, (np.float32(1), np.float32(0)), C.DivisionByZeroError,
     "division by zero"),
    ("floordiv", lambda x, y: x // y, (np.int32(1), np.int32(0)), C.DivisionByZeroError,
     "division by zero"),
    ("gather", lambda x, i: x[i], (A3, np.int32(5)), C.OOBError,
     "out-of-bounds indexing for array of shape (3,): index 5 is out of bounds for axis 0 "
     "with size 3. "),
    ("gather_negative", lambda x, i: x[i], (A3, np.int32(-5)), C.OOBError,
     "out-of-bounds indexing for array of shape (3,): index -2 is out of bounds for axis 0 "
     "with size 3. "),
    ("gather_2d", lambda x: x[fnp.array([[0, 1], [4, 1]])], (np.ones((3, 4), np.float32),),
     C.OOBError,
     "out-of-bounds indexing for array of shape (3, 4): index 4 is out of bounds for axis 0 "
     "with size 3. "),
    ("scatter", lambda x, i: x.at[i].set(1.0), (A3, np.int32(5)), C.OOBError,
     "out-of-bounds indexing for array of shape (3,): index 5 is out of bounds for axis 0 "
     "with size 3. "),
    ("dynamic_slice", lambda x, i: lax.dynamic_slice(x, (i,), (2,)), (A3, np.int32(2)),
     C.OOBError,
     "out-of-bounds indexing for array of shape (3,): index 2 is out of bounds for axis 0 "
     "with size 3. "),
    ("user", positive, (np.float32(-3),), C.FailedCheckError, POSITIVE_MSG),
]  # fmt: skip

SETS = {
    "user_checks": C.user_checks,
    "nan_checks": C.nan_checks,
    "div_checks": C.div_checks,
    "index_checks": C.index_checks,
    "float_checks": C.float_checks,
    "automatic_checks": C.automatic_checks,
    "all_checks": C.all_checks,
    "all_minus_div": C.all_checks - C.div_checks,
}


@pytest.mark.parametrize("set_name", SETS)
@pytest.mark.parametrize("name,fun,args,kind,msg", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_each_error_set_catches_its_kind_only(name, fun, args, kind, msg, set_name):
    errors = SETS[set_name]
    args = [fnp.asarray(a) for a in args]
    err, out = C.checkify(fun, errors=errors)(*args)
    if kind in errors:
        assert err.get() == msg
        assert type(err.get_exception()) is kind
    elif kind is C.DivisionByZeroError and C.NaNError in errors and name == "div":
        assert err.get() is None  # 1/0 is inf, not NaN
    else:
        assert err.get() is None
    if kind is not C.FailedCheckError:  # the checked value is the unchecked one
        np.testing.assert_array_equal(np.asarray(out), np.asarray(fun(*args)))


def test_nan_check_names_the_user_line():
    def g(x):
        return fnp.sin(x)

    err, _ = C.checkify(g, errors=C.nan_checks)(fnp.array(np.inf, np.float32))
    src = err.get_exception().traceback_info
    assert src.function == "test_nan_check_names_the_user_line.<locals>.g"
    assert src.file.endswith("test_checkify.py")


def test_error_sets_compose_as_jax():
    assert C.float_checks == C.nan_checks | C.div_checks
    assert C.automatic_checks == C.float_checks | C.index_checks
    assert C.all_checks - C.div_checks == C.nan_checks | C.index_checks | C.user_checks
    assert isinstance(C.user_checks, frozenset)
    assert C.user_checks == frozenset({C.FailedCheckError})


def test_user_check_dropped_when_user_checks_are_off():
    err, _ = C.checkify(positive, errors=C.nan_checks)(fnp.array(-3.0))
    assert err.get() is None


def test_nan_inputs_flag_the_first_arithmetic_primitive():
    nan = fnp.array([1.0, np.nan])
    assert C.checkify(lambda x: x + 1.0, errors=C.nan_checks)(nan)[0].get() == (
        "nan generated by primitive: add."
    )
    assert C.checkify(lambda x: -x, errors=C.nan_checks)(nan)[0].get() is None  # neg: not checked


def test_first_check_in_program_order():
    def m(x):
        y = fnp.sin(x)
        C.check(x > 0, "second")
        return y

    def m2(x):
        C.check(x > 0, "first")
        return fnp.sin(x)

    # As in JAX, a user check's code is taken when it is traced (before checkify's own).
    x = fnp.array(-np.inf, np.float32)
    assert C.checkify(m, errors=C.all_checks)(x)[0].get() == "second (`check` failed)"
    assert C.checkify(m2, errors=C.all_checks)(x)[0].get() == "first (`check` failed)"


# -- composition ----------------------------------------------------------------------------------


def test_vmap_of_checkify_reports_each_failing_index():
    err, out = fg.vmap(C.checkify(positive))(fnp.array([1.0, -2.0, 3.0, -4.0]))
    assert err.get() == (
        "at mapped index 1: -2.0 needs to be positive! (`check` failed)\n"
        "at mapped index 3: -4.0 needs to be positive! (`check` failed)"
    )
    assert isinstance(err.get_exception(), C.BatchedError)
    np.testing.assert_allclose(out, [1, -0.5, 1 / 3, -0.25], rtol=1e-6)
    err, _ = fg.vmap(C.checkify(fnp.sin, errors=C.nan_checks))(fnp.array([0.0, np.inf]))
    assert err.get() == "at mapped index 1: nan generated by primitive: sin."
    err, _ = fg.vmap(C.checkify(lambda x: x, errors=C.nan_checks))(fnp.array([0.0, np.inf]))
    assert err.get() is None
    with pytest.raises(C.JaxRuntimeError, match="-4.0 needs"):  # throw: the last failing one
        fg.vmap(C.checkify(positive))(fnp.array([1.0, -2.0, 3.0, -4.0]))[0].throw()


def test_checkify_of_vmap_reports_the_last_failing_example():
    err, _ = C.checkify(fg.vmap(positive))(fnp.array([1.0, -2.0, 3.0, -4.0]))
    assert err.get() == "-4.0 needs to be positive! (`check` failed)"


def test_jit_of_vmap_of_checkify():
    def uu(x):
        C.check(x < 10, "grad check {}", x)
        return fnp.sin(x)

    err, _ = fg.jit(fg.vmap(C.checkify(uu)))(fnp.array([1.0, 20.0]))
    assert err.get() == "at mapped index 1: grad check 20.0 (`check` failed)"


def test_grad_inside_checkify():
    def uu(x):
        C.check(x < 10, "grad check {}", x)
        return fnp.sin(x)

    err, g = C.checkify(fg.grad(uu))(fnp.array(11.0))
    assert err.get() == "grad check 11.0 (`check` failed)"
    np.testing.assert_allclose(g, np.cos(11.0), rtol=1e-5)
    g = fg.grad(lambda x: C.checkify(uu)(x)[1])(fnp.array(11.0))
    np.testing.assert_allclose(g, np.cos(11.0), rtol=1e-5)


def test_nan_checks_see_the_backward_pass():
    err, g = C.checkify(fg.grad(lambda x: fnp.sum(fnp.log(x))), errors=C.nan_checks)(
        fnp.array([-1.0, 2.0])
    )
    assert err.get() == "nan generated by primitive: log."
    np.testing.assert_allclose(g, [-1.0, 0.5])
    err, g = C.checkify(fg.grad(fnp.sqrt), errors=C.nan_checks)(fnp.array(0.0))
    assert err.get() is None and float(g) == np.inf


def test_cond():
    def g(x):
        def big(x):
            C.check(x < 5, "too big {}", x)
            return x

        return lax.cond(x > 0, big, fnp.sin, x)

    ck = C.checkify(g, errors=C.all_checks)
    assert ck(fnp.array(7.0))[0].get() == "too big 7.0 (`check` failed)"
    assert ck(fnp.array(-np.inf, np.float32))[0].get() == "nan generated by primitive: sin."
    assert ck(fnp.array(1.0))[0].get() is None
    assert fg.jit(ck)(fnp.array(7.0))[0].get() == "too big 7.0 (`check` failed)"


def test_scan_and_map():
    def s(xs):
        def body(c, x):
            C.check(x < 3, "elem {x} at carry {c}", x=x, c=c)
            return c + 1, x * 2

        return lax.scan(body, 0, xs)

    err, (c, ys) = C.checkify(s)(fnp.arange(6.0))
    assert err.get() == "elem 3.0 at carry 3 (`check` failed)"
    assert int(c) == 6
    np.testing.assert_array_equal(ys, np.arange(6.0) * 2)
    err, _ = C.checkify(
        lambda xs: lax.scan(lambda c, x: (c * x, fnp.log(x)), 1.0, xs), errors=C.nan_checks
    )(fnp.array([1.0, -1.0, 2.0]))
    assert err.get() == "nan generated by primitive: log."

    def uu(x):
        C.check(x < 10, "grad check {}", x)
        return fnp.sin(x)

    err, _ = C.checkify(lambda x: lax.map(uu, x))(fnp.array([1.0, 20.0, 30.0]))
    assert err.get() == "grad check 20.0 (`check` failed)"


def test_while_and_fori():
    def w(x):
        def cond(c):
            C.check(c < 10, "cond check {}", c)
            return c < 20

        def body(c):
            C.check(c < 5, "body check {}", c)
            return c + 1

        return lax.while_loop(cond, body, x)

    err, out = C.checkify(w)(fnp.array(0))
    assert err.get() == "body check 5 (`check` failed)" and int(out) == 20
    err, out = C.checkify(w)(fnp.array(12))
    assert err.get() == "cond check 12 (`check` failed)" and int(out) == 20
    err, out = fg.jit(C.checkify(w))(fnp.array(0))
    assert err.get() == "body check 5 (`check` failed)" and int(out) == 20

    def fl(x):
        def body(i, c):
            C.check(i != 3, "i is {}", i)
            return c + i

        return lax.fori_loop(0, 6, body, x)

    err, out = C.checkify(fl)(fnp.array(0))
    assert err.get() == "i is 3 (`check` failed)" and int(out) == 15


def test_custom_derivatives_and_checkpoint():
    @fg.custom_jvp
    def cj(x):
        C.check(x < 10, "cj {}", x)
        return fnp.sin(x)

    cj.defjvp(lambda pr, t: (cj(pr[0]), fnp.cos(pr[0]) * t[0]))
    assert C.checkify(cj, errors=C.all_checks)(fnp.array(11.0))[0].get() == (
        "cj 11.0 (`check` failed)"
    )
    assert C.checkify(cj, errors=C.all_checks)(fnp.array(np.inf, np.float32))[0].get() == (
        "cj inf (`check` failed)"
    )
    g = fg.grad(lambda x: C.checkify(cj, errors=C.all_checks)(x)[1])(fnp.array(1.0))
    np.testing.assert_allclose(g, np.cos(1.0), rtol=1e-6)

    @fg.custom_vjp
    def cv(x):
        C.check(x < 10, "cv {}", x)
        return fnp.sin(x)

    cv.defvjp(lambda x: (cv(x), x), lambda r, ct: (fnp.cos(r) * ct,))
    assert C.checkify(cv)(fnp.array(11.0))[0].get() == "cv 11.0 (`check` failed)"
    g = fg.grad(lambda x: C.checkify(cv)(x)[1])(fnp.array(1.0))
    np.testing.assert_allclose(g, np.cos(1.0), rtol=1e-6)

    def ck(x):
        C.check(x < 10, "remat {}", x)
        return fnp.sin(x)

    assert C.checkify(fg.checkpoint(ck))(fnp.array(11.0))[0].get() == "remat 11.0 (`check` failed)"
    err, g = C.checkify(fg.grad(fg.checkpoint(ck)))(fnp.array(11.0))
    assert err.get() == "remat 11.0 (`check` failed)"
    np.testing.assert_allclose(g, np.cos(11.0), rtol=1e-5)


def test_vmap_of_checkify_with_batched_control_flow():
    def cd(x):
        def big(x):
            C.check(x < 5, "big {}", x)
            return x

        return lax.cond(x > 0, big, fnp.sin, x)

    err, out = fg.vmap(C.checkify(cd, errors=C.all_checks))(fnp.array([1.0, 7.0, -np.inf]))
    assert err.get() == (
        "at mapped index 1: big 7.0 (`check` failed)\n"
        "at mapped index 2: nan generated by primitive: sin."
    )
    np.testing.assert_array_equal(out, [1.0, 7.0, np.nan])

    def sv(xs):
        def body(c, x):
            C.check(x < 3, "elem {}", x)
            return c, x

        return lax.scan(body, 0.0, xs)

    xs = fnp.arange(6.0).reshape(2, 3)
    assert fg.vmap(C.checkify(sv))(xs)[0].get() == "at mapped index 1: elem 3.0 (`check` failed)"
    assert C.checkify(fg.vmap(sv))(xs)[0].get() == "elem 3.0 (`check` failed)"

    def w(x):
        def body(c):
            C.check(c < 5, "body {}", c)
            return c + 1

        return lax.while_loop(lambda c: c < x + 3, body, x)

    # (JAX 0.10.2 fails on this one inside its while rule; fungrad batches the checkified loop)
    err, out = fg.vmap(C.checkify(w))(fnp.array([0, 3, 1]))
    assert err.get() == "at mapped index 1: body 5 (`check` failed)"
    np.testing.assert_array_equal(out, [3, 6, 4])


def test_pytree_format_arguments_and_outputs():
    def tr(d):
        C.check(d["a"] > 0, "a={a} b={b}", a=d["a"], b=d["b"])
        return {"s": d["a"] + d["b"], "n": 3}

    err, out = C.checkify(tr)({"a": fnp.array(-1.0), "b": fnp.arange(2.0)})
    assert err.get() == "a=-1.0 b=[0. 1.] (`check` failed)"
    assert int(out["n"]) == 3
    np.testing.assert_array_equal(out["s"], [-1.0, 0.0])


def test_more_automatic_checks_as_jax():
    nan = C.checkify(lambda x: fnp.sqrt(x.astype(fnp.bfloat16)), errors=C.nan_checks)
    assert nan(fnp.array(-1.0))[0].get() == "nan generated by primitive: sqrt."
    clog = C.checkify(fnp.log, errors=C.nan_checks)
    assert clog(fnp.array(1 + 1j) * np.nan)[0].get() == "nan generated by primitive: log."
    dus = C.checkify(
        lambda x, i: lax.dynamic_update_slice(x, fnp.ones(2), (i,)), errors=C.index_checks
    )
    assert dus(fnp.zeros(3), fnp.array(-1))[0].get() == (
        "out-of-bounds indexing for array of shape (3,): index 2 is out of bounds for axis 0 "
        "with size 3. "
    )
    add = C.checkify(lambda x: x.at[fnp.array([1, 7])].add(1.0), errors=C.index_checks)
    assert add(fnp.zeros(3))[0].get() == (
        "out-of-bounds indexing for array of shape (3,): index 7 is out of bounds for axis 0 "
        "with size 3. "
    )
    assert C.checkify(fnp.sum, errors=C.all_checks)(fnp.zeros((0, 3)))[0].get() is None


def test_error_is_a_pytree_of_arrays():
    err, _ = C.checkify(lambda x: x)(fnp.array(1))
    assert tree_util.tree_leaves(err) == []
    err, _ = C.checkify(positive)(fnp.array(-1.0))
    pred, code, payload = tree_util.tree_leaves(err)
    assert bool(pred) and code.dtype == np.int32 and float(payload) == -1.0


# -- no false positives, values unchanged ---------------------------------------------------------


def test_valid_program_has_no_error():
    def model(w, x, idx):
        h = fnp.tanh(x @ w)
        logits = h - fg.nn.logsumexp(h, axis=-1, keepdims=True)
        picked = logits[fnp.arange(x.shape[0]), idx]
        upd = lax.dynamic_update_slice(logits, fnp.zeros((1, 2)), (1, 0))
        total, _ = lax.scan(lambda c, r: (c + fnp.sum(r), None), 0.0, upd)
        return -fnp.mean(picked) + total / (1.0 + fnp.abs(total))

    w = fnp.asarray(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    x = fnp.asarray(np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3))
    idx = fnp.array([3, 0])
    for f in (model, fg.grad(model)):
        err, out = C.checkify(f, errors=C.all_checks)(w, x, idx)
        assert err.get() is None
        np.testing.assert_allclose(np.asarray(out), np.asarray(f(w, x, idx)), rtol=1e-6)
        err, _ = fg.jit(C.checkify(f, errors=C.all_checks))(w, x, idx)
        assert err.get() is None


SPECIAL = st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0])
FLOATS = st.one_of(st.floats(-10, 10, width=32), SPECIAL)


def float_arrays(shape=None):
    shape = (
        hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3) if shape is None else shape
    )
    return hnp.arrays(np.float32, shape, elements=FLOATS)


@settings(max_examples=40, deadline=None)
@given(float_arrays())
def test_nan_check_matches_numpy(x):
    def f(x):
        return fnp.sin(x) * 2.0

    err, out = C.checkify(f, errors=C.all_checks)(fnp.asarray(x))
    np.testing.assert_array_equal(np.asarray(out), np.asarray(f(fnp.asarray(x))))
    with np.errstate(invalid="ignore"):
        expect_nan = bool(np.any(np.isnan(np.sin(x))))
    assert err.get() == ("nan generated by primitive: sin." if expect_nan else None)


@settings(max_examples=40, deadline=None)
@given(
    hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3).flatmap(
        lambda s: st.tuples(float_arrays(st.just(s)), float_arrays(st.just(s)))
    )
)
def test_div_check_matches_numpy(xy):
    x, y = xy

    def f(x, y):
        return x / y

    err, out = fg.jit(C.checkify(f, errors=C.float_checks))(fnp.asarray(x), fnp.asarray(y))
    np.testing.assert_array_equal(np.asarray(out), np.asarray(f(fnp.asarray(x), fnp.asarray(y))))
    with np.errstate(all="ignore"):
        q = x / y
    if np.any(y == 0):
        expect = "division by zero"
    elif np.any(np.isnan(q)):
        expect = "nan generated by primitive: div."
    else:
        expect = None
    assert err.get() == expect


@settings(max_examples=30, deadline=None)
@given(st.integers(-8, 8), st.integers(1, 4))
def test_index_check_matches_bounds(i, n):
    x = fnp.arange(float(n))

    def f(x, i):
        return x[i]

    err, out = C.checkify(f, errors=C.index_checks)(x, fnp.asarray(np.int32(i)))
    np.testing.assert_array_equal(np.asarray(out), np.asarray(f(x, fnp.asarray(np.int32(i)))))
    if -n <= i < n:
        assert err.get() is None
    else:
        shown = i + n if i < 0 else i
        assert err.get() == (
            f"out-of-bounds indexing for array of shape ({n},): index {shown} is out of bounds "
            f"for axis 0 with size {n}. "
        )
