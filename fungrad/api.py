"""The public transform API (``fungrad.make_jaxpr``, ...), over pytrees of arguments."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from fungrad import core, tree_util
from fungrad.array import Array, is_arraylike
from fungrad.config import config
from fungrad.ir.passes import simplify
from fungrad.shape_dtype_struct import ShapeDtypeStruct
from fungrad.transforms.api_util import abstractify, check_callable, normalize_argnums
from fungrad.transforms.autodiff import linear_transpose  # noqa: F401  (re-exported)
from fungrad.transforms.jit import jit  # noqa: F401  (re-exported: fungrad.jit)
from fungrad.transforms.memo import clear_caches  # noqa: F401  (re-exported)
from fungrad.transforms.staging import hoist_tracer_consts, trace_to_jaxpr
from fungrad.transforms.vmap_api import vmap  # noqa: F401  (re-exported: fungrad.vmap)

_F = TypeVar("_F", bound=Callable[..., Any])


def _output_leaves(what: str, out, out_tree: list) -> list:
    """The leaves of a traced function's output ``out`` (its treedef appended to
    ``out_tree``); a TypeError naming ``what`` for a leaf that is not an array."""
    leaves, tree = tree_util.tree_flatten(out)
    for leaf in leaves:
        if not is_arraylike(leaf):
            raise TypeError(
                f"{what}: the function returned a value of type "
                f"{type(leaf).__name__}, which is not an array; return arrays (or "
                "pytrees of arrays)"
            )
    out_tree.append(tree)
    return leaves


def make_jaxpr(fun, static_argnums=(), return_shape: bool = False):
    """Return a function that traces ``fun`` and gives its ClosedJaxpr (printable).

    The jaxpr is simplified (common subexpressions merged, dead equations dropped), so e.g.
    ``make_jaxpr(grad(f))`` shows the gradient program without the unused primal output.

    ``static_argnums`` arguments are passed to ``fun`` as Python values; all others are
    pytrees of arrays traced abstractly. With ``return_shape=True`` the function returns
    ``(jaxpr, out_shape)`` where ``out_shape`` is a pytree of ShapedArrays.
    """
    check_callable(fun, "make_jaxpr", "pass the function to trace: make_jaxpr(f)(*args)")
    name = getattr(fun, "__name__", "fun")

    @functools.wraps(fun)
    def make_jaxpr_f(*args, **kwargs):
        static = normalize_argnums("make_jaxpr", static_argnums, len(args), "static_argnums")
        dyn_args = [a for i, a in enumerate(args) if i not in static]
        flat, in_tree = tree_util.tree_flatten((dyn_args, kwargs))
        in_avals = [abstractify(x, f"make_jaxpr({name})") for x in flat]
        out_tree = []

        def flat_fun(*tracers):
            dyn, kw = tree_util.tree_unflatten(in_tree, tracers)
            it = iter(dyn)
            full = [a if i in static else next(it) for i, a in enumerate(args)]
            return _output_leaves(f"make_jaxpr({name})", fun(*full, **kw), out_tree)

        closed = simplify(trace_to_jaxpr(flat_fun, in_avals))
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


def device_get(x):
    """The arrays of pytree ``x`` as numpy arrays on the host (``jax.device_get``); other leaves
    (Python scalars, strings, ...) are returned unchanged."""

    def get(leaf):
        if isinstance(leaf, core.Tracer):
            raise TypeError(
                f"device_get: got a traced value ({leaf.aval.str_short()}); "
                "device_get reads concrete arrays: call it outside jit/grad/vmap"
            )
        if isinstance(leaf, Array):
            return np.asarray(leaf)
        return leaf

    return tree_util.tree_map(get, x)


def typeof(x) -> core.ShapedArray:
    """The abstract value of ``x`` (``jax.typeof``): a ShapedArray with its shape, dtype and
    weak type, for an Array, a tracer, a numpy value or a Python scalar."""
    if not is_arraylike(x):
        raise TypeError(
            f"typeof: value of type {type(x).__name__} is not an array; pass an "
            "Array, a tracer, a numpy value or a Python scalar"
        )
    return abstractify(x, "typeof")


def eval_shape(fun, *args, **kwargs):
    """The shapes and dtypes ``fun(*args, **kwargs)`` would return, computed by tracing
    abstractly (nothing is evaluated), as a pytree of :class:`ShapeDtypeStruct`
    (``jax.eval_shape``). Leaves of ``args`` may be arrays, Python scalars, numpy values or
    ShapeDtypeStructs (or anything with ``.shape`` and ``.dtype``).
    """
    check_callable(fun, "eval_shape", "pass the function to evaluate: eval_shape(f, *args)")
    name = getattr(fun, "__name__", "fun")
    flat, in_tree = tree_util.tree_flatten((args, kwargs))

    def aval_of(x):
        if isinstance(x, ShapeDtypeStruct):
            return x.aval
        if not is_arraylike(x) and hasattr(x, "shape") and hasattr(x, "dtype"):
            return ShapeDtypeStruct(x.shape, x.dtype).aval
        return abstractify(x, f"eval_shape({name})")

    out_tree = []

    def flat_fun(*tracers):
        a, kw = tree_util.tree_unflatten(in_tree, tracers)
        return _output_leaves(f"eval_shape({name})", fun(*a, **kw), out_tree)

    closed = trace_to_jaxpr(flat_fun, [aval_of(x) for x in flat])
    outs = [ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in closed.out_avals]
    return tree_util.tree_unflatten(out_tree[0], outs)


def named_call(fun, *, name: str | None = None):
    """``fun`` under the name ``name`` (``jax.named_call``). JAX uses the name only in
    profiler and compiler metadata, and fungrad records no such metadata, so the result
    computes exactly what ``fun`` does."""
    check_callable(fun, "named_call", "pass the function to name: named_call(f, name='f')")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"named_call: name must be a string, got {type(name).__name__}")

    @functools.wraps(fun)
    def named_f(*args, **kwargs):
        return fun(*args, **kwargs)

    if name is not None:
        named_f.__name__ = name
    return named_f


@contextlib.contextmanager
def named_scope(name: str):
    """A ``with`` block naming the operations inside it (``jax.named_scope``). JAX uses the
    name only in profiler and compiler metadata, which fungrad does not record, so the block
    computes exactly what it would without it."""
    if not isinstance(name, str):
        raise TypeError(
            f"named_scope: the name argument must be a string, got {type(name).__name__}"
        )
    yield


class _CompileTimeEvalTrace(core.Trace):
    """Evaluates primitives whose operands are all concrete eagerly, and hands those with a
    traced operand to the enclosing trace (see :func:`ensure_compile_time_eval`)."""

    def __init__(self, parent: core.Trace):
        self.parent = parent
        self.eval_trace = core.EvalTrace()

    def process_primitive(self, primitive, args, params):
        if any(isinstance(a, core.Tracer) for a in args):
            with core.set_current_trace(self.parent):
                return primitive.bind(*args, **params)
        return self.eval_trace.process_primitive(primitive, args, params)


@contextlib.contextmanager
def ensure_compile_time_eval():
    """A ``with`` block in which operations on concrete values run eagerly even inside ``jit``
    or another transform, so their results are concrete (usable in Python ``if``, as shapes,
    ...); operations on traced values are still traced (``jax.ensure_compile_time_eval``).

    Example::

        @fg.jit
        def f(x):
            with fg.ensure_compile_time_eval():
                n = fnp.sin(3.0) > 0       # a concrete bool Array
            return x * 2 if n else x
    """
    trace = core.current_trace()
    if type(trace) is core.EvalTrace:
        yield
        return
    with core.set_current_trace(_CompileTimeEvalTrace(trace)):
        yield


def closure_convert(fun, *example_args):
    """``(converted, consts)``: ``fun`` with the traced values it closes over made explicit
    (``jax.closure_convert``): ``converted(*args, *consts)`` computes ``fun(*args)``. Inside
    ``custom_vjp``/``custom_jvp`` rules this lets a function that closes over traced values be
    passed on as a plain, differentiable argument. Outside transforms ``consts`` is empty."""
    check_callable(fun, "closure_convert", "pass the function: closure_convert(f, *args)")
    flat, in_tree = tree_util.tree_flatten(example_args)
    avals = [abstractify(x, "closure_convert") for x in flat]
    out_tree = []

    def flat_fun(*xs):
        out = fun(*tree_util.tree_unflatten(in_tree, xs))
        leaves, tree = tree_util.tree_flatten(out)
        out_tree.append(tree)
        return leaves

    closed, hoisted = hoist_tracer_consts(trace_to_jaxpr(flat_fun, avals))
    n = len(hoisted)

    def converted(*args):
        xs, consts = args[: len(args) - n], args[len(args) - n :]
        leaves, tree = tree_util.tree_flatten(xs)
        if tree != in_tree:
            raise TypeError(
                f"closure_convert: the converted function takes arguments with the "
                f"structure of the example arguments {in_tree}, got {tree}"
            )
        outs = core.eval_jaxpr(closed.jaxpr, closed.consts, *consts, *leaves)
        return tree_util.tree_unflatten(out_tree[0], outs)

    functools.update_wrapper(converted, fun)
    return converted, list(hoisted)


def custom_gradient(fun):
    """A function with the gradient rule ``fun`` itself provides (``jax.custom_gradient``):
    ``fun(*args)`` returns ``(value, vjp)`` where ``vjp(cotangent)`` gives the tuple of
    argument cotangents. Differentiable in reverse mode (it is a ``custom_vjp``)."""
    from fungrad.transforms.custom import custom_vjp

    check_callable(fun, "custom_gradient", "decorate the function: @custom_gradient")

    def value_and_vjp(args):
        out = fun(*args)
        if not (isinstance(out, tuple) and len(out) == 2):
            what = "an array" if hasattr(out, "shape") else f"a {type(out).__name__}"
            raise TypeError(
                f"custom_gradient: the function must return a pair (value, vjp_fn), got {what}"
            )
        return out

    @custom_vjp
    def wrapped(*args):
        return value_and_vjp(args)[0]

    def fwd(*args):
        value, vjp = value_and_vjp(args)
        if not callable(vjp):
            raise TypeError(
                "custom_gradient: the function must return (value, vjp_fn) with "
                f"a callable vjp_fn, got {type(vjp).__name__}"
            )
        converted, consts = closure_convert(vjp, value)
        # the residuals: the traced values vjp closes over, as leaves of a Partial
        return value, tree_util.Partial(functools.partial(_consts_first, converted), *consts)

    def bwd(res, ct):
        out = res(ct)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    wrapped.defvjp(fwd, bwd)
    functools.update_wrapper(wrapped, fun)
    return wrapped


def _consts_first(converted, *args):
    """``converted(ct, *consts)`` called as ``f(*consts, ct)`` (a Partial binds consts)."""
    return converted(args[-1], *args[:-1])


def copy_to_host_async(x):
    """Start copying the arrays of pytree ``x`` to host memory (``jax.copy_to_host_async``):
    a :class:`~fungrad.GpuArray` is downloaded now; CPU arrays already are on the host.
    Returns ``x``."""
    from fungrad.devices import GpuArray

    for leaf in tree_util.tree_leaves(x):
        if type(leaf) is GpuArray:
            leaf._value  # noqa: B018  (a GpuArray downloads on first host access)
    return x


def effects_barrier() -> None:
    """Wait until every pending computation has finished (``jax.effects_barrier``): fungrad
    runs computations synchronously, so there is never anything to wait for."""


def print_environment_info(return_string: bool = False):
    """fungrad's, Python's, numpy's and the platform's versions, and the devices
    (``jax.print_environment_info``); printed, or returned with ``return_string=True``."""
    import platform
    import sys

    from fungrad.devices import devices
    from fungrad.version import __version__

    text = (
        "\n".join(
            [
                f"fungrad:    {__version__}",
                f"numpy:      {np.__version__}",
                f"python:     {sys.version.splitlines()[0]}",
                f"platform:   {platform.platform()}",
                f"devices:    {devices('cpu')}",
            ]
        )
        + "\n"
    )
    if return_string:
        return text
    print(text, end="")
    return None


# -- configuration states (JAX's top-level jax.enable_x64, ...) ----------------------------


class _Restore:
    """A ``with`` block that sets one option and restores its previous value on exit."""

    __slots__ = ("name", "value", "saved")

    def __init__(self, name: str, value):
        self.name, self.value = name, value

    def __enter__(self):
        self.saved = getattr(config, self.name)
        config.update(self.name, self.value)
        return self

    def __exit__(self, *exc):
        setattr(config, self.name, self.saved)
        return False

    def __call__(self, fun):
        """Use as a decorator (as JAX's context managers can be): ``fun`` runs inside the
        block."""

        @functools.wraps(fun)
        def wrapped(*args, **kwargs):
            with _Restore(self.name, self.value):
                return fun(*args, **kwargs)

        return wrapped


class State:
    """One option as JAX's top-level ``jax.enable_x64`` etc.: calling it gives a context
    manager (``with fg.enable_x64(True):``; without an argument it uses ``default_value``),
    ``.value`` reads the option."""

    def __init__(self, name: str, jax_name: str, default_value):
        self._option = name
        self.name = jax_name
        self._default_context_manager_value = default_value

    @property
    def value(self):
        return getattr(config, self._option)

    def __call__(self, new_val=None):
        if new_val is None:
            new_val = self._default_context_manager_value
        return _Restore(self._option, new_val)

    def __bool__(self):
        raise TypeError(
            f"bool({self.name}) is ambiguous: read {self.name}.value, or use "
            f"`with {self.name.removeprefix('jax_')}(...)` as a context manager"
        )

    def __repr__(self):
        return f"State({self.name}={self.value!r})"


enable_x64 = State("enable_x64", "jax_enable_x64", True)
enable_checks = State("check_impl_avals", "jax_enable_checks", True)
default_matmul_precision = State("default_matmul_precision", "jax_default_matmul_precision", None)
explain_cache_misses = State("explain_recompiles", "jax_explain_cache_misses", True)
debug_nans = State("debug_nans", "jax_debug_nans", True)
debug_infs = State("debug_infs", "jax_debug_infs", True)
numpy_rank_promotion = State("numpy_rank_promotion", "jax_numpy_rank_promotion", None)


def disable_jit(disable: bool = True):
    """A ``with`` block in which ``jit(f)(...)`` calls ``f`` as plain Python, every operation
    eager, so ``print`` shows values and a debugger can step through it (``jax.disable_jit``).
    """
    return _Restore("disable_jit", bool(disable))
