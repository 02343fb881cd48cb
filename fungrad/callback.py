"""Host callbacks: Python functions called from inside traced and compiled programs.

Three primitives, JAX's semantics (``jax.debug.callback``, ``jax.pure_callback``,
``jax.experimental.io_callback``):

* ``debug_callback`` has no outputs and a side effect: DCE and CSE never drop or merge it
  (``ir.passes.effectful_primitives``), under ``jvp``/``grad`` it is called with the primal
  values (during the forward pass), its transpose does nothing, and under ``vmap`` it is
  unrolled: called once per example, as in JAX. ``fungrad.debug.print`` is built on it.
* ``pure_callback`` computes values of declared shapes and dtypes; it is pure, so a jitted
  program whose outputs do not need it drops it. It cannot be differentiated (a ValueError,
  as in JAX: wrap it in ``custom_jvp``); ``vmap`` follows its ``vmap_method``.
* ``io_callback`` computes values and has a side effect: never dropped; ``ordered=True``
  forbids ``vmap`` (JAX's ValueError); not differentiable.

Callbacks receive fungrad Arrays (copies of the values: the compiled program reuses its
buffers) arranged in the pytree structure of the arguments, and may return numpy arrays,
Arrays, Python scalars or lists; results are checked against the declared shapes (a
RuntimeError naming the callback and the result otherwise) and converted to the declared
dtypes, as JAX converts them.

Compiled code reaches Python through a host step of the program (``lowering/host_callback``):
native code calls back into the interpreter between kernels, also inside compiled loops.
"""

from __future__ import annotations

import numpy as np

from fungrad import core, dtypes, tree_util
from fungrad.array import Array
from fungrad.ir import passes
from fungrad.lowering import kernel as K
from fungrad.transforms import jvp as jvp_mod
from fungrad.transforms import transpose as transpose_mod
from fungrad.transforms import vmap as vmap_mod

__all__ = [
    "pure_callback",
    "io_callback",
    "debug_callback_p",
    "pure_callback_p",
    "io_callback_p",
    "FlatCallback",
    "VMAP_METHODS",
]

VMAP_METHODS = (
    "sequential",
    "sequential_unrolled",
    "expand_dims",
    "broadcast_all",
    "legacy_vectorized",
)


class FlatCallback:
    """The user's ``callback`` as a function of the flat array arguments: it rebuilds the
    ``(args, kwargs)`` pytree (``static`` holds the leaves that are not arrays, by position:
    strings, None, objects) and returns the flat list of results. Params of the callback
    primitives hold one; it compares by identity."""

    __slots__ = ("fn", "tree", "static", "name")

    def __init__(self, fn, tree, static: tuple, name: str):
        self.fn, self.tree, self.static, self.name = fn, tree, static, name

    def __call__(self, *flat):
        leaves = list(flat)
        for i, v in self.static:  # (in increasing positions)
            leaves.insert(i, v)
        args, kwargs = tree_util.tree_unflatten(self.tree, leaves)
        return self.fn(*args, **kwargs)

    def __repr__(self):
        return f"<callback {self.name}>"


def _fn_name(fn) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__


def _is_array_leaf(x) -> bool:
    if isinstance(x, (Array, core.Tracer, np.ndarray, np.generic)):
        return True
    return isinstance(x, (bool, int, float)) and not isinstance(x, type)


def flatten_args(api: str, fn, args, kwargs, static_ok: bool = True):
    """``(dynamic leaves as operands, FlatCallback)`` for ``fn(*args, **kwargs)``: array
    leaves (Arrays, tracers, numpy values, Python numbers) become operands, other leaves
    stay Python values passed as they are (JAX's static arguments of debug callbacks); with
    ``static_ok`` False (pure_callback, io_callback: JAX takes only arrays) they are a
    TypeError."""
    if not callable(fn):
        raise TypeError(
            f"{api}: the callback must be callable, got an object of type {type(fn).__name__}"
        )
    leaves, tree = tree_util.tree_flatten((tuple(args), dict(kwargs)))
    static, dyn = [], []
    for i, x in enumerate(leaves):
        if _is_array_leaf(x):
            dyn.append(x)
        elif static_ok:
            static.append((i, x))
        else:
            raise TypeError(
                f"{api}: argument leaf {i} is of type {type(x).__name__}, not an "
                f"array; {api} passes only arrays and numbers to the callback "
                f"(close over other values, e.g. with functools.partial)"
            )
    operands = []
    for x in dyn:
        if isinstance(x, (Array, core.Tracer)):
            operands.append(x)
        else:
            aval = core.get_aval(x)
            value = np.asarray(x, dtype=dtypes.canonicalize_dtype(aval.dtype))
            operands.append(Array(value, aval.weak_type))
    return operands, FlatCallback(fn, tree, tuple(static), _fn_name(fn))


def result_avals_of(api: str, result_shape_dtypes):
    """``(flat ShapedArrays, treedef)`` of a pytree of ShapeDtypeStruct-like leaves."""
    leaves, tree = tree_util.tree_flatten(result_shape_dtypes)
    avals = []
    for i, x in enumerate(leaves):
        shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
        if shape is None or dtype is None:
            raise TypeError(
                f"{api}: result_shape_dtypes must be a pytree of objects with "
                f"shape and dtype (fungrad.ShapeDtypeStruct), but leaf {i} is "
                f"{x!r:.80}"
            )
        dt = np.dtype(dtype)
        if dtypes.canonicalize_dtype(dt) != dt:
            raise ValueError(
                f"{api}: result_shape_dtypes cannot specify 64-bit types ({dt}) "
                "when enable_x64 is off; use the 32-bit type or turn on "
                "fungrad.config.update('enable_x64', True)"
            )
        avals.append(core.ShapedArray(tuple(shape), dt))
    return avals, tree


def check_results(api: str, callback: FlatCallback, out, result_avals) -> list[np.ndarray]:
    """The callback's results ``out`` as numpy values of ``result_avals``; RuntimeError (JAX's
    runtime error type) for a wrong number of results, a wrong shape or a dtype that differs
    from the declared one after canonicalization (a float64 result for a declared float32
    without x64 converts, as in JAX; an int32 result for a float32 does not)."""
    leaves = tree_util.tree_leaves(out)
    if len(leaves) != len(result_avals):
        raise RuntimeError(
            f"{api}: the callback {callback.name} returned {len(leaves)} arrays but "
            f"result_shape_dtypes declares {len(result_avals)}; return a pytree with the "
            "structure of result_shape_dtypes"
        )
    vals = []
    for i, (v, a) in enumerate(zip(leaves, result_avals)):
        arr = np.asarray(v)
        if arr.shape != a.shape:
            raise RuntimeError(
                f"{api}: result {i} of the callback {callback.name} has shape {arr.shape} "
                f"({arr.dtype}) but result_shape_dtypes declares {a.str_short()}; return "
                "arrays of the declared shapes"
            )
        if arr.dtype != a.dtype:
            if arr.dtype.kind not in "biufc" or dtypes.canonicalize_dtype(arr.dtype) != a.dtype:
                raise RuntimeError(
                    f"{api}: result {i} of the callback {callback.name} has dtype {arr.dtype} "
                    f"but result_shape_dtypes declares {a.str_short()}; return arrays of the "
                    "declared dtypes (convert with .astype)"
                )
            with np.errstate(all="ignore"):
                arr = arr.astype(a.dtype)
        vals.append(arr)
    return vals


def _as_arrays(values, avals) -> list[Array]:
    return [Array.from_impl(np.asarray(v, dtype=a.dtype), a) for v, a in zip(values, avals)]


# -- debug_callback -------------------------------------------------------------------------------

debug_callback_p = core.Primitive("debug_callback", multiple_results=True)


def _debug_callback_impl(*values, callback, ordered):
    del ordered
    callback(*[Array(np.asarray(v)) for v in values])
    return []


def _debug_callback_abstract_eval(*avals, callback, ordered):
    del avals, callback, ordered
    return []


def _debug_callback_jvp(primals, tangents, **params):
    return debug_callback_p.bind(*primals, **params), []


def _debug_callback_transpose(cts, *args, **params):
    return [None] * len(args)


def _unrolled_batch_rule(prim):
    """JAX's batching of debug callbacks: one call per example (unbatched operands are
    passed whole to each)."""

    def rule(axis_size, args, dims, **params):
        from fungrad import lax

        for i in range(axis_size):
            prim.bind(
                *[
                    a if d is None else lax.index_in_dim(a, i, d, keepdims=False)
                    for a, d in zip(args, dims)
                ],
                **params,
            )
        return [], []

    return rule


debug_callback_p.impl = _debug_callback_impl
debug_callback_p.abstract_eval = _debug_callback_abstract_eval
jvp_mod.jvp_rules[debug_callback_p] = _debug_callback_jvp
transpose_mod.transpose_rules[debug_callback_p] = _debug_callback_transpose
vmap_mod.batch_rules[debug_callback_p] = _unrolled_batch_rule(debug_callback_p)
passes.effectful_primitives.add(debug_callback_p)


# -- pure_callback --------------------------------------------------------------------------------

pure_callback_p = core.Primitive("pure_callback", multiple_results=True)


def _pure_callback_impl(*values, callback, result_avals, vmap_method):
    del vmap_method
    out = callback(*[Array(np.asarray(v)) for v in values])
    return check_results("pure_callback", callback, out, result_avals)


def _callback_abstract_eval(*avals, callback, result_avals, **params):
    return list(result_avals)


def _pure_callback_jvp(primals, tangents, **params):
    raise ValueError(
        "Pure callbacks do not support JVP (pure_callback cannot be "
        "differentiated). Please use fungrad.custom_jvp (or custom_vjp) around the "
        "callback to use callbacks while taking gradients."
    )


def _pure_callback_transpose(cts, *args, **params):
    raise ValueError(
        "Pure callbacks do not support transpose. Please use fungrad.custom_vjp "
        "to use callbacks while taking gradients."
    )


def _pure_callback_batch(axis_size, args, dims, *, callback, result_avals, vmap_method):
    from fungrad import lax

    moved = [a if d is None else vmap_mod.moveaxis(a, d, 0) for a, d in zip(args, dims)]
    batched_avals = tuple(a.update(shape=(axis_size, *a.shape)) for a in result_avals)
    if vmap_method == "legacy_vectorized":
        outs = pure_callback_p.bind(
            *moved, callback=callback, result_avals=batched_avals, vmap_method=vmap_method
        )
    elif vmap_method in ("expand_dims", "broadcast_all"):
        size = axis_size if vmap_method == "broadcast_all" else 1
        outs = pure_callback_p.bind(
            *[lax.broadcast(a, (size,)) if d is None else a for a, d in zip(moved, dims)],
            callback=callback,
            result_avals=batched_avals,
            vmap_method=vmap_method,
        )
    elif vmap_method in ("sequential", "sequential_unrolled"):
        outs = _sequential(
            pure_callback_p,
            moved,
            dims,
            dict(callback=callback, result_avals=result_avals, vmap_method=vmap_method),
        )
    else:
        raise NotImplementedError(
            f"vmap of pure_callback (callback {callback.name}) needs a vmap_method: pass "
            f"vmap_method= one of {', '.join(map(repr, VMAP_METHODS))} to pure_callback "
            f"(got vmap_method={vmap_method!r})"
        )
    return list(outs), [0] * len(outs)


def _sequential(prim, moved, dims, params):
    """``prim`` bound once per example in a loop (``lax.map``); results stacked."""
    from fungrad import lax

    batched = [a for a, d in zip(moved, dims) if d is not None]

    def one(xs):
        it = iter(xs)
        return prim.bind(*[a if d is None else next(it) for a, d in zip(moved, dims)], **params)

    return lax.map(one, batched)


pure_callback_p.impl = _pure_callback_impl
pure_callback_p.abstract_eval = _callback_abstract_eval
jvp_mod.jvp_rules[pure_callback_p] = _pure_callback_jvp
transpose_mod.transpose_rules[pure_callback_p] = _pure_callback_transpose
vmap_mod.batch_rules[pure_callback_p] = _pure_callback_batch


def pure_callback(callback, result_shape_dtypes, *args, sharding=None, vmap_method=None, **kwargs):
    """Call the pure Python function ``callback(*args, **kwargs)`` from traced or compiled
    code (``jax.pure_callback``). ``result_shape_dtypes`` is a pytree of
    :class:`fungrad.ShapeDtypeStruct` (or anything with ``shape`` and ``dtype``) describing
    the results; the result is that pytree of Arrays.

    Being pure, the call may be skipped when its results are unused under ``jit``, and it may
    run several times. It cannot be differentiated (wrap it in ``custom_jvp``/``custom_vjp``).
    Under ``vmap``: ``vmap_method="sequential"`` (or ``"sequential_unrolled"``) calls it once
    per example; ``"expand_dims"`` once, with batched arguments' batch axis first and unbatched
    ones given a leading axis of size 1; ``"broadcast_all"`` likewise with unbatched arguments
    tiled to the batch size; ``"legacy_vectorized"`` with unbatched arguments as they are;
    None (the default) makes ``vmap`` raise NotImplementedError.
    """
    if vmap_method not in (*VMAP_METHODS, None):
        raise ValueError(
            f"pure_callback: vmap_method must be one of "
            f"{', '.join(map(repr, VMAP_METHODS))} or None, got {vmap_method!r}"
        )
    if sharding is not None:
        raise ValueError("pure_callback: fungrad has no shardings; pass sharding=None")
    operands, flat = flatten_args("pure_callback", callback, args, kwargs, static_ok=False)
    avals, tree = result_avals_of("pure_callback", result_shape_dtypes)
    outs = pure_callback_p.bind(
        *operands, callback=flat, result_avals=tuple(avals), vmap_method=vmap_method
    )
    return tree_util.tree_unflatten(tree, outs)


# -- io_callback ----------------------------------------------------------------------------------

io_callback_p = core.Primitive("io_callback", multiple_results=True)


def _io_callback_impl(*values, callback, result_avals, ordered):
    del ordered
    out = callback(*[Array(np.asarray(v)) for v in values])
    return check_results("io_callback", callback, out, result_avals)


def _io_callback_jvp(primals, tangents, **params):
    raise ValueError(
        "IO callbacks do not support JVP (io_callback cannot be "
        "differentiated); use fungrad.custom_jvp around it."
    )


def _io_callback_transpose(cts, *args, **params):
    raise ValueError("IO callbacks do not support transpose.")


def _io_callback_batch(axis_size, args, dims, *, callback, result_avals, ordered):
    if ordered:
        raise ValueError(
            f"Cannot vmap an ordered io_callback (callback {callback.name}): "
            "its calls would have no order; pass ordered=False to vmap it"
        )
    moved = [a if d is None else vmap_mod.moveaxis(a, d, 0) for a, d in zip(args, dims)]
    outs = _sequential(
        io_callback_p,
        moved,
        dims,
        dict(callback=callback, result_avals=result_avals, ordered=False),
    )
    return list(outs), [0] * len(outs)


io_callback_p.impl = _io_callback_impl
io_callback_p.abstract_eval = _callback_abstract_eval
jvp_mod.jvp_rules[io_callback_p] = _io_callback_jvp
transpose_mod.transpose_rules[io_callback_p] = _io_callback_transpose
vmap_mod.batch_rules[io_callback_p] = _io_callback_batch
passes.effectful_primitives.add(io_callback_p)


def io_callback(
    callback, result_shape_dtypes, *args, sharding=None, ordered: bool = False, **kwargs
):
    """Call the impure Python function ``callback(*args, **kwargs)`` from traced or compiled
    code (``jax.experimental.io_callback``); results as for :func:`pure_callback`. It is
    never dropped, even when its results are unused; ``ordered=True`` keeps it in program
    order with the other ordered effects (fungrad keeps every callback in program order) and
    makes ``vmap`` raise. Not differentiable; under ``vmap`` (unordered) it is called once
    per example."""
    if sharding is not None:
        raise ValueError("io_callback: fungrad has no shardings; pass sharding=None")
    operands, flat = flatten_args("io_callback", callback, args, kwargs, static_ok=False)
    avals, tree = result_avals_of("io_callback", result_shape_dtypes)
    outs = io_callback_p.bind(
        *operands, callback=flat, result_avals=tuple(avals), ordered=bool(ordered)
    )
    return tree_util.tree_unflatten(tree, outs)


# -- lowering: a host step of the compiled program ------------------------------------------------


def _lower(prim):
    def rule(ctx, *args, callback, result_avals=(), **params):
        from fungrad.lowering import host_callback

        if prim is debug_callback_p:

            def run(values):
                callback(*_as_arrays(values, avals))
                return []
        else:
            api = prim.name

            def run(values):
                out = callback(*_as_arrays(values, avals))
                return check_results(api, callback, out, result_avals)

        avals = [core.ShapedArray(t.shape, t.dtype) for t in args]
        return host_callback.lower_host_call(
            ctx, f"{prim.name} {callback.name}", run, list(args), list(result_avals)
        )

    K.register_lowering(prim, rule)


for _p in (debug_callback_p, pure_callback_p, io_callback_p):
    _lower(_p)
