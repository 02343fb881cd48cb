"""The ``fg.jit`` API (fungrad/transforms/jit.py): results, pytrees, static and donated
arguments, the trace cache (retracing, explain_recompiles, the retrace warning), thread safety,
ahead-of-time lower/compile, errors, and jit composed with grad/vjp/jvp/vmap/scan/jacobians.

Oracles: numpy for values, the same function evaluated eagerly (no jit) for transformed
results, central finite differences (float64) for derivatives, a Python loop for vmap. Traces
are counted with a Python side effect in the traced function; compilations by wrapping
``fungrad.lowering.compile_jaxpr``.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import warnings
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fungrad as fg
import fungrad.lowering
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.testing import check_grads
from fungrad.testing import strategies as fst
from fungrad.transforms.jit_cache import RetraceWarning
from fungrad.transforms.jit_primitive import jit_p
from tests.helpers import assert_array

# -- helpers --------------------------------------------------------------------------------------


def counted(fn):
    """``fn`` and a list that grows by one each time ``fn`` runs as Python (is traced)."""
    traces = []

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        traces.append(1)
        return fn(*args, **kwargs)

    return wrapper, traces


@pytest.fixture
def compiles(monkeypatch):
    """Names of the functions compiled while the test runs (the real compiler still runs)."""
    names = []
    real = fungrad.lowering.compile_jaxpr

    def counting(closed, backend="cpu", name="f"):
        names.append(name)
        return real(closed, backend=backend, name=name)

    monkeypatch.setattr(fungrad.lowering, "compile_jaxpr", counting)
    return names


@pytest.fixture
def option():
    """Set config options for one test, restoring them afterwards."""
    saved = {}

    def set_option(name, value):
        saved.setdefault(name, fg.config.read(name))
        fg.config.update(name, value)

    yield set_option
    for name, value in saved.items():
        fg.config.update(name, value)


def finite_difference_grad(f, x, eps=1e-6):
    x = np.asarray(x, np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (float(f(x + e)) - float(f(x - e))) / (2 * eps)
    return g


def chain(x):
    return fnp.tanh(x) * 0.5 + fnp.exp(-x * x) - fnp.sin(x) / (1 + x * x)


def chain_np(x):
    return np.tanh(x) * 0.5 + np.exp(-x * x) - np.sin(x) / (1 + x * x)


# -- values ---------------------------------------------------------------------------------------


@given(fst.arrays(np.float32, fst.shapes(max_side=5), min_value=-4, max_value=4))
def test_elementwise_chain_matches_numpy(x):
    assert_array(
        fg.jit(chain)(x), chain_np(x.astype(np.float64)), dtype=np.float32, rtol=1e-5, atol=1e-5
    )


def test_nan_and_inf_inputs_propagate():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0], np.float32)
    f = fg.jit(lambda x: x * 2 + 1)
    assert_array(f(x), x * 2 + 1, dtype=np.float32)


@given(
    fst.arrays(
        np.float32, fst.shapes(min_dims=2, max_dims=2, max_side=4), min_value=-3, max_value=3
    )
)
def test_reductions_match_numpy(x):
    s, sq = fg.jit(lambda x: (x.sum(axis=0), (x * x).sum()))(x)
    assert_array(s, x.sum(0), rtol=1e-5, atol=1e-5)
    assert_array(sq, (x.astype(np.float64) ** 2).sum(), rtol=1e-5, atol=1e-5)
    if x.size:
        m, mean = fg.jit(lambda x: (fnp.max(x, axis=1), fnp.mean(x)))(x)
        assert_array(m, x.max(1))
        assert_array(mean, x.astype(np.float64).mean(), rtol=1e-5, atol=1e-6)


def test_dot_matches_numpy():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 7), np.float32), rng.standard_normal((7, 3), np.float32)
    assert_array(fg.jit(lambda a, b: fnp.tanh(a @ b))(a, b), np.tanh(a @ b), rtol=1e-5, atol=1e-5)


def test_python_scalar_arguments_are_weakly_typed():
    f = fg.jit(lambda x, y: x * y)
    out = f(3.0, 2)
    assert_array(out, 6.0, dtype=np.float32, weak_type=True)
    # weak * strong float32 stays float32; int32 * weak float -> float32 (JAX's promotion)
    assert_array(f(np.float32(3.0), 2.0), 6.0, dtype=np.float32, weak_type=False)


def test_numpy_arrays_are_converted_to_canonical_dtypes():
    out = fg.jit(lambda x: x + 1)(np.arange(4, dtype=np.float64))
    assert_array(out, np.arange(4) + 1.0, dtype=np.float32)


def test_x64_values(x64):
    x = np.linspace(-1, 1, 7)
    out = fg.jit(chain)(x)
    assert_array(out, chain_np(x), dtype=np.float64, rtol=1e-12, atol=1e-12)


# -- pytrees and keyword arguments ----------------------------------------------------------------

Params = namedtuple("Params", ["w", "b"])


def test_pytrees_in_and_out():
    def f(params, xs, scale=1.0):
        w, b = params
        y = xs["x"] @ w + b
        return {"y": y * scale, "aux": (fnp.sum(y), None), "n": xs["n"] + 1}

    rng = np.random.default_rng(1)
    params = Params(rng.standard_normal((3, 2), np.float32), rng.standard_normal(2, np.float32))
    xs = {"x": rng.standard_normal((4, 3), np.float32), "n": np.int32(4)}
    out = fg.jit(f)(params, xs, scale=2.0)
    y = xs["x"] @ params.w + params.b
    assert set(out) == {"y", "aux", "n"}
    assert_array(out["y"], 2 * y, rtol=1e-5, atol=1e-6)
    assert_array(out["aux"][0], y.sum(), rtol=1e-5, atol=1e-5)
    assert out["aux"][1] is None
    assert_array(out["n"], 5, dtype=np.int32)


@given(
    fst.pytrees(
        fst.arrays(np.float32, fst.shapes(max_dims=2, max_side=3), min_value=-2, max_value=2)
    )
)
def test_pytree_of_arrays_round_trips(tree):
    out = fg.jit(lambda t: fg.tree_util.tree_map(lambda x: fnp.exp(x) * 2, t))(tree)
    assert fg.tree_util.tree_structure(out) == fg.tree_util.tree_structure(tree)
    for got, x in zip(fg.tree_util.tree_leaves(out), fg.tree_util.tree_leaves(tree)):
        assert_array(got, np.exp(x.astype(np.float64)) * 2, dtype=np.float32, rtol=1e-5)


def test_keyword_arguments_are_traced_not_static():
    f, traces = counted(lambda x, *, scale: x * scale)
    jf = fg.jit(f)
    assert_array(jf(fnp.ones(2), scale=2.0), [2.0, 2.0])
    assert_array(jf(fnp.ones(2), scale=3.0), [3.0, 3.0])
    assert len(traces) == 1  # a new value of a dynamic keyword argument does not retrace


def test_zero_outputs_and_a_constant_output():
    assert fg.jit(lambda x: None)(fnp.ones(2)) is None
    assert_array(fg.jit(lambda x: (x, 2.0))(fnp.ones(2))[1], 2.0, dtype=np.float32)


# -- the trace cache ------------------------------------------------------------------------------


def test_same_avals_trace_once_and_new_shapes_dtypes_weak_types_retrace():
    f, traces = counted(lambda x: x * 2)
    jf = fg.jit(f)
    for _ in range(3):
        jf(fnp.ones(3))
        jf(np.ones(3, np.float32))  # numpy input, same aval
    assert len(traces) == 1
    jf(fnp.ones(4))
    assert len(traces) == 2
    jf(fnp.ones(4, np.int32))
    assert len(traces) == 3
    jf(2.0)  # weak f32[]
    jf(np.float32(2.0))  # strong f32[]
    assert len(traces) == 5
    jf(fnp.ones(3))
    assert len(traces) == 5


def test_pytree_structure_is_part_of_the_key():
    f, traces = counted(lambda t: t[0] + t[1])
    jf = fg.jit(f)
    jf((1.0, 2.0))
    jf([1.0, 2.0])
    assert len(traces) == 2
    assert jf._cache_size() == 2


def test_enable_x64_is_part_of_the_key(option):
    f, traces = counted(lambda x: x + 1.0)
    jf = fg.jit(f)
    x = fg.Array(np.ones(2, np.float32))  # an Array: the hot path's tables are per x64 too
    jf(x)
    jf(x)
    option("enable_x64", True)
    out = jf(x)
    assert len(traces) == 2 and out.dtype == np.float32


def test_clear_cache_retraces():
    f, traces = counted(lambda x: x + 1)
    jf = fg.jit(f)
    jf(fnp.ones(2))
    jf.clear_cache()
    assert jf._cache_size() == 0
    jf(fnp.ones(2))
    assert len(traces) == 2


def test_outputs_of_a_call_feed_the_next_call_without_retracing():
    f, traces = counted(lambda x: x * 0.5 + 1)
    jf = fg.jit(f)
    x = fnp.zeros(3)
    for _ in range(5):
        x = jf(x)
    assert len(traces) == 1
    assert_array(x, np.full(3, 1.9375))


# -- static arguments -----------------------------------------------------------------------------


def test_static_argnums_values_and_retracing():
    f, traces = counted(lambda x, n: x**n if n > 1 else x)
    jf = fg.jit(f, static_argnums=1)
    assert_array(jf(fnp.full(2, 3.0), 2), [9.0, 9.0])
    assert_array(jf(fnp.full(2, 3.0), 2), [9.0, 9.0])
    assert len(traces) == 1
    assert_array(jf(fnp.full(2, 3.0), 3), [27.0, 27.0])
    assert_array(jf(fnp.full(2, 3.0), 1), [3.0, 3.0])
    assert len(traces) == 3


def test_static_argnames_and_the_same_parameter_by_position_or_keyword():
    def f(x, mode="add"):
        return x + 1 if mode == "add" else x * 10

    f, traces = counted(f)
    jf = fg.jit(f, static_argnames="mode")
    assert_array(jf(fnp.ones(2), mode="mul"), [10.0, 10.0])
    assert_array(jf(fnp.ones(2), "mul"), [10.0, 10.0])  # positional: also static
    assert_array(jf(fnp.ones(2)), [2.0, 2.0])  # the default
    jn = fg.jit(f, static_argnums=1)
    assert_array(jn(fnp.ones(2), mode="mul"), [10.0, 10.0])


def test_negative_static_argnums_count_from_the_end_of_the_call():
    jf = fg.jit(lambda x, n: x * n, static_argnums=-1)
    assert_array(jf(fnp.ones(2), 3), [3.0, 3.0])


def test_static_values_of_different_types_do_not_share_a_trace():
    f, traces = counted(lambda x, n: x * n)
    jf = fg.jit(f, static_argnums=1)
    jf(fnp.ones(2), 1)
    jf(fnp.ones(2), 1.0)  # 1 == 1.0 but a different Python type
    assert len(traces) == 2


@pytest.mark.parametrize("value", [[1, 2], np.arange(3), {"a": 1}])
def test_unhashable_static_argument_is_an_error(value):
    jf = fg.jit(lambda x, n: x, static_argnums=1)
    with pytest.raises(
        ValueError,
        match=r"(?s)Non-hashable static arguments.*static argument "
        r"n.*unhashable type",
    ):
        jf(fnp.ones(2), value)


def test_argument_validation_at_jit_time():
    def f(x, y):
        return x + y

    with pytest.raises(ValueError, match=r"static_argnums=\(3,\), but only accepts 2"):
        fg.jit(f, static_argnums=3)
    with pytest.raises(ValueError, match=r"donate_argnums=\(2,\), but only accepts 2"):
        fg.jit(f, donate_argnums=2)
    with pytest.raises(ValueError, match="invalid argnames {'z'}"):
        fg.jit(f, static_argnames="z")
    with pytest.raises(ValueError, match="cannot intersect"):
        fg.jit(f, static_argnums=0, donate_argnums=0)
    with pytest.raises(TypeError, match="static_argnums must be an int or a sequence of ints"):
        fg.jit(f, static_argnums="x")
    with pytest.raises(TypeError, match="jit: expected a callable value, got 3"):
        fg.jit(3)
    fg.jit(lambda *args: args[0], static_argnums=5)  # *args: any index is possible


@pytest.mark.parametrize(
    "option, value",
    [
        ("static_argnums", 0.5),
        ("static_argnums", True),
        ("static_argnums", (0, 1.0)),
        ("static_argnums", None),
        ("donate_argnums", 0.5),
        ("donate_argnums", "x"),
        ("static_argnames", 0),
        ("static_argnames", ("x", 1)),
    ],
)
def test_issue15_bad_jit_options_are_type_errors_naming_the_option(option, value):
    """Floats, bools, None and mixed sequences raised "'float' object is not iterable"."""
    with pytest.raises(
        TypeError,
        match=rf"jit: {option} must be an? (int|string) or a "
        rf"sequence of (int|string)s, got ",
    ):
        fg.jit(lambda x, y: x, **{option: value})


@pytest.mark.parametrize("transform", [fg.grad, fg.jacfwd, fg.jacrev, fg.value_and_grad])
def test_issue15_bad_argnums_are_type_errors(transform):
    for bad in (0.5, True, "0", (0, None)):
        with pytest.raises(TypeError, match="argnums must be an int or a sequence of ints"):
            transform(lambda x: fnp.sum(x), argnums=bad)(fnp.ones(2))
    with pytest.raises(TypeError, match="make_jaxpr: static_argnums must be an int"):
        fg.make_jaxpr(lambda x: x, static_argnums=0.5)(fnp.ones(2))


def test_non_array_argument_names_it_and_suggests_static():
    jf = fg.jit(lambda x, opts: x)
    with pytest.raises(TypeError, match=r"argument opts\['mode'\] is a str .*static_argnums=1"):
        jf(fnp.ones(2), {"mode": "fast"})
    with pytest.raises(TypeError, match=r"argument mode is a str .*static_argnames='mode'"):
        fg.jit(lambda x, *, mode: x)(fnp.ones(2), mode="fast")
    with pytest.raises(TypeError, match=r"argument rest\[1\] is a object"):
        fg.jit(lambda x, *rest: x)(1.0, 2.0, object())


def test_non_array_output_is_an_error():
    with pytest.raises(
        TypeError,
        match=r"jit\(<lambda>\): the function returned a value of type "
        "str",
    ):
        fg.jit(lambda x: "no")(1.0)
    with pytest.raises(
        TypeError,
        match=r"returned a value of type str at output\['k'\]\[1\] "
        r"\('s'\), which is not an array",
    ):
        fg.jit(lambda x: {"k": (x, "s")})(1.0)


def test_python_control_flow_on_traced_values_says_to_use_static_argnums():
    def f(x):
        return x if x > 0 else -x

    with pytest.raises(fg.ConcretizationTypeError, match="static_argnums"):
        fg.jit(f)(1.0)
    # with the argument static, Python control flow is fine
    assert_array(fg.jit(f, static_argnums=0)(-2.0), 2.0)


# -- decorators, wrapping, backends ---------------------------------------------------------------


def test_decorator_forms():
    @fg.jit
    def f(x):
        """Doc of f."""
        return x + 1

    @functools.partial(fg.jit, static_argnums=1)
    def g(x, n):
        return x * n

    @fg.jit(static_argnames=("n",))
    def h(x, n):
        return x - n

    assert f.__name__ == "f" and f.__doc__ == "Doc of f." and f.__wrapped__ is not None
    assert_array(f(1.0), 2.0)
    assert_array(g(2.0, 3), 6.0)
    assert_array(h(2.0, n=3), -1.0)
    assert_array(fg.jit(functools.partial(lambda a, x: a * x, 3.0))(2.0), 6.0)


@pytest.mark.parametrize("backend", [None, "cpu"])
def test_cpu_backend(backend):
    assert_array(fg.jit(lambda x: x + 1, backend=backend)(1.0), 2.0)


@pytest.mark.parametrize("backend", ["tpu", "cuda"])
def test_unavailable_backends_are_a_clear_error(backend):
    with pytest.raises(
        ValueError,
        match=f"backend '{backend}' is not available; the supported backends are 'cpu', 'gpu'",
    ):
        fg.jit(lambda x: x, backend=backend)


# -- donation -------------------------------------------------------------------------------------


def test_donated_arrays_are_deleted():
    jf = fg.jit(lambda x, y: (x + y, y * 2), donate_argnums=0)
    x, y = fnp.ones(3), fnp.ones(3)
    a, b = jf(x, y)
    assert_array(a, np.full(3, 2.0))
    assert x.is_deleted() and not y.is_deleted()
    for use in (lambda: x + 1, lambda: np.asarray(x), lambda: x.shape, lambda: jf(x, y)):
        with pytest.raises(
            RuntimeError, match="Array has been deleted.*donated to a jitted function"
        ):
            use()
    assert_array(y, np.ones(3))


def test_donation_by_keyword_pytree_and_numpy_inputs():
    jf = fg.jit(lambda p, x: p["a"] + x, donate_argnums=0)
    p = {"a": fnp.ones(2)}
    jf(p=p, x=fnp.ones(2))
    assert p["a"].is_deleted()
    raw = np.ones(2, np.float32)
    assert_array(jf({"a": raw}, raw), [2.0, 2.0])  # numpy inputs are copies: nothing deleted
    assert raw.sum() == 2.0


def test_issue15_donate_argnames_as_jax():
    """donate_argnames (JAX's option; the intersection error already named it) donates by
    name, whether the argument is passed by position or by keyword, keyword-only too."""

    def f(x, y, *, z):
        return x + y + z

    jf = fg.jit(f, donate_argnames=("y", "z"))
    x, y, z = fnp.ones(2), fnp.ones(2), fnp.ones(2)
    assert_array(jf(x, y, z=z), [3.0, 3.0])
    assert not x.is_deleted() and y.is_deleted() and z.is_deleted()
    y2 = fnp.ones(2)
    jf(fnp.ones(2), y=y2, z=fnp.ones(2))
    assert y2.is_deleted()
    with pytest.raises(ValueError, match="invalid argnames {'w'} in donate_argnames"):
        fg.jit(f, donate_argnames="w")
    with pytest.raises(ValueError, match="cannot intersect"):
        fg.jit(f, static_argnames="y", donate_argnames="y")


def test_donation_is_ignored_under_transforms():
    jf = fg.jit(lambda x: x * x, donate_argnums=0)
    x = fnp.full((), 3.0)
    assert_array(fg.grad(jf)(x), 6.0)
    assert not x.is_deleted()


# -- explain_recompiles and the retrace warning ---------------------------------------------------


def _explanations(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "fungrad.jit"]


def test_explain_recompiles_names_the_changed_argument(option, caplog):
    option("explain_recompiles", True)
    caplog.set_level(logging.WARNING, logger="fungrad.jit")

    def f(params, x, n):
        return params["w"] * x * n

    jf = fg.jit(f, static_argnums=2)
    p = {"w": fnp.ones(3)}
    jf(p, fnp.ones(3), 2)
    assert _explanations(caplog) == []  # the first trace is not a retrace
    jf({"w": fnp.ones(4)}, fnp.ones(4), 2)
    jf(p, fnp.ones(3, np.int32), 2)
    jf(p, fnp.ones(3), 5)
    jf(p, 1.0, 2)
    jf(p, np.float32(1.0), 2)
    jf({"w": fnp.ones(3), "v": 1.0}, fnp.ones(3), 2)
    jf(p, fnp.ones(3), 2)  # cached: no message
    msgs = _explanations(caplog)
    assert len(msgs) == 6, msgs
    assert all(m.startswith("TRACING CACHE MISS: jit(f) (defined at ") for m in msgs)
    assert "test_jit_api.py" in msgs[0]
    assert "argument \"params['w']\" changed shape from f32[3] to f32[4]" in msgs[0]
    assert "argument 'x' changed shape from f32[3] to f32[4]" in msgs[0]
    assert "argument 'x' changed dtype from f32[3] to i32[3]" in msgs[1]
    assert "static argument 'n' changed from 2 to 5" in msgs[2]
    assert "argument 'x' changed shape" in msgs[3] and "to f32[]" in msgs[3]
    assert "from weakly to strongly typed" in msgs[4]
    assert "pytree structure of argument 'params' changed" in msgs[5]


def test_explain_recompiles_is_off_by_default(caplog):
    caplog.set_level(logging.WARNING, logger="fungrad.jit")
    jf = fg.jit(lambda x: x)
    jf(fnp.ones(1))
    jf(fnp.ones(2))
    assert _explanations(caplog) == []


def test_retrace_warning_fires_once_past_the_threshold(option):
    option("jit_retrace_warning_threshold", 3)

    def growing(x):
        return x + 1

    jf = fg.jit(growing)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 4):
            jf(fnp.ones(n))
        assert not [w for w in caught if w.category is RetraceWarning]
        for n in range(4, 8):
            jf(fnp.ones(n))
    hits = [w for w in caught if w.category is RetraceWarning]
    assert len(hits) == 1
    msg = str(hits[0].message)
    assert "jit(growing)" in msg and "traced 4 times" in msg
    assert "argument 'x' changed shape from f32[3] to f32[4]" in msg
    assert hits[0].filename == __file__  # points at the caller's line


def test_retrace_warning_threshold_zero_disables(option):
    option("jit_retrace_warning_threshold", 0)
    jf = fg.jit(lambda x: x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RetraceWarning)
        for n in range(12):
            jf(fnp.ones(n))


def _lru_misses(calls, cap):
    """The calls that miss an LRU cache of ``cap`` entries (the reference)."""
    held, misses = [], []
    for c in calls:
        if c in held:
            held.remove(c)
        else:
            misses.append(c)
            if len(held) == cap:
                held.pop(0)
        held.append(c)
    return misses


def test_issue15_per_function_cache_is_a_bounded_lru(option):
    """Issue 15 item 17: a function called with thousands of shapes kept every compiled entry.
    At most jit_cache_max_entries signatures stay; the least recently used (hot-path calls
    count) are dropped and traced again, and their results stay right."""
    option("jit_cache_max_entries", 3)
    option("jit_retrace_warning_threshold", 0)
    traces = []

    def f(x, scale=2.0):
        traces.append(x.shape[0])
        return x * scale + 1.0

    calls = [1, 2, 3, 1, 1, 4, 1, 5, 6, 7, 1, 2, 7, 6, 6, 2]
    expected = _lru_misses(calls, 3)
    assert expected == [1, 2, 3, 4, 5, 6, 7, 1, 2, 6]  # 1 survives 4 and 5, not 5, 6 and 7
    for jf, kw in [(fg.jit(f), {}), (fg.jit(f, static_argnames="scale"), {"scale": 2.0})]:
        traces.clear()
        for n in calls:
            x = np.arange(n, dtype=np.float32)
            np.testing.assert_array_equal(np.asarray(jf(fnp.asarray(x), **kw)), x * 2 + 1)
            assert jf._cache_size() == min(3, len(set(traces)))
        assert traces == expected, kw


def test_issue15_retrace_warning_names_the_cache_bound(option):
    option("jit_retrace_warning_threshold", 2)
    option("jit_cache_max_entries", 5)
    jf = fg.jit(lambda x: x + 1)
    with pytest.warns(
        RetraceWarning,
        match=r"At most 5 signatures are kept per function "
        r"\(config 'jit_cache_max_entries'\)",
    ):
        for n in range(1, 5):
            jf(fnp.ones(n))


# -- thread safety --------------------------------------------------------------------------------


def test_first_calls_from_many_threads_trace_and_compile_once(compiles):
    def slow_to_trace(x):
        time.sleep(0.05)  # widen the window in which the other threads arrive
        return fnp.sin(x) * 2

    f, traces = counted(slow_to_trace)
    jf = fg.jit(f)
    barrier = threading.Barrier(6)
    results, errors = [None] * 6, []

    def worker(i):
        try:
            barrier.wait()
            results[i] = np.asarray(jf(fnp.full(5, float(i))))
        except Exception as e:  # reported below, with the thread's index
            errors.append((i, e))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(traces) == 1
    assert compiles.count("slow_to_trace") == 1
    for i, r in enumerate(results):
        np.testing.assert_allclose(r, np.sin(np.full(5, float(i), np.float32)) * 2, rtol=1e-6)


def test_a_failed_trace_is_not_cached():
    calls = []

    def f(x):
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("first trace fails")
        return x + 1

    jf = fg.jit(f)
    with pytest.raises(ValueError, match="first trace fails"):
        jf(fnp.ones(2))
    assert_array(jf(fnp.ones(2)), [2.0, 2.0])


# -- lower / compile ------------------------------------------------------------------------------


def test_lower_as_text_shows_the_jaxpr_and_llvm_ir():
    lowered = fg.jit(lambda x: fnp.exp(x) * 2).lower(fnp.ones(8))
    text = lowered.as_text()
    assert "exp" in text and "define" in text
    assert "exp" in str(lowered.jaxpr)


def test_compiled_runs_and_checks_its_signature():
    def f(x, p, n):
        return x * p["a"].sum() * n

    lowered = fg.jit(f, static_argnums=2).lower(fnp.ones(3), {"a": fnp.ones(2)}, 4)
    compiled = lowered.compile()
    assert "define" in compiled.as_text()
    assert_array(compiled(fnp.ones(3), {"a": fnp.ones(2)}), np.full(3, 8.0))
    with pytest.raises(
        TypeError,
        match=r"Argument \"p\['a'\]\" compiled with f32\[2\] and "
        r"called with f32\[5\]",
    ):
        compiled(fnp.ones(3), {"a": fnp.ones(5)})
    with pytest.raises(
        TypeError,
        match=r"Argument 'x' compiled with f32\[3\] and called with "
        r"i32\[3\]",
    ):
        compiled(fnp.ones(3, np.int32), {"a": fnp.ones(2)})
    with pytest.raises(TypeError, match="pytree structure"):
        compiled(fnp.ones(3), {"b": fnp.ones(2)})
    with pytest.raises(TypeError, match="pytree structure"):
        compiled(fnp.ones(3), {"a": fnp.ones(2)}, 4)  # static arguments are not passed


def test_lower_with_abstract_arguments():
    compiled = (
        fg.jit(lambda x, y: x @ y)
        .lower(fg.ShapedArray((2, 3), np.float32), fg.ShapedArray((3,), np.float32))
        .compile()
    )
    a, b = np.ones((2, 3), np.float32), np.arange(3, dtype=np.float32)
    assert_array(compiled(a, b), a @ b)
    assert compiled.in_avals == [
        fg.ShapedArray((2, 3), np.float32),
        fg.ShapedArray((3,), np.float32),
    ]
    with pytest.raises(TypeError, match="argument x is a ShapedArray"):
        fg.jit(lambda x: x)(fg.ShapedArray((2,), np.float32))


def test_trace_stage_and_shape_dtype_struct_arguments():
    # JAX's AOT stages: jit(f).trace(*args) -> .jaxpr / .out_info / .lower().compile(), with
    # ShapeDtypeStructs standing for arguments (JAX 0.10.2's out_info printed below).
    jf = fg.jit(lambda x, y: {"s": x * 2, "t": (x @ y).sum()})
    traced = jf.trace(fnp.ones((2, 3)), fg.ShapeDtypeStruct((3, 4), np.float32))
    assert [str(a.str_short()) for a in traced.jaxpr.in_avals] == ["f32[2,3]", "f32[3,4]"]
    assert str(traced.out_info) == (
        "{'s': ShapeDtypeStruct(shape=(2, 3), dtype=float32), "
        "'t': ShapeDtypeStruct(shape=(), dtype=float32)}"
    )
    out = traced.lower().compile()(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))
    assert_array(out["t"], np.float32(24.0))
    weak = fg.jit(lambda x: x * 2).trace(1.0).out_info
    assert repr(weak) == "ShapeDtypeStruct(shape=(), dtype=float32, weak_type=True)"
    spec = fg.ShapeDtypeStruct((2,), np.float32)
    assert_array(fg.jit(lambda x: x * 2).lower(spec).compile()(np.ones(2, np.float32)), [2.0, 2.0])
    with pytest.raises(TypeError, match="argument x is a ShapeDtypeStruct"):
        fg.jit(lambda x: x)(spec)  # only the AOT stages take abstract arguments


def test_lower_shares_the_cache_with_calls():
    f, traces = counted(lambda x: x + 1)
    jf = fg.jit(f)
    jf.lower(fnp.ones(2)).compile()
    jf(fnp.ones(2))
    assert len(traces) == 1


# -- the jit primitive in jaxprs ------------------------------------------------------------------


def test_make_jaxpr_shows_a_jit_equation():
    inner = fg.jit(lambda x: fnp.sin(x) * 2)
    closed = fg.make_jaxpr(lambda x: inner(x) + 1)(fnp.ones(3))
    text = str(closed)
    assert "jit[" in text and "name=<lambda>" in text and "sin" in text
    eqn = next(e for e in closed.eqns if e.primitive is jit_p)
    assert [a.shape for a in eqn.params["jaxpr"].in_avals] == [(3,)]


def test_a_function_reading_a_traced_value_from_outside_is_traced_again_each_time():
    box = {}
    jg = fg.jit(lambda y: box["x"] * y)

    def outer(x):
        box["x"] = x
        return jg(2.0)

    assert_array(fg.grad(outer)(1.0), 2.0)
    assert_array(fg.grad(outer)(3.0), 2.0)
    assert_array(fg.vmap(outer)(fnp.arange(3.0)), [0.0, 2.0, 4.0])
    assert jg._cache_size() == 0  # jaxprs holding another transform's tracers are not kept


def test_jit_of_a_closure_over_a_traced_value():
    def f(x):
        return fg.jit(lambda y: x * y)(3.0)

    assert_array(fg.grad(f)(2.0), 3.0)
    assert_array(fg.vmap(f)(fnp.arange(3.0)), [0.0, 3.0, 6.0])
    assert_array(fg.jit(f)(2.0), 6.0)


# -- composition with the other transforms --------------------------------------------------------


def _loss(w, x):
    return fnp.sum(fnp.tanh(x @ w) ** 2) + 0.1 * fnp.sum(w * w)


def _data(seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((3, 2)), rng.standard_normal((4, 3))


def test_grad_of_jit_matches_eager_and_finite_differences(x64, compiles):
    w, x = _data()
    g = fg.grad(fg.jit(_loss))(w, x)
    assert_array(g, fg.grad(_loss)(w, x), rtol=1e-10, atol=1e-12)
    fd = finite_difference_grad(lambda w: _loss(w, x), w)
    assert_array(g, fd, rtol=1e-6, atol=1e-7)
    n = len(compiles)
    fg.grad(fg.jit(_loss))(w, x)  # a new jit object: traced and compiled again
    jl = fg.jit(_loss)
    fg.grad(jl)(w, x)
    m = len(compiles)
    for _ in range(3):  # the same jit object: its forward and backward compile once
        fg.grad(jl)(w, x)
    assert len(compiles) == m and m > n


def test_jit_of_grad_and_value_and_grad(x64):
    w, x = _data(1)
    assert_array(fg.jit(fg.grad(_loss))(w, x), fg.grad(_loss)(w, x), rtol=1e-10, atol=1e-12)
    v, g = fg.jit(fg.value_and_grad(_loss, argnums=(0, 1)))(w, x)
    v0, g0 = fg.value_and_grad(_loss, argnums=(0, 1))(w, x)
    assert_array(v, v0, rtol=1e-12)
    for a, b in zip(g, g0):
        assert_array(a, b, rtol=1e-10, atol=1e-12)


def test_vmap_of_jit_and_jit_of_vmap_match_a_loop():
    rng = np.random.default_rng(2)
    xs, w = rng.standard_normal((5, 3), np.float32), rng.standard_normal((3, 2), np.float32)

    def f(x, w):
        return fnp.tanh(x @ w), fnp.sum(x)

    loop = [f(x, w) for x in xs]
    outs = [
        fg.vmap(fg.jit(f), in_axes=(0, None))(xs, w),
        fg.jit(fg.vmap(f, in_axes=(0, None)))(xs, w),
        fg.vmap(fg.jit(f), in_axes=(1, None))(xs.T, w),
    ]
    for out in outs:
        for k, (a, b) in enumerate(loop):
            assert_array(out[0][k], a, rtol=1e-5, atol=1e-6)
            assert_array(out[1][k], b, rtol=1e-5, atol=1e-6)


def test_vmap_of_jit_over_a_non_leading_axis():
    xs = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = fg.vmap(fg.jit(lambda v: fnp.cumsum(v) * 2), in_axes=1)(xs)
    assert_array(out, np.stack([np.cumsum(xs[:, j]) * 2 for j in range(4)]))


def test_jit_of_jit_and_nested_jit_calls():
    inner, traces = counted(lambda x: fnp.exp(x) - 1)
    j_inner = fg.jit(inner)
    outer = fg.jit(lambda x: j_inner(x) * j_inner(2 * x))
    x = np.linspace(-1, 1, 5).astype(np.float32)
    assert_array(outer(x), np.expm1(x) * np.expm1(2 * x), rtol=1e-5, atol=1e-6)
    assert_array(fg.jit(fg.jit(chain))(x), chain_np(x), rtol=1e-5, atol=1e-6)
    assert len(traces) == 1  # both inner calls share one trace


def test_jit_inside_scan_bodies(x64):
    step = fg.jit(lambda c, a: (c * 0.9 + fnp.sin(a).sum(), c * a))

    def run(c0, xs, body):
        return lax.scan(body, c0, xs)

    def plain(c, a):
        return c * 0.9 + fnp.sin(a).sum(), c * a

    xs = np.random.default_rng(3).standard_normal((6, 2))
    got, want = run(1.5, xs, step), run(1.5, xs, plain)
    assert_array(got[0], want[0], rtol=1e-12)
    assert_array(got[1], want[1], rtol=1e-12)
    g = fg.grad(lambda c: run(c, xs, step)[0])(1.5)
    assert_array(g, fg.grad(lambda c: run(c, xs, plain)[0])(1.5), rtol=1e-10)
    assert_array(g, finite_difference_grad(lambda c: run(float(c), xs, plain)[0], 1.5), rtol=1e-6)
    # and the whole scan compiled, with jit inside its body
    out = fg.jit(lambda c: run(c, xs, step)[0])(1.5)
    assert_array(out, want[0], rtol=1e-12)


def test_jvp_and_linearize_of_jit(x64):
    f = fg.jit(lambda x: (fnp.sin(x) * x, fnp.sum(x**3)))
    x, t = np.linspace(-1, 1, 4), np.linspace(0.5, 2, 4)
    (p1, p2), (t1, t2) = fg.jvp(f, (x,), (t,))
    assert_array(p1, np.sin(x) * x, rtol=1e-12)
    assert_array(t1, (np.cos(x) * x + np.sin(x)) * t, rtol=1e-12)
    assert_array(t2, np.sum(3 * x**2 * t), rtol=1e-12)
    _, f_lin = fg.linearize(f, x)
    assert_array(f_lin(t)[0], t1, rtol=1e-12)


def test_jacobians_and_hessian_of_jit(x64):
    def f(x):
        return fnp.sum(fnp.sin(x) * x[::-1]) + fnp.prod(x)

    x = np.array([0.3, -0.7, 1.1])
    jf = fg.jit(f)
    assert_array(fg.jacrev(jf)(x), fg.jacrev(f)(x), rtol=1e-12, atol=1e-14)
    assert_array(fg.jacfwd(jf)(x), fg.jacrev(f)(x), rtol=1e-12, atol=1e-14)
    h = fg.hessian(jf)(x)
    assert_array(h, fg.hessian(f)(x), rtol=1e-10, atol=1e-12)
    fd = np.stack([finite_difference_grad(lambda v, i=i: fg.grad(f)(v)[i], x) for i in range(3)])
    assert_array(h, fd, rtol=1e-5, atol=1e-6)


def test_check_grads_of_jit_both_modes_second_order(x64):
    check_grads(
        fg.jit(lambda x, y: fnp.tanh(x) * y + fnp.exp(-x * y)),
        (np.array([0.2, -0.4]), np.array([1.5, 0.3])),
        order=2,
        modes=("fwd", "rev"),
    )


def test_grad_with_integer_and_static_arguments(x64):
    f = fg.jit(lambda x, idx, n: fnp.sum(x[idx] ** n), static_argnums=2)
    x = np.array([1.0, 2.0, 3.0])
    g = fg.grad(f)(x, np.array([0, 2, 2], np.int32), 2)
    assert_array(g, [2.0, 0.0, 12.0])


def test_per_example_gradients_jit_vmap_grad_of_jit():
    rng = np.random.default_rng(4)
    w, xs, ys = (
        rng.standard_normal(3, np.float32),
        rng.standard_normal((6, 3), np.float32),
        rng.standard_normal(6, np.float32),
    )

    def loss(w, x, y):
        return (fnp.dot(x, w) - y) ** 2

    per_example = fg.jit(fg.vmap(fg.grad(fg.jit(loss)), in_axes=(None, 0, 0)))(w, xs, ys)
    for k in range(6):
        assert_array(per_example[k], 2 * (xs[k] @ w - ys[k]) * xs[k], rtol=1e-5, atol=1e-6)


def test_weak_type_of_array_arguments_on_the_hot_path():
    f, traces = counted(lambda x: x * 2)
    jf = fg.jit(f)
    strong, weak = fg.Array(np.float32(1.0)), fg.Array(np.float32(1.0), weak_type=True)
    for _ in range(2):
        assert_array(jf(strong), 2.0, dtype=np.float32, weak_type=False)
        assert_array(jf(weak), 2.0, dtype=np.float32, weak_type=True)
    assert len(traces) == 2


def test_transforms_of_jit_compile_their_jaxprs(compiles):
    jf = fg.jit(lambda x: fnp.sin(x) * x)
    x = fnp.ones(3)
    fg.vmap(jf)(fnp.ones((2, 3)))
    fg.grad(lambda x: jf(x).sum())(x)
    assert len(compiles) >= 3  # the batched, the known-forward and the transposed jaxprs
    assert set(compiles) == {"<lambda>"}  # each keeps the function's name, as in JAX


# -- the hot path ---------------------------------------------------------------------------------


def test_the_hot_path_is_used_only_where_it_may_be():
    f, traces = counted(lambda x: x * 2 + 1)
    jf = fg.jit(f)
    x = fnp.full((), 3.0)
    assert_array(jf(x), 7.0)
    assert_array(jf(x), 7.0)
    # under a transform, the same avals must bind jit_p instead, even for concrete arguments
    assert "jit[" in str(fg.make_jaxpr(jf)(x))
    assert "jit[" in str(fg.make_jaxpr(lambda y: jf(x) + y)(1.0))
    assert_array(fg.grad(jf)(x), 2.0)
    # a deleted Array is caught before any native call
    y = fnp.full((), 1.0)
    y.delete()
    with pytest.raises(RuntimeError, match="deleted"):
        jf(y)
    assert len(traces) == 1


def test_many_arguments_hot_path():
    jf = fg.jit(lambda a, b, c: a * b + c)
    a = fnp.full(4, 2.0)
    for _ in range(3):
        assert_array(jf(a, a, a), np.full(4, 6.0))
    assert_array(jf(a, jf(a, a, a), a), np.full(4, 14.0))  # a fresh Array (aval not cached)


def test_static_and_donated_arguments_on_the_hot_path():
    f, traces = counted(lambda x, n: x * n)
    jf = fg.jit(f, static_argnums=1, donate_argnums=0)
    for _ in range(3):
        x = fnp.ones(2)
        assert_array(jf(x, 3), [3.0, 3.0])
        assert x.is_deleted()
    assert len(traces) == 1
    with pytest.raises(RuntimeError, match="deleted"):
        jf(x, 3)
    with pytest.raises(ValueError, match="Non-hashable static arguments"):
        jf(fnp.ones(2), [3])
    with pytest.raises(ValueError, match="Non-hashable static arguments"):
        jf(fnp.ones(2), fnp.ones(()))
    assert_array(jf(fnp.ones(2), 3.0), [3.0, 3.0])  # 3.0 is not the static value 3
    z = fnp.ones(2)
    assert "jit[" in str(fg.make_jaxpr(lambda y: jf(z, 3) + y)(1.0))  # staged, not run
    assert not z.is_deleted()  # (nor donated)
    y = fnp.ones(2)
    assert_array(jf(y, n=3), [3.0, 3.0])  # by keyword: the general path, a new signature
    assert y.is_deleted() and len(traces) == 3  # (as in JAX: f(x, 3) and f(x, n=3) differ)


@pytest.mark.parametrize("n", [0, 1, 3])
def test_random_argument_counts(n):
    jf = fg.jit(lambda *xs: sum(xs, fnp.zeros(2)))
    assert_array(jf(*[fnp.ones(2)] * n), np.full(2, float(n)))


@given(st.integers(0, 3), st.booleans())
def test_weak_and_strong_scalars_give_jax_dtypes(k, weak):
    x = float(k) if weak else np.float32(k)
    out = fg.jit(lambda x: x * 2)(x)
    assert_array(out, 2.0 * k, dtype=np.float32, weak_type=weak)
