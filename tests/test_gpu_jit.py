"""``jit(f, backend="gpu")``: devices, residency (no host round trips between calls), grad and
vmap programs, a training loop, random bits, and the errors (no adapter, float64, what the
GPU does not lower yet). The reference is the same function run eagerly (numpy impls)."""

from __future__ import annotations

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.lowering.gpu import runtime as gpu_runtime
from tests.test_jit_training import init, loss, sgd_step

pytestmark = pytest.mark.usefixtures("gpu")


def test_devices_lists_the_cpu_and_the_adapters():
    devs = fg.devices()
    assert devs[0].platform == "cpu"
    gpus = fg.devices("gpu")
    assert gpus and all(d.platform == "gpu" for d in gpus)
    assert sum(d.active for d in gpus) == 1
    assert "GpuDevice" in repr(gpus[0])


def test_device_put_round_trips_and_results_stay_on_the_device(gpu):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    gx = fg.device_put(x, backend="gpu")
    assert isinstance(gx, fg.GpuArray) and gx.shape == (3, 4) and gx.dtype == np.float32
    f = fg.jit(lambda v: v * 2 + 1, backend="gpu")
    gpu.transfers.update(upload=0, download=0)
    y = gx
    for _ in range(5):
        y = f(y)  # chained calls: device buffers are bound as they are
    assert gpu.transfers == {"upload": 0, "download": 0}
    expected = x
    for _ in range(5):
        expected = expected * 2 + 1
    np.testing.assert_array_equal(np.asarray(y), expected)
    assert gpu.transfers["download"] == 1
    np.asarray(y)  # the host copy is kept
    assert gpu.transfers["download"] == 1
    back = fg.device_put(y, "cpu")
    assert type(back) is fg.Array
    np.testing.assert_array_equal(np.asarray(back), expected)
    assert y.block_until_ready() is y


def test_ahead_of_time_compiled_gpu_functions_take_gpu_arrays(gpu):
    """``jit(f).lower(x).compile()`` called with GpuArrays keeps them on the device, as the
    jitted function does (it raised "not an array")."""
    gx = fg.device_put(np.arange(6, dtype=np.float32), backend="gpu")
    compiled = fg.jit(lambda v: fnp.sin(v) * 2, backend="gpu").lower(gx).compile()
    gpu.transfers.update(upload=0, download=0)
    y = compiled(compiled(gx))
    assert isinstance(y, fg.GpuArray) and gpu.transfers == {"upload": 0, "download": 0}
    np.testing.assert_allclose(
        np.asarray(y), np.sin(np.sin(np.arange(6.0)) * 2) * 2, rtol=1e-6, atol=1e-6
    )


def test_host_inputs_are_uploaded_and_pytrees_work():
    f = fg.jit(lambda d: {"s": d["a"] + d["b"], "p": d["a"] * d["b"]}, backend="gpu")
    a, b = np.float32([1, 2, 3]), np.float32([4, 5, 6])
    out = f({"a": a, "b": fnp.asarray(b)})
    np.testing.assert_array_equal(np.asarray(out["s"]), a + b)
    np.testing.assert_array_equal(np.asarray(out["p"]), a * b)


def test_gpu_arrays_work_in_eager_code_and_in_cpu_jit():
    g = fg.device_put(np.float32([0.5, 1.5]), backend="gpu")
    np.testing.assert_allclose(np.asarray(fnp.sin(g)), np.sin([0.5, 1.5]), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(fg.jit(fnp.exp)(g)), np.exp([0.5, 1.5]), rtol=1e-6)
    assert float(g[1]) == 1.5 and g.tolist() == [0.5, 1.5]


def test_grad_and_vmap_programs_run_on_the_gpu():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 3)).astype(np.float32)
    xs = rng.standard_normal((16, 8)).astype(np.float32)

    def f(w, x):
        return fnp.sum(fnp.tanh(x @ w) ** 2)

    per_example = fg.jit(fg.vmap(fg.grad(f), in_axes=(None, 0)), backend="gpu")
    got = np.asarray(per_example(w, xs))
    want = np.stack([np.asarray(fg.grad(f)(w, x)) for x in xs])
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
    hess_vec = fg.jit(
        lambda w, v: fg.jvp(fg.grad(lambda w: f(w, xs[0])), (w,), (v,))[1], backend="gpu"
    )
    v = np.ones_like(w)
    np.testing.assert_allclose(
        np.asarray(hess_vec(w, v)),
        np.asarray(fg.jvp(fg.grad(lambda w: f(w, xs[0])), (w,), (v,))[1]),
        rtol=2e-5,
        atol=2e-6,
    )


def test_grad_of_a_gpu_jitted_function():
    f = fg.jit(lambda x: fnp.sum(fnp.sin(x) * x), backend="gpu")
    x = np.linspace(-1, 1, 7, dtype=np.float32)
    np.testing.assert_allclose(
        np.asarray(fg.grad(f)(x)), np.cos(x) * x + np.sin(x), rtol=1e-5, atol=1e-6
    )


def test_mlp_trains_on_the_gpu_and_matches_eager_steps():
    rng = np.random.default_rng(0)
    sizes = (20, 64, 32, 5)
    params = init(rng, sizes)
    x = fnp.asarray(rng.standard_normal((48, sizes[0])).astype(np.float32))
    labels = fnp.asarray(np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, 5, 48)])
    step = fg.jit(sgd_step, backend="gpu")
    eager_params = params
    losses = []
    for _ in range(15):
        params, value = step(params, x, labels)
        eager_params, eager_value = sgd_step(eager_params, x, labels)
        np.testing.assert_allclose(float(value), float(eager_value), rtol=1e-4, atol=1e-5)
        losses.append(float(value))
    for p, q in zip(fg.tree_util.tree_leaves(params), fg.tree_util.tree_leaves(eager_params)):
        assert isinstance(p, fg.GpuArray)
        np.testing.assert_allclose(np.asarray(p), np.asarray(q), rtol=2e-3, atol=2e-4)
    assert losses[-1] < 0.7 * losses[0], losses
    text = step.lower(params, x, labels).as_text()
    assert "@compute" in text and "fusion plan" in text
    assert float(loss(params, x, labels)) == pytest.approx(losses[-1], rel=0.2)


def test_random_bits_and_uniform_match_the_cpu():
    key = fg.random.key(42)
    for fn in (
        lambda k: fg.random.bits(k, (5, 7)),
        lambda k: fg.random.uniform(k, (1000,)),
        lambda k: fg.random.randint(k, (50,), -3, 9),
    ):
        np.testing.assert_array_equal(
            np.asarray(fg.jit(fn, backend="gpu")(key)), np.asarray(fn(key))
        )


def _same(f, *args, rtol=1e-5, atol=1e-6):
    got = fg.tree_util.tree_leaves(fg.jit(f, backend="gpu")(*args))
    want = fg.tree_util.tree_leaves(f(*args))
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)


def test_scan_fori_and_reverse_scan_run_on_the_gpu():
    xs = np.linspace(-1, 1, 12, dtype=np.float32).reshape(6, 2)
    _same(lambda x: fg.lax.fori_loop(0, 5, lambda i, v: v * 1.5 + fnp.sin(v), x), xs[0])

    def cumulative(c, x):
        c = c * 0.9 + x
        return c, fnp.tanh(c) * 2

    _same(lambda xs: fg.lax.scan(cumulative, fnp.zeros(2), xs), xs)
    _same(lambda xs: fg.lax.scan(cumulative, fnp.ones(2), xs, reverse=True), xs)

    def two_carries(carry, x):  # the body swaps its carries
        a, b = carry
        return (b + x, a * 2), a - b

    _same(lambda xs: fg.lax.scan(two_carries, (fnp.zeros(2), fnp.ones(2)), xs), xs)


def test_cond_switch_and_while_run_on_the_gpu():
    def f(i, x):
        return fg.lax.switch(i, [lambda v: v + 1, lambda v: fnp.exp(v), lambda v: v @ v], x)

    m = np.float32([[1, 2], [3, 4]])
    for i in (-1, 0, 1, 2, 7):
        _same(f, np.int32(i), m)
    _same(lambda p, x: fg.lax.cond(p > 0, lambda v: v * 2, lambda v: -v, x), np.float32(-1), m)

    def collatz_steps(n):
        def body(s):
            k, v = s
            return k + 1, fnp.where(v % 2 == 0, v // 2, 3 * v + 1)

        return fg.lax.while_loop(lambda s: s[1] != 1, body, (np.int32(0), n))

    for n in (1, 6, 27):
        _same(collatz_steps, np.int32(n))


def _collatz_steps(n):
    def body(s):
        k, v = s
        return k + 1, fnp.where(v % 2 == 0, v // 2, 3 * v + 1)

    return fg.lax.while_loop(lambda s: s[1] != 1, body, (np.int32(0), n))[0]


def test_while_loops_inside_scan_fori_cond_and_while_run_on_the_gpu():
    """Host-driven while loops anywhere: once per scan/fori iteration (their own counter
    word), inside a cond's branch (no iteration when unselected: the predicate is cleared
    first), and inside another while loop; odd and even trip counts (carry homes)."""

    def f(ns, p):
        c, ks = fg.lax.scan(
            lambda c, n: (c + _collatz_steps(n), _collatz_steps(n)), np.int32(0), ns
        )
        z = fg.lax.cond(p > 0, lambda: _collatz_steps(ns[0] + 1), lambda: -_collatz_steps(ns[1]))
        w = fg.lax.fori_loop(0, 3, lambda i, acc: acc + _collatz_steps(ns[i]), np.int32(0))
        o = fg.lax.while_loop(
            lambda s: s[0] < 4,
            lambda s: (s[0] + 1, s[1] + _collatz_steps(ns[s[0]])),
            (np.int32(0), np.int32(0)),
        )
        return c, ks, z, w, o

    ns = fnp.asarray(np.int32([6, 27, 1, 7, 9]))  # 8, 111, 0, 16, 19 steps
    for p in (1, -1):
        _same(f, ns, np.int32(p))


def test_grad_through_scan_on_the_gpu():
    xs = np.linspace(-1, 1, 8, dtype=np.float32).reshape(4, 2)

    def loss(w, xs):
        def step(c, x):
            return fnp.tanh(c * w + x), None

        c, _ = fg.lax.scan(step, fnp.zeros(2), xs)
        return fnp.sum(c**2)

    _same(fg.grad(loss), np.float32([0.5, -0.3]), xs)


def test_sort_argsort_and_top_k_on_the_gpu():
    x = np.float32([[3, -0.0, np.nan, 1, 0.0, -np.inf, 1, 2], [5, 4, 3, 2, 1, 0, -1, -2]])
    for f in (
        lambda v: fnp.sort(v, axis=-1),
        lambda v: fnp.sort(v, axis=0),
        lambda v: fnp.argsort(v, axis=-1),
        lambda v: fg.lax.top_k(v, 3),
    ):
        got = fg.tree_util.tree_leaves(fg.jit(f, backend="gpu")(x))
        want = fg.tree_util.tree_leaves(f(x))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    i = np.int32([[4, -2, 4, 0, -2]])
    _same(lambda v: fg.lax.sort((v, fnp.arange(5, dtype=np.int32)[None]), num_keys=1), i)


def test_without_an_adapter_gpu_jit_says_how_to_get_one(monkeypatch):
    monkeypatch.setattr(gpu_runtime, "_runtime", None)
    monkeypatch.setattr(gpu_runtime, "_adapters", [])
    monkeypatch.delenv("FUNGRAD_GPU_ADAPTER", raising=False)  # set where a device is picked
    f = fg.jit(lambda v: v + 1, backend="gpu")
    with pytest.raises(gpu_runtime.GpuUnavailableError, match="mesa-vulkan-drivers"):
        f(np.float32(1.0))
    assert fg.devices() == [fg.devices("cpu")[0]]
    monkeypatch.setenv("FUNGRAD_GPU_ADAPTER", "no-such-adapter")
    with pytest.raises(gpu_runtime.GpuUnavailableError, match="matches no adapter"):
        gpu_runtime.select_adapter()


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(ValueError, match="backend 'tpu'"):
        fg.jit(lambda v: v, backend="tpu")


def test_gpu_arrays_take_the_hot_path_after_the_first_call(monkeypatch):
    """A call on GpuArrays (or Arrays) with a signature seen before goes straight to the
    executable: with jit's general path broken, it still runs; a new signature, keywords or
    a transform need the general path."""
    from fungrad.transforms.jit_cache import JitFunction as _JitFunction

    f = fg.jit(lambda x, y: (x * 2 + y, {"d": x - y}), backend="gpu")
    gx = fg.device_put(np.arange(8, dtype=np.float32), backend="gpu")
    gy = fnp.ones(8, np.float32)
    first = f(gx, gy)

    def broken(self, *args, **kwargs):
        raise AssertionError("the general path was taken")

    monkeypatch.setattr(_JitFunction, "prepare", broken)
    out, tree = f(gx, gy)
    assert isinstance(out, fg.GpuArray)
    np.testing.assert_array_equal(np.asarray(out), np.arange(8) * 2 + 1)
    np.testing.assert_array_equal(np.asarray(tree["d"]), np.asarray(first[1]["d"]))
    y = gx
    for _ in range(3):  # chained GpuArray calls stay on the hot path
        y, _ = f(y, gy)
    np.testing.assert_array_equal(np.asarray(y), ((np.arange(8) * 2 + 1) * 2 + 1) * 2 + 1)
    for call in (
        lambda: f(gx[:4], gy[:4]),
        lambda: f(x=gx, y=gy),
        lambda: f(np.ones(8, np.float32), gy),
    ):
        with pytest.raises(AssertionError, match="general path"):
            call()
    monkeypatch.undo()
    f.clear_cache()
    monkeypatch.setattr(_JitFunction, "prepare", broken)
    with pytest.raises(AssertionError, match="general path"):  # clear_cache empties it
        f(gx, gy)
    monkeypatch.undo()
    g = fg.grad(lambda v: fnp.sum(f(v, gy)[0]))(fnp.ones(8, np.float32))
    np.testing.assert_array_equal(np.asarray(g), np.full(8, 2.0, np.float32))
