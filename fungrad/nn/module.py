"""``fungrad.nn.Module``: a layer is a frozen dataclass that is also a pytree.

Why a module class and not ``init``/``apply`` pairs: parameters and the code that uses them
travel together, so a model is one value. ``fg.grad(loss)(model, x)`` returns a gradient of
the model's own type and structure, ``fg.jit``/``fg.vmap`` take a model as an ordinary
argument, and an optimizer state built from ``model`` has the model's tree structure (the
``fungrad.optim`` transforms map over it like any pytree). This is equinox's design, kept
minimal. The stax-style ``init``/``apply`` pairs remain in
:mod:`fungrad.example_libraries.stax` for code that prefers them.

The rules:

* Every ``Module`` subclass is turned into a frozen dataclass when it is defined (annotated
  class attributes are the fields). Its ``__init__`` is either the dataclass one, or the
  class's own ``__init__``, which sets fields with ``self.name = value``; assignment is allowed
  only while ``__init__`` runs, and only to declared fields.
* When construction ends, each field is classified once: a field whose value is an array
  (:class:`fungrad.Array`, a tracer, ``numpy.ndarray``/``numpy.generic``), a ``Module``, or a
  container (list/tuple/dict/pytree) holding one, is a *child*; every other value (int,
  float, str, callable, ``None``...) is *static* and is kept in the treedef, so ``fg.jit``
  traces only the arrays and recompiles when a static value changes. ``field(static=True)``
  forces a field static whatever it holds. A child container is flattened whole, so keep
  functions out of containers that hold arrays (wrap them in :class:`fungrad.nn.Lambda`):
  they would become leaves that ``jit`` cannot trace.
* The classification is stored with the instance and carried by the treedef, so
  ``tree_map(f, model)`` rebuilds a model with the same structure even when ``f`` returns
  non-arrays (a mask of bools, ``None``, a ``ShapeDtypeStruct``): the mapped values land in
  the child fields and flatten again as children.
* Equality and hash are by identity (arrays have no truth value); ``repr`` prints arrays as
  ``f32[3,4]``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

from fungrad import tree_util
from fungrad.array import Array

__all__ = ["Module", "field", "inference_mode", "is_array"]

_INIT_FLAG = "_fg_initializing"
_AUX = "_fg_aux"


def is_array(x) -> bool:
    """True for a fungrad Array, a tracer, or a numpy array/scalar: the values a Module keeps
    as pytree children (and ``fg.jit`` traces)."""
    return isinstance(x, (Array, np.ndarray, np.generic))


def field(*, static: bool = False, **kwargs) -> Any:
    """``dataclasses.field`` with one extra flag: ``static=True`` keeps the field in the
    treedef (never traced, never differentiated) even when it holds an array."""
    metadata = dict(kwargs.pop("metadata", None) or {})
    if static:
        metadata["static"] = True
    return dataclasses.field(metadata=metadata, **kwargs)


def _holds_array(value) -> bool:
    if is_array(value) or isinstance(value, Module):
        return True
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return False
    leaves = tree_util.tree_leaves(value, is_leaf=lambda x: isinstance(x, Module))
    return any(is_array(x) or isinstance(x, Module) for x in leaves)


class _Static:
    """A static field value inside a treedef: compared with ``==`` when that gives a bool
    (so equal hyperparameters hit the jit cache), otherwise by identity; hashed by value
    when hashable, else by type (only a hash collision, never a wrong equality)."""

    __slots__ = ("value", "_hash")

    def __init__(self, value):
        self.value = value
        try:
            self._hash = hash(value)
        except TypeError:
            self._hash = hash(type(value).__qualname__)

    def __eq__(self, other):
        if not isinstance(other, _Static):
            return NotImplemented
        if self.value is other.value:
            return True
        if type(self.value) is not type(other.value):
            return False
        try:
            eq = self.value == other.value
        except Exception:
            return False
        return eq if isinstance(eq, bool) else False

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return repr(self.value)


def _short(x) -> str:
    if is_array(x) or (hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, type)):
        dt = np.dtype(x.dtype)
        code = {"f": "f", "i": "i", "u": "u", "b": "bool", "c": "c"}.get(dt.kind, dt.name)
        name = code if code == "bool" else f"{code}{dt.itemsize * 8}"
        return f"{name}[{','.join(str(d) for d in x.shape)}]"
    if callable(x) and not isinstance(x, (Module, type)) and hasattr(x, "__qualname__"):
        return x.__qualname__
    return repr(x)


class Module:
    """Base class of layers and models: a frozen dataclass registered as a pytree.

    Subclass it and annotate fields::

        class Affine(fg.nn.Module):
            weight: fg.Array
            bias: fg.Array
            activation: Callable = fg.nn.relu   # not an array: static

            def __call__(self, x):
                return self.activation(x @ self.weight + self.bias)

    See the module docstring for which fields are children and which are static.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # a user __init__ (this class's or an inherited one) wins over the dataclass one
        user_init = "__init__" in cls.__dict__ or getattr(cls.__init__, "_fg_user", False)
        dataclasses.dataclass(cls, init=not user_init, repr=False, eq=False)
        tree_util.register_pytree_with_keys(
            cls, _flatten_with_keys, functools.partial(_unflatten, cls), _flatten
        )
        init = cls.__init__
        if getattr(init, "_fg_wrapped", False):  # inherited, already wrapped
            return

        @functools.wraps(init)
        def __init__(self, *args, **kw):
            if _INIT_FLAG in self.__dict__:  # a nested super().__init__ call
                init(self, *args, **kw)
                return
            object.__setattr__(self, _INIT_FLAG, True)
            try:
                init(self, *args, **kw)
            finally:
                del self.__dict__[_INIT_FLAG]
            _finish_init(self)

        __init__._fg_wrapped = True
        __init__._fg_user = user_init
        cls.__init__ = __init__

    def __setattr__(self, name, value):
        if _INIT_FLAG not in self.__dict__:
            raise dataclasses.FrozenInstanceError(
                f"{type(self).__name__}.{name}: Modules are immutable after __init__; build a "
                "new one (or use fungrad.tree_util.tree_map) instead of assigning"
            )
        if name not in {f.name for f in dataclasses.fields(self)}:
            raise AttributeError(
                f"{type(self).__name__}.__init__ set {name!r}, which is not a declared field; "
                f"annotate it in the class body ({name}: <type>)"
            )
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        raise dataclasses.FrozenInstanceError(
            f"{type(self).__name__}.{name}: Modules are immutable; cannot delete a field"
        )

    def __repr__(self):
        return _pformat(self, 0, 0)


_WIDTH = 96


def _pformat(x, indent: int, col: int = 0) -> str:
    """``x`` on one line when it fits in ``_WIDTH`` columns (it starts at column ``col``),
    else one field (or element) a line at ``indent + 2``; arrays print as ``f32[3,4]``."""
    if isinstance(x, Module):
        items = [
            (f"{f.name}=", x.__dict__.get(f.name, "<unset>"))
            for f in dataclasses.fields(x)
            if f.repr
        ]
        open_, close = f"{type(x).__name__}(", ")"
    elif type(x) in (list, tuple):
        items = [("", v) for v in x]
        open_, close = ("[", "]") if type(x) is list else ("(", ",)" if len(x) == 1 else ")")
    elif type(x) is dict:
        items = [(f"{k!r}: ", v) for k, v in x.items()]
        open_, close = "{", "}"
    else:
        return _short(x)
    flat = open_ + ", ".join(p + _pformat(v, 0) for p, v in items) + close
    if col + len(flat) <= _WIDTH:
        return flat
    pad = " " * (indent + 2)
    body = "".join(f"{pad}{p}{_pformat(v, indent + 2, indent + 2 + len(p))},\n" for p, v in items)
    return f"{open_}\n{body}{' ' * indent}{close.lstrip(',')}"


def _finish_init(self: Module) -> None:
    cls = type(self)
    for f in dataclasses.fields(cls):  # defaults of fields a user __init__ did not set
        if f.name not in self.__dict__:
            if f.default is not dataclasses.MISSING:
                object.__setattr__(self, f.name, f.default)
            elif f.default_factory is not dataclasses.MISSING:
                object.__setattr__(self, f.name, f.default_factory())
    missing = [f.name for f in dataclasses.fields(cls) if f.name not in self.__dict__]
    if missing:
        raise TypeError(
            f"{cls.__name__}.__init__ left fields {missing} unset; assign every declared field "
            "(or give it a default)"
        )
    dynamic = tuple(
        f.name
        for f in dataclasses.fields(cls)
        if not f.metadata.get("static", False) and _holds_array(self.__dict__[f.name])
    )
    # the treedef's aux data, built once: the child field names and the (name, static value)
    # pairs (unflatten gives the rebuilt instance the same object)
    static = tuple(
        (f.name, _Static(self.__dict__[f.name]))
        for f in dataclasses.fields(cls)
        if f.name not in dynamic
    )
    object.__setattr__(self, _AUX, (dynamic, static))


def _flatten(m: Module):
    aux = m.__dict__[_AUX]
    d = m.__dict__
    return [d[n] for n in aux[0]], aux


def _flatten_with_keys(m: Module):
    aux = m.__dict__[_AUX]
    return [(tree_util.GetAttrKey(n), m.__dict__[n]) for n in aux[0]], aux


def _unflatten(cls, aux, children):
    dynamic, static = aux
    m = object.__new__(cls)
    d = m.__dict__
    for name, s in static:
        d[name] = s.value
    for name, c in zip(dynamic, children):
        d[name] = c
    d[_AUX] = aux
    return m


def inference_mode(model, value: bool = True):
    """``model`` with every ``inference`` field of its Modules (Dropout, BatchNorm, ...) set
    to ``value``, nested Modules included (equinox's ``nn.inference_mode``): build the
    evaluation model once instead of passing ``inference=True`` down by hand. Returns a
    new tree; ``model`` is unchanged."""

    def fix(x):
        if not isinstance(x, Module):
            return x
        d = dict(x.__dict__)
        dynamic = d[_AUX][0]
        for name in dynamic:
            d[name] = tree_util.tree_map(fix, d[name], is_leaf=lambda y: isinstance(y, Module))
        if "inference" in d and "inference" not in dynamic:
            d["inference"] = bool(value)
        static = tuple((n, _Static(d[n])) for n, _ in d[_AUX][1])
        new = object.__new__(type(x))
        new.__dict__.update(d)
        new.__dict__[_AUX] = (dynamic, static)
        return new

    return tree_util.tree_map(fix, model, is_leaf=lambda y: isinstance(y, Module))
