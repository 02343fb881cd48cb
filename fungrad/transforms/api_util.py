"""Helpers every transform's front end shares: checking that a transform is applied to a
callable, naming functions in messages (``fun_name``, ``fun_location``), and reading
``argnums``-style options against a function's signature (``Signature``,
``resolve_argnums``, ``normalize_argnums``), as JAX's ``api_util``."""

from __future__ import annotations

import functools
import inspect

from fungrad import core, dtypes
from fungrad.array import Array, is_arraylike

__all__ = [
    "Signature",
    "abstractify",
    "check_callable",
    "fun_location",
    "fun_name",
    "index_tuple",
    "normalize_argnums",
    "resolve_argnums",
]


def check_callable(fun, transform: str, usage: str) -> None:
    """A TypeError unless ``fun`` is callable, raised where a transform is applied (as JAX's
    "Expected a callable value"), naming the transform and how to call it (``usage``)."""
    if not callable(fun):
        raise TypeError(
            f"{transform}: expected a callable value, got {fun!r:.60} (of type "
            f"{type(fun).__name__}); {usage}"
        )


def fun_name(fun) -> str:
    while isinstance(fun, functools.partial):
        fun = fun.func
    return getattr(fun, "__name__", type(fun).__name__)


def fun_location(fun) -> str:
    while isinstance(fun, functools.partial):
        fun = fun.func
    code = getattr(inspect.unwrap(fun), "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code is not None else "<unknown>"


def index_tuple(what: str, value, kind, fun_name: str = "jit") -> tuple:
    """``static_argnums``-like options as a tuple: one ``kind`` (int or str) or a sequence of
    them; anything else is a TypeError naming ``fun_name`` and the option."""
    noun = "int" if kind is int else "string"
    if isinstance(value, kind) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        items = None
    else:
        items = tuple(value)
    if items is None or any(not isinstance(v, kind) or isinstance(v, bool) for v in items):
        raise TypeError(
            f"{fun_name}: {what} must be {'an' if kind is int else 'a'} {noun} or a "
            f"sequence of {noun}s, got "
            f"{value!r:.60} ({type(value).__name__})"
        )
    return items


class Signature:
    """What jit knows of ``fun``'s parameters: the names of its positional parameters (to name
    arguments in messages and relate static_argnums to static_argnames, as JAX does), whether
    it takes ``*args`` and ``**kwargs``."""

    def __init__(self, fun):
        try:
            params = list(inspect.signature(fun).parameters.values())
        except (TypeError, ValueError):  # builtins without a signature: no names, no checks
            params = None
        self.known = params is not None
        params = params or []
        kinds = inspect.Parameter
        self.positional = [
            p.name for p in params if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)
        ]
        self.keyword = {
            p.name for p in params if p.kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY)
        }
        self.var_positional = next((p.name for p in params if p.kind is kinds.VAR_POSITIONAL), None)
        self.var_keyword = any(p.kind is kinds.VAR_KEYWORD for p in params)
        # positional-or-keyword parameters: the ones reachable both ways
        self.both = [p.name for p in params if p.kind is kinds.POSITIONAL_OR_KEYWORD]

    def arg_name(self, i: int) -> str:
        if i < len(self.positional):
            return self.positional[i]
        if self.var_positional:
            return f"{self.var_positional}[{i - len(self.positional)}]"
        return f"args[{i}]"


def resolve_argnums(sig: Signature, what: str, nums, names) -> tuple[tuple, frozenset]:
    """Validate ``{what}_argnums`` / ``{what}_argnames`` against the signature and complete each
    from the other (JAX: a static positional parameter is also static when passed by keyword)."""
    if sig.known and not sig.var_positional:
        for i in nums:
            j = i + len(sig.positional) if i < 0 else i
            if not 0 <= j < len(sig.positional):
                raise ValueError(
                    f"Jitted function has {what}_argnums={nums}, but only accepts "
                    f"{len(sig.positional)} positional arguments."
                )
    if sig.known and not sig.var_keyword:
        bad = set(names) - sig.keyword
        if bad:
            raise ValueError(
                f"Jitted function has invalid argnames {bad} in {what}_argnames. "
                "Function does not take these args."
            )
    names = set(names)
    nums = list(nums)
    for i in list(nums):
        j = i + len(sig.positional) if i < 0 and not sig.var_positional else i
        if 0 <= j < len(sig.positional) and sig.positional[j] in sig.both:
            names.add(sig.positional[j])
    for n in list(names):
        if n in sig.both:
            k = sig.positional.index(n)
            if k not in nums:
                nums.append(k)
    return tuple(nums), frozenset(names)


def normalize_argnums(
    fun_name: str, argnums, nargs: int, option: str = "argnums"
) -> tuple[int, ...]:
    """``argnums`` (an int or a sequence of ints, negative counting from the end) as
    non-negative indices into ``nargs`` positional arguments."""
    out = []
    for i in map(int, index_tuple(option, argnums, int, fun_name)):
        j = i + nargs if i < 0 else i
        if not 0 <= j < nargs:
            raise ValueError(
                f"{fun_name}: {option[:-1]} {i} is out of range for a call with "
                f"{nargs} positional arguments"
            )
        out.append(j)
    return tuple(out)


def abstractify(x, what: str) -> core.ShapedArray:
    """The aval a traced argument gets (canonical dtype; Python scalars are weak)."""
    if not is_arraylike(x):
        raise TypeError(
            f"{what}: argument of type {type(x).__name__} is not a valid fungrad "
            "type; pass arrays, numpy values or Python scalars (or mark it static)"
        )
    aval = core.get_aval(x)
    if type(x) is not Array and not isinstance(x, core.Tracer):
        aval = aval.update(dtype=dtypes.canonicalize_dtype(aval.dtype))
    return aval
