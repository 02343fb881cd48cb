"""jax.sharding, with_sharding_constraint, jit's in/out_shardings and shard_map.

References: numpy, finite differences (check_grads), Python loops for vmap, and JAX 0.10.2's
own answers recorded as literals (computed with ``XLA_FLAGS=--xla_force_host_platform_device
_count=4`` for the several-device shard_maps, which fungrad runs over an AbstractMesh of the
same shape inside jit; JAX is never imported here).
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.experimental.shard_map import shard_map as exp_shard_map
from fungrad.sharding import (
    AbstractMesh,
    AxisType,
    DuplicateSpecError,
    Mesh,
    NamedSharding,
    Sharding,
    SingleDeviceSharding,
    get_abstract_mesh,
    get_mesh,
    set_mesh,
)
from fungrad.sharding import PartitionSpec as P
from fungrad.testing import check_grads

AUTO = AxisType.Auto


def _mesh(*names):
    return fg.make_mesh((1,) * len(names), names, axis_types=(AUTO,) * len(names))


def _cpu():
    return fg.devices("cpu")[0]


# -- PartitionSpec, meshes, shardings ----------------------------------------------------------


def test_partition_spec_as_jax():
    assert fg.P is P
    assert repr(P("x", None)) == "P('x', None)"
    assert repr(P("x")) == "P('x',)" and repr(P()) == "P()"
    assert repr(P(None, ("x",), P.UNCONSTRAINED)) == "P(None, 'x', UNCONSTRAINED)"
    assert repr(P(("x", "y"))) == "P(('x', 'y'),)"
    assert P("x", None) != P("x") and P("x") == P("x") and hash(P("x")) == hash(P("x"))
    assert P("x").__eq__(("x",)) is NotImplemented  # not a tuple, as in JAX
    assert tuple(P("x", ("a", "b"))) == ("x", ("a", "b")) and len(P("x", None)) == 2
    assert P("x")[0] == "x" and P("x") + P("y") == P("x", "y")
    assert repr(P("x", unreduced={"y"})) == "P('x', unreduced={'y'})"
    assert fg.tree_util.tree_leaves([P("x"), P()]) == [P("x"), P()]  # pytree leaves


def test_axis_type():
    assert list(AxisType) == [AxisType.Auto, AxisType.Explicit, AxisType.Manual]
    assert repr(AxisType.Auto) == "Auto" and str(AxisType.Auto) == "AxisType.Auto"


def test_make_mesh_and_mesh():
    m = fg.make_mesh((1,), ("x",))
    assert repr(m) == "Mesh(axis_sizes=(1,), axis_names=('x',), axis_types=(Explicit,))"
    assert dict(m.shape) == {"x": 1} and m.axis_names == ("x",) and m.size == 1
    assert m.devices.tolist() == [_cpu()] and m.device_ids.tolist() == [0]
    assert m.axis_types == (AxisType.Explicit,) and not m.empty
    assert m == fg.make_mesh((1,), ("x",)) and hash(m) == hash(fg.make_mesh((1,), ("x",)))
    m2 = Mesh(np.array(fg.devices("cpu")).reshape(1, 1), ("x", "y"))
    assert m2.axis_types == (AUTO, AUTO) and list(m2.shape.items()) == [("x", 1), ("y", 1)]
    assert Mesh(fg.devices("cpu"), "x").axis_names == ("x",)
    a = m.abstract_mesh
    assert isinstance(a, AbstractMesh) and a.axis_sizes == (1,) and a.axis_names == ("x",)
    am = AbstractMesh((2, 4), ("a", "b"))
    assert repr(am) == "AbstractMesh('a': 2, 'b': 4, axis_types=(Auto, Auto))"
    assert list(am.shape.items()) == [("a", 2), ("b", 4)] and am.size == 8
    assert fg.make_mesh((1,), ("x",), axis_types=AUTO).axis_types == (AUTO,)


def test_mesh_errors():
    with pytest.raises(ValueError, match=re.escape("Number of devices 1 must be >= the product")):
        fg.make_mesh((2,), ("x",))
    with pytest.raises(ValueError, match="devices.ndim == 1 and len.axis_names. == 2"):
        Mesh(fg.devices("cpu"), ("x", "y"))
    with pytest.raises(ValueError, match="Number of axis names should match"):
        fg.make_mesh((1,), ("x",), axis_types=(AUTO, AUTO))
    with pytest.raises(ValueError, match="repeat a name"):
        fg.make_mesh((1, 1), ("x", "x"))


def test_named_sharding():
    m = _mesh("x")
    s = NamedSharding(m, P("x"))
    assert repr(s) == (
        "NamedSharding(mesh=Mesh('x': 1, axis_types=(Auto,)), spec=P('x',), memory_kind=device)"
    )
    assert s.spec == P("x") and s.mesh is m and s.num_devices == 1
    assert s.device_set == {_cpu()} and s.is_fully_replicated and s.memory_kind == "device"
    assert s.shard_shape((4,)) == (4,)
    assert s.devices_indices_map((4,)) == {_cpu(): (slice(None),)}
    assert s.is_equivalent_to(NamedSharding(m, P()), 1)
    assert s != NamedSharding(m, P("x", None)) and s == NamedSharding(m, P("x"))
    assert isinstance(s, Sharding) and isinstance(SingleDeviceSharding(_cpu()), Sharding)
    with pytest.raises(ValueError, match=re.escape("Resource axis: z of P('z',) is not found")):
        NamedSharding(m, P("z"))
    with pytest.raises(DuplicateSpecError, match="has duplicate entries for `x`"):
        NamedSharding(m, P("x", "x"))


def test_named_sharding_on_an_abstract_mesh_splits_by_its_sizes():
    s = NamedSharding(AbstractMesh((2, 2), ("x", "y")), P(("x", "y")))
    assert s.shard_shape((8, 3)) == (2, 3) and not s.is_fully_replicated


def test_context_mesh():
    m = _mesh("x")
    assert get_abstract_mesh().empty and get_mesh().empty
    with set_mesh(m) as entered:
        assert entered is m and get_mesh() is m
        assert get_abstract_mesh() == AbstractMesh((1,), ("x",), (AUTO,))
    assert get_abstract_mesh().empty
    set_mesh(m)
    try:
        assert get_mesh() is m  # set at once, without `with`
    finally:
        set_mesh(None)
    assert get_mesh().empty
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with m:  # JAX's deprecated spelling: a bare spec finds the mesh
            y = lax.with_sharding_constraint(fnp.ones(2), P("x"))
    assert w[0].category is DeprecationWarning and y.sharding == NamedSharding(m, P("x"))


# -- device_put and Array.sharding ---------------------------------------------------------------


def test_device_put_with_shardings():
    m = _mesh("x")
    x = fnp.arange(4.0)
    assert x.sharding == SingleDeviceSharding(_cpu()) and x.is_fully_addressable
    y = fg.device_put(x, NamedSharding(m, P("x")))
    np.testing.assert_array_equal(y, x)
    assert y.sharding == NamedSharding(m, P("x")) and x.sharding == SingleDeviceSharding(_cpu())
    (shard,) = y.addressable_shards
    assert shard.device == _cpu() and shard.index == (slice(None),) and shard.replica_id == 0
    np.testing.assert_array_equal(shard.data, x)
    assert y.devices() == {_cpu()} and y.is_fully_replicated
    tree = fg.device_put({"w": x, "b": 1.0}, {"w": NamedSharding(m, P("x")), "b": None})
    assert tree["w"].sharding.spec == P("x") and float(tree["b"]) == 1.0
    assert fg.device_put(x, _cpu()).sharding == SingleDeviceSharding(_cpu())
    with set_mesh(m):
        assert fg.device_put(x, P()).sharding == NamedSharding(m, P())
    with pytest.raises(ValueError, match="Please set a mesh via `jax.set_mesh`"):
        fg.device_put(x, P("x"))
    with pytest.raises(ValueError, match="only valid for values of rank at least 2, but was"):
        fg.device_put(x, NamedSharding(m, P("x", None)))


# -- with_sharding_constraint --------------------------------------------------------------------


def test_with_sharding_constraint_is_identity_with_the_sharding_recorded():
    m = _mesh("x")
    s = NamedSharding(m, P("x"))
    x = fnp.arange(4.0)
    y = lax.with_sharding_constraint(x, s)
    np.testing.assert_array_equal(y, x)
    assert y.sharding == s
    text = str(fg.make_jaxpr(lambda a: lax.with_sharding_constraint(a, s))(x))
    assert "sharding_constraint[sharding=NamedSharding(mesh=Mesh('x': 1" in text
    np.testing.assert_array_equal(
        fg.jit(lambda a: lax.with_sharding_constraint(a * 2, s))(x), x * 2
    )
    out = lax.with_sharding_constraint((x, {"k": x}), (s, None))
    assert out[0].sharding == s and out[1]["k"].sharding == SingleDeviceSharding(_cpu())


def test_with_sharding_constraint_errors():
    m = _mesh("x")
    x = fnp.arange(4.0)
    with pytest.raises(RuntimeError, match="with_sharding_constraint requires a non-empty mesh"):
        lax.with_sharding_constraint(x, P("x"))
    with pytest.raises(ValueError, match="One of with_sharding_constraint arguments is incompat"):
        lax.with_sharding_constraint(x, NamedSharding(m, P("x", None)))
    with pytest.raises(ValueError, match="pytree structure error"):
        lax.with_sharding_constraint((x, x), (NamedSharding(m, P()),) * 3)


def test_with_sharding_constraint_grad_vmap(x64):
    m = _mesh("x", "y")
    s = NamedSharding(m, P("x", "y"))

    def f(a):
        return fnp.sin(lax.with_sharding_constraint(a * a, s)).sum()

    a = np.random.default_rng(0).standard_normal((3, 4))
    check_grads(f, (a,), order=2)
    np.testing.assert_allclose(fg.grad(f)(a), 2 * a * np.cos(a * a), rtol=1e-12)
    g = fg.vmap(lambda v: lax.with_sharding_constraint(v * 3, s), in_axes=2)
    b = np.random.default_rng(1).standard_normal((3, 4, 5))
    want = np.stack([np.asarray(lax.with_sharding_constraint(b[:, :, i] * 3, s)) for i in range(5)])
    np.testing.assert_allclose(g(b), want, rtol=1e-12)
    # the batch dimension enters the spec unsplit
    h = fg.vmap(lambda v: lax.with_sharding_constraint(v, s), in_axes=2, out_axes=2)
    (eqn,) = fg.make_jaxpr(h)(b).jaxpr.eqns
    assert eqn.params["sharding"].spec == P("x", "y", None)
    np.testing.assert_array_equal(h(b), b)


def test_reshard():
    m = _mesh("x")
    y = fg.reshard(fnp.arange(3.0), NamedSharding(m, P("x")))
    assert y.sharding.spec == P("x")
    np.testing.assert_array_equal(y, np.arange(3.0))


# -- jit's in_shardings / out_shardings ---------------------------------------------------------


def test_jit_shardings():
    m = _mesh("x")
    s, r = NamedSharding(m, P("x")), NamedSharding(m, P())
    x = fnp.arange(4.0)
    f = fg.jit(lambda a, b: (a * b, a), in_shardings=(s, r), out_shardings=(s, r))
    out = f(x, x)
    np.testing.assert_array_equal(out[0], x * x)
    assert out[0].sharding == s and out[1].sharding == r
    np.testing.assert_array_equal(
        fg.jit(lambda a, n: a * n, static_argnums=1, in_shardings=(s,))(x, 2), x * 2
    )
    assert fg.jit(lambda a: {"w": a}, out_shardings={"w": s})(x)["w"].sharding == s
    np.testing.assert_array_equal(
        fg.grad(fg.jit(lambda a: (a * a).sum(), in_shardings=s))(x), 2 * x
    )
    assert fg.jit(lambda a: a, in_shardings=s).lower(x).as_text()


def test_jit_shardings_errors():
    m = _mesh("x")
    s = NamedSharding(m, P("x"))
    x = fnp.arange(4.0)
    with pytest.raises(
        ValueError, match="got a tuple or list of length 2 for an args tuple of length 1"
    ):
        fg.jit(lambda a, n: a * n, static_argnums=1, in_shardings=(s, None))(x, 2)
    with pytest.raises(ValueError, match="does not support kwargs when in_shardings"):
        fg.jit(lambda a, b: a * b, in_shardings=(s, s))(x, b=x)
    with pytest.raises(
        TypeError, match="expected to be PartitionSpec instances or None, but got 3"
    ):
        fg.jit(lambda a: a, in_shardings=3)
    with pytest.raises(ValueError, match="One of jit outputs with pytree key path result is"):
        fg.jit(lambda a: a.sum(), out_shardings=s)(x)
    with pytest.raises(ValueError, match="One of jit arguments with pytree key path a is"):
        fg.jit(lambda a: a, in_shardings=NamedSharding(m, P("x", None)))(1.0)
    with pytest.raises(RuntimeError, match="jit requires a non-empty mesh in context"):
        fg.jit(lambda a: a, in_shardings=P("x"))(x)


def test_data_parallel_training_step(x64):
    """The usual JAX program: params replicated, the batch split over 'data', one jitted step;
    the same numbers as the step without any sharding."""
    mesh = fg.make_mesh((fg.device_count(),), ("data",))
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((3, 2)), "b": np.zeros(2)}
    xb, yb = rng.standard_normal((8, 3)), rng.standard_normal((8, 2))

    def loss(p, x, y):
        return fnp.mean((x @ p["w"] + p["b"] - y) ** 2)

    def step(p, x, y):
        g = fg.grad(loss)(p, x, y)
        return fg.tree_util.tree_map(lambda a, b: a - 0.1 * b, p, g)

    repl, data = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    p = fg.device_put(params, repl)
    x, y = fg.device_put((xb, yb), data)
    sharded = fg.jit(step, in_shardings=(repl, data, data), out_shardings=repl)
    for _ in range(3):
        p = sharded(p, x, y)
        params = step(params, xb, yb)
    for k in params:
        np.testing.assert_allclose(p[k], params[k], rtol=1e-12)
        assert p[k].sharding == repl
    with set_mesh(mesh):  # the same with bare specs on the context mesh
        step2 = fg.jit(step, in_shardings=(P(), P("data"), P("data")), out_shardings=P())
        np.testing.assert_allclose(step2(p, x, y)["w"], step(p, xb, yb)["w"], rtol=1e-12)


# -- shard_map on fungrad's devices -------------------------------------------------------------


def test_shard_map_psum_data_parallel(x64):
    mesh = fg.make_mesh((fg.device_count(),), ("data",), axis_types=(AUTO,))
    rng = np.random.default_rng(0)
    w, xb = rng.standard_normal((3, 2)), rng.standard_normal((8, 3))

    @fg.jit
    def grads(w, x):
        def local(w, x):
            g = fg.grad(lambda w: fnp.sum(fnp.tanh(x @ w)))(w)
            return lax.psum(g, "data"), lax.pmean(fnp.sum(x), "data")

        return fg.shard_map(local, mesh=mesh, in_specs=(P(), P("data")), out_specs=(P(), P()))(w, x)

    g, s = grads(w, xb)
    want = xb.T @ (1 - np.tanh(xb @ w) ** 2)
    np.testing.assert_allclose(g, want, rtol=1e-12)
    np.testing.assert_allclose(s, xb.sum(), rtol=1e-12)


def test_shard_map_one_device_mesh():
    m = _mesh("x")
    x = fnp.arange(4.0)

    def sm(f, i, o, **kw):
        return fg.shard_map(f, mesh=m, in_specs=i, out_specs=o, **kw)(x)

    np.testing.assert_array_equal(sm(lambda b: lax.psum(b, "x"), P("x"), P()), x)
    np.testing.assert_array_equal(sm(lambda b: b + lax.axis_index("x"), P(), P("x")), x)
    np.testing.assert_array_equal(sm(lambda b: lax.all_gather(b, "x"), P("x"), P("x")), [x])
    np.testing.assert_array_equal(sm(lambda b: lax.ppermute(b, "x", [(0, 0)]), P("x"), P("x")), x)
    assert int(sm(lambda b: lax.axis_size("x"), P(), P())) == 1
    np.testing.assert_array_equal(sm(lambda b: b, P("x"), P(), check_vma=False), x)
    np.testing.assert_array_equal(exp_shard_map(lambda b: b * 2, m, P("x"), P("x"))(x), x * 2)
    assert sm(lambda b: b, P("x"), P("x")).sharding == NamedSharding(m, P("x"))
    a, b = fg.shard_map(
        lambda a, b: (a * b, a), mesh=m, in_specs=(P("x"), P()), out_specs=(P("x"), P("x"))
    )(x, 2.0)
    np.testing.assert_array_equal(a, x * 2)
    with set_mesh(m):
        np.testing.assert_array_equal(
            fg.shard_map(lambda b: b * 2, in_specs=P("x"), out_specs=P("x"))(x), x * 2
        )
    explicit = fg.make_mesh((1,), ("x",))  # in_specs inferred from the arguments' shardings
    xs = fg.device_put(x, NamedSharding(explicit, P("x")))
    np.testing.assert_array_equal(
        fg.shard_map(lambda b: b * 2, mesh=explicit, out_specs=P("x"))(xs), x * 2
    )


def test_shard_map_errors():
    m = _mesh("x")
    x = fnp.arange(4.0)

    def sm(f, i, o, arg=x, **kw):
        return fg.shard_map(f, mesh=m, in_specs=i, out_specs=o, **kw)(arg)

    with pytest.raises(
        ValueError,
        match=r"out_specs is P\(\) which implies that the corresponding output value is "
        r"replicated across mesh axis 'x'",
    ):
        sm(lambda b: b, P("x"), P())
    with pytest.raises(
        ValueError,
        match=r"in_specs is P\('x',\) which has length 1, but the passed args\[0\], where "
        r"args\[0\] is bound to <lambda>'s parameter 'b', has shape float32\[\]",
    ):
        sm(lambda b: b, P("x"), P("x"), arg=1.0)
    with pytest.raises(
        ValueError,
        match=r"out_specs is P\('x',\) which has length 1, but <lambda>\(\*args\) has "
        r"shape float32\[\]",
    ):
        sm(lambda b: b.sum(), P("x"), P("x"))
    with pytest.raises(
        ValueError, match="in_specs argument must refer to an axis marked as manual"
    ):
        sm(lambda b: b, P("z"), P("x"))
    with pytest.raises(
        ValueError, match="out_specs argument must refer to an axis marked as manual"
    ):
        sm(lambda b: b, P("x"), P("z"))
    with pytest.raises(DuplicateSpecError):
        sm(lambda b: b, P("x", "x"), P(), arg=fnp.ones((2, 2)))
    with pytest.raises(
        TypeError, match="in_specs argument must be a pytree of `jax.sharding.PartitionSpec`"
    ):
        sm(lambda b: b, "x", P("x"))
    with pytest.raises(TypeError, match="it was `None` when axis_names=frozenset"):
        fg.shard_map(lambda b: b, mesh=m, out_specs=P("x"))(x)
    with pytest.raises(ValueError, match="The context mesh cannot be empty"):
        fg.shard_map(lambda b: b, in_specs=P(), out_specs=P())(x)
    with pytest.raises(ValueError, match="requires axis_names=frozenset"):
        sm(lambda b: b, P(), P(), axis_names={"y"})
    with pytest.raises(TypeError, match="requires a callable"):
        fg.shard_map(3, mesh=m, in_specs=P(), out_specs=P())
    with pytest.raises(TypeError, match="requires a `jax.sharding.Mesh`"):
        fg.shard_map(lambda b: b, mesh=3, in_specs=P(), out_specs=P())
    with pytest.raises(ValueError, match="pytree structure error"):
        sm(lambda b: b, (P("x"), P("x")), P("x"))
    with pytest.raises(ValueError, match="Please pass `jax.Array`s with a `NamedSharding`"):
        fg.shard_map(
            lambda b: b, mesh=AbstractMesh((2,), ("x",)), in_specs=P("x"), out_specs=P("x")
        )(x)


def test_shard_map_indivisible_error():
    am = AbstractMesh((2, 2), ("x", "y"))
    f = fg.shard_map(lambda b: b, mesh=am, in_specs=P("x"), out_specs=P("x"))
    with pytest.raises(
        ValueError,
        match=r"maps array axis 0 \(of size 3\) to mesh axis 'x' \(of size 2\), but 2 does "
        r"not evenly divide 3",
    ):
        fg.jit(f)(fnp.arange(3.0))


# -- shard_map over several blocks: JAX's numbers on 4 devices ---------------------------------

X = np.arange(16.0, dtype=np.float32).reshape(4, 4)
V = np.arange(8.0, dtype=np.float32)
M22 = AbstractMesh((2, 2), ("x", "y"))
M4 = AbstractMesh((4,), ("x",))


def _smap(f, mesh, i, o, **kw):
    return fg.jit(fg.shard_map(f, mesh=mesh, in_specs=i, out_specs=o, **kw))


def test_shard_map_blocks_match_jax():
    idx = lambda b: b * (lax.axis_index("x") * 2 + lax.axis_index("y"))  # noqa: E731
    cases = [
        (_smap(lambda b: lax.psum(b, "x"), M22, P("x", "y"), P(None, "y")), (X,),
         [[8, 10, 12, 14], [16, 18, 20, 22]]),
        (_smap(lambda b: b * lax.axis_index("x"), M22, P("x", "y"), P("x", "y")), (X,),
         [[0] * 4, [0] * 4, [8, 9, 10, 11], [12, 13, 14, 15]]),
        (_smap(lambda b: b, M22, P("x", "y"), P(None, "y"), check_vma=False), (X,),
         [[0, 1, 2, 3], [4, 5, 6, 7]]),
        (_smap(lambda b: lax.pmean(b, "y"), M22, P("x", "y"), P("x")), (X,),
         [[1, 2], [5, 6], [9, 10], [13, 14]]),
        (_smap(lambda b: lax.ppermute(b, "x", [(0, 1), (1, 0)]), M22, P("x"), P("x")), (X,),
         X[[2, 3, 0, 1]].tolist()),
        (_smap(lambda b: lax.psum(b, ("x", "y")), M22, P("x", "y"), P()), (X,),
         [[20, 24], [36, 40]]),
        (_smap(idx, M22, P(("x", "y")), P(("x", "y"))), (X,),
         [[0] * 4, [4, 5, 6, 7], [16, 18, 20, 22], [36, 39, 42, 45]]),
        (_smap(idx, M22, P(("y", "x")), P(("y", "x"))), (X,),
         [[0] * 4, [8, 10, 12, 14], [8, 9, 10, 11], [36, 39, 42, 45]]),
        (_smap(lambda a, b: a @ b, M22, (P("x", None), P(None, "y")), P("x", "y")), (X, X + 1),
         [[62, 68, 74, 80], [174, 196, 218, 240], [286, 324, 362, 400], [398, 452, 506, 560]]),
        (_smap(lambda b: lax.psum_scatter(b, "x", tiled=True), M4, P(), P("x")), (V,),
         [0, 4, 8, 12, 16, 20, 24, 28]),
        (_smap(lambda b: lax.ppermute(b, "x", [(i, (i + 1) % 4) for i in range(4)])
               * lax.axis_index("x"), M4, P("x"), P("x")), (V,),
         [0, 0, 0, 1, 4, 6, 12, 15]),
        (_smap(lambda b: b - lax.pmean(b.mean(), "x"), M4, P("x"), P("x")), (V,),
         [-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5]),
        (_smap(lambda b: b, M22, P("x"), P("x"), axis_names={"x"}), (X,), X.tolist()),
    ]  # fmt: skip
    for f, args, want in cases:
        np.testing.assert_array_equal(f(*args), np.array(want, np.float32))


def test_shard_map_grad_matches_jax_and_finite_differences(x64):
    f = fg.shard_map(
        lambda b: lax.psum(fnp.sin(b) * b, "x"),
        mesh=M22,
        in_specs=P("x", "y"),
        out_specs=P(None, "y"),
    )
    loss = fg.jit(lambda a: (f(a) ** 2).sum())
    want = [  # JAX 0.10.2, 4 CPU devices, float32
        [0.0, 12.575620651245117, -0.5577559471130371, 59.83900833129883],
        [63.827484130859375, 0.6133272647857666, 133.66360473632812, 170.3527374267578],
        [-2.764535903930664, -70.87965393066406, 64.71636962890625, 20.123071670532227],
        [-181.55335998535156, 16.31088638305664, 70.83383178710938, -308.45166015625],
    ]
    np.testing.assert_allclose(fg.grad(loss)(X.astype(np.float64)), want, rtol=1e-5, atol=1e-4)
    a = np.random.default_rng(0).standard_normal((4, 4))
    check_grads(loss, (a,), order=1, modes=("rev",))
    # against the sum of the blocks written out in numpy
    top, bottom = np.sin(a[:2]) * a[:2], np.sin(a[2:]) * a[2:]
    np.testing.assert_allclose(loss(a), ((top + bottom) ** 2).sum(), rtol=1e-12)


def test_shard_map_vmap_matches_a_loop_and_jax():
    k = fg.shard_map(
        lambda b: b - lax.pmean(b.mean(), "x"), mesh=M4, in_specs=P("x"), out_specs=P("x")
    )
    xs = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    got = fg.jit(fg.vmap(k))(xs)
    want = np.stack([np.asarray(fg.jit(k)(row)) for row in xs])
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(got, xs - xs.mean(1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_shard_map_jit_matches_eager_on_a_device_mesh():
    m = _mesh("x", "y")
    f = fg.shard_map(lambda a, b: lax.psum(a * b, "y") + lax.axis_index("x"), mesh=m,
                     in_specs=(P("x", "y"), P(None, "y")), out_specs=P("x"))  # fmt: skip
    a, b = np.arange(6.0).reshape(2, 3), np.ones((2, 3))
    np.testing.assert_array_equal(f(a, b), fg.jit(f)(a, b))
    np.testing.assert_array_equal(f(a, b), a * b)


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.tuples(st.sampled_from([1, 2, 3]), st.sampled_from([1, 2])),
    blocks=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    spec=st.sampled_from(
        [P("x", "y"), P("y", "x"), P(("x", "y")), P(("y", "x")), P(None, "x"), P("y"), P()]
    ),
)
def test_shard_map_split_then_join_is_the_identity(sizes, blocks, spec):
    """The blocks f sees are numpy's slices of the argument, and joining them back with the
    same spec gives the argument."""
    mesh = AbstractMesh(sizes, ("x", "y"))
    n = dict(zip(("x", "y"), sizes))
    parts = list(spec) + [None] * (2 - len(spec))
    div = [int(np.prod([n[a] for a in ((p,) if isinstance(p, str) else p or ())])) for p in parts]
    shape = (blocks[0] * div[0], blocks[1] * div[1])
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    out = _smap(lambda b: b * 1, mesh, spec, spec)(x)
    np.testing.assert_array_equal(out, x)
    first = _smap(lambda b: b, mesh, spec, P(), check_vma=False)(x)
    np.testing.assert_array_equal(first, x[: blocks[0], : blocks[1]])
