"""``jax.extend.linear_util``: functions wrapped with a stack of transformations, for library
code written against JAX's tracing machinery (flax's lifted transforms, for example).

A :class:`WrappedFun` holds the user's function ``f`` and ``f_transformed``, ``f`` with every
transformation applied so far. A transformation is a function ``gen(f, *static, *args,
**kwargs)`` that calls ``f`` (the inner function) somewhere inside; ``transformation2(gen)``
makes ``gen(wrapped, *static)`` return the wrapped function with ``gen`` added outermost.
A transformation *with aux* also gets a :class:`Store` before its static arguments, where it
stores a side result (an output tree, say) that the caller reads after the call through the
thunk it was given. The generator forms (``transformation``, ``transformation_with_aux``:
``gen(*static, *args)`` yields the inner call's arguments and receives its result) are the
older spelling of the same thing.

fungrad's own transforms do not use this module (they call plain functions); it exists so
that code built on JAX's extension API runs unchanged.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

__all__ = [
    "EqualStore",
    "Store",
    "StoreException",
    "WrappedFun",
    "cache",
    "merge_linear_aux",
    "transformation",
    "transformation2",
    "transformation_with_aux",
    "transformation_with_aux2",
    "wrap_init",
]


class StoreException(Exception):
    """A :class:`Store` read before anything was stored in it, or stored into twice."""


_EMPTY = object()


class Store:
    """One side result of a transformation: stored once, read after the call."""

    __slots__ = ("_val",)

    def __init__(self):
        self._val = _EMPTY

    def store(self, val) -> None:
        if self._val is not _EMPTY:
            raise StoreException("Store occupied: a transformation stored its result twice")
        self._val = val

    def reset(self) -> None:
        self._val = _EMPTY

    @property
    def val(self):
        if self._val is _EMPTY:
            raise StoreException(
                "Store empty: read the thunk after calling the wrapped function, not before"
            )
        return self._val

    def __bool__(self) -> bool:
        return self._val is not _EMPTY


class EqualStore(Store):
    """A :class:`Store` that accepts storing again a value equal to the one it holds."""

    __slots__ = ()

    def store(self, val) -> None:
        if self._val is _EMPTY:
            self._val = val
            return
        try:
            same = bool(self._val == val)
        except Exception:  # noqa: BLE001 - values that do not compare are not equal
            same = False
        if not same:
            raise StoreException("Store occupied with a value not equal to the new one")


class WrappedFun:
    """``f`` with ``transforms`` applied, outermost first; call it with :meth:`call_wrapped`.

    ``params`` are keyword arguments every call passes to ``f``; ``debug_info`` is whatever
    the creator gave (a :class:`fungrad.api_util.DebugInfo` or None)."""

    __slots__ = ("f", "f_transformed", "transforms", "stores", "params", "in_type", "debug_info")

    def __init__(self, f, f_transformed, transforms, stores, params, in_type, debug_info):
        self.f = f
        self.f_transformed = f_transformed
        self.transforms = transforms
        self.stores = stores
        self.params = params
        self.in_type = in_type
        self.debug_info = debug_info

    @property
    def __name__(self) -> str:
        return getattr(self.f, "__name__", "<unnamed wrapped function>")

    def wrap(self, gen, gen_static_args: tuple, out_store: Store | None) -> WrappedFun:
        """This function with ``gen`` applied outside the transformations it has."""
        extra = (self.f_transformed,) if out_store is None else (self.f_transformed, out_store)
        return WrappedFun(
            self.f,
            functools.partial(gen, *extra, *gen_static_args),
            ((gen, gen_static_args), *self.transforms),
            (out_store, *self.stores),
            self.params,
            None,
            self.debug_info,
        )

    def call_wrapped(self, *args, **kwargs):
        """Call ``f`` through every transformation."""
        return self.f_transformed(*args, **kwargs)

    def populate_stores(self, stores) -> None:
        """Copy the values of ``stores`` (another WrappedFun's) into this one's stores."""
        for mine, theirs in zip(self.stores, stores):
            if mine is not None:
                mine.store(theirs.val)

    def replace_debug_info(self, debug_info) -> WrappedFun:
        return WrappedFun(
            self.f,
            self.f_transformed,
            self.transforms,
            self.stores,
            self.params,
            self.in_type,
            debug_info,
        )

    def __repr__(self) -> str:
        names = [getattr(gen, "__name__", repr(gen)) for gen, _ in self.transforms]
        return f"WrappedFun({self.__name__}, transforms={names})"

    def __hash__(self):
        return hash((self.f, self.transforms, self.params))

    def __eq__(self, other):
        return (
            isinstance(other, WrappedFun)
            and self.f == other.f
            and self.transforms == other.transforms
            and self.params == other.params
        )


def wrap_init(f: Callable, params=None, *, debug_info=None) -> WrappedFun:
    """``f`` as a :class:`WrappedFun` with no transformations; ``params``: keyword arguments
    (a dict or ``(name, value)`` pairs) passed to ``f`` on every call."""
    items = tuple(sorted(dict(params or {}).items()))
    call = functools.partial(f, **dict(items)) if items else f
    return WrappedFun(f, call, (), (), items, None, debug_info)


def _curried(transform):
    """``transform(gen, fun, *static)`` usable as ``transform(gen)(fun, *static)`` too."""

    @functools.wraps(transform)
    def curried(gen, *args, **kwargs):
        if not args and not kwargs:
            return functools.partial(transform, gen)
        return transform(gen, *args, **kwargs)

    return curried


@_curried
def transformation2(gen, fun: WrappedFun, *gen_static_args) -> WrappedFun:
    """``fun`` with ``gen(inner, *gen_static_args, *args, **kwargs)`` applied outermost."""
    return fun.wrap(gen, gen_static_args, None)


@_curried
def transformation_with_aux2(
    gen, fun: WrappedFun, *gen_static_args, use_eq_store: bool = False
) -> tuple[WrappedFun, Callable[[], Any]]:
    """``fun`` with ``gen(inner, store, *gen_static_args, *args, **kwargs)`` applied, and a
    thunk that returns what ``gen`` stored (call it after the wrapped function)."""
    store = EqualStore() if use_eq_store else Store()
    return fun.wrap(gen, gen_static_args, store), lambda: store.val


def _from_generator(gen, with_aux: bool):
    """A transformation function from a generator ``gen(*static, *args)`` that yields
    ``(args, kwargs)`` for the inner call and receives its result: it returns the
    transformed result (or, ``with_aux``, the pair (result, side result))."""

    def run(inner, *rest, **kwargs):
        store, rest = (rest[0], rest[1:]) if with_aux else (None, rest)
        it = gen(*rest, **kwargs)
        inner_args, inner_kwargs = next(it)
        out = it.send(inner(*inner_args, **inner_kwargs))
        if with_aux:
            out, aux = out
            store.store(aux)
        return out

    run.__name__ = getattr(gen, "__name__", "transformation")
    return run


@_curried
def transformation(gen, fun: WrappedFun, *gen_static_args) -> WrappedFun:
    """The generator spelling of :func:`transformation2`."""
    return transformation2(_from_generator(gen, False), fun, *gen_static_args)


@_curried
def transformation_with_aux(gen, fun: WrappedFun, *gen_static_args):
    """The generator spelling of :func:`transformation_with_aux2`."""
    return transformation_with_aux2(_from_generator(gen, True), fun, *gen_static_args)


def merge_linear_aux(aux1: Callable[[], Any], aux2: Callable[[], Any]):
    """The side result of whichever of two branches ran: ``aux1()``'s, else ``aux2()``'s
    (exactly one of them must have stored)."""
    try:
        out1 = aux1()
    except StoreException:
        try:
            return False, aux2()
        except StoreException:
            raise StoreException("neither store of merge_linear_aux holds a value") from None
    try:
        aux2()
    except StoreException:
        return True, out1
    raise StoreException("both stores of merge_linear_aux hold a value")


def cache(call: Callable, *, explain: Callable | None = None) -> Callable:
    """Memoise ``call(fun: WrappedFun, *args)`` on the wrapped function's ``f``,
    transformations and parameters and on ``args`` (hashable): the result is computed once
    per distinct key while ``fun.f`` is alive, and a call's stores are filled from the first
    call's. ``explain`` is accepted for JAX's signature (it reports cache misses there)."""
    del explain
    memo: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    @functools.wraps(call)
    def cached(fun: WrappedFun, *args):
        try:
            table = memo.setdefault(fun.f, {})
        except TypeError:  # f cannot be weakly referenced: nothing to key on
            return call(fun, *args)
        key = (fun.transforms, fun.params, args)
        hit = table.get(key)
        if hit is None:
            hit = table[key] = (call(fun, *args), fun.stores)
        else:
            fun.populate_stores(hit[1])
        return hit[0]

    cached.cache_clear = memo.clear
    return cached
