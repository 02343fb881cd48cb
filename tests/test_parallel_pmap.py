"""fungrad.parallel.pmap on one device: equal to a Python loop over the mapped axis (which has
size local_device_count()), collectives over axis_name, static and unmapped arguments,
differentiation through it, and the error for more slices than devices."""

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.devices import local_device_count
from fungrad.parallel import pmap

N = local_device_count()


def test_matches_loop_and_collectives():
    x = np.arange(N * 6, dtype=np.float32).reshape(N, 2, 3)
    f = lambda v: fnp.tanh(v) @ fnp.ones(3)  # noqa: E731
    np.testing.assert_allclose(
        np.asarray(pmap(f)(x)), np.stack([np.asarray(f(v)) for v in x]), rtol=1e-6
    )
    got = pmap(lambda v: v - lax.pmean(v, "d"), axis_name="d")(x)
    np.testing.assert_allclose(np.asarray(got), x - x.mean(0, keepdims=True), atol=1e-6)
    np.testing.assert_allclose(
        np.asarray(pmap(lambda v: lax.psum(v, "d"), "d")(x)), np.broadcast_to(x.sum(0), x.shape)
    )


def test_static_unmapped_decorator_and_grad():
    x = np.ones((N, 3), np.float32)
    np.testing.assert_allclose(
        np.asarray(pmap(lambda v, k: v * k, static_broadcasted_argnums=1)(x, 3)), 3 * x
    )
    np.testing.assert_allclose(
        np.asarray(pmap(lambda v, b: v + b, in_axes=(0, None))(x, np.arange(3.0))),
        x + np.arange(3.0),
    )

    @pmap
    def double(v):
        return 2 * v

    np.testing.assert_allclose(np.asarray(double(x)), 2 * x)
    g = fg.grad(lambda w: pmap(lambda v: fnp.sum(v * w))(x).sum())(2.0)
    assert float(g) == float(x.sum())


def test_errors():
    with pytest.raises(ValueError, match="only 1 device"):
        pmap(lambda v: v)(np.ones((N + 1, 2)))
    with pytest.raises(TypeError, match="pmap: fun must be callable"):
        pmap(3)
    with pytest.raises(ValueError, match="in_axes has 1 entries for 2"):
        pmap(lambda a, b: a, in_axes=(0,))(np.ones((N, 2)), np.ones((N, 2)))
