"""``jnp.ufunc`` and ``jnp.frompyfunc``: numpy's ufunc interface for any Python function.

``frompyfunc(f, nin, nout)`` is a ufunc object whose call broadcasts its arguments and applies
``f`` elementwise (with ``vectorize``, so ``f`` is traced once, not called per element), and
whose ``outer``, ``reduce``, ``accumulate``, ``at`` and ``reduceat`` methods follow numpy:
``reduce``/``accumulate``/``at`` apply ``f`` sequentially, in index order (a ``lax.scan`` /
``fori_loop``), so ``f`` need not be associative.
"""

from __future__ import annotations

import operator

import numpy as np

from fungrad import lax
from fungrad import numpy as fnp
from fungrad.numpy import util
from fungrad.numpy.vectorization import vectorize

__all__ = ["frompyfunc", "ufunc"]


class ufunc:  # noqa: N801  (numpy's and JAX's spelling)
    """A universal function built from ``func`` of ``nin`` arrays returning ``nout``
    (``jnp.ufunc``). ``call``, ``reduce``, ``accumulate``, ``at`` and ``reduceat`` may
    replace the generic implementations of those methods."""

    def __init__(
        self,
        func,
        /,
        nin: int,
        nout: int,
        *,
        name: str | None = None,
        nargs: int | None = None,
        identity=None,
        call=None,
        reduce=None,
        accumulate=None,
        at=None,
        reduceat=None,
    ):
        if not callable(func):
            raise TypeError(f"ufunc: func must be callable, got {type(func).__name__}")
        self._func = func
        self.nin, self.nout = operator.index(nin), operator.index(nout)
        self.nargs = self.nin if nargs is None else operator.index(nargs)
        self.identity = identity
        self.__name__ = name or getattr(func, "__name__", "ufunc")
        self._call = call or vectorize(func)
        self._reduce, self._accumulate, self._at, self._reduceat = reduce, accumulate, at, reduceat

    def __repr__(self):
        return f"<jnp.ufunc '{self.__name__}'>"

    def __call__(self, *args, out=None, where=None):
        if out is not None or where is not None:
            raise ValueError(
                f"{self.__name__}: out= and where= are not supported (fungrad "
                "arrays are immutable); use the returned array"
            )
        if len(args) != self.nin:
            raise TypeError(f"{self.__name__}: expected {self.nin} arguments, got {len(args)}")
        return self._call(*args)

    def _binary(self, method: str):
        if self.nin != 2 or self.nout != 1:
            raise ValueError(
                f"{method} is only supported for binary ufuncs with one output "
                f"({self.__name__} has nin={self.nin}, nout={self.nout})"
            )

    def outer(self, A, B, /):
        """``func(a, b)`` for every pair of an element of ``A`` and one of ``B``: shape
        ``A.shape + B.shape``."""
        self._binary("outer")
        util.check_arraylike("outer", A, B)
        A, B = util.asarray(A), util.asarray(B)
        return self(A.reshape(A.shape + (1,) * B.ndim), B)

    def _result_dtype(self, *xs):
        """The dtype ``func`` returns for arguments of the dtypes of ``xs`` (traced, nothing
        evaluated): the generic methods compute in it, as JAX's do (``logical_and.reduce`` of
        integers is boolean, ``logaddexp.accumulate`` of integers float)."""
        from fungrad.core import ShapedArray
        from fungrad.transforms.staging import trace_to_jaxpr

        avals = [ShapedArray((), util.asarray(x).dtype) for x in xs]
        closed = trace_to_jaxpr(lambda *a: [util.asarray(self._func(*a))], avals)
        return closed.out_avals[0].dtype

    def _fold(self, x, init):
        """Fold ``func`` over the leading axis of ``x`` starting from ``init``: the carries."""

        def step(carry, item):
            new = util.asarray(self._func(carry, item)).astype(carry.dtype)
            return new, new

        return lax.scan(step, init, x)

    def reduce(
        self, a, axis=0, dtype=None, out=None, keepdims: bool = False, initial=None, where=None
    ):
        """``func`` folded along ``axis`` (None: over the flattened array), left to right,
        starting from ``initial`` (or the first element; ``identity`` for an empty axis)."""
        self._binary("reduce")
        if out is not None or where is not None:
            raise ValueError(f"{self.__name__}.reduce: out= and where= are not supported")
        if self._reduce is not None:
            return self._reduce(a, axis, dtype, out, keepdims, initial, where)
        util.check_arraylike(f"{self.__name__}.reduce", a)
        x = util.asarray(a)
        x = x.astype(self._result_dtype(x, x) if dtype is None else dtype)
        ndim = x.ndim
        if axis is None:
            axes = tuple(range(ndim))
            x = fnp.ravel(x)
            flat_axes = (0,)
        else:
            axes = util.canonicalize_axes(axis, ndim, f"{self.__name__}.reduce")
            if len(axes) > 1:
                raise ValueError(
                    f"{self.__name__}.reduce: func is applied in order, so at "
                    f"most one axis may be given (or None: all, flattened); got "
                    f"{axis}"
                )
            flat_axes = axes
        for ax in flat_axes:
            x = self._reduce_axis(fnp.moveaxis(x, ax, 0), initial)
        if keepdims:
            x = fnp.reshape(
                x, tuple(1 if d in axes else s for d, s in enumerate(util.asarray(a).shape))
            )
        return x

    def _reduce_axis(self, x, initial):
        if initial is None and x.shape[0] == 0:
            if self.identity is None:
                raise ValueError(
                    f"{self.__name__}.reduce: zero-size array to reduction "
                    "operation with no identity; pass initial="
                )
            initial = self.identity
        if initial is None:
            init, rest = x[0], x[1:]
        else:
            init = fnp.broadcast_to(util.asarray(initial).astype(x.dtype), x.shape[1:])
            rest = x
        if rest.shape[0] == 0:
            return init
        return self._fold(rest, init)[0]

    def accumulate(self, a, axis: int = 0, dtype=None, out=None):
        """The running ``reduce`` along ``axis``: ``out[i] = func(out[i-1], a[i])``."""
        self._binary("accumulate")
        if out is not None:
            raise ValueError(f"{self.__name__}.accumulate: out= is not supported")
        if self._accumulate is not None:
            return self._accumulate(a, axis, dtype, out)
        util.check_arraylike(f"{self.__name__}.accumulate", a)
        x = util.asarray(a)
        x = x.astype(self._result_dtype(x, x) if dtype is None else dtype)
        axis = util.canonicalize_axis(axis, x.ndim, f"{self.__name__}.accumulate")
        x = fnp.moveaxis(x, axis, 0)
        if x.shape[0] == 0:
            return fnp.moveaxis(x, 0, axis)
        _, ys = self._fold(x[1:], x[0])
        return fnp.moveaxis(fnp.concatenate([x[:1], ys]), 0, axis)

    def at(self, a, indices, b=None, /, *, inplace: bool = True):
        """``a`` with ``a[i] = func(a[i], b[k])`` (or ``func(a[i])``) applied for each index
        ``i = indices[k]`` in turn, repeated indices included; needs ``inplace=False``."""
        if inplace:
            raise ValueError(
                f"{self.__name__}.at: fungrad arrays are immutable; call it with "
                "inplace=False and use the returned array"
            )
        if self._at is not None:
            return self._at(a, indices, b)
        x = util.asarray(a)
        idx = (
            tuple(util.asarray(i) for i in indices)
            if isinstance(indices, tuple)
            else (util.asarray(indices),)
        )
        n = idx[0].size
        idx = tuple(fnp.ravel(i) for i in idx)
        if self.nin == 2:
            if b is None:
                raise TypeError(f"{self.__name__}.at: a binary ufunc needs the argument b")
            x = x.astype(self._result_dtype(x, b))  # (JAX computes in func's result dtype)
            bb = util.asarray(b).astype(x.dtype)
            per_index = bb.ndim > 0 and bb.shape[0] == n and n > 1
        elif self.nin != 1 or b is not None:
            raise ValueError(
                f"{self.__name__}.at: needs a unary ufunc without b or a binary one with b"
            )

        def body(k, arr):
            where = tuple(i[k] for i in idx)
            cur = arr[where]
            if self.nin == 1:
                new = self._func(cur)
            else:
                new = self._func(cur, bb[k] if per_index else bb)
            return arr.at[where].set(util.asarray(new).astype(arr.dtype))

        return lax.fori_loop(0, n, body, x)

    def reduceat(self, a, indices, axis: int = 0, dtype=None, out=None):
        """``reduce`` over the slices ``a[indices[i]:indices[i+1]]`` along ``axis`` (numpy's
        rule: ``a[indices[i]]`` where ``indices[i] >= indices[i+1]``); ``indices`` must be
        concrete."""
        self._binary("reduceat")
        if out is not None:
            raise ValueError(f"{self.__name__}.reduceat: out= is not supported")
        if self._reduceat is not None:
            return self._reduceat(a, indices, axis, dtype, out)
        x = util.asarray(a)
        if dtype is not None:
            x = x.astype(dtype)
        axis = util.canonicalize_axis(axis, x.ndim, f"{self.__name__}.reduceat")
        ind = np.asarray(util.concrete_or_error(indices, f"{self.__name__}.reduceat indices"))
        x = fnp.moveaxis(x, axis, 0)
        n = x.shape[0]
        parts = []
        for k, start in enumerate(ind.tolist()):
            stop = int(ind[k + 1]) if k + 1 < len(ind) else n
            if not 0 <= start < n:
                raise IndexError(
                    f"{self.__name__}.reduceat: index {start} out of bounds for axis of size {n}"
                )
            parts.append(x[start] if start >= stop else self._reduce_axis(x[start:stop], None))
        return fnp.moveaxis(fnp.stack(parts), 0, axis)


def frompyfunc(func, /, nin: int, nout: int, *, identity=None):
    """A :class:`ufunc` from the Python function ``func`` of ``nin`` arguments and ``nout``
    results (``jnp.frompyfunc``)."""
    return ufunc(func, nin, nout, identity=identity)
