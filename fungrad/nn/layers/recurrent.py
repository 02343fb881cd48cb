"""Recurrent cells (simple RNN, LSTM, GRU) and the loops that run them over a sequence with
:func:`fungrad.lax.scan`: :func:`rnn`, the :class:`RNN` layer and :class:`Bidirectional`.

Gate conventions are PyTorch's (``torch.nn.LSTMCell`` / ``GRUCell``, which equinox follows):
LSTM gates in the order input, forget, cell, output; GRU gates reset, update, new, with the
reset gate applied to the hidden projection plus its own bias ``bias_n``. Every weight and
bias starts uniform in ``[-1/sqrt(hidden_size), 1/sqrt(hidden_size))`` (PyTorch's and
equinox's initialisation). The weights are stored in this package's ``x @ weight`` layout:
``weight_ih`` is ``(input_size, gates * hidden_size)``, ``weight_hh`` ``(hidden_size, gates
* hidden_size)``, each gate a consecutive block of ``hidden_size`` columns (PyTorch's
``weight_ih`` transposed). An LSTM's two PyTorch biases ``b_ih + b_hh`` are one ``bias``
here (they only ever appear summed).

A cell maps one step: ``carry = cell(x, carry)`` with ``x`` ``(*batch, input_size)``; the
carry is ``h`` ``(*batch, hidden_size)`` (``(h, c)`` for the LSTM), and
``cell.init_carry(batch_shape)`` gives zeros. The step's output is ``h`` (the carry, or its
first element when the carry is a tuple).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import fungrad.numpy as fnp
from fungrad import lax, random
from fungrad.array import Array
from fungrad.nn import functions
from fungrad.nn.layers._util import check_floating, default_float
from fungrad.nn.module import Module, field

__all__ = ["Bidirectional", "GRUCell", "LSTMCell", "RNN", "SimpleRNNCell", "rnn"]


def _uniform_params(name, key, input_size, hidden_size, gates, use_bias, dtype, extra_bias=0):
    if input_size < 1 or hidden_size < 1:
        raise ValueError(
            f"{name}: input_size and hidden_size must be positive, got {input_size} and "
            f"{hidden_size}"
        )
    dtype = check_floating(name, default_float(dtype))
    lim = 1.0 / np.sqrt(hidden_size)
    k = random.split(key, 4)
    width = gates * hidden_size
    w_ih = random.uniform(k[0], (input_size, width), dtype, -lim, lim)
    w_hh = random.uniform(k[1], (hidden_size, width), dtype, -lim, lim)
    b = random.uniform(k[2], (width,), dtype, -lim, lim) if use_bias else None
    b_n = random.uniform(k[3], (extra_bias,), dtype, -lim, lim) if use_bias and extra_bias else None
    return w_ih, w_hh, b, b_n


class _Cell(Module):
    """Shared checks and ``init_carry`` of the cells (not public)."""

    def _check(self, x, h):
        name = type(self).__name__
        xs, hs = np.shape(x), np.shape(h)
        if len(xs) < 1 or xs[-1] != self.input_size:
            raise TypeError(
                f"{name}: input of shape {xs} does not end in input_size={self.input_size}"
            )
        if hs != (*xs[:-1], self.hidden_size):
            raise TypeError(
                f"{name}: hidden state of shape {hs} does not match the input's batch axes "
                f"{xs[:-1]} and hidden_size={self.hidden_size}; start from "
                f"cell.init_carry({xs[:-1]})"
            )

    def _zeros(self, batch_shape, dtype):
        dtype = self.weight_hh.dtype if dtype is None else np.dtype(dtype)
        return fnp.zeros((*tuple(batch_shape), self.hidden_size), dtype)


class SimpleRNNCell(_Cell):
    """Elman RNN cell: ``h' = activation(x @ weight_ih + h @ weight_hh + bias)`` (PyTorch's
    ``RNNCell``; ``activation`` ``fg.nn.tanh``-like, default ``fungrad.numpy.tanh``)."""

    weight_ih: Array
    weight_hh: Array
    bias: Array | None
    input_size: int
    hidden_size: int
    activation: Callable = field(static=True, default=fnp.tanh)

    def __init__(self, input_size: int, hidden_size: int, use_bias: bool = True,
                 activation: Callable = fnp.tanh, dtype=None, *, key):  # fmt: skip
        self.weight_ih, self.weight_hh, self.bias, _ = _uniform_params(
            "SimpleRNNCell", key, input_size, hidden_size, 1, use_bias, dtype
        )
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        self.activation = activation

    def init_carry(self, batch_shape=(), dtype=None):
        """Zeros ``(*batch_shape, hidden_size)``."""
        return self._zeros(batch_shape, dtype)

    def __call__(self, x, h):
        self._check(x, h)
        z = fnp.matmul(x, self.weight_ih) + fnp.matmul(h, self.weight_hh)
        return self.activation(z + self.bias if self.bias is not None else z)


class LSTMCell(_Cell):
    """Long short-term memory cell (Hochreiter & Schmidhuber 1997, with a forget gate), the
    carry ``(h, c)``::

        i, f, g, o = split(x @ weight_ih + h @ weight_hh + bias, 4)
        c' = sigmoid(f) * c + sigmoid(i) * tanh(g)
        h' = sigmoid(o) * tanh(c')
    """

    weight_ih: Array
    weight_hh: Array
    bias: Array | None
    input_size: int
    hidden_size: int

    def __init__(self, input_size: int, hidden_size: int, use_bias: bool = True, dtype=None,
                 *, key):  # fmt: skip
        self.weight_ih, self.weight_hh, self.bias, _ = _uniform_params(
            "LSTMCell", key, input_size, hidden_size, 4, use_bias, dtype
        )
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)

    def init_carry(self, batch_shape=(), dtype=None):
        """``(h, c)``, both zeros ``(*batch_shape, hidden_size)``."""
        return (self._zeros(batch_shape, dtype), self._zeros(batch_shape, dtype))

    def __call__(self, x, carry):
        if not isinstance(carry, (tuple, list)) or len(carry) != 2:
            raise TypeError(
                f"LSTMCell: the carry must be a pair (h, c) (cell.init_carry(batch_shape)), "
                f"got {type(carry).__name__}"
            )
        h, c = carry
        self._check(x, h)
        self._check(x, c)
        z = fnp.matmul(x, self.weight_ih) + fnp.matmul(h, self.weight_hh)
        if self.bias is not None:
            z = z + self.bias
        i, f, g, o = fnp.split(z, 4, axis=-1)
        c = functions.sigmoid(f) * c + functions.sigmoid(i) * fnp.tanh(g)
        return (functions.sigmoid(o) * fnp.tanh(c), c)


class GRUCell(_Cell):
    """Gated recurrent unit (Cho et al. 2014) in PyTorch's form, the carry ``h``, with a
    reset gate ``r``, an update gate ``z`` and a candidate ``n``::

        xr, xz, xn = split(x @ weight_ih + bias, 3)
        hr, hz, hn = split(h @ weight_hh, 3)
        r = sigmoid(xr + hr)
        z = sigmoid(xz + hz)
        n = tanh(xn + r * (hn + bias_n))
        h' = (1 - z) * n + z * h
    """

    weight_ih: Array
    weight_hh: Array
    bias: Array | None
    bias_n: Array | None
    input_size: int
    hidden_size: int

    def __init__(self, input_size: int, hidden_size: int, use_bias: bool = True, dtype=None,
                 *, key):  # fmt: skip
        self.weight_ih, self.weight_hh, self.bias, self.bias_n = _uniform_params(
            "GRUCell", key, input_size, hidden_size, 3, use_bias, dtype, extra_bias=hidden_size
        )
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)

    def init_carry(self, batch_shape=(), dtype=None):
        """Zeros ``(*batch_shape, hidden_size)``."""
        return self._zeros(batch_shape, dtype)

    def __call__(self, x, h):
        self._check(x, h)
        xg = fnp.matmul(x, self.weight_ih)
        if self.bias is not None:
            xg = xg + self.bias
        hg = fnp.matmul(h, self.weight_hh)
        xr, xz, xn = fnp.split(xg, 3, axis=-1)
        hr, hz, hn = fnp.split(hg, 3, axis=-1)
        r = functions.sigmoid(xr + hr)
        z = functions.sigmoid(xz + hz)
        n = fnp.tanh(xn + r * (hn + self.bias_n if self.bias_n is not None else hn))
        return n + z * (h - n)


def _output(carry):
    return carry[0] if isinstance(carry, (tuple, list)) else carry


def _flip_valid(xs, lengths):
    """Reverse each sequence's first ``lengths`` steps in place (time axis 0, then the batch
    axes that ``lengths`` has), leaving the padding after them where it is."""
    T = xs.shape[0]
    t = fnp.reshape(fnp.arange(T), (T,) + (1,) * lengths.ndim)
    idx = fnp.where(t < lengths, lengths - 1 - t, t)  # (T, *batch)
    idx = fnp.reshape(idx, idx.shape + (1,) * (xs.ndim - idx.ndim))
    return fnp.take_along_axis(xs, fnp.broadcast_to(idx, xs.shape), axis=0)


def _over_batch(mask, x):
    """``mask`` (the batch shape) with trailing axes of size one to broadcast against ``x``."""
    return fnp.reshape(mask, mask.shape + (1,) * (x.ndim - mask.ndim))


def rnn(cell, xs, carry=None, *, reverse: bool = False, time_axis: int = 0,
        seq_lengths=None):  # fmt: skip
    """Run ``cell`` over the ``time_axis`` of ``xs`` with :func:`fungrad.lax.scan`; returns
    ``(ys, final_carry)``, ``ys`` the step outputs (``h``) stacked on ``time_axis``.

    ``xs`` is ``(T, *batch, input_size)`` for ``time_axis=0`` (``time_axis=1`` for
    batch-first ``(B, T, input_size)``); ``carry`` defaults to ``cell.init_carry(batch)``.
    ``reverse=True`` runs from the last step to the first and returns ``ys`` in input order.

    ``seq_lengths`` (integers with the batch shape: ``(B,)``, or a scalar for one unbatched
    sequence, as under ``vmap``) marks padded sequences: the carry stops changing after
    step ``seq_lengths[b]``, so ``final_carry`` is each sequence's state at its own end,
    and ``ys`` is zero on padding. With ``reverse``, each sequence is read from its own last
    valid step back to its first (the padding is not read first). ``cell`` may be any
    callable ``cell(x, carry) -> carry``.
    """
    xs = fnp.asarray(xs)
    if xs.ndim < 2:
        raise TypeError(f"rnn: xs must be (T, *batch, input_size)-like, got shape {xs.shape}")
    ax = time_axis + xs.ndim if time_axis < 0 else time_axis
    if not 0 <= ax < xs.ndim - 1:
        raise ValueError(
            f"rnn: time_axis={time_axis} must name an axis of xs {xs.shape} before the feature axis"
        )
    xs = fnp.moveaxis(xs, ax, 0)
    batch = xs.shape[1:-1]
    if carry is None:
        if not hasattr(cell, "init_carry"):
            raise TypeError(f"rnn: {type(cell).__name__} has no init_carry; pass the initial carry")
        w = getattr(cell, "weight_hh", None)
        dtype = xs.dtype if w is None else fnp.promote_types(xs.dtype, w.dtype)
        carry = cell.init_carry(batch, dtype)

    if seq_lengths is None:

        def step(c, x):
            c = cell(x, c)
            return c, _output(c)

        carry, ys = lax.scan(step, carry, xs, reverse=reverse)
        return fnp.moveaxis(ys, 0, ax), carry

    lengths = fnp.asarray(seq_lengths)
    if not np.issubdtype(lengths.dtype, np.integer) or lengths.shape != batch:
        raise TypeError(
            f"rnn: seq_lengths must be integers with the batch shape {batch} of xs "
            f"{xs.shape} (time axis first); got {lengths.dtype} of shape {lengths.shape}"
        )
    T = xs.shape[0]
    lengths = fnp.clip(lengths, 0, T)  # a length past the end means the whole sequence
    if reverse:
        xs = _flip_valid(xs, lengths)

    def masked_step(c, tx):
        t, x = tx
        new = cell(x, c)
        live = t < lengths  # the batch shape

        def keep(n, o):
            return fnp.where(_over_batch(live, n), n, o)

        new = tuple(map(keep, new, c)) if isinstance(new, (tuple, list)) else keep(new, c)
        y = _output(new)
        return new, y * _over_batch(live, y).astype(y.dtype)

    carry, ys = lax.scan(masked_step, carry, (fnp.arange(T), xs))
    if reverse:
        ys = _flip_valid(ys, lengths)
    return fnp.moveaxis(ys, 0, ax), carry


class RNN(Module):
    """A cell run over a sequence as a layer (flax's ``nn.RNN``): ``RNN(cell)(xs)`` is
    ``rnn(cell, xs, ...)[0]``, and ``(ys, final_carry)`` with ``return_carry=True``.

    Default layout is batch-first like the other layers, ``(*batch, T, input_size)``
    (``time_axis=-2``); set ``time_axis=0`` for time-major input.
    """

    cell: Module
    reverse: bool = False
    time_axis: int = -2
    return_carry: bool = False

    def __call__(self, xs, carry=None, *, seq_lengths=None):
        xs = fnp.asarray(xs)
        ys, carry = rnn(
            self.cell, xs, carry, reverse=self.reverse, time_axis=self.time_axis,
            seq_lengths=seq_lengths,
        )  # fmt: skip
        return (ys, carry) if self.return_carry else ys


class Bidirectional(Module):
    """Two :class:`RNN` layers, one reading forward and one backward, their outputs joined
    on the feature axis (``merge_fn``, concatenation by default; flax's
    ``nn.Bidirectional``). ``forward``'s cell reads the steps in order and ``backward``'s in
    reverse, whatever the layers' own ``reverse`` flags; both use ``forward.time_axis``.
    Returns ``ys`` or, with ``return_carry``, ``(ys, (forward carry, backward carry))``."""

    forward: RNN
    backward: RNN
    merge_fn: Callable = field(static=True, default=None)
    return_carry: bool = False

    def __call__(self, xs, carry=None, *, seq_lengths=None):
        cf, cb = (None, None) if carry is None else carry
        f, b = self.forward, self.backward
        yf, cf = rnn(f.cell, xs, cf, reverse=False, time_axis=f.time_axis,
                     seq_lengths=seq_lengths)  # fmt: skip
        yb, cb = rnn(b.cell, xs, cb, reverse=True, time_axis=f.time_axis,
                     seq_lengths=seq_lengths)  # fmt: skip
        merge = self.merge_fn or (lambda a, c: fnp.concatenate([a, c], axis=-1))
        ys = merge(yf, yb)
        return (ys, (cf, cb)) if self.return_carry else ys
