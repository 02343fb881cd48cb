"""Debugging inside transforms: ``fungrad.debug.print`` / ``debug.callback``,
``fungrad.callback.pure_callback`` and ``fungrad.experimental.io_callback``, eagerly and under
jit (native code calling back into Python, also inside compiled loops), vmap, grad and scan,
with JAX's semantics (what is printed, when a callback may be dropped, the errors)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import debug, lax
from fungrad.callback import pure_callback
from fungrad.experimental import io_callback
from fungrad.testing import check_grads

SDS = fg.ShapeDtypeStruct


def printed(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


# -- debug.print: formatting ---------------------------------------------------------------------


def test_print_formats_positional_keyword_and_specs(capsys):
    debug.print(
        "x={x} y={} z={z:.3f} s={s}",
        fnp.arange(3.0),
        x=fnp.float32(1.5),
        z=fnp.float32(1.23456),
        s="static",
    )
    debug.print("no fields", fnp.int32(3), 2.5, skip_format_check=True)  # appended
    debug.print("")
    assert printed(capsys) == ["x=1.5 y=[0. 1. 2.] z=1.235 s=static", "no fields 3 2.5", ""]


def test_print_two_call_form_and_printoptions(capsys):
    debug.print(ordered=True)("v={}", fnp.array([1.0, 2.0]))
    with np.printoptions(precision=2):
        debug.print("{}", fnp.array([1 / 3]))
    assert printed(capsys) == ["v=[1. 2.]", "[0.33]"]


def test_print_bad_format_arguments():
    with pytest.raises(ValueError, match="unused positional"):
        debug.print("{}", 1, 2)
    with pytest.raises(ValueError, match="f-string"):
        debug.print("x", y=1)
    with pytest.raises(KeyError):
        debug.print("{x}", y=1)
    with pytest.raises(TypeError, match="two-call form"):
        debug.print(None, 1)
    with pytest.raises(TypeError, match="format must be a str"):
        debug.print(3)
    debug.print("{}", 1, 2, skip_format_check=True)  # (JAX: the check can be skipped)


# -- debug.print under transforms ----------------------------------------------------------------


def _f(x):
    debug.print("x={x} s={s}", x=x, s=fnp.sum(x))
    return fnp.sin(x) * 2


def test_print_jit_prints_runtime_values_like_eager(capsys):
    x = fnp.arange(3.0)
    _f(x)
    eager = printed(capsys)
    jf = fg.jit(_f)
    np.testing.assert_allclose(jf(x), _f(x), rtol=1e-6)
    capsys.readouterr()
    jf(x + 1)  # the compiled code prints each call's values
    assert eager == ["x=[0. 1. 2.] s=3.0"]
    assert printed(capsys) == ["x=[1. 2. 3.] s=6.0"]


def test_print_vmap_prints_each_example_like_a_loop(capsys):
    xs = fnp.arange(6.0).reshape(3, 2)
    out = fg.vmap(_f)(xs)
    got = printed(capsys)
    loop = [_f(x) for x in xs]
    assert got == printed(capsys)  # (JAX unrolls debug callbacks under vmap)
    assert got[0] == "x=[0. 1.] s=1.0" and len(got) == 3
    np.testing.assert_allclose(out, np.stack(loop), rtol=1e-6)
    fg.jit(fg.vmap(_f))(xs)
    assert printed(capsys) == got


def test_print_grad_prints_primals_once_in_the_forward_pass(capsys):
    x = fnp.array([0.5, 1.0])
    g = fg.grad(lambda v: fnp.sum(_f(v)))(x)
    np.testing.assert_allclose(g, 2 * np.cos(np.asarray(x)), rtol=1e-6)
    assert printed(capsys) == ["x=[0.5 1. ] s=1.5"]
    fg.jit(fg.grad(lambda v: fnp.sum(_f(v))))(x)
    assert printed(capsys) == ["x=[0.5 1. ] s=1.5"]
    fg.jvp(_f, (x,), (fnp.ones(2),))
    assert printed(capsys) == ["x=[0.5 1. ] s=1.5"]


def test_print_does_not_change_derivatives(capsys):
    check_grads(lambda v: _f(v) * v, (np.array([0.3, -1.2]),), order=2)


def test_print_in_scan_fori_while_cond_under_jit(capsys):
    def step(c, x):
        debug.print("c={} x={}", c, x)
        return c + x, c * 2

    def body(i, c):
        debug.print("i={} c={}", i, c)
        return c * 2

    def wbody(c):
        debug.print("w={}", c)
        return c + 1

    def branch(name, sign):
        def fn(x):
            debug.print(name + " {}", x)
            return sign * x

        return fn

    programs = [
        (lambda xs: lax.scan(step, 0.0, xs), (fnp.arange(3.0),)),
        (lambda xs: lax.scan(step, 0.0, xs, reverse=True), (fnp.arange(3.0),)),
        (lambda c: lax.fori_loop(0, 3, body, c), (fnp.float32(1.0),)),
        (lambda c: lax.while_loop(lambda c: c < 3, wbody, c), (fnp.int32(0),)),
        (lambda p, x: lax.cond(p, branch("T", 1), branch("F", -1), x), (True, 2.0)),
        (lambda p, x: lax.cond(p, branch("T", 1), branch("F", -1), x), (False, 2.0)),
    ]
    for fn, args in programs:
        want = fn(*args)
        eager = printed(capsys)
        got = fg.jit(fn)(*args)
        assert printed(capsys) == eager, fn
        for a, b in zip(fg.tree_util.tree_leaves(got), fg.tree_util.tree_leaves(want)):
            np.testing.assert_array_equal(a, b)
    assert eager == ["F 2.0"]


def test_print_in_nested_loops_under_jit(capsys):
    def outer(c, x):
        def inner(d, y):
            debug.print("{} {}", x, y)
            return d + y, ()

        return lax.scan(inner, c, fnp.arange(2.0))[0], ()

    fn = lambda xs: lax.scan(outer, 0.0, xs)[0]  # noqa: E731
    fn(fnp.arange(3.0))
    eager = printed(capsys)
    fg.jit(fn)(fnp.arange(3.0))
    assert printed(capsys) == eager and len(eager) == 6


# -- debug.callback ------------------------------------------------------------------------------


def test_callback_receives_arrays_in_the_argument_structure():
    got = []

    def cb(a, b, *, c, tag):
        got.append(
            (
                type(a).__name__,
                np.asarray(a).tolist(),
                np.asarray(b["k"]).tolist(),
                np.asarray(c).tolist(),
                tag,
            )
        )

    def fn(x):
        debug.callback(cb, x, {"k": x * 2}, c=3, tag="t")
        return x

    fn(fnp.arange(2.0))
    fg.jit(fn)(fnp.arange(2.0))
    debug.callback(ordered=True)(cb, fnp.zeros(1), {"k": 1}, c=0, tag="two")
    assert got == [("Array", [0.0, 1.0], [0.0, 2.0], 3, "t")] * 2 + [("Array", [0.0], 1, 0, "two")]
    with pytest.raises(TypeError, match="callable"):
        debug.callback(3, 1)


def test_callbacks_keep_program_order_and_are_never_dropped_or_merged():
    log = []

    def fn(x):
        y = x * 2  # unused by the outputs: only the callbacks read it
        debug.callback(lambda v: log.append(("a", float(v))), y)
        debug.callback(lambda v: log.append(("b", float(v))), x, ordered=True)
        debug.callback(lambda v: log.append(("a", float(v))), y)
        return x + 1

    fn(1.0)
    eager = list(log)
    log.clear()
    jf = fg.jit(fn)
    assert float(jf(1.0)) == 2.0
    assert log == eager == [("a", 2.0), ("b", 1.0), ("a", 2.0)]
    text = jf.lower(1.0).as_text()
    assert text.count("debug_callback") >= 3


def test_callback_in_a_jitted_call_whose_outputs_are_unused():
    log = []
    inner = fg.jit(lambda v: (debug.callback(lambda a: log.append(float(a)), v), v * 3)[1])

    @fg.jit
    def outer(x):
        inner(x)  # result dropped: the call stays for its effect
        return x

    outer(2.0)
    assert log == [2.0]


def test_identical_inlined_callbacks_are_not_merged():
    log = []
    inner = fg.jit(lambda v: debug.callback(lambda a: log.append(float(a)), v))

    @fg.jit
    def outer(x):
        inner(x)  # the same equation twice once inlined: CSE must keep both
        inner(x)
        return x

    outer(1.0)
    assert log == [1.0, 1.0]
    assert fg.jit(lambda x: debug.print("only {}", x))(1.0) is None  # a program without outputs


def test_callback_exception_propagates_and_stops_the_program():
    calls = []

    def step(c, x):
        def cb(v):
            calls.append(float(v))
            if float(v) == 2.0:
                raise KeyError("boom")

        debug.callback(cb, x)
        return c + x, x

    fn = fg.jit(lambda xs: lax.scan(step, 0.0, xs))
    with pytest.raises(KeyError, match="boom"):
        fn(fnp.arange(5.0))
    assert calls == [0.0, 1.0, 2.0]  # nothing ran after the failing call
    calls.clear()
    assert float(fn(fnp.arange(2.0))[0]) == 1.0  # the executable is still usable


# -- pure_callback ---------------------------------------------------------------------------------


def _sin_cb(x):
    return pure_callback(np.sin, SDS(x.shape, x.dtype), x, vmap_method="sequential")


@settings(max_examples=15, deadline=None)
@given(
    shape=st.sampled_from([(), (0,), (3,), (2, 3)]),
    dtype=st.sampled_from([np.float32, np.int32, np.bool_]),
)
def test_pure_callback_values_eager_and_jit(shape, dtype):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3).astype(dtype)

    def fn(v):
        return pure_callback(
            lambda a: np.asarray(a)[..., None].repeat(2, -1), SDS((*shape, 2), dtype), v
        )

    want = np.asarray(x)[..., None].repeat(2, -1)
    for f in (fn, fg.jit(fn)):
        got = f(x)
        assert got.dtype == dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_pure_callback_nan_inf_pytrees_kwargs_and_conversions():
    x = fnp.array([np.nan, np.inf, -1.0])

    def fn(v):
        return pure_callback(
            lambda a, *, scale: {"y": np.asarray(a) * scale, "n": np.array([np.isnan(a).sum()])},
            {"y": SDS((3,), fnp.float32), "n": SDS((1,), fnp.int32)},
            v,
            scale=2.0,
        )

    for f in (fn, fg.jit(fn)):
        out = f(x)
        np.testing.assert_array_equal(out["y"], [np.nan, np.inf, -2.0])
        assert out["n"].dtype == np.int32 and out["n"].tolist() == [1]
    # results are converted to the declared dtype (float64 -> float32, as JAX does)
    f64 = fg.jit(
        lambda v: pure_callback(lambda a: np.ones(3, np.float64), SDS((3,), np.float32), v)
    )
    assert f64(x).dtype == np.float32


def test_pure_callback_unused_is_dropped_under_jit_but_runs_eagerly():
    calls = []

    def fn(v):
        pure_callback(lambda a: (calls.append(1), a)[1], SDS((), fnp.float32), v)
        return v + 1

    fn(1.0)
    assert calls == [1]
    assert float(fg.jit(fn)(1.0)) == 2.0
    assert calls == [1]


def test_pure_callback_vmap_methods_match_a_loop():
    shapes = []

    def add(a, b):
        shapes.append((np.shape(a), np.shape(b)))
        return np.asarray(a) + np.asarray(b)

    def fn(method):
        return lambda x, y: pure_callback(add, SDS((2,), fnp.float32), x, y, vmap_method=method)

    xs, y = fnp.arange(6.0).reshape(3, 2), fnp.array([10.0, 20.0])
    want = np.asarray(xs) + np.asarray(y)
    expected_shapes = {
        "sequential": [((2,), (2,))] * 3,
        "sequential_unrolled": [((2,), (2,))] * 3,
        "expand_dims": [((3, 2), (1, 2))],
        "broadcast_all": [((3, 2), (3, 2))],
        "legacy_vectorized": [((3, 2), (2,))],
    }
    for method, want_shapes in expected_shapes.items():
        for vm in (
            fg.vmap(fn(method), in_axes=(0, None)),
            fg.jit(fg.vmap(fn(method), in_axes=(0, None))),
        ):
            shapes.clear()
            np.testing.assert_array_equal(vm(xs, y), want)
            assert shapes == want_shapes, method
    # batch axis not first: moved to the front for the callback
    shapes.clear()
    out = fg.vmap(fn("expand_dims"), in_axes=(1, None))(xs.T, y)
    np.testing.assert_array_equal(out, want)
    assert shapes == [((3, 2), (1, 2))]


def test_pure_callback_errors():
    x = fnp.ones(2)
    with pytest.raises(NotImplementedError, match="vmap_method"):
        fg.vmap(lambda v: pure_callback(np.sin, SDS((), fnp.float32), v))(x)
    with pytest.raises(ValueError, match="vmap_method must be one of"):
        pure_callback(np.sin, SDS((2,), fnp.float32), x, vmap_method="bogus")
    with pytest.raises(ValueError, match="custom_jvp"):
        fg.grad(lambda v: fnp.sum(_sin_cb(v)))(x)
    with pytest.raises(ValueError, match="custom_jvp"):
        fg.jit(fg.grad(lambda v: fnp.sum(_sin_cb(v))))(x)
    with pytest.raises(ValueError, match="64-bit"):
        pure_callback(np.sin, SDS((2,), np.float64), x)
    with pytest.raises(TypeError, match="shape and dtype"):
        pure_callback(np.sin, [(2,)], x)
    wrong = lambda v: pure_callback(  # noqa: E731
        lambda a: np.ones(3, np.float32), SDS((2,), fnp.float32), v
    )
    for f in (wrong, fg.jit(wrong)):
        with pytest.raises(RuntimeError, match=r"shape \(3,\).*declares f32\[2\]"):
            f(x)
    two = lambda v: pure_callback(lambda a: (a, a), SDS((2,), fnp.float32), v)  # noqa: E731
    for f in (two, fg.jit(two)):
        with pytest.raises(RuntimeError, match="returned 2 arrays"):
            f(x)


def test_pure_callback_differentiated_through_custom_jvp():
    @fg.custom_jvp
    def sin(v):
        return _sin_cb(v)

    @sin.defjvp
    def _(primals, tangents):
        (v,), (t,) = primals, tangents
        return sin(v), pure_callback(np.cos, SDS(v.shape, v.dtype), v, vmap_method="sequential") * t

    x = np.array([0.2, -0.7, 1.5], np.float32)
    g = fg.grad(lambda v: fnp.sum(sin(v) * v))(x)
    np.testing.assert_allclose(g, np.cos(x) * x + np.sin(x), rtol=1e-5)
    np.testing.assert_allclose(fg.jit(fg.grad(lambda v: fnp.sum(sin(v) * v)))(x), g, rtol=1e-6)
    check_grads(sin, (x.astype(np.float64),), order=1, modes=("fwd",))


def test_pure_callback_in_a_compiled_scan_and_nested_jit():
    def step(c, x):
        y = pure_callback(
            lambda a, b: np.asarray(a) * np.asarray(b) + 1, SDS((), fnp.float32), c, x
        )
        return y, y

    fn = lambda xs: lax.scan(step, 1.0, xs)  # noqa: E731
    want = fn(fnp.arange(4.0))
    got = fg.jit(fn)(fnp.arange(4.0))
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[1], [1.0, 2.0, 5.0, 16.0])
    inner = fg.jit(lambda v: v * 10)
    outer = fg.jit(
        lambda x: pure_callback(lambda a: np.asarray(inner(a)) + 1, SDS((3,), fnp.float32), x)
    )
    np.testing.assert_array_equal(outer(fnp.arange(3.0)), [1.0, 11.0, 21.0])


def test_callbacks_from_several_threads():
    fn = fg.jit(lambda x: pure_callback(lambda a: np.asarray(a) * 2, SDS((3,), fnp.float32), x))
    out: dict = {}

    def work(i):
        for _ in range(5):
            out[i] = float(fnp.sum(fn(fnp.full((3,), float(i)))))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == {i: 6.0 * i for i in range(4)}


# -- io_callback -----------------------------------------------------------------------------------


def test_io_callback_is_never_dropped_and_keeps_state_in_loops():
    state = {"n": 0}

    def tick(v):
        state["n"] += 1
        return np.float32(state["n"]) + np.asarray(v)

    @fg.jit
    def unused(x):
        io_callback(tick, SDS((), fnp.float32), x)
        return x

    unused(1.0)
    assert state["n"] == 1

    @fg.jit
    def unused_loop(xs):  # a scan whose outputs nothing reads: kept for its callbacks
        lax.scan(lambda c, x: (c, io_callback(tick, SDS((), fnp.float32), x)), 0.0, xs)
        return xs

    unused_loop(fnp.zeros(4))
    assert state["n"] == 5
    state["n"] = 1
    step = lambda c, x: (c, io_callback(tick, SDS((), fnp.float32), x, ordered=True))  # noqa
    ys = fg.jit(lambda xs: lax.scan(step, 0.0, xs)[1])(fnp.zeros(3))
    np.testing.assert_array_equal(ys, [2.0, 3.0, 4.0])


def test_io_callback_vmap_grad_errors():
    seen = []

    def cb(v):
        seen.append(np.shape(v))
        return np.asarray(v) * 2

    fn = lambda v: io_callback(cb, SDS((), fnp.float32), v)  # noqa: E731
    np.testing.assert_array_equal(fg.vmap(fn)(fnp.arange(3.0)), [0.0, 2.0, 4.0])
    assert seen == [()] * 3
    with pytest.raises(ValueError, match="ordered"):
        fg.vmap(lambda v: io_callback(cb, SDS((), fnp.float32), v, ordered=True))(fnp.ones(2))
    with pytest.raises(ValueError, match="do not support JVP"):
        fg.grad(fn)(1.0)


# -- the GPU backend -------------------------------------------------------------------------------


def test_gpu_callbacks_at_top_level_in_loops_and_branches(gpu, capsys):
    def step(c, x):
        debug.print("c={} x={}", c, x)
        y = pure_callback(
            lambda a, b: np.asarray(a) * np.asarray(b) + 1, SDS((), fnp.float32), c, x
        )
        return y, y

    programs = [
        (lambda xs: lax.scan(step, 1.0, xs), (fnp.arange(3.0),)),
        (
            lambda c: lax.while_loop(
                lambda c: c < 2, lambda c: (debug.print("w={}", c), c + 1)[1], c
            ),
            (fnp.int32(0),),
        ),
        (
            lambda p, x: lax.cond(
                p,
                lambda v: (debug.print("T {}", v), v)[1],
                lambda v: (debug.print("F {}", v), -v)[1],
                x,
            ),
            (False, 2.0),
        ),
    ]
    for fn, args in programs:
        want = fn(*args)
        eager = printed(capsys)
        got = fg.jit(fn, backend="gpu")(*args)
        assert printed(capsys) == eager
        for a, b in zip(fg.tree_util.tree_leaves(got), fg.tree_util.tree_leaves(want)):
            np.testing.assert_array_equal(np.asarray(a), b)
