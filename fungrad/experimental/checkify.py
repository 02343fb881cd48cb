"""``jax.experimental.checkify``: run-time checks that survive ``jit``, ``vmap`` and ``grad``.

``checkify(f, errors=...)`` returns a function that returns ``(err, out)``: ``f``'s output and
an :class:`Error` value holding the first failed check (``err.get()`` is its message or None,
``err.throw()`` raises it). The checks are the user's (:func:`check`, :func:`debug_check`,
:func:`check_error`) and automatic ones chosen by the error sets (``nan_checks``,
``div_checks``, ``index_checks``; ``float_checks``, ``automatic_checks``, ``all_checks``
combine them, and set operations make others). ``f`` is traced to a jaxpr and evaluated by
the checkify interpreter (``checkify_interpreter.py``), which computes the error as ordinary
array values next to ``f``'s own, so the result composes with every other transform.

Outside ``checkify`` a failing :func:`check` raises :class:`JaxRuntimeError` eagerly, and a
``check`` staged into a compiled program without ``checkify`` is JAX's ValueError when it is
compiled; a :func:`debug_check` outside ``checkify`` does nothing.
"""

from __future__ import annotations

import functools

import numpy as np

from fungrad import numpy as fnp
from fungrad import source_info, tree_util
from fungrad.array import Array
from fungrad.experimental.checkify_error import (
    BatchedError,
    DivisionByZeroError,
    Error,
    FailedCheckError,
    JaxException,
    JaxRuntimeError,
    NaNError,
    OOBError,
    all_checks,
    assert_func,
    automatic_checks,
    div_checks,
    float_checks,
    index_checks,
    init_error,
    nan_checks,
    user_checks,
)
from fungrad.experimental.checkify_interpreter import checkify_jaxpr
from fungrad.experimental.checkify_primitive import check_error_value, check_p
from fungrad.transforms import staging
from fungrad.transforms.api_util import check_callable

__all__ = [
    "checkify",
    "check",
    "debug_check",
    "check_error",
    "Error",
    "JaxRuntimeError",
    "JaxException",
    "FailedCheckError",
    "NaNError",
    "DivisionByZeroError",
    "OOBError",
    "BatchedError",
    "check_p",
    "ErrorCategory",
    "init_error",
    "user_checks",
    "nan_checks",
    "index_checks",
    "div_checks",
    "float_checks",
    "automatic_checks",
    "all_checks",
]

ErrorCategory = type[JaxException]
"""The type of an error set's members (JAX's ``checkify.ErrorCategory``): an error class."""


def checkify(f, errors: frozenset = user_checks):
    """Functionalize the checks of ``f`` and add the automatic checks of ``errors``.

    Returns a function taking ``f``'s arguments and returning ``(err, out)``: ``out`` is
    ``f``'s result and ``err`` an :class:`Error` holding the first check that failed (in
    program order). As in JAX, ``f`` is called with the arguments themselves (closed over,
    not turned into abstract values), so Python scalars stay Python scalars.

    Example::

        def f(x):
            checkify.check(x > 0, "{x} needs to be positive!", x=x)
            return 1 / x

        err, out = fg.jit(checkify.checkify(f))(fnp.float32(-3.0))
        err.get()  # '-3.0 needs to be positive! (`check` failed)'
    """
    check_callable(f, "checkify", "checkify.checkify(f, errors=checkify.user_checks)")
    errors = frozenset(errors)

    @functools.wraps(f)
    def checked_fun(*args, **kwargs):
        out_tree = []

        def traced():
            leaves, tree = tree_util.tree_flatten(f(*args, **kwargs))
            out_tree.append(tree)
            return leaves

        closed = staging.trace_to_jaxpr(traced, [])
        error, outs = checkify_jaxpr(closed.jaxpr, closed.consts, errors, init_error)
        return error, tree_util.tree_unflatten(out_tree[0], outs)

    return checked_fun


def check(pred, msg: str, *fmt_args, debug: bool = False, **fmt_kwargs) -> None:
    """Check that the scalar boolean ``pred`` holds; ``msg`` (a ``str.format`` string over
    ``fmt_args``/``fmt_kwargs``, pytrees of arrays whose run-time values it prints) is the
    error when it does not. Under :func:`checkify` the failure becomes the Error value;
    outside it a False ``pred`` raises :class:`JaxRuntimeError` eagerly, and a check staged
    into ``jit`` without ``checkify`` cannot be compiled (functionalize it with
    ``checkify.checkify``)."""
    _check(pred, msg, debug, fmt_args, fmt_kwargs)


def debug_check(pred, msg: str, *fmt_args, **fmt_kwargs) -> None:
    """:func:`check` that runs only under :func:`checkify` (outside it, it does nothing)."""
    _check(pred, msg, True, fmt_args, fmt_kwargs)


def check_error(error: Error) -> None:
    """Raise ``error`` (:class:`JaxRuntimeError`) if it holds a failure; like ``check``,
    :func:`checkify` functionalizes it again, so an Error returned by an inner
    ``jit(checkify(f))`` can be re-raised or carried outward."""
    if not isinstance(error, Error):
        raise TypeError(f"check_error takes an Error as argument, got type {type(error)} instead.")
    check_error_value(error)


def _is_scalar_pred(pred) -> bool:
    return isinstance(pred, bool) or (
        isinstance(pred, Array) and pred.shape == () and pred.dtype == np.dtype(bool)
    )


def _check(pred, msg, debug, fmt_args, fmt_kwargs):
    if not _is_scalar_pred(pred):
        name = "debug_check" if debug else "check"
        raise TypeError(f"{name} takes a scalar pred as argument, got {pred}")
    payload, payload_tree = tree_util.tree_flatten((fmt_args, fmt_kwargs))
    for arg in payload:
        if not isinstance(arg, (Array, np.ndarray)):
            raise TypeError(
                "Formatting arguments to checkify.check need to be PyTrees of arrays, but "
                f"got {arg!r} of type {type(arg)}."
            )
    src = source_info.current(2)
    error = assert_func(
        init_error,
        fnp.logical_not(pred),
        FailedCheckError,
        (msg, payload_tree),
        src,
        payload,
    )
    check_error_value(error, debug=debug)
