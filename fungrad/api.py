"""The public transform API (``fungrad.make_jaxpr``, ...), over pytrees of arguments."""

from __future__ import annotations

import functools

from fungrad import core, tree_util
from fungrad.array import Array, is_arraylike
from fungrad.transforms.staging import trace_to_jaxpr


def _normalize_argnums(fun_name: str, argnums, nargs: int) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    out = []
    for i in nums:
        if not isinstance(i, int):
            raise TypeError(f"{fun_name}: argnums must be ints, got {i!r}")
        j = i + nargs if i < 0 else i
        if not 0 <= j < nargs:
            raise ValueError(f"{fun_name}: argnum {i} is out of range for a call with "
                             f"{nargs} positional arguments")
        out.append(j)
    return tuple(out)


def abstractify(x, what: str) -> core.ShapedArray:
    """The aval a traced argument gets (canonical dtype; Python scalars are weak)."""
    if not is_arraylike(x):
        raise TypeError(f"{what}: argument of type {type(x).__name__} is not a valid fungrad "
                        "type; pass arrays, numpy values or Python scalars (or mark it static)")
    aval = core.get_aval(x)
    if type(x) is not Array and not isinstance(x, core.Tracer):
        from fungrad import dtypes
        aval = aval.update(dtype=dtypes.canonicalize_dtype(aval.dtype))
    return aval


def make_jaxpr(fun, static_argnums=(), return_shape: bool = False):
    """Return a function that traces ``fun`` and gives its ClosedJaxpr (printable).

    ``static_argnums`` arguments are passed to ``fun`` as Python values; all others are
    pytrees of arrays traced abstractly. With ``return_shape=True`` the function returns
    ``(jaxpr, out_shape)`` where ``out_shape`` is a pytree of ShapedArrays.
    """
    name = getattr(fun, "__name__", "fun")

    @functools.wraps(fun)
    def make_jaxpr_f(*args, **kwargs):
        static = _normalize_argnums("make_jaxpr", static_argnums, len(args))
        dyn_args = [a for i, a in enumerate(args) if i not in static]
        flat, in_tree = tree_util.tree_flatten((dyn_args, kwargs))
        in_avals = [abstractify(x, f"make_jaxpr({name})") for x in flat]
        out_tree = []

        def flat_fun(*tracers):
            dyn, kw = tree_util.tree_unflatten(in_tree, tracers)
            it = iter(dyn)
            full = [a if i in static else next(it) for i, a in enumerate(args)]
            out = fun(*full, **kw)
            leaves, tree = tree_util.tree_flatten(out)
            for leaf in leaves:
                if not is_arraylike(leaf):
                    raise TypeError(f"make_jaxpr({name}): the function returned a value of type "
                                    f"{type(leaf).__name__}, which is not an array; return "
                                    "arrays (or pytrees of arrays)")
            out_tree.append(tree)
            return leaves

        closed = trace_to_jaxpr(flat_fun, in_avals)
        if return_shape:
            shapes = tree_util.tree_unflatten(out_tree[0], closed.out_avals)
            return closed, shapes
        return closed

    return make_jaxpr_f


def block_until_ready(x):
    """Wait for every array in the pytree ``x`` to be computed; returns ``x``."""
    for leaf in tree_util.tree_leaves(x):
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
    return x
