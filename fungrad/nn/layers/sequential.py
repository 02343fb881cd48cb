"""``Sequential``: layers applied one after another, passing keys, inference flags and
state to the layers that take them."""

from __future__ import annotations

import functools
import inspect

from fungrad import random
from fungrad.nn.layers.linear import Lambda
from fungrad.nn.module import Module

__all__ = ["Sequential"]


@functools.cache
def _call_params(cls: type) -> frozenset:
    try:
        return frozenset(inspect.signature(cls.__call__).parameters)
    except (TypeError, ValueError):
        return frozenset()


def _is_stateful(layer) -> bool:
    return bool(getattr(layer, "is_stateful", False))


class Sequential(Module):
    """Apply ``layers`` in order: ``Sequential([Linear(...), fg.nn.relu, ...])(x)`` (a plain
    function is wrapped in :class:`Lambda`).

    The calling convention, followed by every layer of :mod:`fungrad.nn.layers`:

    * ``key``: split into one key per layer; a layer whose ``__call__`` has a ``key``
      parameter (Dropout) gets its key.
    * ``inference``: passed to the layers whose ``__call__`` has an ``inference`` parameter
      (Dropout, BatchNorm, nested Sequentials) when not ``None``.
    * state: a layer with ``is_stateful`` true (BatchNorm) is called as
      ``layer(x, state) -> (x, state)``. If any layer is stateful the Sequential is too:
      ``state = seq.init_state()`` gives a tuple with one entry per layer (``None`` for
      stateless ones), and ``seq(x, state) -> (y, new_state)``; otherwise ``seq(x) -> y``.
    """

    layers: tuple

    def __init__(self, layers):
        layers = tuple(layers)
        for i, layer in enumerate(layers):
            if not callable(layer):
                raise TypeError(
                    f"Sequential: layer {i} ({type(layer).__name__}) is not callable; pass "
                    "Modules or functions"
                )
        # a plain function becomes a Lambda, so it stays static (not a pytree leaf)
        self.layers = tuple(
            layer if isinstance(layer, Module) else Lambda(layer) for layer in layers
        )

    @property
    def is_stateful(self) -> bool:
        return any(_is_stateful(layer) for layer in self.layers)

    def init_state(self):
        """One state per layer (``None`` for the stateless ones)."""
        return tuple(layer.init_state() if _is_stateful(layer) else None for layer in self.layers)

    def __call__(self, x, state=None, *, key=None, inference: bool | None = None):
        stateful = self.is_stateful
        if stateful and state is None:
            raise ValueError(
                "Sequential: it has stateful layers (BatchNorm): call seq(x, state) with "
                "state = seq.init_state(); it returns (y, new_state)"
            )
        if stateful and (not isinstance(state, tuple) or len(state) != len(self.layers)):
            raise TypeError(
                f"Sequential: state must be a tuple of {len(self.layers)} entries (from "
                f"init_state()), got {type(state).__name__}"
            )
        keys = (
            random.split(key, len(self.layers))
            if key is not None and self.layers
            else [None] * len(self.layers)
        )
        new_state = []
        for i, layer in enumerate(self.layers):
            params = _call_params(type(layer))
            kw = {}
            if keys[i] is not None and "key" in params:
                kw["key"] = keys[i]
            if inference is not None and "inference" in params:
                kw["inference"] = inference
            if _is_stateful(layer):
                x, s = layer(x, state[i], **kw)
                new_state.append(s)
            else:
                x = layer(x, **kw)
                new_state.append(None)
        return (x, tuple(new_state)) if stateful else x

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Sequential(self.layers[i])
        return self.layers[i]

    def __len__(self):
        return len(self.layers)

    def __iter__(self):
        return iter(self.layers)
