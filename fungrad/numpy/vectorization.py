"""Applying Python functions over array axes, built on ``vmap`` (jax.numpy's ``vectorize``,
``apply_along_axis``, ``apply_over_axes``, ``piecewise``).

``vectorize(f)`` broadcasts its arguments and maps ``f`` over every loop dimension with
``vmap``; with a generalized-ufunc ``signature`` such as ``"(n),(n)->()"`` the trailing *core*
dimensions are passed to ``f`` whole. So ``f`` is traced once, not called per element.
"""

from __future__ import annotations

import functools
import operator
import re

from fungrad import core
from fungrad import numpy as fnp
from fungrad.numpy import util

__all__ = ["apply_along_axis", "apply_over_axes", "piecewise", "vectorize"]

_DIM = r"\w+"
_CORE = rf"(?:{_DIM}(?:,\s*{_DIM})*)?"
_ARG = rf"\({_CORE}\)"
_ARGS = rf"{_ARG}(?:,\s*{_ARG})*"
_SIGNATURE = re.compile(rf"^\s*{_ARGS}\s*->\s*{_ARGS}\s*$")


def _parse_signature(signature: str):
    if not _SIGNATURE.match(signature):
        raise ValueError(
            f"vectorize: not a valid gufunc signature: {signature!r} (example: '(m,n),(n)->(m)')"
        )
    ins, outs = signature.split("->")

    def parse(part):
        return [
            tuple(d.strip() for d in arg.split(",") if d.strip())
            for arg in re.findall(r"\(([^)]*)\)", part)
        ]

    return parse(ins), parse(outs)


def _vmap_over(f, n_loop: int):
    """``f`` mapped over ``n_loop`` leading dimensions of every argument."""
    from fungrad.api import vmap

    for _ in range(n_loop):
        f = vmap(f)
    return f


def vectorize(pyfunc, *, excluded=frozenset(), signature: str | None = None):
    """A version of ``pyfunc`` that broadcasts its array arguments and maps over them
    (``jnp.vectorize``), as ``numpy.vectorize`` but traced once with ``vmap``.

    Args:
      pyfunc: the function of scalars (or of core-dimension arrays, see ``signature``).
      excluded: positions (ints) or names (strs) of arguments passed unchanged.
      signature: a generalized-ufunc signature like ``"(n),(n)->()"``; without it every
        argument is treated as a scalar (core dimensions ``()``).

    Returns:
      The vectorized function.
    """
    if not callable(pyfunc):
        raise TypeError(f"vectorize: pyfunc must be callable, got {type(pyfunc).__name__}")
    excluded = frozenset(excluded)
    parsed = None if signature is None else _parse_signature(signature)

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        excl_pos = {i for i in excluded if isinstance(i, int)}
        dyn_pos = [i for i in range(len(args)) if i not in excl_pos]
        dyn_kw = sorted(k for k in kwargs if k not in excluded)
        arrays = [util.asarray(args[i], fun_name="vectorize") for i in dyn_pos]
        arrays += [util.asarray(kwargs[k], fun_name="vectorize") for k in dyn_kw]
        if parsed is None:
            core_dims = [()] * len(arrays)
            out_cores = None
        else:
            core_dims, out_cores = parsed
            if len(core_dims) != len(arrays):
                raise TypeError(
                    f"vectorize: the signature {signature!r} has {len(core_dims)} "
                    f"inputs, but {len(arrays)} arguments are not excluded"
                )
        sizes: dict[str, int] = {}
        loop_shapes = []
        for a, dims in zip(arrays, core_dims):
            if a.ndim < len(dims):
                raise ValueError(
                    f"vectorize: an argument of shape {a.shape} has fewer "
                    f"dimensions than its core dimensions {dims}"
                )
            core_shape = a.shape[a.ndim - len(dims) :]
            for name, size in zip(dims, core_shape):
                if sizes.setdefault(name, size) != size:
                    raise ValueError(
                        f"vectorize: inconsistent size for core dimension "
                        f"{name!r}: {sizes[name]} vs {size}"
                    )
            loop_shapes.append(a.shape[: a.ndim - len(dims)])
        loop = util.broadcast_shapes(*loop_shapes, fun_name="vectorize") if arrays else ()
        arrays = [
            fnp.broadcast_to(a, loop + a.shape[a.ndim - len(d) :])
            for a, d in zip(arrays, core_dims)
        ]

        def core_fn(*xs):
            full = list(args)
            for i, x in zip(dyn_pos, xs):
                full[i] = x
            kw = dict(kwargs)
            for k, x in zip(dyn_kw, xs[len(dyn_pos) :]):
                kw[k] = x
            out = pyfunc(*full, **kw)
            if out_cores is not None:
                outs = out if isinstance(out, tuple) else (out,)
                if len(outs) != len(out_cores):
                    raise ValueError(
                        f"vectorize: the function returned {len(outs)} outputs, "
                        f"the signature {signature!r} has {len(out_cores)}"
                    )
                for o, dims in zip(outs, out_cores):
                    if core.get_aval(util.asarray(o)).ndim != len(dims):
                        raise ValueError(
                            f"vectorize: an output of shape "
                            f"{fnp.shape(o)} does not match its core dimensions "
                            f"{dims} in {signature!r}"
                        )
            return out

        if not loop:
            return core_fn(*arrays)
        return _vmap_over(core_fn, len(loop))(*arrays)

    return wrapped


def apply_along_axis(func1d, axis: int, arr, *args, **kwargs):
    """``func1d`` applied to every 1-D slice of ``arr`` along ``axis``
    (``jnp.apply_along_axis``); the slices' results replace that axis."""
    util.check_arraylike("apply_along_axis", arr)
    arr = util.asarray(arr, fun_name="apply_along_axis")
    axis = util.canonicalize_axis(axis, arr.ndim, "apply_along_axis")
    from fungrad.api import vmap

    def f(x):
        return func1d(x, *args, **kwargs)

    # map over the dimensions before the axis (outermost), then those after it
    for _ in range(arr.ndim - axis - 1):
        f = vmap(f, in_axes=-1, out_axes=-1)
    for _ in range(axis):
        f = vmap(f, in_axes=0, out_axes=0)
    return f(arr)


def apply_over_axes(func, a, axes):
    """``func(a, axis)`` applied for each axis in ``axes`` in turn, keeping the rank (a
    reduced axis is restored as size 1) (``jnp.apply_over_axes``)."""
    util.check_arraylike("apply_over_axes", a)
    a = util.asarray(a, fun_name="apply_over_axes")
    for axis in [axes] if isinstance(axes, int) else axes:
        b = func(a, operator.index(axis))
        b = util.asarray(b)
        if b.ndim == a.ndim - 1:
            b = fnp.expand_dims(b, axis)
        elif b.ndim != a.ndim:
            raise ValueError(
                "apply_over_axes: the function must return an array of the same "
                f"rank as its input or one less, got shape {b.shape} for input "
                f"shape {a.shape}"
            )
        a = b
    return a


def piecewise(x, condlist, funclist, *args, **kw):
    """``funclist[i](x)`` where ``condlist[i]`` holds (``jnp.piecewise``); a constant in
    place of a function gives that value; one extra function is the value where no condition
    holds (else 0). Later conditions win where several hold, as in numpy.

    Every function is evaluated on all of ``x`` (and must be defined there): the result picks
    values with ``where``.
    """
    util.check_arraylike("piecewise", x)
    x = util.asarray(x, fun_name="piecewise")
    if isinstance(condlist, (list, tuple)):
        conds = [util.asarray(c, fun_name="piecewise") for c in condlist]
    else:
        c = util.asarray(condlist, fun_name="piecewise")
        conds = [c] if c.ndim == x.ndim or c.ndim == 0 else list(c)
    n = len(conds)
    if len(funclist) not in (n, n + 1):
        raise ValueError(
            f"piecewise: with {n} conditions, funclist must have {n} or {n + 1} "
            f"entries, got {len(funclist)}"
        )

    def value(f):
        out = f(x, *args, **kw) if callable(f) else f
        return fnp.broadcast_to(util.asarray(out).astype(x.dtype), x.shape)

    out = value(funclist[n]) if len(funclist) == n + 1 else fnp.zeros_like(x)
    for c, f in zip(conds, funclist[:n]):
        out = fnp.where(fnp.broadcast_to(c.astype(bool), x.shape), value(f), out)
    return out
