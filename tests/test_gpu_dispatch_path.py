"""The GPU executable's recorded command lists (``GpuExecutable._submit_recorded``): a program
of dispatches alone records each call from a list built once per set of buffers; the values
must follow the buffers bound at each call, whichever the pool hands out."""

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp


def _gpu():
    try:
        from fungrad.lowering.gpu import runtime

        return runtime.runtime()
    except Exception:
        return None


pytestmark = pytest.mark.skipif(_gpu() is None, reason="no WebGPU adapter")


def _layer(w, x):
    return fnp.tanh(x @ w).sum(axis=1), x * 2.0


def test_values_follow_the_buffers_of_each_call():
    rng = np.random.default_rng(0)
    ws = [rng.normal(size=(20, 12)).astype(np.float32) for _ in range(3)]
    xs = [rng.normal(size=(7, 20)).astype(np.float32) for _ in range(3)]
    gws = [fg.device_put(w, backend="gpu") for w in ws]
    gxs = [fg.device_put(x, backend="gpu") for x in xs]
    f = fg.jit(_layer, backend="gpu")
    exe = f.lower(gws[0], gxs[0]).compile()._exe
    assert exe._straight
    kept = []
    for i, j in [(0, 0), (1, 2), (0, 0), (2, 1), (1, 2), (0, 0)] * 2:
        s, d = f(gws[i], gxs[j])
        np.testing.assert_allclose(
            np.asarray(s), np.tanh(xs[j].astype(np.float64) @ ws[i]).sum(1), rtol=1e-5
        )
        np.testing.assert_array_equal(np.asarray(d), xs[j] * 2)
        kept.append(s)  # outputs kept alive: the pool hands out new buffers
    assert 1 <= len(exe._recorded) <= 16
    # host arrays are uploaded to fresh buffers at every call
    s, _ = f(ws[2], xs[0])
    np.testing.assert_allclose(
        np.asarray(s), np.tanh(xs[0].astype(np.float64) @ ws[2]).sum(1), rtol=1e-5
    )


def test_programs_with_host_loops_take_the_general_path():
    f = fg.jit(
        lambda x: fg.lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] + 1.0), (0, x)),
        backend="gpu",
    )
    x = np.zeros(4, np.float32)
    assert not f.lower(x).compile()._exe._straight
    for _ in range(2):
        i, y = f(x)
        assert int(np.asarray(i)) == 3
        np.testing.assert_array_equal(np.asarray(y), x + 3)


def test_a_recording_error_is_raised_not_lost():
    """The recorded path calls wgpu-native's pass functions directly: an invalid dispatch
    (more workgroups than a dimension allows) still raises, when the encoder finishes."""
    from fungrad.lowering.gpu.dispatches import Dispatch

    f = fg.jit(lambda v: v * 2.0 + 1.0, backend="gpu")
    x = np.ones(8, np.float32)
    exe = f.lower(x).compile()._exe
    good = exe._commands[0]
    exe._commands[0] = Dispatch(good.pipeline, good.bindings, (70000, 1, 1))
    exe._recorded.clear()
    try:
        with pytest.raises(Exception, match="65535"):
            exe.call([x])
    finally:
        exe._commands[0] = good
        exe._recorded.clear()
    np.testing.assert_array_equal(np.asarray(exe.call([x])[0]), np.full(8, 3, np.float32))
