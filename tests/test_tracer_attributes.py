"""Tracers answer the Array methods: no tracer class may hold an attribute (a slot or a class
member of its own) under the name of an Array method. A staging tracer's IR variable once sat
in ``.var``, so ``x.var()`` inside ``jit`` called a ``Var``."""

import importlib
import pkgutil

import numpy as np

import fungrad
import fungrad.numpy as fnp
from fungrad import core

_AVAL_NAMES = {"aval", "shape", "dtype", "ndim", "size", "weak_type"}


def _tracer_classes():
    for info in pkgutil.walk_packages(fungrad.__path__, "fungrad."):
        try:
            importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - optional backends (GPU, MPI) may not import here
            pass
    stack, seen = list(core.Tracer.__subclasses__()), []
    while stack:
        cls = stack.pop()
        seen.append(cls)
        stack.extend(cls.__subclasses__())
    return seen


def test_no_tracer_attribute_shadows_an_array_method():
    methods = {n for n in dir(fungrad.Array) if not n.startswith("_")} - _AVAL_NAMES
    classes = _tracer_classes()
    assert len(classes) >= 3
    for cls in classes:
        slots = cls.__dict__.get("__slots__", ())
        own = ({slots} if isinstance(slots, str) else set(slots)) | set(vars(cls))
        assert not own & methods, (cls.__qualname__, sorted(own & methods))


def test_variance_and_friends_as_methods_under_jit_and_grad():
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(float(fungrad.jit(lambda v: v.var())(x)), np.var(x), rtol=1e-6)
    np.testing.assert_allclose(
        np.asarray(fungrad.jit(lambda v: v.var(axis=0, ddof=1))(x)), np.var(x, 0, ddof=1)
    )
    g = fungrad.grad(lambda v: fungrad.jit(lambda y: y.var() + y.std())(v))(x)
    n, c = x.size, x - x.mean()
    want = 2 * c / n + c / (n * np.std(x))
    np.testing.assert_allclose(np.asarray(g), want, rtol=1e-5)
    assert fungrad.vmap(lambda r: r.var())(fnp.asarray(x)).tolist() == np.var(x, 1).tolist()
