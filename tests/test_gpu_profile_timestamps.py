"""fungrad.profile() on the GPU backend with device timestamps (``GpuExecutable._submit_stamped``):
per-dispatch times from the device's clock, written inside the pass or by one pass per dispatch,
and the host-clock fallback; values identical to the ordinary build."""

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.profiler import profile


def _runtime():
    try:
        from fungrad.lowering.gpu import runtime

        return runtime.runtime()
    except Exception:
        return None


RT = _runtime()
pytestmark = [
    pytest.mark.skipif(RT is None, reason="no WebGPU adapter"),
    pytest.mark.skipif(
        RT is not None and RT.timestamps is None, reason="the adapter has no timestamp queries"
    ),
]


@pytest.fixture(params=["inside-passes", "passes", "host"])
def clock(request, monkeypatch):
    """Each way a profiled build times its dispatches (the adapter has both timestamp kinds
    where it has inside-pass ones: lavapipe, NVIDIA)."""
    from fungrad.lowering.gpu.executable import GpuExecutable

    if request.param == "host":
        monkeypatch.setattr(GpuExecutable, "PROFILE_CLOCK", "host")
    else:
        if request.param == "inside-passes" and RT.timestamps != "inside-passes":
            pytest.skip("no timestamps inside passes")
        monkeypatch.setattr(RT, "timestamps", request.param)
    return request.param


def _two_layer(w1, w2, x):
    h = fnp.tanh(x @ w1)
    return fnp.sum(h @ w2, axis=1), fnp.cumsum(x, axis=1)


def _args(seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(48, 40)).astype(np.float32),
        rng.normal(size=(40, 24)).astype(np.float32),
        rng.normal(size=(32, 48)).astype(np.float32),
    )


def _leaves(tree):
    return [np.asarray(x) for x in fg.tree_util.tree_leaves(tree)]


def test_dispatch_times_come_from_the_device(clock):
    f = fg.jit(_two_layer, backend="gpu")
    args = _args()
    plain = f(*args)
    exe = f.lower(*args).compile()._exe
    with profile() as prof:
        profiled = f(*args)
        f(*args)
    for a, b in zip(_leaves(plain), _leaves(profiled)):
        assert a.tobytes() == b.tobytes()
    w1, w2, x = (a.astype(np.float64) for a in args)
    np.testing.assert_allclose(
        _leaves(profiled)[0], np.tanh(x @ w1) @ w2 @ np.ones(24), rtol=1e-4, atol=1e-4
    )
    records = prof.kernels()
    assert records and {r.kind for r in records} == {"dispatch"}
    assert len(records) == exe.num_dispatches
    assert all(r.calls == 2 and r.total_s > 0 for r in records)
    (program,) = prof.programs()
    assert program.calls == 2 and sum(r.total_s for r in records) <= program.total_s


def test_loop_bodies_count_every_iteration(clock):
    def f(x):
        def body(c, row):
            c = fnp.tanh(c + row)
            return c, c * 2.0

        return lax.scan(body, fnp.zeros(x.shape[1]), x)

    x = np.random.default_rng(1).normal(size=(5, 16)).astype(np.float32)
    jf = fg.jit(f, backend="gpu")
    plain = jf(x)
    with profile() as prof:
        got = jf(x)
    for a, b in zip(_leaves(plain), _leaves(got)):
        assert a.tobytes() == b.tobytes()
    c, ys = np.zeros(16), []
    for row in x.astype(np.float64):
        c = np.tanh(c + row)
        ys.append(2 * c)
    np.testing.assert_allclose(_leaves(got)[1], np.array(ys), rtol=1e-5, atol=1e-6)
    calls = {r.name: r.calls for r in prof.kernels()}
    assert 5 in calls.values()  # the body's kernel, once per iteration
    assert max(calls.values()) <= 6  # (the loop counter's: once more, for the exit test)
    assert all(r.total_s > 0 for r in prof.kernels())


def test_while_loop_submissions_are_stamped_each(clock):
    def f(x):
        return lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 1.5), (0, x))

    x = np.linspace(-1, 1, 8, dtype=np.float32)
    jf = fg.jit(f, backend="gpu")
    with profile() as prof:
        i, y = jf(x)
    assert int(np.asarray(i)) == 10
    np.testing.assert_allclose(np.asarray(y), x * 1.5**10, rtol=1e-6)
    records = prof.kernels()
    assert max(r.calls for r in records) >= 10
    assert all(r.total_s > 0 for r in records if r.calls)  # (a slot of a home copy: none)


def test_more_dispatches_than_one_query_set_holds(monkeypatch, clock):
    from fungrad.lowering.gpu.executable import GpuExecutable

    monkeypatch.setattr(GpuExecutable, "STAMPED_DISPATCHES", 2)
    f = fg.jit(_two_layer, backend="gpu")
    args = _args(2)
    plain = f(*args)
    exe = f.lower(*args).compile()._exe
    assert exe.num_dispatches > 2
    with profile() as prof:
        got = f(*args)
    for a, b in zip(_leaves(plain), _leaves(got)):
        assert a.tobytes() == b.tobytes()
    assert len(prof.kernels()) == exe.num_dispatches
    assert all(r.calls == 1 and r.total_s > 0 for r in prof.kernels())


def test_empty_program_profiles():
    f = fg.jit(lambda x: x[:0] * 2.0, backend="gpu")
    with profile() as prof:
        out = f(np.ones(4, np.float32))
    assert np.asarray(out).shape == (0,)
    assert all(r.calls == 0 or r.total_s >= 0 for r in prof.kernels())
