"""numpy's indexing-syntax array builders, as jax.numpy has them: ``mgrid``, ``ogrid``,
``r_``, ``c_``, ``s_`` and ``index_exp``.

``mgrid[0:4, 0:3]`` is a dense ``(2, 4, 3)`` grid and ``ogrid[...]`` its sparse (broadcastable)
form; a complex step ``5j`` asks for 5 points including the stop, as in numpy. ``r_[...]``
concatenates slices, scalars and arrays (along the first axis, or as a leading string
directive ``"axis[,ndmin[,trans1d]]"`` says), ``c_[...]`` along the last axis as columns.
"""

from __future__ import annotations

import numpy as np

from fungrad import numpy as fnp
from fungrad.numpy import util

__all__ = ["c_", "index_exp", "mgrid", "ogrid", "r_", "s_"]

s_ = np.s_
index_exp = np.index_exp


def _slice_array(s: slice, name: str):
    start = 0 if s.start is None else s.start
    step = 1 if s.step is None else s.step
    if isinstance(step, complex):
        num = int(abs(step))
        if s.stop is None:
            raise ValueError(f"{name}: a slice with a complex step needs a stop")
        return fnp.linspace(start, s.stop, num)
    if s.stop is None:
        raise ValueError(f"{name}: slices need a stop, got {s!r}")
    return fnp.arange(start, s.stop, step)


class _Grid:
    def __init__(self, sparse: bool, name: str):
        self.sparse, self.name = sparse, name

    def __getitem__(self, key):
        keys = key if isinstance(key, tuple) else (key,)
        for k in keys:
            if not isinstance(k, slice):
                raise TypeError(
                    f"{self.name}: index with slices (e.g. {self.name}[0:4, 0:3]), got {k!r}"
                )
        arrays = util.promote_dtypes(
            *[_slice_array(k, self.name) for k in keys], fun_name=self.name
        )
        if not isinstance(key, tuple):
            return arrays[0]
        grids = fnp.meshgrid(*arrays, indexing="ij", sparse=self.sparse)
        return list(grids) if self.sparse else fnp.stack(grids, 0)

    def __repr__(self):
        return f"fungrad.numpy.{self.name}"


mgrid = _Grid(False, "mgrid")
ogrid = _Grid(True, "ogrid")


class _Concatenator:
    def __init__(self, name: str, axis: int, ndmin: int, trans1d: int):
        self.name, self.axis, self.ndmin, self.trans1d = name, axis, ndmin, trans1d

    def _directive(self, text: str):
        parts = text.split(",")
        if text in ("r", "c") or len(parts) > 3:
            raise ValueError(
                f"{self.name}: the directive {text!r} is not supported (fungrad has "
                "no matrix type); use 'axis', 'axis,ndmin' or "
                "'axis,ndmin,trans1d'"
            )
        try:
            vals = [int(p) for p in parts]
        except ValueError:
            raise ValueError(
                f"{self.name}: directive {text!r} must be integers 'axis[,ndmin[,trans1d]]'"
            ) from None
        return vals + [self.ndmin, self.trans1d][len(vals) - 1 :]

    def __getitem__(self, key):
        items = list(key) if isinstance(key, tuple) else [key]
        axis, ndmin, trans1d = self.axis, self.ndmin, self.trans1d
        if items and isinstance(items[0], str):
            axis, ndmin, trans1d = self._directive(items.pop(0))
        arrays = []
        for item in items:
            if isinstance(item, slice):
                arr = _slice_array(item, self.name)
            elif isinstance(item, str):
                raise ValueError(
                    f"{self.name}: a string directive must come first, got {item!r} later"
                )
            else:
                arr = util.asarray(item, fun_name=self.name)
            if arr.ndim == 0:
                arr = arr.reshape(1)
            if arr.ndim < ndmin:
                k1, k2 = trans1d, ndmin - arr.ndim
                arr = arr.reshape((1,) * k2 + arr.shape)
                if k1 < 0:
                    k1 += k2 + 1
                axes = list(range(ndmin))
                arr = fnp.transpose(arr, axes[:k1] + axes[k2:] + axes[k1:k2])
            arrays.append(arr)
        if not arrays:
            return fnp.zeros(0)
        return fnp.concatenate(util.promote_dtypes(*arrays, fun_name=self.name), axis=axis)

    def __len__(self):
        return 0

    def __repr__(self):
        return f"fungrad.numpy.{self.name}"


r_ = _Concatenator("r_", 0, 1, -1)
c_ = _Concatenator("c_", -1, 2, 0)
