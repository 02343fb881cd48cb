"""The core: avals, the jaxpr IR, primitives, traces and ``bind``, ``eval_jaxpr``, typechecking.

Tracing model ("stackless", as in today's JAX and Autodidax2): one *current trace* per thread.
``prim.bind(*args, **params)`` hands the primitive to the current trace. The base trace is the
:class:`EvalTrace`, which runs the primitive's numpy ``impl`` on concrete values. A transform
makes a new trace whose ``parent`` is the trace that was current, sets it current while the
user's function runs, and in ``process_primitive`` unwraps *its own* tracers (recognised by
``tracer._trace is self``), treats anything else as a constant, and binds the primitive's rule
in the parent trace. Because ownership is explicit, nested transforms never confuse their
perturbations.

Rule signatures (each transform's table documents its own):

* ``impl(*values, **params) -> value | list``: numpy reference (the oracle for the compilers);
* ``abstract_eval(*avals, **params) -> ShapedArray | list[ShapedArray]``: shape/dtype rule.
"""

from __future__ import annotations

import itertools
import math
import operator
import sys
import threading
from collections.abc import Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from fungrad import dtypes, float_normalization, source_info
from fungrad.config import config

# ---------------------------------------------------------------------------------------------
# Errors


class FungradTypeError(TypeError):
    """Base of fungrad's tracing errors (a TypeError, as in JAX: ``errors.JAXTypeError``)."""


class FungradIndexError(IndexError):
    """Base of fungrad's indexing errors (an IndexError: ``errors.JAXIndexError``)."""


class ConcretizationTypeError(FungradTypeError):
    """A concrete Python value (int, float, ...) was needed from an abstract tracer."""


class TracerBoolConversionError(ConcretizationTypeError):
    """``bool()`` of a tracer: an ``if``, ``while``, ``and``/``or`` on a traced value."""


class TracerIntegerConversionError(FungradTypeError):
    """A tracer used as a Python integer index or size (``__index__``: ``range(n)``,
    ``lst[i]``); not a ConcretizationTypeError, as in JAX."""


class NonConcreteBooleanIndexError(FungradIndexError):
    """A traced boolean mask used as an index: the result's shape would depend on its values."""


class TracerArrayConversionError(FungradTypeError):
    """A tracer was passed where a numpy array was needed (``np.asarray(tracer)``)."""


class UnexpectedTracerError(FungradTypeError):
    """A tracer escaped the transform that created it (stored in a global, returned by aux)."""


class JaxprTypeError(TypeError):
    """A jaxpr failed :func:`typecheck_jaxpr`."""


# ---------------------------------------------------------------------------------------------
# Abstract values


class AbstractValue:
    """The base of abstract values (JAX's ``jax.core.AbstractValue``); fungrad's one kind is
    :class:`ShapedArray`."""

    __slots__ = ()


class ShapedArray(AbstractValue):
    """The abstract value of an array: static shape, dtype and weak-type flag."""

    __slots__ = ("shape", "dtype", "weak_type", "_hash")
    array_abstraction_level = 1

    def __init__(self, shape, dtype, weak_type: bool = False, sharding=None):
        # (``sharding``: JAX's avals carry one; fungrad's do not (one device, see
        # docs/sharding.md), so it is accepted and dropped: ``.sharding`` is the unsharded one)
        if type(shape) is not tuple or not all(type(d) is int for d in shape):
            shape = tuple(map(operator.index, shape))
        self.shape = shape
        self.dtype = dtype if type(dtype) is np.dtype else np.dtype(dtype)
        self.weak_type = bool(weak_type)
        self._hash = None

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))

    @property
    def sharding(self):
        """JAX's aval sharding: fungrad's values are unsharded, ``NamedSharding(AbstractMesh(()),
        P(None, ...))`` (set by fungrad.sharding; None before it is imported)."""
        return None if _unsharded is None else _unsharded(len(self.shape))

    def update(self, shape=None, dtype=None, weak_type=None, sharding=None) -> ShapedArray:
        return ShapedArray(
            self.shape if shape is None else shape,
            self.dtype if dtype is None else dtype,
            self.weak_type if weak_type is None else weak_type,
        )

    def strip_weak_type(self) -> ShapedArray:
        return self.update(weak_type=False) if self.weak_type else self

    def str_short(self) -> str:
        """``f32[3,4]``: the jaxpr printer's spelling."""
        return f"{dtypes.short_name(self.dtype)}[{','.join(map(str, self.shape))}]"

    def __eq__(self, other):
        return (
            type(other) is ShapedArray
            and self.shape == other.shape
            and self.dtype == other.dtype
            and self.weak_type == other.weak_type
        )

    def __hash__(self):
        h = self._hash
        if h is None:
            h = self._hash = hash((self.shape, self.dtype, self.weak_type))
        return h

    def _long(self) -> str:
        return f"{self.dtype.name}[{','.join(map(str, self.shape))}]"

    def __str__(self):
        """JAX's: ``float32[2,3]``, ``~float32[]`` when weakly typed (``str(typeof(x))``)."""
        return ("~" if self.weak_type else "") + self._long()

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({self._long()}{weak})"

    # Concretisation of an abstract value is always an error; the message says how to fix it.
    def _concretization_error(self, what: str, tracer=None, error=ConcretizationTypeError):
        raise error(concretization_message(what, self, tracer))


_unsharded = None  # ndim -> the unsharded aval sharding (fungrad.sharding sets it)


def set_aval_sharding(unsharded) -> None:
    """Let ``ShapedArray.sharding`` answer ``unsharded(ndim)``: the sharding layer is above
    this one, so it registers itself here (fungrad/sharding.py)."""
    global _unsharded
    _unsharded = unsharded


_interned_avals: dict = {}


def interned_aval(shape: tuple, dtype: np.dtype, weak_type: bool) -> ShapedArray:
    """The ShapedArray of a concrete value (``shape`` a tuple of ints, ``dtype`` a numpy
    dtype), one shared object per distinct aval: eager code compares avals in its cache keys
    all the time, and equal objects that are the same object compare without a call."""
    key = (shape, dtype, weak_type)
    aval = _interned_avals.get(key)
    if aval is None:
        if len(_interned_avals) >= 4096:
            _interned_avals.clear()
        aval = _interned_avals[key] = ShapedArray(shape, dtype, weak_type)
    return aval


def concretization_message(what: str, aval: ShapedArray, tracer=None) -> str:
    origin = getattr(tracer, "_origin", None) if tracer is not None else None
    where = f" ({origin})" if origin else ""
    return (
        f"Abstract tracer value encountered where a concrete value is expected: {what} of a "
        f"traced array with shape/dtype {aval.str_short()}{where}.\n"
        "The value is only known when the compiled function runs, so Python cannot branch on "
        "it or convert it. Fixes: use lax.cond / lax.switch / lax.while_loop for control flow, "
        "fungrad.numpy.where to select values, or mark the argument static "
        "(jit(f, static_argnums=...)) if it is a configuration value."
    )


def get_aval(x) -> ShapedArray:
    """The aval of an Array, tracer, numpy value or Python scalar (scalars are weak)."""
    aval = getattr(x, "_aval", None)  # Arrays cache theirs
    if aval is not None:
        return aval
    aval = getattr(x, "aval", None)
    if aval is not None:
        return aval
    if isinstance(x, (bool, int, float, complex)):
        return interned_aval((), dtypes.python_scalar_dtype(x), not isinstance(x, bool))
    if isinstance(x, (np.ndarray, np.generic)):
        return interned_aval(x.shape, dtypes.canonicalize_dtype(x.dtype), False)
    raise TypeError(f"Value of type {type(x).__name__} is not a valid fungrad type: {x!r:.80}")


# ---------------------------------------------------------------------------------------------
# The IR: Var, Literal, JaxprEqn, Jaxpr, ClosedJaxpr

_var_ids = itertools.count()


class Var:
    """A variable of a jaxpr. Identity is the object; the printer assigns names."""

    __slots__ = ("aval", "count")

    def __init__(self, aval: ShapedArray):
        self.aval = aval
        self.count = next(_var_ids)

    def __repr__(self):
        return f"Var({self.count}:{self.aval.str_short()})"


class Literal:
    """A scalar constant appearing directly as an equation input (``2.0:f32[]``)."""

    __slots__ = ("val", "aval")

    def __init__(self, val, aval: ShapedArray):
        self.val = val
        self.aval = aval

    def __repr__(self):
        return f"Literal({self.val!r}:{self.aval.str_short()})"


Atom = Var | Literal  # an equation's input (JAX's jax.core.Atom)
Value = Any  # what a jaxpr's variables hold when it is evaluated (JAX's jax.core.Value)
ParamDict = dict[str, Any]  # an equation's parameters (JAX's jax.core.ParamDict)


def max_dim(d1: int, d2: int) -> int:
    """``max(d1, d2)`` of two dimension sizes (JAX's handles symbolic sizes; fungrad's sizes
    are always integers)."""
    return max(operator.index(d1), operator.index(d2))


def min_dim(d1: int, d2: int) -> int:
    """``min(d1, d2)`` of two dimension sizes (see :func:`max_dim`)."""
    return min(operator.index(d1), operator.index(d2))


class JaxprEqn:
    """One equation ``outvars = primitive[params] invars``. ``params`` values are hashable.

    ``source_info`` (a :class:`fungrad.source_info.SourceInfo` or None) is the user's line
    that produced it; it is metadata only: equality, hashing and CSE never look at it."""

    __slots__ = ("primitive", "invars", "params", "outvars", "source_info")

    def __init__(self, primitive, invars, params, outvars, source_info=None):
        self.primitive = primitive
        self.invars = list(invars)
        self.params = dict(params)
        self.outvars = list(outvars)
        self.source_info = source_info

    def replace(self, *, primitive=None, invars=None, params=None, outvars=None):
        """A copy with the given fields changed; the source line is kept (passes that rewrite
        an equation should build the new one this way)."""
        return JaxprEqn(
            self.primitive if primitive is None else primitive,
            self.invars if invars is None else invars,
            self.params if params is None else params,
            self.outvars if outvars is None else outvars,
            self.source_info,
        )

    def __repr__(self):
        from fungrad.pretty import pp_eqn

        return pp_eqn(self)


class Jaxpr:
    """``{ lambda constvars ; invars . let eqns in outvars }``."""

    __slots__ = ("constvars", "invars", "eqns", "outvars")

    def __init__(self, constvars, invars, eqns, outvars):
        self.constvars = list(constvars)
        self.invars = list(invars)
        self.eqns = list(eqns)
        self.outvars = list(outvars)

    in_avals = property(lambda self: [v.aval for v in self.invars])
    out_avals = property(lambda self: [v.aval for v in self.outvars])

    def __str__(self):
        from fungrad.pretty import pp_jaxpr

        return pp_jaxpr(self)

    __repr__ = __str__

    def pretty_print(self, *, source_info: bool = False, width: int = 80) -> str:
        """The jaxpr's text; ``source_info=True`` ends each equation with a comment naming
        the user's line that produced it (``# model.py:42 (loss)``), as JAX does. A jaxpr
        that fits in ``width`` columns prints on one line (JAX's layout)."""
        from fungrad.pretty import pp_jaxpr

        return pp_jaxpr(self, source_info=source_info, width=width)


class ClosedJaxpr:
    """A jaxpr together with the values of its constvars."""

    __slots__ = ("jaxpr", "consts")

    def __init__(self, jaxpr: Jaxpr, consts: Sequence[Any]):
        if len(consts) != len(jaxpr.constvars):
            raise ValueError(
                f"ClosedJaxpr: {len(jaxpr.constvars)} constvars but {len(consts)} consts"
            )
        self.jaxpr = jaxpr
        self.consts = list(consts)

    in_avals = property(lambda self: self.jaxpr.in_avals)
    out_avals = property(lambda self: self.jaxpr.out_avals)
    eqns = property(lambda self: self.jaxpr.eqns)

    def __call__(self, *args):
        """Evaluate with the given arguments (arrays, numpy values or Python scalars)."""
        from fungrad.operands import operand

        return eval_jaxpr(
            self.jaxpr, self.consts, *[operand(a, "ClosedJaxpr argument") for a in args]
        )

    def __str__(self):
        from fungrad.pretty import pp_jaxpr

        return pp_jaxpr(self.jaxpr)

    __repr__ = __str__

    def pretty_print(self, *, source_info: bool = False, width: int = 80) -> str:
        """The jaxpr's text (see :meth:`Jaxpr.pretty_print`)."""
        return self.jaxpr.pretty_print(source_info=source_info, width=width)


# ---------------------------------------------------------------------------------------------
# Primitives

primitives: dict[str, Primitive] = {}
"""Every primitive by name: the registry that rule-completeness tests walk."""


class Primitive:
    """A named operation; its rules live in per-transform tables keyed by the primitive.

    ``impl`` and ``abstract_eval`` are attributes set by the primitive's family module.
    ``multiple_results`` primitives take and return lists.
    """

    __slots__ = ("name", "multiple_results", "impl", "abstract_eval", "__weakref__")

    def __init__(self, name: str, *, multiple_results: bool = False):
        if name in primitives:
            raise ValueError(f"a primitive named {name!r} is already registered")
        self.name = name
        self.multiple_results = multiple_results
        self.impl = None
        self.abstract_eval = None
        primitives[name] = self

    def bind(self, *args, **params):
        """Apply the primitive under the current trace (eagerly when no transform is active)."""
        return _state.trace.process_primitive(self, args, params)

    def __repr__(self):
        return self.name


# ---------------------------------------------------------------------------------------------
# Traces and tracers


class Trace:
    """Interprets primitives. Subclasses: EvalTrace here; staging, JVP, batching elsewhere."""

    parent: Trace | None = None

    def process_primitive(self, primitive: Primitive, args, params):
        raise AssertionError(f"{type(self).__name__} must define process_primitive")


def is_ancestor(trace: Trace, other: Trace) -> bool:
    """Whether ``other`` encloses ``trace`` (is its parent, grandparent, ...)."""
    t = trace.parent
    while t is not None:
        if t is other:
            return True
        t = t.parent
    return False


def eval_closed_jaxpr_impl(closed: ClosedJaxpr, *values) -> list:
    """Evaluate ``closed`` on numpy values, returning numpy values: the impl of every
    primitive that just runs the jaxpr it holds (custom_jvp_call, checkpoint...)."""
    from fungrad.array import Array

    outs = eval_jaxpr(closed.jaxpr, closed.consts, *[Array(v) for v in values])
    return [o._value for o in outs]


if TYPE_CHECKING:  # type checkers see a tracer's operators and methods as Array's
    from fungrad.array import Array as _TracerBase
else:
    _TracerBase = object


class Tracer(_TracerBase):
    """A value under a transform. Array methods and operators are installed by fungrad.numpy."""

    __slots__ = ("_trace", "__weakref__")
    __array_priority__ = 1000

    @property
    def aval(self) -> ShapedArray:
        raise AssertionError(f"{type(self).__name__} must define aval")

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: self.aval.ndim)
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)

    def to_concrete_value(self):
        """The concrete numpy value behind this tracer, or None when it is abstract."""
        return None

    def _concrete(self, what: str, error=ConcretizationTypeError):
        val = self.to_concrete_value()
        if val is None:
            self.aval._concretization_error(what, self, error)
        return val

    def __bool__(self):
        return bool(self._concrete("bool()", TracerBoolConversionError))

    def __int__(self):
        return int(self._concrete("int()"))

    def __float__(self):
        return float(self._concrete("float()"))

    def __index__(self):
        return int(
            self._concrete(
                "the __index__ method (used as an index or size)", TracerIntegerConversionError
            )
        )

    def __complex__(self):
        return complex(self._concrete("complex()"))

    def __array__(self, dtype=None, copy=None):
        val = self.to_concrete_value()
        if val is None:
            raise TracerArrayConversionError(
                f"A traced array with shape/dtype {self.aval.str_short()} was converted to a "
                "numpy array (np.asarray / np.array / a numpy function). numpy cannot see traced "
                "values: use fungrad.numpy functions instead of numpy ones inside transformed "
                "functions."
            )
        return np.asarray(val, dtype=dtype)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object (a 0-d traced array)")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d traced array")
        return (self[i] for i in range(self.shape[0]))

    def __hash__(self):
        raise TypeError(
            f"unhashable type: traced array ({self.aval.str_short()}); "
            "traced values cannot be dict keys or set members"
        )

    def __repr__(self):
        return f"Traced<{self.aval.str_short()}>with<{type(self._trace).__name__}>"


class EvalTrace(Trace):
    """The base trace: runs each primitive's numpy impl on concrete values."""

    def process_primitive(self, primitive, args, params):
        array_type = _array_type
        vals, avals = [], []
        for a in args:
            if type(a) is array_type:
                vals.append(a._value)
                aval = a._aval
                avals.append(a.aval if aval is None else aval)
            elif isinstance(a, Tracer):
                raise escaped_tracer_error(a, primitive)
            else:  # a raw Python or numpy value: give it its canonical dtype
                aval = get_aval(a)
                vals.append(np.array(a, dtype=dtypes.canonicalize_dtype(aval.dtype))[()])
                avals.append(aval)
        # The shape rule runs first: bad input gets the primitive's own error (naming the
        # operation, shapes and dtypes), never numpy's, and the impl only sees valid input.
        out_avals = cached_abstract_eval(primitive, tuple(avals), params)
        impl = primitive.impl
        # bfloat16 and float8 (numpy kind "V", as float0; float8_e5m2 alone is "f") are
        # computed in float32
        for aval in avals:
            if aval.dtype.kind == "V" or aval.dtype is _F8E5M2:
                impl = _bfloat16_impl(primitive, avals, params, out_avals)
                break
        else:
            if primitive.multiple_results:
                if any(a.dtype.kind == "V" or a.dtype is _F8E5M2 for a in out_avals):
                    impl = _bfloat16_impl(primitive, avals, params, out_avals)
            elif out_avals.dtype.kind == "V" or out_avals.dtype is _F8E5M2:
                impl = _bfloat16_impl(primitive, avals, params, out_avals)
        try:
            out = impl(*vals, **params)
        except FloatingPointError as e:  # debug_nans in a loop body: name the iteration too
            from fungrad import nan_hunt

            raise nan_hunt.locate(primitive, vals, params, e) from None
        if config.eager_checks:  # check_impl_avals, debug_nans or debug_infs
            if config.check_impl_avals:
                _check_impl_avals(primitive, out, out_avals, params)
            if config.debug_nans or config.debug_infs:
                outs = out if primitive.multiple_results else [out]
                check_nans_infs(primitive.name, outs, vals, params)
        if primitive.multiple_results:
            return [array_type.from_impl(o, a) for o, a in zip(out, out_avals)]
        return array_type.from_impl(out, out_avals)


_F8E5M2 = dtypes.float8_e5m2
"""ml_dtypes gives float8_e5m2 numpy kind "f" (its other floats are "V"), a singleton dtype."""


def _bfloat16_impl(primitive, avals, params, out_avals):
    """``primitive``'s impl (called as ``impl(*vals, **params)``), computing in float32 and
    rounding to bfloat16 where operands or results are bfloat16 (``float_normalization``)."""
    outs = out_avals if primitive.multiple_results else [out_avals]
    if not float_normalization.touches_narrow_float([*avals, *outs]):
        return primitive.impl
    fn = float_normalization.widened_impl(primitive, params, out_avals)
    return lambda *vals, **_: fn(*vals)


_array_type: type = type(None)
"""``fungrad.Array`` (set by fungrad.array when it is imported: core cannot import it)."""


_abstract_eval_cache: dict = {}


def cached_abstract_eval(primitive, avals, params):
    """``primitive.abstract_eval`` memoised on (primitive, input avals, params): eager code
    repeats the same shapes, and shape rules are pure. Unhashable params are not cached."""
    try:
        key = (primitive, avals, tuple(params.items()), config.enable_x64)
        out = _abstract_eval_cache.get(key)
    except TypeError:
        return primitive.abstract_eval(*avals, **params)
    if out is None:
        out = primitive.abstract_eval(*avals, **params)
        if len(_abstract_eval_cache) >= 8192:
            _abstract_eval_cache.clear()
        _abstract_eval_cache[key] = out
    return out


def check_nans_infs(where: str, values, inputs=None, params=None) -> None:
    """With ``debug_nans`` / ``debug_infs`` on: FloatingPointError when a floating value in
    ``values`` (numpy arrays, the outputs of primitive ``where``) holds a NaN / an infinity,
    naming ``where``, the user's source line of the call (and the forward primitive when it
    was made while differentiating one), the first bad index and a summary of ``inputs`` (the
    primitive's numpy inputs; ``params`` its params); see :mod:`fungrad.nan_hunt`."""
    for i, v in enumerate(values):
        v = np.asarray(v)
        if dtypes.kind(v.dtype) not in "fc" or v.size == 0:
            continue
        for on, kind, test in (
            (config.debug_nans, "nan", np.isnan),
            (config.debug_infs, "inf", np.isinf),
        ):
            if not on:
                continue
            bad = test(v)
            if bad.any():
                from fungrad import nan_hunt

                src = source_info.current(2)  # the user's line (worked out only on failure)
                raise nan_hunt.primitive_error(where, values, i, kind, bad, inputs, src, params)


def _check_impl_avals(primitive, out, out_avals, params):
    outs = out if primitive.multiple_results else [out]
    avals = out_avals if primitive.multiple_results else [out_avals]
    if len(outs) != len(avals):
        raise AssertionError(
            f"{primitive}: impl gave {len(outs)} outputs, abstract_eval {len(avals)}"
        )
    for o, a in zip(outs, avals):
        if not isinstance(o, (np.ndarray, np.generic)):
            raise AssertionError(
                f"{primitive}: impl returned {type(o).__name__}, not a numpy value"
            )
        if tuple(o.shape) != a.shape or o.dtype != a.dtype:
            raise AssertionError(
                f"{primitive}[{params}]: impl gave {o.dtype}{list(o.shape)} but "
                f"abstract_eval says {a.str_short()}"
            )


def escaped_tracer_error(tracer, primitive=None) -> UnexpectedTracerError:
    what = f" as an input of {primitive}" if primitive is not None else ""
    return UnexpectedTracerError(
        f"Encountered a traced value {tracer!r}{what} outside the transformation that created "
        "it. A tracer escaped: it was stored in a global or attribute, or returned through a "
        "side channel, while a function was being transformed. Return it as an output "
        "instead, or pass it in as an argument."
    )


class _TraceState(threading.local):
    def __init__(self):
        self.trace: Trace = EvalTrace()


_state = _TraceState()


def current_trace() -> Trace:
    return _state.trace


class set_current_trace:  # noqa: N801  (used like a function: ``with set_current_trace(t):``)
    """Make ``trace`` current for the duration of the block (per thread). A small class rather
    than a generator-based context manager: every transformed primitive enters one."""

    __slots__ = ("trace", "prev")

    def __init__(self, trace: Trace):
        self.trace = trace

    def __enter__(self):
        self.prev = _state.trace
        _state.trace = self.trace

    def __exit__(self, *exc):
        _state.trace = self.prev
        return False


@contextmanager
def eval_context():
    """Run a block eagerly whatever transform is active (for concrete helper computations)."""
    with set_current_trace(EvalTrace()):
        yield


# ---------------------------------------------------------------------------------------------
# Evaluating and checking jaxprs


def eval_jaxpr(jaxpr: Jaxpr, consts: Sequence[Any], *args) -> list:
    """Evaluate ``jaxpr`` by binding each equation under the current trace."""
    from fungrad.array import Array

    if len(args) != len(jaxpr.invars):
        raise TypeError(f"eval_jaxpr: jaxpr takes {len(jaxpr.invars)} arguments, got {len(args)}")
    env: dict[Var, Any] = {}

    def read(v):
        if type(v) is Literal:
            return Array(v.val, v.aval.weak_type)
        return env[v]

    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    # Equations staged while an equation is re-bound here keep its source line.
    state = source_info._state
    prev = source_info.set_equation_source(sys._getframe(), state.info)
    outer = prev[1]
    try:
        for eqn in jaxpr.eqns:
            state.info = eqn.source_info or outer
            out = eqn.primitive.bind(*map(read, eqn.invars), **eqn.params)
            if eqn.primitive.multiple_results:
                env.update(zip(eqn.outvars, out))
            else:
                env[eqn.outvars[0]] = out
    finally:
        source_info.restore(prev)
    return [read(v) for v in jaxpr.outvars]


def typecheck_jaxpr(jaxpr: Jaxpr) -> None:
    """Raise JaxprTypeError unless every variable is bound once before use and every
    equation's output avals are what its primitive's abstract_eval gives for its inputs."""
    from fungrad.pretty import pp_eqn

    bound: set[Var] = set()

    def bind_var(v, where):
        if type(v) is not Var:
            raise JaxprTypeError(f"{where}: expected a Var, got {v!r}")
        if v in bound:
            raise JaxprTypeError(f"{where}: variable {v!r} is bound twice")
        bound.add(v)

    for v in jaxpr.constvars:
        bind_var(v, "constvars")
    for v in jaxpr.invars:
        bind_var(v, "invars")
    for i, eqn in enumerate(jaxpr.eqns):
        for x in eqn.invars:
            if type(x) is Var and x not in bound:
                raise JaxprTypeError(
                    f"equation {i} ({pp_eqn(eqn)}): input {x!r} is used before it is defined"
                )
            if type(x) not in (Var, Literal):
                raise JaxprTypeError(f"equation {i}: input {x!r} is not a Var or Literal")
        try:
            out = eqn.primitive.abstract_eval(*[x.aval for x in eqn.invars], **eqn.params)
        except (TypeError, ValueError) as e:
            raise JaxprTypeError(f"equation {i} ({pp_eqn(eqn)}) is ill-typed: {e}") from e
        out_avals = out if eqn.primitive.multiple_results else [out]
        if len(out_avals) != len(eqn.outvars):
            raise JaxprTypeError(
                f"equation {i} ({pp_eqn(eqn)}): {eqn.primitive} produces "
                f"{len(out_avals)} outputs, the equation binds "
                f"{len(eqn.outvars)}"
            )
        for v, a in zip(eqn.outvars, out_avals):
            if v.aval.strip_weak_type() != a.strip_weak_type():
                raise JaxprTypeError(
                    f"equation {i} ({pp_eqn(eqn)}): output {v!r} is declared "
                    f"{v.aval.str_short()} but {eqn.primitive} gives "
                    f"{a.str_short()}"
                )
            bind_var(v, f"equation {i}")
    for v in jaxpr.outvars:
        if type(v) is Var and v not in bound:
            raise JaxprTypeError(f"output {v!r} is never defined")
