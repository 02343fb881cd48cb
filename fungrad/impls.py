"""What the eager impls of primitives share, below every layer that defines or runs them.

* numpy's floating-point error state: :func:`ignore_fp_errors` wraps an impl so it never warns
  (compiled code cannot either; overflow gives inf), and :data:`FP_STATE` /
  :data:`FP_IGNORE_ALL` / :func:`unguarded` let a caller that runs many impls in a row (the
  eager tape's generated functions, fungrad/transforms/pycodegen.py) set the state once;
* :data:`specialized_impls`: per-signature versions of an impl, filled by the primitives that
  have one (dot_general).
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["FP_IGNORE_ALL", "FP_STATE", "ignore_fp_errors", "specialized_impls", "unguarded"]


try:  # numpy 2 keeps the error state in a context variable (private API: any surprise in it
    # falls back to np.errstate, as numpy 1.x does)
    from numpy._core.umath import _extobj_contextvar as _fp_state
    from numpy._core.umath import _make_extobj

    _fp_ignore_all = _make_extobj(all="ignore")
except (ImportError, AttributeError, TypeError, ValueError):
    _fp_state = _fp_ignore_all = None


def ignore_fp_errors(fn):
    """``fn`` running with numpy's floating-point errors ignored, as ``np.errstate(all=
    "ignore")`` does: impls never warn (compiled code cannot either), overflow gives inf.
    With numpy 2 the error state is a context variable, set here directly: a ``with
    np.errstate(...)`` block costs about 2.5 µs a call, several times a small ufunc, and eager
    code runs impls on small arrays all the time. (The ignoring state is built once, at import:
    it keeps the buffer size numpy had then.)

    ``unguarded(impl)`` gives ``fn`` back, for callers that set the state once around several
    such impls (see :data:`FP_STATE`)."""
    if _fp_state is None:
        return functools.wraps(fn)(np.errstate(all="ignore")(fn))
    set_state, reset_state = _fp_state.set, _fp_state.reset

    @functools.wraps(fn)
    def ignoring(*args, **params):
        token = set_state(FP_IGNORE_ALL)
        try:
            return fn(*args, **params)
        finally:
            reset_state(token)

    ignoring._fp_unguarded = fn
    return ignoring


FP_STATE = _fp_state
"""numpy's floating-point error state (a ContextVar), or None when numpy keeps it elsewhere
(numpy 1.x): ``token = FP_STATE.set(FP_IGNORE_ALL)`` ... ``FP_STATE.reset(token)`` runs
:func:`unguarded` impls as their :func:`ignore_fp_errors` wrappers would."""

FP_IGNORE_ALL = _fp_ignore_all


specialized_impls: dict = {}
"""primitive -> ``specialize(*in_avals, **params) -> fn(*values)``: the primitive's impl for
one signature, with the work that depends only on the signature done once (a dot_general's
layout plan...). ``fn`` runs with floating-point errors already ignored (:data:`FP_STATE`)
and returns what the impl would. Used where a signature runs many times (eager grad's
cached linearizations, transforms.pycodegen.python_function)."""


def unguarded(impl):
    """The function an :func:`ignore_fp_errors` impl wraps (to be called with the error
    state already set through :data:`FP_STATE`), or None for any other impl."""
    return getattr(impl, "_fp_unguarded", None)
