"""Stax: neural-network layers as function pairs (``jax.example_libraries.stax``).

A *layer* is a pair ``(init_fun, apply_fun)``:

- ``init_fun(rng, input_shape) -> (output_shape, params)`` draws the layer's parameters from
  the PRNG key ``rng`` for inputs of shape ``input_shape`` (a leading ``-1`` stands for "any
  batch size") and says what shape comes out;
- ``apply_fun(params, inputs, **kwargs) -> outputs`` runs the layer; the keyword ``rng`` (a PRNG
  key) feeds layers that need randomness (:func:`Dropout`).

Constructors are CamelCase (``Dense(10)``, ``Conv(32, (3, 3))``); layers with nothing to
configure are pairs already (``Relu``, ``Flatten``, ``Identity``, ``FanInSum``). Combinators
(:func:`serial`, :func:`parallel`, :func:`shape_dependent`) build a layer from layers.

Parameter layouts, key splitting and initial numbers are JAX's: the same key gives the same
weights as ``jax.example_libraries.stax``. Like JAX's, this is an example library; the
parameters are plain tuples/lists of arrays, so they go through ``grad``/``jit``/``vmap`` and
:mod:`fungrad.example_libraries.optimizers` as pytrees.
"""

from __future__ import annotations

import math
import operator

import numpy as np

import fungrad.numpy as jnp
from fungrad import lax, random
from fungrad.nn import (
    elu,
    gelu,
    leaky_relu,
    log_softmax,
    relu,
    selu,
    sigmoid,
    softmax,
    softplus,
    standardize,
)
from fungrad.nn.initializers import glorot_normal, normal, ones, zeros

__all__ = [
    "AvgPool",
    "BatchNorm",
    "Conv",
    "Conv1DTranspose",
    "ConvTranspose",
    "Dense",
    "Dropout",
    "Elu",
    "Exp",
    "FanInConcat",
    "FanInSum",
    "FanOut",
    "Flatten",
    "Gelu",
    "GeneralConv",
    "GeneralConvTranspose",
    "Identity",
    "LeakyRelu",
    "LogSoftmax",
    "MaxPool",
    "Relu",
    "Selu",
    "Sigmoid",
    "Softmax",
    "Softplus",
    "SumPool",
    "Tanh",
    "elementwise",
    "elu",
    "gelu",
    "glorot",
    "glorot_normal",
    "leaky_relu",
    "log_softmax",
    "logsoftmax",
    "normal",
    "ones",
    "parallel",
    "randn",
    "relu",
    "selu",
    "serial",
    "shape_dependent",
    "sigmoid",
    "softmax",
    "softplus",
    "standardize",
    "zeros",
]

# JAX's older names, kept by JAX for programs that use them.
glorot = glorot_normal
randn = normal
logsoftmax = log_softmax


def _shape_tuple(where: str, shape) -> tuple:
    try:
        return tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(
            f"stax.{where}: input_shape must be a sequence of integers (-1 for an "
            f"unknown batch size), got {shape!r}"
        ) from None


def _count(where: str, what: str, value) -> int:
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(
            f"stax.{where}: {what} must be an integer, got {type(value).__name__} {value!r}"
        ) from None
    if n < 0:  # a TypeError, as JAX's negative-shape check raises
        raise TypeError(f"stax.{where}: {what} must be >= 0, got {n}")
    return n


def _pair(where: str, params, names: str):
    """``params`` unpacked as the layer's two parameters ``names`` (e.g. ``"(W, b)"``);
    anything else is a TypeError saying what the layer's params are."""
    try:
        first, second = params
    except (TypeError, ValueError) as e:  # the type Python's unpacking raised, as JAX's
        raise type(e)(
            f"stax.{where}: params must be the pair {names} its init_fun made, "
            f"got {type(params).__name__} {params!r:.60}"
        ) from None
    return first, second


def _layer_funs(where: str, layers) -> tuple[list, list]:
    """The init and apply functions of ``layers``, each an ``(init_fun, apply_fun)`` pair."""
    for i, layer in enumerate(layers):
        if not (
            isinstance(layer, (tuple, list))
            and len(layer) == 2
            and callable(layer[0])
            and callable(layer[1])
        ):
            raise TypeError(
                f"stax.{where}: layer {i} must be an (init_fun, apply_fun) pair, "
                f"as stax layers are (e.g. stax.Dense(10), stax.Relu), got "
                f"{type(layer).__name__} {layer!r:.60}"
            )
    return [init for init, _ in layers], [apply for _, apply in layers]


# --------------------------------------------------------------------------- dense / conv


def Dense(out_dim, W_init=glorot_normal(), b_init=normal()):
    """A fully connected layer: ``inputs @ W + b``, with ``W`` of shape ``(in_dim, out_dim)``.

    ``params = (W, b)``; ``W`` from ``W_init`` and ``b`` (shape ``(out_dim,)``) from ``b_init``,
    on the two halves of ``random.split(rng)``."""
    out_dim = _count("Dense", "out_dim", out_dim)

    def init_fun(rng, input_shape):
        input_shape = _shape_tuple("Dense", input_shape)
        if not input_shape:
            raise ValueError(
                "stax.Dense: input_shape must have at least one dimension (the "
                "features are the last), got ()"
            )
        w_key, b_key = random.split(rng)
        W = W_init(w_key, (input_shape[-1], out_dim))
        b = b_init(b_key, (out_dim,))
        return input_shape[:-1] + (out_dim,), (W, b)

    def apply_fun(params, inputs, **kwargs):
        W, b = _pair("Dense", params, "(W, b)")
        return jnp.dot(inputs, W) + b

    return init_fun, apply_fun


def _conv_specs(where: str, dimension_numbers, filter_shape):
    """Check ``dimension_numbers`` (three layout strings) against ``filter_shape``."""
    try:
        lhs_spec, rhs_spec, out_spec = dimension_numbers
    except (TypeError, ValueError):
        raise TypeError(
            f"stax.{where}: dimension_numbers must be three layout strings such as "
            f"('NHWC', 'HWIO', 'NHWC'), got {dimension_numbers!r}"
        ) from None
    filter_shape = tuple(filter_shape)
    for spec, needed in ((lhs_spec, "NC"), (rhs_spec, "OI"), (out_spec, "NC")):
        if not isinstance(spec, str) or any(spec.count(c) != 1 for c in needed):
            raise ValueError(
                f"stax.{where}: dimension_numbers {dimension_numbers!r}: layout "
                f"{spec!r} must name each of {', '.join(needed)} once"
            )
    if not len(lhs_spec) == len(rhs_spec) == len(out_spec) == len(filter_shape) + 2:
        raise ValueError(
            f"stax.{where}: filter_shape {filter_shape} has {len(filter_shape)} "
            f"spatial dimensions but dimension_numbers {dimension_numbers!r} has "
            f"{len(rhs_spec) - 2}; give one filter size per spatial dimension"
        )
    return lhs_spec, rhs_spec, out_spec, filter_shape


def _conv_init(
    where, dimension_numbers, out_chan, filter_shape, strides, padding, W_init, b_init, shape_rule
):
    lhs_spec, rhs_spec, out_spec = dimension_numbers

    def init_fun(rng, input_shape):
        input_shape = _shape_tuple(where, input_shape)
        if len(input_shape) != len(lhs_spec):
            raise ValueError(
                f"stax.{where}: input_shape {input_shape} has {len(input_shape)} "
                f"dimensions but the input layout {lhs_spec!r} has "
                f"{len(lhs_spec)}"
            )
        sizes = iter(filter_shape)
        kernel_shape = [
            out_chan if c == "O" else input_shape[lhs_spec.index("C")] if c == "I" else next(sizes)
            for c in rhs_spec
        ]
        output_shape = shape_rule(input_shape, kernel_shape, strides, padding, dimension_numbers)
        bias_shape = [out_chan if c == "C" else 1 for c in out_spec]
        w_key, b_key = random.split(rng)
        return tuple(output_shape), (W_init(w_key, kernel_shape), b_init(b_key, bias_shape))

    return init_fun


def GeneralConv(
    dimension_numbers,
    out_chan,
    filter_shape,
    strides=None,
    padding="VALID",
    W_init=None,
    b_init=normal(1e-6),
):
    """A convolution layer with any layouts: ``conv_general_dilated(inputs, W, ...) + b``.

    ``dimension_numbers = (lhs, rhs, out)`` names the layouts, e.g. ``('NCHW', 'OIHW',
    'NCHW')``; ``strides`` default to 1.

    ``params = (W, b)``; ``W`` (laid out as ``rhs``) defaults to ``glorot_normal`` over its
    ``I`` and ``O`` axes, ``b`` (broadcastable to the output, ``out_chan`` on its ``C`` axis)
    to ``normal(1e-6)``."""
    out_chan = _count("GeneralConv", "out_chan", out_chan)
    lhs_spec, rhs_spec, out_spec, filter_shape = _conv_specs(
        "GeneralConv", dimension_numbers, filter_shape
    )
    one = (1,) * len(filter_shape)
    strides = tuple(strides) if strides else one
    W_init = W_init or glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))
    dn = (lhs_spec, rhs_spec, out_spec)
    init_fun = _conv_init(
        "GeneralConv",
        dn,
        out_chan,
        filter_shape,
        strides,
        padding,
        W_init,
        b_init,
        lax.conv_general_shape_tuple,
    )

    def apply_fun(params, inputs, **kwargs):
        W, b = _pair("GeneralConv", params, "(W, b)")
        return (
            lax.conv_general_dilated(inputs, W, strides, padding, one, one, dimension_numbers=dn)
            + b
        )

    return init_fun, apply_fun


def GeneralConvTranspose(
    dimension_numbers,
    out_chan,
    filter_shape,
    strides=None,
    padding="VALID",
    W_init=None,
    b_init=normal(1e-6),
):
    """A transposed-convolution layer with any layouts: ``conv_transpose(inputs, W, ...) + b``.

    ``dimension_numbers = (lhs, rhs, out)`` as in :func:`GeneralConv`; upsamples by
    ``strides``.

    ``params = (W, b)``, initialised as in :func:`GeneralConv`."""
    out_chan = _count("GeneralConvTranspose", "out_chan", out_chan)
    lhs_spec, rhs_spec, out_spec, filter_shape = _conv_specs(
        "GeneralConvTranspose", dimension_numbers, filter_shape
    )
    strides = tuple(strides) if strides else (1,) * len(filter_shape)
    W_init = W_init or glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))
    dn = (lhs_spec, rhs_spec, out_spec)
    init_fun = _conv_init(
        "GeneralConvTranspose",
        dn,
        out_chan,
        filter_shape,
        strides,
        padding,
        W_init,
        b_init,
        lax.conv_transpose_shape_tuple,
    )

    def apply_fun(params, inputs, **kwargs):
        W, b = _pair("GeneralConvTranspose", params, "(W, b)")
        return lax.conv_transpose(inputs, W, strides, padding, dimension_numbers=dn) + b

    return init_fun, apply_fun


def Conv(out_chan, filter_shape, strides=None, padding="VALID", W_init=None, b_init=normal(1e-6)):
    """A 2-D convolution layer on NHWC inputs with an HWIO kernel (see :func:`GeneralConv`)."""
    return GeneralConv(
        ("NHWC", "HWIO", "NHWC"), out_chan, filter_shape, strides, padding, W_init, b_init
    )


def ConvTranspose(
    out_chan, filter_shape, strides=None, padding="VALID", W_init=None, b_init=normal(1e-6)
):
    """A 2-D transposed-convolution layer on NHWC inputs with an HWIO kernel."""
    return GeneralConvTranspose(
        ("NHWC", "HWIO", "NHWC"), out_chan, filter_shape, strides, padding, W_init, b_init
    )


def Conv1DTranspose(
    out_chan, filter_shape, strides=None, padding="VALID", W_init=None, b_init=normal(1e-6)
):
    """A 1-D transposed-convolution layer on NHC inputs with an HIO kernel."""
    return GeneralConvTranspose(
        ("NHC", "HIO", "NHC"), out_chan, filter_shape, strides, padding, W_init, b_init
    )


# --------------------------------------------------------------------------- normalisation


def BatchNorm(
    axis=(0, 1, 2), epsilon=1e-5, center=True, scale=True, beta_init=zeros, gamma_init=ones
):
    """Batch normalisation: standardise over ``axis``, then ``gamma * z + beta``.

    The statistics are those of the batch at hand.

    ``params = (beta, gamma)``, each of the input shape without ``axis`` (``()`` in place of
    one turned off by ``center=False`` / ``scale=False``). No running averages are kept, as in
    JAX's stax."""
    try:
        axis = (operator.index(axis),)
    except TypeError:
        axis = tuple(operator.index(a) for a in axis)

    def init_fun(rng, input_shape):
        input_shape = _shape_tuple("BatchNorm", input_shape)
        bad = [a for a in axis if not 0 <= a < len(input_shape)]
        if bad:
            raise ValueError(
                f"stax.BatchNorm: axis {axis} is out of range for input_shape "
                f"{input_shape} (give non-negative axes below "
                f"{len(input_shape)})"
            )
        shape = tuple(d for i, d in enumerate(input_shape) if i not in axis)
        beta_key, gamma_key = random.split(rng)
        beta = beta_init(beta_key, shape) if center else ()
        gamma = gamma_init(gamma_key, shape) if scale else ()
        return input_shape, (beta, gamma)

    def apply_fun(params, x, **kwargs):
        beta, gamma = _pair("BatchNorm", params, "(beta, gamma)")
        expand = tuple(None if i in axis else slice(None) for i in range(jnp.ndim(x)))
        z = standardize(x, axis, epsilon=epsilon)
        if scale:
            z = gamma[expand] * z
        if center:
            z = z + beta[expand]
        return z

    return init_fun, apply_fun


# --------------------------------------------------------------------------- elementwise


def elementwise(fun, **fun_kwargs):
    """A layer without parameters applying ``fun(inputs, **fun_kwargs)`` (shape-preserving)."""

    def init_fun(rng, input_shape):
        return input_shape, ()

    def apply_fun(params, inputs, **kwargs):
        return fun(inputs, **fun_kwargs)

    return init_fun, apply_fun


Tanh = elementwise(jnp.tanh)
Relu = elementwise(relu)
Exp = elementwise(jnp.exp)
LogSoftmax = elementwise(log_softmax, axis=-1)
Softmax = elementwise(softmax, axis=-1)
Softplus = elementwise(softplus)
Sigmoid = elementwise(sigmoid)
Elu = elementwise(elu)
LeakyRelu = elementwise(leaky_relu)
Selu = elementwise(selu)
Gelu = elementwise(gelu)


# --------------------------------------------------------------------------- pooling


def _pooling_layer(name: str, reducer, init_val, average: bool):
    """The constructor of a pooling layer reducing windows with ``reducer`` from ``init_val``;
    ``average`` divides each output by the number of inputs (padding excluded) in its window."""

    def PoolingLayer(window_shape, strides=None, padding="VALID", spec=None):
        window_shape = tuple(window_shape)
        strides = tuple(strides) if strides else (1,) * len(window_shape)
        if len(strides) != len(window_shape):
            raise ValueError(
                f"stax.{name}: strides {strides} and window_shape {window_shape} "
                "must have one entry per spatial dimension each"
            )
        if spec is None:
            batch_axis, chan_axis = 0, len(window_shape) + 1
        else:
            if (
                not isinstance(spec, str)
                or len(spec) != len(window_shape) + 2
                or spec.count("N") != 1
                or spec.count("C") != 1
            ):
                raise ValueError(
                    f"stax.{name}: spec {spec!r} must be a layout string with "
                    f"one 'N', one 'C' and {len(window_shape)} spatial letters "
                    f"(one per window dimension), e.g. 'NHWC'"
                )
            batch_axis, chan_axis = spec.index("N"), spec.index("C")
        full_window, full_strides = list(window_shape), list(strides)
        for ax in sorted((batch_axis, chan_axis)):
            full_window.insert(ax, 1)
            full_strides.insert(ax, 1)
        full_window, full_strides = tuple(full_window), tuple(full_strides)

        def init_fun(rng, input_shape):
            input_shape = _shape_tuple(name, input_shape)
            if len(input_shape) != len(full_window):
                raise ValueError(
                    f"stax.{name}: input_shape {input_shape} must have "
                    f"{len(full_window)} dimensions (batch, channels and "
                    f"{len(window_shape)} spatial) for window_shape "
                    f"{window_shape}"
                )
            pads = lax.padtype_to_pads(input_shape, full_window, full_strides, padding)
            out_shape = lax.reduce_window_shape_tuple(input_shape, full_window, full_strides, pads)
            return tuple(out_shape), ()

        def apply_fun(params, inputs, **kwargs):
            init = init_val
            dtype = np.dtype(getattr(inputs, "dtype", np.float32))
            if init == -math.inf and dtype.kind in "iu":  # -inf in the integer dtype, as JAX
                init = np.iinfo(dtype).min
            out = lax.reduce_window(inputs, init, reducer, full_window, full_strides, padding)
            if not average:
                return out
            spatial = tuple(
                d for i, d in enumerate(inputs.shape) if i not in (batch_axis, chan_axis)
            )
            counts = lax.reduce_window(
                jnp.ones(spatial, inputs.dtype), 0.0, lax.add, window_shape, strides, padding
            )
            for ax in sorted((batch_axis, chan_axis)):
                counts = jnp.expand_dims(counts, ax)
            return out / counts

        PoolingLayer.__name__ = PoolingLayer.__qualname__ = name
        return init_fun, apply_fun

    return PoolingLayer


MaxPool = _pooling_layer("MaxPool", lax.max, -jnp.inf, average=False)
MaxPool.__doc__ = (
    "Max pooling over ``window_shape`` windows.\n\n``MaxPool(window_shape, "
    "strides=None, padding='VALID', spec=None)``; ``spec`` (e.g. 'NCHW') places "
    "the batch and channel axes (default: first and last)."
)
SumPool = _pooling_layer("SumPool", lax.add, 0.0, average=False)
SumPool.__doc__ = "Sum pooling over ``window_shape`` windows; arguments as MaxPool's."
AvgPool = _pooling_layer("AvgPool", lax.add, 0.0, average=True)
AvgPool.__doc__ = (
    "Average pooling over ``window_shape`` windows (padding not counted).\n\n"
    "Arguments as MaxPool's."
)


# --------------------------------------------------------------------------- shape plumbing


def _flatten_init(rng, input_shape):
    input_shape = _shape_tuple("Flatten", input_shape)
    if not input_shape:
        raise ValueError("stax.Flatten: input_shape must have a batch dimension, got ()")
    return (input_shape[0], math.prod(input_shape[1:])), ()


def _flatten_apply(params, inputs, **kwargs):
    return jnp.reshape(inputs, (inputs.shape[0], -1))


#: Flattens all but the leading (batch) dimension. A layer, not a constructor (as in JAX).
Flatten = (_flatten_init, _flatten_apply)

#: Returns its inputs unchanged. A layer, not a constructor (as in JAX).
Identity = (lambda rng, input_shape: (input_shape, ()), lambda params, inputs, **kwargs: inputs)


def FanOut(num):
    """A layer copying its input ``num`` times into a list (to feed :func:`parallel`)."""
    num = _count("FanOut", "num", num)

    def init_fun(rng, input_shape):
        return [input_shape] * num, ()

    def apply_fun(params, inputs, **kwargs):
        return [inputs] * num

    return init_fun, apply_fun


def _fan_in_sum_init(rng, input_shape):
    if not input_shape:
        raise ValueError("stax.FanInSum: needs at least one input shape, got an empty list")
    return input_shape[0], ()


def _fan_in_sum_apply(params, inputs, **kwargs):
    return sum(inputs)


#: Sums a list of inputs (e.g. the outputs of :func:`parallel`). A layer, not a constructor.
FanInSum = (_fan_in_sum_init, _fan_in_sum_apply)


def FanInConcat(axis=-1):
    """A layer concatenating a list of inputs along ``axis``."""
    axis = operator.index(axis)

    def init_fun(rng, input_shape):
        shapes = [_shape_tuple("FanInConcat", s) for s in input_shape]
        if not shapes:
            raise ValueError("stax.FanInConcat: needs at least one input shape, got none")
        ndim = len(shapes[0])
        if not -ndim <= axis < ndim:
            raise ValueError(
                f"stax.FanInConcat: axis {axis} is out of range for inputs of {ndim} dimensions"
            )
        ax = axis % ndim
        for s in shapes[1:]:
            if len(s) != ndim or s[:ax] + s[ax + 1 :] != shapes[0][:ax] + shapes[0][ax + 1 :]:
                raise ValueError(
                    f"stax.FanInConcat: input shapes {shapes} must agree except along axis {axis}"
                )
        size = sum(s[ax] for s in shapes)
        return shapes[0][:ax] + (size,) + shapes[0][ax + 1 :], ()

    def apply_fun(params, inputs, **kwargs):
        return jnp.concatenate(inputs, axis)

    return init_fun, apply_fun


def Dropout(rate, mode="train"):
    """Dropout where ``rate`` is the probability of KEEPING a unit (as in JAX's stax).

    Kept units are divided by ``rate``.

    ``apply_fun`` needs ``rng=`` (a PRNG key) in every mode; with ``mode='train'`` it draws
    ``random.bernoulli(rng, rate, inputs.shape)``, with any other mode it returns the inputs."""
    if isinstance(rate, (int, float)) and not 0 <= rate <= 1:
        raise ValueError(f"stax.Dropout: rate (the keep probability) must be in [0, 1], got {rate}")

    def init_fun(rng, input_shape):
        return input_shape, ()

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.get("rng")
        if rng is None:
            raise ValueError(
                "stax.Dropout: apply_fun needs a PRNG key: call apply_fun(params, inputs, "
                "rng=key) with key from fungrad.random.key / PRNGKey (serial and parallel pass "
                "their own rng= on to their layers)."
            )
        if mode != "train":
            return inputs
        keep = random.bernoulli(rng, rate, inputs.shape)
        return jnp.where(keep, inputs / rate, 0)

    return init_fun, apply_fun


# --------------------------------------------------------------------------- combinators


def serial(*layers):
    """The layers one after another: a layer whose params are the list of theirs.

    ``init_fun`` gives layer ``k`` the second half of ``random.split`` of the key left by
    layer ``k - 1``; ``apply_fun(..., rng=key)`` gives layer ``k`` ``random.split(key, n)[k]``."""
    init_funs, apply_funs = _layer_funs("serial", layers)

    def init_fun(rng, input_shape):
        params = []
        for init in init_funs:
            rng, layer_rng = random.split(rng)
            input_shape, layer_params = init(layer_rng, input_shape)
            params.append(layer_params)
        return input_shape, params

    def apply_fun(params, inputs, **kwargs):
        if len(params) != len(apply_funs):
            raise ValueError(
                f"stax.serial: got {len(params)} layer params for "
                f"{len(apply_funs)} layers; pass the params init_fun returned"
            )
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, len(apply_funs)) if rng is not None else [None] * len(apply_funs)
        for apply, layer_params, layer_rng in zip(apply_funs, params, rngs):
            inputs = apply(layer_params, inputs, rng=layer_rng, **kwargs)
        return inputs

    return init_fun, apply_fun


def parallel(*layers):
    """The layers side by side: input ``k`` of a list goes through layer ``k``.

    Outputs, output shapes and params are sequences with one entry per layer. Often between
    :func:`FanOut` and :data:`FanInSum` / :func:`FanInConcat`."""
    init_funs, apply_funs = _layer_funs("parallel", layers)
    n = len(layers)

    def _check(what, seq):
        if len(seq) != n:
            raise ValueError(
                f"stax.parallel: got {len(seq)} {what} for {n} layers; give one "
                "per layer (e.g. from FanOut)"
            )

    def init_fun(rng, input_shape):
        _check("input shapes", input_shape)
        rngs = random.split(rng, n)
        pairs = [init(r, s) for init, r, s in zip(init_funs, rngs, input_shape)]
        return tuple(s for s, _ in pairs), tuple(p for _, p in pairs)

    def apply_fun(params, inputs, **kwargs):
        _check("inputs", inputs)
        _check("layer params", params)
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, n) if rng is not None else [None] * n
        return [
            apply(p, x, rng=r, **kwargs) for apply, p, x, r in zip(apply_funs, params, inputs, rngs)
        ]

    return init_fun, apply_fun


def shape_dependent(make_layer):
    """A layer built by ``make_layer(input_shape)`` once the input shape is known.

    ``init_fun`` builds it from ``input_shape``, ``apply_fun`` from ``inputs.shape``."""

    def init_fun(rng, input_shape):
        return make_layer(input_shape)[0](rng, input_shape)

    def apply_fun(params, inputs, **kwargs):
        return make_layer(inputs.shape)[1](params, inputs, **kwargs)

    return init_fun, apply_fun
