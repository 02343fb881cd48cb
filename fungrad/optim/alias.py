"""optax's optimizers: chains of the transformations in :mod:`fungrad.optim.transforms` and
:mod:`fungrad.optim.constraints`, ending with the (negated) learning rate.

Every optimizer returns a :class:`~fungrad.optim.base.GradientTransformationExtraArgs`; its
``update(grads, state, params)`` gives the updates to add with
:func:`~fungrad.optim.base.apply_updates`. ``learning_rate`` may be a float, a scalar array or a
schedule (a callable of the int32 step count, e.g. from :mod:`fungrad.optim.schedules`). The
chains, argument names and defaults are optax's, so states and numbers match step by step.
"""

from __future__ import annotations

from fungrad.optim import constraints as cn
from fungrad.optim import transforms as tr
from fungrad.optim.base import (
    GradientTransformationExtraArgs,
    chain,
    identity,
)
from fungrad.optim.factorized import scale_by_factored_rms
from fungrad.optim.wrappers import ema, masked

__all__ = [
    "adabelief",
    "adadelta",
    "adafactor",
    "adagrad",
    "adam",
    "adamax",
    "adamaxw",
    "adamw",
    "amsgrad",
    "lamb",
    "lars",
    "lion",
    "nadam",
    "nadamw",
    "noisy_sgd",
    "novograd",
    "radam",
    "rmsprop",
    "sgd",
    "sign_sgd",
    "yogi",
]

_TX = GradientTransformationExtraArgs


def sgd(learning_rate, momentum=None, nesterov: bool = False, accumulator_dtype=None) -> _TX:
    """Stochastic gradient descent, with optional (Nesterov) momentum:
    ``t = g + momentum t``, ``u = -lr t`` (``u = -lr (g + momentum t)`` with Nesterov)."""
    if momentum is not None:
        first = tr.trace(decay=momentum, nesterov=nesterov, accumulator_dtype=accumulator_dtype)
    else:
        first = identity()
    return chain(first, tr.scale_by_learning_rate(learning_rate))


def adam(
    learning_rate,
    b1=0.9,
    b2=0.999,
    eps=1e-8,
    eps_root=0.0,
    mu_dtype=None,
    *,
    nesterov: bool = False,
) -> _TX:
    """Adam (Kingma & Ba 2014): ``u = -lr m_hat / (sqrt(v_hat + eps_root) + eps)``."""
    return chain(
        tr.scale_by_adam(
            b1=b1, b2=b2, eps=eps, eps_root=eps_root, mu_dtype=mu_dtype, nesterov=nesterov
        ),
        tr.scale_by_learning_rate(learning_rate),
    )


def nadam(
    learning_rate,
    b1=0.9,
    b2=0.999,
    eps=1e-8,
    eps_root=0.0,
    mu_dtype=None,
    *,
    nesterov: bool = True,
) -> _TX:
    """NAdam (Dozat 2016): :func:`adam` with Nesterov momentum."""
    return adam(learning_rate, b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov)


def adamw(
    learning_rate,
    b1=0.9,
    b2=0.999,
    eps=1e-8,
    eps_root=0.0,
    mu_dtype=None,
    weight_decay=1e-4,
    mask=None,
    *,
    nesterov: bool = False,
) -> _TX:
    """AdamW (Loshchilov & Hutter 2019): Adam's step plus decoupled weight decay,
    ``u = -lr (adam_step + weight_decay p)``; ``mask`` selects the decayed leaves."""
    return chain(
        tr.scale_by_adam(
            b1=b1, b2=b2, eps=eps, eps_root=eps_root, mu_dtype=mu_dtype, nesterov=nesterov
        ),
        cn.add_decayed_weights(weight_decay, mask),
        tr.scale_by_learning_rate(learning_rate),
    )


def nadamw(
    learning_rate,
    b1=0.9,
    b2=0.999,
    eps=1e-8,
    eps_root=0.0,
    mu_dtype=None,
    weight_decay=1e-4,
    mask=None,
    *,
    nesterov: bool = True,
) -> _TX:
    """:func:`adamw` with Nesterov momentum."""
    return adamw(
        learning_rate, b1, b2, eps, eps_root, mu_dtype, weight_decay, mask, nesterov=nesterov
    )


def adamax(learning_rate, b1=0.9, b2=0.999, eps=1e-8) -> _TX:
    """AdaMax, Adam under the infinity norm: ``v = max(|g| + eps, b2 v)``,
    ``u = -lr m_hat / v``."""
    return chain(
        tr.scale_by_adamax(b1=b1, b2=b2, eps=eps), tr.scale_by_learning_rate(learning_rate)
    )


def adamaxw(learning_rate, b1=0.9, b2=0.999, eps=1e-8, weight_decay=1e-4, mask=None) -> _TX:
    """:func:`adamax` plus decoupled weight decay."""
    return chain(
        tr.scale_by_adamax(b1=b1, b2=b2, eps=eps),
        cn.add_decayed_weights(weight_decay, mask),
        tr.scale_by_learning_rate(learning_rate),
    )


def amsgrad(
    learning_rate,
    b1=0.9,
    b2=0.999,
    eps=1e-8,
    eps_root=0.0,
    mu_dtype=None,
    bias_correction_mu: bool = True,
    bias_correction_nu: bool = True,
) -> _TX:
    """AMSGrad: Adam dividing by the running maximum of the second moment."""
    return chain(
        tr.scale_by_amsgrad(
            b1=b1,
            b2=b2,
            eps=eps,
            eps_root=eps_root,
            mu_dtype=mu_dtype,
            bias_correction_mu=bias_correction_mu,
            bias_correction_nu=bias_correction_nu,
        ),
        tr.scale_by_learning_rate(learning_rate),
    )


def radam(
    learning_rate,
    b1=0.9,
    b2=0.999,
    eps=1e-8,
    eps_root=0.0,
    threshold=5.0,
    *,
    nesterov: bool = False,
) -> _TX:
    """Rectified Adam (Liu et al. 2020)."""
    return chain(
        tr.scale_by_radam(
            b1=b1, b2=b2, eps=eps, eps_root=eps_root, threshold=threshold, nesterov=nesterov
        ),
        tr.scale_by_learning_rate(learning_rate),
    )


def adabelief(
    learning_rate, b1=0.9, b2=0.999, eps=1e-16, eps_root=1e-16, *, nesterov: bool = False
) -> _TX:
    """AdaBelief (Zhuang et al. 2020): Adam scaled by the variance of ``g`` around ``m``."""
    return chain(
        tr.scale_by_belief(b1=b1, b2=b2, eps=eps, eps_root=eps_root, nesterov=nesterov),
        tr.scale_by_learning_rate(learning_rate),
    )


def yogi(learning_rate, b1=0.9, b2=0.999, eps=1e-3) -> _TX:
    """Yogi (Zaheer et al. 2018): Adam with an additive second-moment update."""
    return chain(tr.scale_by_yogi(b1=b1, b2=b2, eps=eps), tr.scale_by_learning_rate(learning_rate))


def rmsprop(
    learning_rate,
    decay=0.9,
    eps=1e-8,
    initial_scale=0.0,
    eps_in_sqrt: bool = True,
    centered: bool = False,
    momentum=None,
    nesterov: bool = False,
    bias_correction: bool = False,
) -> _TX:
    """RMSProp (Hinton 2012): ``u = -lr g / sqrt(v + eps)``; ``centered`` divides by the
    standard deviation instead; ``momentum`` adds a trace after the learning rate."""
    scaler = tr.scale_by_stddev if centered else tr.scale_by_rms
    return chain(
        scaler(
            decay=decay,
            eps=eps,
            initial_scale=initial_scale,
            eps_in_sqrt=eps_in_sqrt,
            bias_correction=bias_correction,
        ),
        tr.scale_by_learning_rate(learning_rate),
        tr.trace(decay=momentum, nesterov=nesterov) if momentum is not None else identity(),
    )


def adagrad(learning_rate, initial_accumulator_value=0.1, eps=1e-7) -> _TX:
    """AdaGrad (Duchi et al. 2011): ``s += g^2``, ``u = -lr g / sqrt(s + eps)``."""
    return chain(
        tr.scale_by_rss(initial_accumulator_value=initial_accumulator_value, eps=eps),
        tr.scale_by_learning_rate(learning_rate),
    )


def adadelta(
    learning_rate=None, rho=0.9, eps=1e-6, weight_decay=0.0, weight_decay_mask=None
) -> _TX:
    """AdaDelta (Zeiler 2012); ``learning_rate=None`` applies the raw AdaDelta step with
    its sign unflipped, as optax does."""
    return chain(
        cn.add_decayed_weights(weight_decay, mask=weight_decay_mask),
        tr.scale_by_adadelta(rho=rho, eps=eps),
        tr.scale_by_learning_rate(learning_rate),
    )


def adafactor(
    learning_rate=None,
    min_dim_size_to_factor: int = 128,
    decay_rate=0.8,
    decay_offset=0,
    multiply_by_parameter_scale: bool = True,
    clipping_threshold=1.0,
    momentum=None,
    dtype_momentum="float32",
    weight_decay_rate=None,
    eps=1e-30,
    factored: bool = True,
    weight_decay_mask=None,
) -> _TX:
    """Adafactor (Shazeer & Stern 2018): factored second moments
    (:func:`~fungrad.optim.factorized.scale_by_factored_rms`), block-RMS clipping, the
    learning rate relative to each parameter block's RMS, optional momentum (an
    undebiased EMA) and weight decay, then the sign flip."""
    txs = [scale_by_factored_rms(factored, decay_rate, decay_offset, min_dim_size_to_factor, eps)]
    if clipping_threshold is not None:
        txs.append(cn.clip_by_block_rms(clipping_threshold))
    if learning_rate is not None:
        txs.append(tr.scale_by_learning_rate(learning_rate, flip_sign=False))
    if multiply_by_parameter_scale:
        txs.append(tr.scale_by_param_block_rms())
    if momentum is not None:
        txs.append(ema(momentum, debias=False, accumulator_dtype=dtype_momentum))
    if weight_decay_rate is not None:
        txs.append(cn.add_decayed_weights(weight_decay_rate, mask=weight_decay_mask))
    txs.append(tr.scale(-1))
    return chain(*txs)


def lamb(
    learning_rate, b1=0.9, b2=0.999, eps=1e-6, eps_root=0.0, weight_decay=0.0, mask=None
) -> _TX:
    """LAMB (You et al. 2020): Adam's step plus weight decay, rescaled per layer by the
    trust ratio ``||p|| / ||u||``."""
    return chain(
        tr.scale_by_adam(b1=b1, b2=b2, eps=eps, eps_root=eps_root),
        cn.add_decayed_weights(weight_decay=weight_decay, mask=mask),
        tr.scale_by_trust_ratio(),
        tr.scale_by_learning_rate(learning_rate),
    )


def lars(
    learning_rate,
    weight_decay=0.0,
    weight_decay_mask=True,
    trust_coefficient=0.001,
    eps=0.0,
    trust_ratio_mask=True,
    momentum=0.9,
    nesterov: bool = False,
) -> _TX:
    """LARS (You et al. 2017): weight decay, the layerwise trust ratio
    ``trust_coefficient ||p|| / (||u|| + eps)`` on the leaves ``trust_ratio_mask`` selects,
    the learning rate, then momentum."""
    return chain(
        cn.add_decayed_weights(weight_decay, mask=weight_decay_mask),
        masked(
            tr.scale_by_trust_ratio(trust_coefficient=trust_coefficient, eps=eps),
            trust_ratio_mask,
        ),
        tr.scale_by_learning_rate(learning_rate),
        tr.trace(decay=momentum, nesterov=nesterov),
    )


def lion(learning_rate, b1=0.9, b2=0.99, mu_dtype=None, weight_decay=1e-3, mask=None) -> _TX:
    """Lion (Chen et al. 2023): ``u = -lr (sign((1-b1) g + b1 m) + weight_decay p)``,
    then ``m = b2 m + (1-b2) g``."""
    return chain(
        tr.scale_by_lion(b1=b1, b2=b2, mu_dtype=mu_dtype),
        cn.add_decayed_weights(weight_decay, mask),
        tr.scale_by_learning_rate(learning_rate),
    )


def noisy_sgd(learning_rate, eta=0.01, gamma=0.55, key=None, *, seed: int | None = None) -> _TX:
    """SGD with annealed Gaussian gradient noise of variance ``eta / t^gamma``
    (Neelakantan et al. 2015). ``key`` is a PRNG key or int (default seed 0)."""
    if key is None and seed is None:
        key = 0
    return chain(cn.add_noise(eta, gamma, key, seed=seed), tr.scale_by_learning_rate(learning_rate))


def novograd(learning_rate, b1=0.9, b2=0.25, eps=1e-6, eps_root=0.0, weight_decay=0.0) -> _TX:
    """NovoGrad: layerwise-normalised gradients with momentum (needs params)."""
    return chain(
        tr.scale_by_novograd(b1=b1, b2=b2, eps=eps, eps_root=eps_root, weight_decay=weight_decay),
        tr.scale_by_learning_rate(learning_rate),
    )


def sign_sgd(learning_rate) -> _TX:
    """signSGD (Bernstein et al. 2018): ``u = -lr sign(g)``."""
    return chain(tr.scale_by_sign(), tr.scale_by_learning_rate(learning_rate))
