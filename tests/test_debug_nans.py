"""NaN / Inf hunting (debug_nans, debug_infs): the first primitive that makes an invalid value
is named with its inputs and the user's line, eagerly and under jit (an op-by-op rerun, into
scan / while / cond bodies), under vmap and grad; a NaN born in a derivative also names the
forward primitive it differentiates, with the fix."""

from __future__ import annotations

import gc
import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax, nan_hunt

HERE = r"test_debug_nans\.py"


def _line(fn, text: str) -> int:
    """The line number of the first line of ``fn``'s source holding ``text``."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, s in enumerate(lines) if text in s)


@pytest.fixture
def nans():
    with fg.debug_nans(True):
        yield


@pytest.fixture
def infs():
    with fg.debug_infs(True):
        yield


def masked_sqrt(x):
    y = fnp.sqrt(x)
    return fnp.where(x > 0, y, 0.0).sum()


def _raises(fun, *args, match):
    with pytest.raises(FloatingPointError, match=match) as info:
        fun(*args)
    return str(info.value)


# -- forward: the primitive, the user's line, its inputs, why ------------------------------------


def _log_of(x):
    return fnp.log(x) + 1.0


@pytest.mark.parametrize("jit", [False, True])
def test_forward_nan_names_primitive_line_inputs_and_why(nans, jit):
    fun = fg.jit(_log_of) if jit else _log_of
    line = _line(_log_of, "fnp.log")
    msg = _raises(
        fun,
        fnp.array([1.0, -2.0, 0.5]),
        match=rf"\(nan\) encountered in log at {HERE}:{line} \(_log_of\): output f32\[3\] "
        r"holds 1 nan value\(s\), the first at index \(1,\)",
    )
    assert "Its inputs: 0: f32[3] finite values in [-2, 1]" in msg
    assert "log(x) is nan for x < 0" in msg
    assert "derivative" not in msg
    if jit:
        assert msg.startswith("invalid value (nan) encountered in jit(_log_of): its output 0")
        assert "again without jit, op by op" in msg


def test_zero_d_and_empty_values(nans):
    with pytest.raises(FloatingPointError, match=r"log .*output f32\[\] holds 1 nan.*index \(\)"):
        fnp.log(fnp.array(-1.0))
    assert fnp.log(fnp.zeros((0, 3))).shape == (0, 3)  # nothing to check
    assert fg.jit(fnp.log)(fnp.zeros(0)).shape == (0,)


def test_only_the_checked_kind_raises(nans):
    assert float(fnp.log(fnp.array(0.0))) == -np.inf  # an inf is not a nan
    with fg.debug_infs(True):
        _raises(fnp.log, fnp.array(0.0), match=r"\(inf\) encountered in log")
        # Complex values are checked too.
        _raises(fnp.log, fnp.array(0j), match=r"\(inf\) encountered in log")


def test_a_nan_argument_is_said_to_come_from_outside(nans):
    msg = _raises(fg.jit(lambda v: v * 2.0), fnp.array([np.nan, 1.0]), match=r"encountered in mul")
    assert "Input 0 already held nan: it came in from outside" in msg


# -- the derivative: the forward primitive and line, and the fix ---------------------------------


@pytest.mark.parametrize("jit", [False, True])
def test_nan_in_backward_pass_names_the_forward_sqrt(nans, jit):
    fun = fg.grad(masked_sqrt)
    fun = fg.jit(fun) if jit else fun
    line = _line(masked_sqrt, "fnp.sqrt")
    msg = _raises(
        fun,
        fnp.array([0.0, 1.0, 4.0]),
        match=rf"\(nan\) encountered in mul at {HERE}:{line} \(masked_sqrt\), in the "
        rf"derivative \(jvp or backward pass\) of sqrt at {HERE}:{line} \(masked_sqrt\)",
    )
    assert "the cotangent of sqrt is inf where its input is 0" in msg
    assert "'double where' trick" in msg and "safe_x = fnp.where(mask, x, 1.0)" in msg
    # The inf that multiplied the zero cotangent was not checked: say how to find it.
    assert "turn on debug_infs too" in msg
    # The values that make the derivative blow up: the forward sqrt's inputs.
    assert "The inputs of that sqrt were: 0: f32[3] finite values in [0, 4], 1 zero." in msg

    # The double where fixes it: the same gradient as numpy's, no error.
    def fixed(x):
        safe = fnp.where(x > 0, x, 1.0)
        return fnp.where(x > 0, fnp.sqrt(safe), 0.0).sum()

    g = (fg.jit(fg.grad(fixed)) if jit else fg.grad(fixed))(fnp.array([0.0, 1.0, 4.0]))
    np.testing.assert_allclose(np.asarray(g), [0.0, 0.5, 0.25])


@pytest.mark.parametrize("jit", [False, True])
def test_inf_in_derivative_of_sqrt_at_zero(infs, jit):
    fun = fg.grad(lambda x: fnp.sqrt(x).sum())
    fun = fg.jit(fun) if jit else fun
    _raises(
        fun,
        fnp.array([0.0, 1.0]),
        match=r"\(inf\) encountered in div at .*, in the derivative \(jvp or backward pass\) "
        r"of sqrt at .*the cotangent of sqrt is inf where its input is 0.*The inputs of that "
        r"sqrt were: 0: f32\[2\] finite values in \[0, 1\], 1 zero\.",
    )


def _log_masked(x):
    return fnp.where(x > 0, fnp.log(x), 0.0).sum()


def _div_masked(x):
    return fnp.where(x != 0, 1.0 / x, 0.0).sum()


def _pow_masked(x):
    return fnp.where(x > 0, x**0.5, 0.0).sum()


def _atan2_origin(v):
    return fnp.where(v[0] ** 2 + v[1] ** 2 > 0, fnp.arctan2(v[0], v[1]), 0.0)


def _norm_masked(v):
    return fnp.where(fnp.sum(v**2) > 0, fnp.linalg.norm(v), 0.0)


def _rsqrt_masked(x):
    return fnp.where(x > 0, lax.rsqrt(x), 0.0).sum()


def _erf_inv_masked(x):  # no bespoke hint for erf_inv: the generic one
    return fnp.where(x < 1, lax.erf_inv(x), 0.0).sum()


@pytest.mark.parametrize(
    "fun, arg, forward, why",
    [
        (_log_masked, [0.0, 2.0], "log", "the derivative of log, 1 / x, is inf"),
        (_div_masked, [0.0, 2.0], "div", "-x / y \\*\\* 2, is inf where y is 0"),
        (_pow_masked, [0.0, 2.0], "pow", "y \\* x \\*\\* \\(y - 1\\), is inf at x = 0"),
        (_atan2_origin, [0.0, 0.0], "atan2", "nan at x = y = 0"),
        (_norm_masked, [0.0, 0.0], "sqrt", "norm"),
        (_rsqrt_masked, [0.0, 2.0], "rsqrt", "is inf where its input is 0"),
        (_erf_inv_masked, [1.0, 0.5], "erf_inv", "the derivative of erf_inv is not finite"),
    ],
)
def test_common_culprits_name_their_forward_primitive_and_line(nans, fun, arg, forward, why):
    line = _line(fun, "fnp.where")
    for g in (fg.grad(fun), fg.jit(fg.grad(fun))):
        _raises(
            g,
            fnp.array(arg),
            match=rf"encountered in \w+ at {HERE}:{line} \({fun.__name__}\), in the derivative "
            rf"\(jvp or backward pass\) of {forward} at {HERE}:{line}.*Why: .*{why}.*double where",
        )


def test_equations_record_the_forward_primitive_they_differentiate():
    jaxpr = fg.make_jaxpr(fg.grad(masked_sqrt))(fnp.ones(3)).jaxpr
    forward = {(str(e.primitive), getattr(e.source_info.forward, "name", None)) for e in jaxpr.eqns}
    assert ("div", "sqrt") in forward  # the jvp rule's 0.5 / sqrt(x)
    assert ("mul", "sqrt") in forward  # its transpose: the cotangent times it
    # A higher-order derivative keeps the user's primitive, not a first-order one.
    hess = fg.make_jaxpr(fg.hessian(lambda x: fnp.sqrt(x).sum()))(fnp.ones(3)).jaxpr
    names = {getattr(e.source_info.forward, "name", None) for e in hess.eqns if e.source_info}
    assert "sqrt" in names and "div" not in names and "mul" not in names
    # Forward equations record none.
    plain = fg.make_jaxpr(masked_sqrt)(fnp.ones(3)).jaxpr
    assert all(e.source_info.forward is None for e in plain.eqns)


# -- vmap, scan, while, cond ---------------------------------------------------------------------


@pytest.mark.parametrize("jit", [False, True])
def test_vmap(nans, jit):
    fun = fg.vmap(_log_of)
    fun = fg.jit(fun) if jit else fun
    line = _line(_log_of, "fnp.log")
    _raises(
        fun,
        fnp.array([[1.0, 2.0], [3.0, -4.0]]),
        match=rf"nan\) encountered in log at {HERE}:{line} \(_log_of\): output f32\[2,2\] .*"
        r"index \(1, 1\)",
    )


def _scanned(x):
    def body(c, xi):
        c = c - 1.0
        return c, fnp.log(c * xi)

    return lax.scan(body, 3.0, x)[1].sum()


def test_scan_names_the_failing_iteration_under_jit(nans):
    body_line = _line(_scanned, "fnp.log")
    scan_line = _line(_scanned, "lax.scan")
    _raises(
        fg.jit(_scanned),
        fnp.ones(5),
        match=rf"encountered in log at {HERE}:{body_line} \(_scanned.<locals>.body\), in "
        rf"iteration 3 of the scan at {HERE}:{scan_line} \(_scanned\)",
    )
    _raises(_scanned, fnp.ones(5), match=rf"encountered in log at {HERE}:{body_line}")
    # grad through the scan: the backward pass runs the body's derivative in reverse.
    _raises(fg.jit(fg.grad(_scanned)), fnp.ones(5), match="encountered in log")


def _looped(x):
    def body(c):
        i, v = c
        return i + 1, fnp.sqrt(v - 1.0)

    return lax.while_loop(lambda c: c[0] < 4, body, (0, x))[1]


def test_while_and_cond_bodies(nans):
    line = _line(_looped, "fnp.sqrt")
    _raises(
        fg.jit(_looped),
        fnp.array(1.5),
        match=rf"encountered in sqrt at {HERE}:{line} .*, in iteration 1 of the while loop",
    )

    def branchy(x):
        return lax.cond(x > 0, lambda v: fnp.log(v - 5.0), lambda v: v, x)

    _raises(fg.jit(branchy), fnp.array(1.0), match=r"encountered in log .*in branch 1 of the cond")
    np.testing.assert_allclose(float(fg.jit(branchy)(fnp.array(-1.0))), -1.0)


def test_nested_jit_is_stepped_into(nans):
    inner = fg.jit(_log_of)
    _raises(
        fg.jit(lambda v: inner(v) * 2.0),
        fnp.array([-1.0]),
        match=r"encountered in log at .* inside jit\(_log_of\)",
    )


# -- jit: the screen, and the honest "no primitive made it" --------------------------------------


def test_a_complex_overflow_costs_only_the_exact_check(nans):
    with fg.debug_infs(True):
        # Finite values whose sum overflows: screened, then found clean.
        big = np.full(4, 3e38 + 3e38j, np.complex64)
        assert nan_hunt.may_hold_invalid([big])
        assert nan_hunt.jit_error("f", None, [], [big]) is None
        np.testing.assert_array_equal(np.asarray(fg.jit(lambda v: v * 1.0)(fnp.asarray(big))), big)
        real = fnp.full(4, 3e38)
        np.testing.assert_array_equal(np.asarray(fg.jit(lambda v: v * 1.0)(real)), np.asarray(real))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), min_size=0, max_size=12),
    st.booleans(),
    st.booleans(),
)
def test_the_screen_is_exact_for_real_values(values, nan_on, inf_on):
    v = np.array(values, np.float32)
    fg.config.update("debug_nans", nan_on)
    fg.config.update("debug_infs", inf_on)
    try:
        bad = (nan_on and np.isnan(v).any()) or (inf_on and np.isinf(v).any())
        maybe = nan_hunt.may_hold_invalid([np.ones(2, np.int32), v])
        if bad:
            assert maybe  # never misses one
        if np.isfinite(v).all():
            assert not maybe  # and finite values never cost the exact check
    finally:
        fg.config.update("debug_nans", False)
        fg.config.update("debug_infs", False)


def test_nan_only_in_compiled_code_is_said_honestly(nans):
    x = fnp.array([1.0, 2.0])
    closed = fg.make_jaxpr(lambda v: v * 2.0)(x)
    err = nan_hunt.jit_error("f", closed, [x], [np.array([2.0, np.nan], np.float32)], ["out"])
    assert isinstance(err, FloatingPointError)
    assert "its output 0 (out), f32[2], holds 1 nan value(s), the first at index (1,)" in str(err)
    assert "produced no invalid value: the nan only appears in the compiled (fused) code" in str(
        err
    )


@settings(max_examples=15, deadline=None)
@given(st.lists(st.floats(-10, 10, width=32), min_size=1, max_size=6))
def test_clean_values_pass_and_match_numpy(values):
    x = np.array(values, np.float32)

    def f(v):
        return fnp.tanh(v) * 2.0 + fnp.exp(-(v**2))

    want = np.tanh(x) * 2.0 + np.exp(-(x**2))
    with fg.debug_nans(True), fg.debug_infs(True):
        for fun in (f, fg.jit(f)):
            np.testing.assert_allclose(np.asarray(fun(fnp.asarray(x))), want, rtol=1e-5, atol=1e-6)
        g = fg.jit(fg.grad(lambda v: f(v).sum()))(fnp.asarray(x))
        np.testing.assert_allclose(
            np.asarray(g), 2 * (1 - np.tanh(x) ** 2) - 2 * x * np.exp(-(x**2)), rtol=1e-4, atol=1e-5
        )


@pytest.mark.usefixtures("gpu")
def test_gpu_backend(nans):
    line = _line(_log_of, "fnp.log")
    _raises(
        fg.jit(_log_of, backend="gpu"),
        fnp.array([1.0, -1.0]),
        match=rf"jit\(_log_of\).*encountered in log at {HERE}:{line}",
    )
    _raises(
        fg.jit(fg.grad(masked_sqrt), backend="gpu"),
        fnp.array([0.0, 1.0]),
        match=r"in the derivative \(jvp or backward pass\) of sqrt",
    )


@pytest.mark.usefixtures("gpu")
def test_gpu_calls_after_a_nan_error_and_a_collection(nans):
    """The error's traceback holds device buffers in a reference cycle; collected after their
    wgpu buffers, they must not put dead handles back in the pool (the next upload failed)."""
    for _ in range(3):
        with pytest.raises(FloatingPointError):
            fg.jit(_log_of, backend="gpu")(fnp.array([1.0, -1.0]))
        gc.collect()
        got = fg.jit(lambda x: x * 2.0 + 1.0, backend="gpu")(fnp.array([1.0, 2.0, 3.0]))
        np.testing.assert_array_equal(np.asarray(got), [3.0, 5.0, 7.0])


@pytest.mark.usefixtures("gpu")
def test_gpu_pool_skips_a_buffer_released_after_it_was_pooled():
    """The other order of that collection: the device buffer finalised first pools its wgpu
    buffer, whose own finaliser then releases the handle; the pool must not hand it out."""
    from fungrad.lowering.gpu import runtime as gpu_runtime

    rt = gpu_runtime.runtime()
    words = 1000 + rt.POOL_KEEP  # (a size no other test pools)
    db = rt.alloc(words)
    buf = db.buffer
    del db  # pooled, live
    buf._release()  # what wgpu-py's finaliser does
    assert buf._internal is None
    fresh = rt.upload(np.arange(words, dtype=np.float32))
    assert fresh.buffer is not buf
    np.testing.assert_array_equal(
        rt.download(fresh, (words,), np.float32), np.arange(words, dtype=np.float32)
    )


def test_eager_loops_name_the_iteration_too(nans):
    body_line = _line(_scanned, "fnp.log")
    _raises(
        _scanned,
        fnp.ones(5),
        match=rf"encountered in log at {HERE}:{body_line} .*, in iteration 3 of the scan",
    )

    def nested(x):
        def outer(c, xi):
            return c, lax.scan(lambda d, _: (d - xi, fnp.sqrt(d - xi)), c, None, length=3)[1]

        return lax.scan(outer, 2.0, x)[1]

    _raises(
        nested,
        fnp.array([0.5, 1.0]),
        match=r"encountered in sqrt .*in iteration 2 of the scan .*, in iteration 1 of the scan",
    )


def test_a_jit_call_inside_eager_grad_or_vmap_is_stepped_into(nans):
    line = _line(masked_sqrt, "fnp.sqrt")
    _raises(
        fg.grad(fg.jit(masked_sqrt)),
        fnp.array([0.0, 1.0]),
        match=rf"encountered in mul at {HERE}:{line} \(masked_sqrt\), in the derivative "
        r"\(jvp or backward pass\) of sqrt at .*, inside jit\(masked_sqrt\)",
    )
    _raises(
        fg.vmap(fg.jit(_log_of)),
        fnp.array([[1.0], [-1.0]]),
        match=rf"encountered in log at {HERE}:{_line(_log_of, 'fnp.log')} .*inside jit\(_log_of\)",
    )


def test_a_compiled_call_whose_nan_the_rerun_does_not_make_says_so(nans):
    closed = fg.make_jaxpr(lambda v: v * 2.0)(fnp.ones(2))
    params = {"jaxpr": closed, "name": "f"}
    x = np.array([1.0, 2.0], np.float32)
    bad = np.array([2.0, np.nan], np.float32)
    err = nan_hunt.primitive_error("jit", [bad], 0, "nan", np.isnan(bad), [x], None, params)
    assert "encountered in jit: output f32[2] holds 1 nan" in str(err)
    assert "op by op made no invalid value: the nan only appears in the compiled" in str(err)
