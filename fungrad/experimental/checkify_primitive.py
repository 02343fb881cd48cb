"""The ``check`` primitive: an Error value that raises when it holds a failure.

``checkify.check`` and ``check_error`` bind ``check`` on the leaves of an Error value
(``err_tree`` is its treedef; ``debug`` marks ``debug_check``). ``checkify`` discharges every
``check`` it meets into the error value it threads through the program; what is left
undischarged behaves as in JAX:

* eagerly, the impl raises :class:`JaxRuntimeError` when the error holds a failure;
* under ``jvp``/``grad`` the check is made on the primal values;
* under ``vmap`` the batch is reduced to one error (the last failing example, as JAX's
  ``_reduce_any_error``) and checked;
* staged into a compiled program (``jit`` without ``checkify``) it cannot run: compiling it
  raises JAX's ValueError telling to functionalize it with ``checkify.checkify``; a
  ``debug_check`` compiles to nothing.

The primitive has an effect, so DCE keeps it though it has no outputs.
"""

from __future__ import annotations

import numpy as np

from fungrad import core, tree_util
from fungrad import numpy as fnp
from fungrad.array import Array
from fungrad.experimental.checkify_error import Error, JaxRuntimeError, init_error
from fungrad.ir import passes
from fungrad.lowering import kernel as K
from fungrad.transforms import jvp as jvp_mod
from fungrad.transforms import vmap as vmap_mod

__all__ = ["check_p", "check_error_value", "functionalization_error"]

check_p = core.Primitive("check", multiple_results=True)


def functionalization_error() -> ValueError:
    """JAX's error for a ``check`` that reached the compiler unfunctionalized."""
    return ValueError(
        "Cannot abstractly evaluate a checkify.check which was not functionalized. This "
        "probably means you tried to stage (jit/scan/pmap/...) a `check` without "
        "functionalizing it through `checkify.checkify`."
    )


def raise_if_failed(error: Error) -> None:
    """Raise :class:`JaxRuntimeError` with the first failure of a concrete ``error``."""
    exc = error.get_exception()
    if exc is None:
        return
    err = JaxRuntimeError(str(exc))
    if exc.traceback_info is not None:
        err.add_note(f"the failed check is at {exc.traceback_info}")
    raise err from exc


def _check_impl(*values, err_tree, debug):
    if not debug:
        raise_if_failed(tree_util.tree_unflatten(err_tree, [Array(v) for v in values]))
    return []


def _check_abstract_eval(*avals, err_tree, debug):
    del avals, err_tree, debug
    return []


def _check_jvp(primals, tangents, *, err_tree, debug):
    del tangents
    check_p.bind(*primals, err_tree=err_tree, debug=debug)
    return [], []


def _check_batch(axis_size, args, dims, *, err_tree, debug):
    args = [
        vmap_mod.bdim_at_front(a, d, axis_size)
        if d is not None
        else fnp.broadcast_to(a, (axis_size, *np.shape(a)))
        for a, d in zip(args, dims)
    ]
    error = reduce_any_error(tree_util.tree_unflatten(err_tree, args))
    leaves, tree = tree_util.tree_flatten(error)
    check_p.bind(*leaves, err_tree=tree, debug=debug)
    return [], []


def _check_lowering(ctx, *args, err_tree, debug):
    if debug:  # a debug_check outside checkify does nothing
        return []
    raise functionalization_error()


check_p.impl = _check_impl
check_p.abstract_eval = _check_abstract_eval
jvp_mod.jvp_rules[check_p] = _check_jvp
vmap_mod.batch_rules[check_p] = _check_batch
K.register_lowering(check_p, _check_lowering)
passes.effectful_primitives.add(check_p)


def reduce_any_error(error: Error) -> Error:
    """One error out of a batched one: for each kind, the slot of the last failing example
    (JAX's ``_reduce_any_error``; its ``argsort(pred)[-1]``)."""
    out = init_error
    for effect, pred in error._pred.items():
        batch = np.shape(pred)
        n = int(np.prod(batch))
        pred = fnp.reshape(pred, (n,))
        code = fnp.reshape(error._code[effect], (n,))
        payload = [fnp.reshape(p, (n, *np.shape(p)[len(batch) :])) for p in error._payload[effect]]
        idx = n - 1 - fnp.argmax(pred[::-1])
        out = out._update(effect, pred[idx], code[idx], {}, [p[idx] for p in payload])
    return out._replace(_metadata=error._metadata)


def check_error_value(error: Error, *, debug: bool = False) -> None:
    """Bind ``check`` on ``error`` (batched errors reduced first)."""
    if any(np.shape(v) for v in error._pred.values()):
        error = reduce_any_error(error)
    leaves, tree = tree_util.tree_flatten(error)
    check_p.bind(*leaves, err_tree=tree, debug=debug)
