"""The complex split: a complex program rewritten into a program of real values.

Neither the kernel IR, the fusion planner nor the backends know complex numbers. A program
with complex values is rewritten, before compilation, so that every complex value becomes a
pair of real values of the real dtype of the same precision (complex64 -> two float32 arrays,
"planar" layout): ``Pair(re, im)``. Complex arithmetic then becomes ordinary real
elementwise code, which fuses like any other, and both backends run it unchanged (complex64 on
the GPU too; complex128 meets the GPU's float64 error).

The pass walks the jaxpr and, for each equation with a complex operand or result, calls the
primitive's *split rule* (:data:`SPLIT_RULES`, :func:`register_split_rule`):
``rule(*args, **params)`` gets a :class:`Pair` of real values for each complex operand and the
value itself for a real one, and returns the list of its outputs in the same form. Rules are
written with ``fungrad.lax`` operations (or this module's small helpers, which bind the same
primitives): while a rule runs, the current trace is the pass's own ``_SplitTrace``, which
appends each bound primitive to the real jaxpr being built. Equations without complex values
(and without sub-jaxprs holding any) are copied as they are. Control flow (``cond``,
``while``, ``scan``) and call primitives are split recursively: a complex carry or operand of
a sub-jaxpr becomes two adjacent real ones. A complex operand of a primitive with no rule is a
:class:`~fungrad.lowering.fusion.LoweringError` naming it (such programs still run eagerly).
The rules themselves live in ``complex_rules.py``; primitives defined elsewhere register theirs
here (``lax/fft.py``).

At the boundary (:func:`split_program`), a complex input enters as a real array ``[..., 2]``
(its numpy value viewed as the real dtype, no copy) that the program slices into planes, and
a complex output leaves interleaved the same way, written by ``complex_interleave`` (a
compiler-internal primitive: one loop nest storing both parts of each element; where the two
planes are the slices of one ``[..., 2]`` array, as after an FFT step or for an argument
returned as it is, ``ir/passes.py`` replaces it by that array, so nothing is copied);
:class:`SplitExecutable` wraps the real executable of either backend and does the viewing, in
one place (a GPU result stays on the device as a complex GpuArray). ``compile_jaxpr`` applies
all this only when a program has a complex value (:func:`has_complex`): real programs are
compiled exactly as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from fungrad import core, dtypes
from fungrad.array import Array, is_concrete_array
from fungrad.core import ShapedArray
from fungrad.devices import GpuArray
from fungrad.lowering import fusion, kernel
from fungrad.lowering.fusion import LoweringError

__all__ = [
    "Pair",
    "SPLIT_RULES",
    "SplitExecutable",
    "has_complex",
    "has_split_rule",
    "register_split_rule",
    "removed_by_split",
    "split_closed",
    "split_program",
    "split_rule",
]


class Pair(NamedTuple):
    """A complex value as its real and imaginary parts: two real values of one shape."""

    re: Any
    im: Any


#: primitive -> split rule ``rule(*args, **params) -> list`` (see the module docstring)
SPLIT_RULES: dict[core.Primitive, Callable] = {}

#: names of the primitives every equation of which has a complex operand or result (``real``,
#: ``imag``, ``complex``, ``conj``; ``register_split_rule(..., complex_only=True)`` adds more):
#: the split rewrites all of them, so they need no kernel lowering
_COMPLEX_ONLY = {"real", "imag", "complex", "conj"}

#: the rules of ``complex_rules.py``, by primitive name (installed into SPLIT_RULES on use)
_BUILTIN: dict[str, Callable] = {}
_installed = [0]


def register_split_rule(prim, rule=None, *, complex_only: bool = False):
    """Register ``rule`` as the split rule of ``prim`` (a Primitive; usable as a decorator).
    ``complex_only``: every equation of ``prim`` has a complex operand or result, so compiled
    programs never hold it and it needs no kernel lowering (see :func:`removed_by_split`)."""
    if rule is None:
        return lambda r: register_split_rule(prim, r, complex_only=complex_only)
    SPLIT_RULES[prim] = rule
    if complex_only:
        _COMPLEX_ONLY.add(prim.name)
    return rule


def _install_builtin() -> None:
    """Enter the built-in rules of the primitives registered so far (rules a module
    registered itself are kept)."""
    if _installed[0] == len(core.primitives):
        return
    from fungrad.lowering import complex_rules  # noqa: F401  (fills _BUILTIN)

    for name, rule in _BUILTIN.items():
        prim = core.primitives.get(name)
        if prim is not None:
            SPLIT_RULES.setdefault(prim, rule)
    _installed[0] = len(core.primitives)


def split_rule(prim: core.Primitive) -> Callable | None:
    """The split rule of ``prim``, or None."""
    _install_builtin()
    return SPLIT_RULES.get(prim)


def has_split_rule(prim: core.Primitive) -> bool:
    """Whether programs with complex operands of ``prim`` compile (a split rule exists)."""
    return split_rule(prim) is not None


def removed_by_split(prim: core.Primitive) -> bool:
    """Whether the split rewrites every equation of ``prim`` (it only has complex values on
    one side), so that ``prim`` needs no kernel lowering."""
    return prim.name in _COMPLEX_ONLY and has_split_rule(prim)


# ---------------------------------------------------------------------------------------------
# Finding complex values


def _is_complex_aval(aval) -> bool:
    dt = getattr(aval, "dtype", None)
    return dt is not None and np.dtype(dt).kind == "c"


def _sub_jaxprs(params: dict):
    for v in params.values():
        for x in v if type(v) in (tuple, list) else (v,):
            if type(x) is core.ClosedJaxpr:
                yield x.jaxpr
            elif type(x) is core.Jaxpr:
                yield x


def _jaxpr_has_complex(jaxpr: core.Jaxpr, memo: dict) -> bool:
    hit = memo.get(id(jaxpr))
    if hit is not None:
        return hit
    found = any(_is_complex_aval(v.aval) for v in jaxpr.invars) or any(
        _is_complex_aval(v.aval) for v in jaxpr.constvars
    )
    if not found:
        for eqn in jaxpr.eqns:
            if (
                any(_is_complex_aval(v.aval) for v in eqn.outvars)
                or any(type(x) is core.Literal and _is_complex_aval(x.aval) for x in eqn.invars)
                or (
                    eqn.params and any(_jaxpr_has_complex(j, memo) for j in _sub_jaxprs(eqn.params))
                )
            ):
                found = True
                break
    if not found:
        found = any(type(v) is core.Literal and _is_complex_aval(v.aval) for v in jaxpr.outvars)
    memo[id(jaxpr)] = found
    return found


def has_complex(closed: core.ClosedJaxpr) -> bool:
    """Whether ``closed`` (or a jaxpr inside it) has a complex value: one pass over its
    equations, so that compiling a real program costs next to nothing more."""
    return _jaxpr_has_complex(closed.jaxpr, {})


# ---------------------------------------------------------------------------------------------
# The trace that builds the real jaxpr


class _Value(core.Tracer):
    """A real value of the jaxpr being built: a Var or a Literal of it."""

    __slots__ = ("atom",)

    def __init__(self, trace: _SplitTrace, atom):
        self._trace = trace
        self.atom = atom

    @property
    def aval(self) -> ShapedArray:
        return self.atom.aval

    def to_concrete_value(self):
        return self.atom.val if type(self.atom) is core.Literal else None


class _SplitTrace(core.Trace):
    """Appends every primitive bound under it to one jaxpr (``eqns``); concrete operands
    (Arrays, numpy values, Python scalars) become literals (0-d) or constvars."""

    def __init__(self, parent):
        self.parent = parent
        self.eqns: list[core.JaxprEqn] = []
        self.constvars: list[core.Var] = []
        self.consts: list = []
        self.source = None  # the source line of the equation being split now

    def value(self, atom) -> _Value:
        return _Value(self, atom)

    def const(self, value) -> _Value:
        """A concrete value as an operand: a Literal when 0-d, else a constvar."""
        if is_concrete_array(value):
            aval = value.aval
            value = value._value
        else:
            aval = core.get_aval(value)
            value = np.asarray(value, dtype=dtypes.canonicalize_dtype(aval.dtype))
            aval = ShapedArray(aval.shape, value.dtype, aval.weak_type)
        if not aval.shape:
            return self.value(core.Literal(np.asarray(value, aval.dtype)[()], aval))
        v = core.Var(aval)
        self.constvars.append(v)
        self.consts.append(value)
        return self.value(v)

    def atom(self, x):
        if isinstance(x, core.Tracer):
            if type(x) is _Value and x._trace is self:
                return x.atom
            raise LoweringError(
                f"complex split: a value of another trace ({x!r}) reached a split rule; a rule "
                "must compute only with its operands and constants"
            )
        return self.const(x).atom

    def process_primitive(self, primitive, args, params):
        atoms = [self.atom(a) for a in args]
        out = core.cached_abstract_eval(primitive, tuple(a.aval for a in atoms), params)
        outs = out if primitive.multiple_results else [out]
        outvars = [core.Var(a) for a in outs]
        self.eqns.append(core.JaxprEqn(primitive, atoms, params, outvars, self.source))
        vals = [_Value(self, v) for v in outvars]
        return vals if primitive.multiple_results else vals[0]


def current_trace() -> _SplitTrace:
    """The trace of the jaxpr being built (valid while a split rule runs)."""
    t = core.current_trace()
    if type(t) is not _SplitTrace:
        raise LoweringError("complex split: a split helper was called outside the pass")
    return t


def constant(value, dtype) -> _Value:
    """A 0-d constant of ``dtype`` in the jaxpr being built (a weakly typed literal)."""
    dt = np.dtype(dtype)
    return current_trace().value(core.Literal(dt.type(value), ShapedArray((), dt, True)))


# ---------------------------------------------------------------------------------------------
# The pass


def _real_aval(aval: ShapedArray) -> ShapedArray:
    return ShapedArray(aval.shape, dtypes.real_dtype(aval.dtype), aval.weak_type)


def flatten(values) -> list:
    """``values`` with each :class:`Pair` replaced by its two parts (the order sub-jaxprs
    take them in)."""
    out = []
    for v in values:
        if type(v) is Pair:
            out += [v.re, v.im]
        else:
            out.append(v)
    return out


def unflatten(values, avals) -> list:
    """The inverse of :func:`flatten` for values of ``avals`` (complex avals take two)."""
    it = iter(values)
    return [Pair(next(it), next(it)) if _is_complex_aval(a) else next(it) for a in avals]


class _Pass:
    """One application of the split to a program: sub-jaxprs are split once each (memo)."""

    def __init__(self):
        self.memo: dict[int, tuple[core.ClosedJaxpr, core.ClosedJaxpr]] = {}
        self.has_complex_memo: dict = {}

    def closed(self, closed: core.ClosedJaxpr) -> core.ClosedJaxpr:
        hit = self.memo.get(id(closed))
        if hit is not None:
            return hit[1]
        if not _jaxpr_has_complex(closed.jaxpr, self.has_complex_memo):
            out = closed
        else:
            out = self.build(closed, interleaved=False)
        self.memo[id(closed)] = (closed, out)
        return out

    def build(self, closed: core.ClosedJaxpr, interleaved: bool) -> core.ClosedJaxpr:
        """The split of ``closed``: complex invars/outvars as two real ones each, or (at the
        program's boundary, ``interleaved``) as one real ``[..., 2]`` array each."""
        j = closed.jaxpr
        trace = _SplitTrace(core.current_trace())
        with core.set_current_trace(trace):
            env: dict = {}
            invars = []
            for v in j.invars:
                if not _is_complex_aval(v.aval):
                    invars.append(v)
                    env[v] = trace.value(v)
                    continue
                ra = _real_aval(v.aval)
                if interleaved:
                    x = core.Var(ShapedArray(v.aval.shape + (2,), ra.dtype, ra.weak_type))
                    invars.append(x)
                    env[v] = _planes(trace.value(x))
                else:
                    re, im = core.Var(ra), core.Var(ra)
                    invars += [re, im]
                    env[v] = Pair(trace.value(re), trace.value(im))
            for v, c in zip(j.constvars, closed.consts):
                if not _is_complex_aval(v.aval):
                    trace.constvars.append(v)
                    trace.consts.append(c)
                    env[v] = trace.value(v)
                    continue
                c = np.asarray(c._value if is_concrete_array(c) else c)
                if isinstance(c, core.Tracer):
                    raise LoweringError("complex split: a traced constant cannot be compiled")
                env[v] = Pair(trace.const(np.real(c).copy()), trace.const(np.imag(c).copy()))
            self.eqns(j.eqns, env, trace)
            outs = [_read(env, v, trace) for v in j.outvars]
            outvars = []
            for v, x in zip(j.outvars, outs):
                if _is_complex_aval(v.aval):
                    ra = _real_aval(v.aval)
                    re, im = (_fit(p, ra) for p in x)
                    if interleaved:
                        outvars.append(trace.atom(_interleave(re, im)))
                    else:
                        outvars += [trace.atom(re), trace.atom(im)]
                else:
                    outvars.append(trace.atom(_fit(x, v.aval)))
        jaxpr = core.Jaxpr(trace.constvars, invars, trace.eqns, outvars)
        return core.ClosedJaxpr(jaxpr, trace.consts)

    def eqns(self, eqns, env: dict, trace: _SplitTrace) -> None:
        """Split ``eqns`` into ``trace``, reading and writing values in ``env``. The
        equations a split rule adds keep the source line of the equation they replace."""
        outer = trace.source
        try:
            for eqn in eqns:
                args = [_read(env, x, trace) for x in eqn.invars]
                if not self.needs_split(eqn, args):
                    atoms = [trace.atom(a) for a in args]
                    trace.eqns.append(eqn.replace(invars=atoms))
                    for v in eqn.outvars:
                        env[v] = trace.value(v)
                    continue
                rule = split_rule(eqn.primitive)
                if rule is None:
                    raise LoweringError(_no_rule_message(eqn))
                trace.source = eqn.source_info or outer
                outs = rule(*args, **eqn.params)
                outs = _normalize(eqn, outs)
                for v, x in zip(eqn.outvars, outs):
                    env[v] = x
        finally:
            trace.source = outer

    def needs_split(self, eqn: core.JaxprEqn, args) -> bool:
        if any(type(a) is Pair for a in args):
            return True
        if any(_is_complex_aval(v.aval) for v in eqn.outvars):
            return True
        return bool(eqn.params) and any(
            _jaxpr_has_complex(sub, self.has_complex_memo) for sub in _sub_jaxprs(eqn.params)
        )

    def inline(self, closed: core.ClosedJaxpr, args) -> list:
        """Evaluate ``closed`` on ``args`` (real values and Pairs) into the current jaxpr:
        the split of a call."""
        trace = current_trace()
        j = closed.jaxpr
        env: dict = {}
        for v, c in zip(j.constvars, closed.consts):
            if _is_complex_aval(v.aval):
                c = np.asarray(c._value if is_concrete_array(c) else c)
                env[v] = Pair(trace.const(np.real(c).copy()), trace.const(np.imag(c).copy()))
            else:
                env[v] = trace.const(c) if not isinstance(c, core.Tracer) else trace.atom(c)
        env.update(zip(j.invars, args))
        eqns, rename = _fresh_eqns(j.eqns)
        self.eqns(eqns, env, trace)
        return [
            _read(env, rename.get(v, v) if type(v) is core.Var else v, trace) for v in j.outvars
        ]


_state = threading.local()  # the pass running on this thread (compiles may run concurrently)


def _current_pass() -> _Pass:
    p = getattr(_state, "active", None)
    if p is None:
        raise LoweringError("complex split: a split rule for control flow ran outside the pass")
    return p


def split_closed(closed: core.ClosedJaxpr) -> core.ClosedJaxpr:
    """The split of a sub-jaxpr (for the rules of primitives holding jaxprs): each complex
    input and output becomes two adjacent real ones (see :func:`flatten`); a jaxpr without
    complex values is returned as it is."""
    return _current_pass().closed(closed)


def inline_closed(closed: core.ClosedJaxpr, args) -> list:
    """``closed`` applied to ``args`` (real values and Pairs), its equations split into the
    jaxpr being built; returns its outputs (Pairs for complex ones)."""
    return _current_pass().inline(closed, args)


def split_program(closed: core.ClosedJaxpr) -> core.ClosedJaxpr:
    """The real program computing ``closed``: each complex input is a real array with one more
    trailing axis of 2 (real and imaginary parts) and each complex output is returned so."""
    p = _Pass()
    saved = getattr(_state, "active", None)
    _state.active = p
    try:
        return p.build(closed, interleaved=True)
    finally:
        _state.active = saved


def _fresh_eqns(eqns):
    """Equations with new outvars (a body inlined twice must bind new Vars each time), and
    the renaming of the old ones."""
    rename: dict = {}
    out = []
    for e in eqns:
        invars = [rename.get(x, x) if type(x) is core.Var else x for x in e.invars]
        outvars = [core.Var(v.aval) for v in e.outvars]
        rename.update(zip(e.outvars, outvars))
        out.append(e.replace(invars=invars, outvars=outvars))
    return out, rename


def _read(env: dict, x, trace: _SplitTrace):
    if type(x) is core.Literal:
        if _is_complex_aval(x.aval):
            ra = _real_aval(x.aval)
            val = np.asarray(x.val, x.aval.dtype)
            return Pair(
                trace.value(core.Literal(ra.dtype.type(val.real), ra)),
                trace.value(core.Literal(ra.dtype.type(val.imag), ra)),
            )
        return trace.value(x)
    v = env.get(x)
    if v is None:
        raise LoweringError(f"complex split: the variable {x!r} is used before it is defined")
    return v


def _fit(x, aval: ShapedArray):
    """``x`` as a value of ``aval``: a 0-d value broadcast to its shape, a weak type matched."""
    if type(x) is Pair:
        raise LoweringError(
            f"complex split: a rule returned a complex pair where a {aval.str_short()} value "
            "was expected"
        )
    have = x.aval
    if have.shape != aval.shape:
        if have.shape:
            raise LoweringError(
                f"complex split: a rule returned {have.str_short()} where "
                f"{aval.str_short()} was expected"
            )
        x = _bind("broadcast_in_dim", x, shape=aval.shape, broadcast_dimensions=())
    if x.aval.dtype != aval.dtype or x.aval.weak_type != aval.weak_type:
        x = _bind("convert_element_type", x, new_dtype=aval.dtype, weak_type=aval.weak_type)
    return x


def _normalize(eqn: core.JaxprEqn, outs) -> list:
    """A rule's result as one value per outvar, each of the outvar's shape: a Pair for a
    complex outvar. A single-result rule may return its value (or ``(re, im)``) unlisted."""
    n = len(eqn.outvars)
    if n == 1 and not eqn.primitive.multiple_results:
        if type(outs) is Pair or isinstance(outs, core.Tracer) or is_concrete_array(outs):
            outs = [outs]
        elif isinstance(outs, (list, tuple)) and len(outs) == 2:
            outs = [Pair(*outs)]
    outs = list(outs)
    if len(outs) != n:
        raise LoweringError(
            f"complex split: the rule of {eqn.primitive} returned {len(outs)} values for "
            f"{n} outputs"
        )
    res = []
    for v, x in zip(eqn.outvars, outs):
        if _is_complex_aval(v.aval):
            if type(x) is not Pair:
                if isinstance(x, tuple) and len(x) == 2:
                    x = Pair(*x)
                else:
                    raise LoweringError(
                        f"complex split: the rule of {eqn.primitive} returned a real value "
                        f"for its complex output {v.aval.str_short()}"
                    )
            ra = _real_aval(v.aval)
            res.append(Pair(_fit(_as_value(x.re), ra), _fit(_as_value(x.im), ra)))
        else:
            res.append(_fit(_as_value(x), v.aval))
    return res


def _as_value(x):
    if type(x) is _Value:
        return x
    return current_trace().const(x)


def _no_rule_message(eqn: core.JaxprEqn) -> str:
    ins = ", ".join(x.aval.str_short() for x in eqn.invars)
    outs = ", ".join(v.aval.str_short() for v in eqn.outvars)
    return (
        f"jit: the primitive {eqn.primitive.name} has no complex lowering yet (operands "
        f"{ins or 'none'}; results {outs or 'none'}), so a jitted function applying it to "
        "complex values cannot be compiled; it works eagerly: call the function without jit "
        "(or under fungrad.disable_jit())"
    )


def _bind(prim_name: str, /, *args, **params):
    return core.primitives[prim_name].bind(*args, **params)


def _planes(x) -> Pair:
    """The real and imaginary planes of a real ``[..., 2]`` value."""
    shape = x.aval.shape[:-1]
    nd = len(shape)

    def plane(k):
        s = _bind(
            "slice",
            x,
            start_indices=(0,) * nd + (k,),
            limit_indices=shape + (k + 1,),
            strides=None,
        )
        return _bind("reshape", s, new_sizes=shape, dimensions=None)

    return Pair(plane(0), plane(1))


def _interleave(re, im):
    """Two real planes as one ``[..., 2]`` value (:data:`interleave_p`)."""
    return interleave_p.bind(re, im)


def _interleave_abstract_eval(re, im):
    if re.shape != im.shape or re.dtype != im.dtype:
        raise TypeError(
            f"complex_interleave: the planes must have one shape and dtype, got "
            f"{re.str_short()} and {im.str_short()}"
        )
    return ShapedArray(re.shape + (2,), re.dtype, re.weak_type and im.weak_type)


def _interleave_lowering(ctx, re, im):
    # One loop nest over the planes' shape storing both parts of each element next to each
    # other: written as a concatenate, each output element would select between the two
    # parts, computing both (and LLVM would not vectorise the loop of 2), 6-13x slower for
    # exp or log of complex64.
    shape = re.shape
    planner = ctx.planner
    out = planner.new_buffer(shape + (2,), re.dtype, "temp")

    def stores(idx):
        at = ctx.imul(ctx.flat_index(idx, shape), ctx.iconst(2))
        return [
            fusion.Store(out, at, re.at(idx)),
            fusion.Store(out, ctx.iadd(at, ctx.iconst(1)), im.at(idx)),
        ]

    planner.add_kernel("interleave", shape, stores, origin="complex")
    return planner.buffer_tensor(out, "complex")


#: ``complex_interleave(re, im)``: ``[..., 2]`` with ``re`` and ``im`` side by side. It exists
#: only inside the compiler (the outputs of split programs), so it is kept out of
#: ``core.primitives``, the registry of the primitives user programs bind.
interleave_p = core.Primitive("complex_interleave")
del core.primitives["complex_interleave"]
interleave_p.impl = lambda re, im: np.stack([re, im], axis=-1)
interleave_p.abstract_eval = _interleave_abstract_eval
kernel.register_lowering(interleave_p, _interleave_lowering)


# ---------------------------------------------------------------------------------------------
# The executable


def _planar_input(x, real_dtype, planar_shape):
    """A complex argument as the real ``[..., 2]`` value the split program takes: a view of
    its memory (a GPU array keeps its device buffer)."""
    v = x._value if type(x) is Array else x
    if type(v) is np.ndarray and v.flags.c_contiguous and v.ndim and v.dtype.kind == "c":
        if v.dtype.itemsize == 2 * real_dtype.itemsize:  # the common case: views only
            return v.view(real_dtype).reshape(planar_shape)
    if isinstance(x, GpuArray):
        return GpuArray(x._dbuf, ShapedArray(planar_shape, real_dtype), x.aval.weak_type)
    v = np.ascontiguousarray(
        x._value if is_concrete_array(x) else x, dtype=dtypes.complex_dtype(real_dtype)
    )
    return v.reshape(-1).view(real_dtype).reshape(planar_shape)


def _complex_output(out, aval: ShapedArray):
    """A ``[..., 2]`` real output as the complex Array of ``aval`` (a view; a GPU output stays
    on the device)."""
    if type(out) is not Array and isinstance(out, GpuArray):
        return _ComplexGpuArray(out._dbuf, aval, aval.weak_type)
    v = out._value
    v = v.view(aval.dtype) if v.ndim > 1 else v.reshape(1, 2).view(aval.dtype)
    r = Array(v.reshape(aval.shape), aval.weak_type)
    r._aval = aval
    return r


class _ComplexGpuArray(GpuArray):
    """A complex GpuArray: its device buffer holds (re, im) pairs of real values."""

    __slots__ = ()

    @property
    def _value(self):
        host = self._host
        if host is None:
            if self._dbuf is None:
                return GpuArray._value.fget(self)  # deleted: the usual error value
            aval = self._aval
            planar = GpuArray(
                self._dbuf, ShapedArray(aval.shape + (2,), dtypes.real_dtype(aval.dtype))
            )._value
            host = planar.reshape(-1).view(aval.dtype).reshape(aval.shape)
            if not aval.shape:
                host = host[()]
            self._host = host
        return host


def _check_gpu_dtypes(jaxpr: core.Jaxpr, name: str) -> None:
    """TypeError for complex128 values on the GPU (WGSL has no float64 for their parts)."""
    for v in [*jaxpr.invars, *jaxpr.outvars, *(x for e in jaxpr.eqns for x in e.outvars)]:
        aval = getattr(v, "aval", None)
        if aval is not None and aval.dtype == np.complex128:
            raise TypeError(
                f"jit({name}, backend='gpu'): the program has complex128 values "
                f"({aval.str_short()}), but WGSL has only 32-bit floats for their parts: use "
                "complex64 (turn enable_x64 off, or astype(complex64)), or backend='cpu'"
            )
    for e in jaxpr.eqns:
        for sub in _sub_jaxprs(e.params):
            _check_gpu_dtypes(sub, name)


class SplitExecutable:
    """The executable of a complex program: the backend's executable of its split
    (:func:`split_program`), called with complex arguments viewed as real ``[..., 2]`` arrays
    and returning its ``[..., 2]`` outputs viewed as complex. Other attributes (``program``,
    ``ir``, ``shaders``...) are the real executable's."""

    def __init__(
        self, closed: core.ClosedJaxpr, compile_real, name: str = "main", backend: str = "cpu"
    ):
        self.name = name
        self.in_avals = list(closed.in_avals)
        self.out_avals = list(closed.out_avals)
        if backend == "gpu":
            _check_gpu_dtypes(closed.jaxpr, name)
        self.split_jaxpr = split_program(closed)
        self.executable = compile_real(self.split_jaxpr, name)
        self._in = tuple(
            (dtypes.real_dtype(a.dtype), a.shape + (2,)) if _is_complex_aval(a) else None
            for a in self.in_avals
        )
        self._out = tuple(a if _is_complex_aval(a) else None for a in self.out_avals)
        self.compile_time_s = getattr(self.executable, "compile_time_s", None)

    def call(self, args) -> list:
        """Run on ``args`` (with ``in_avals``); returns the outputs as Arrays."""
        real = [x if c is None else _planar_input(x, *c) for x, c in zip(args, self._in)]
        outs = self.executable.call(real)
        return [o if a is None else _complex_output(o, a) for o, a in zip(outs, self._out)]

    def as_text(self) -> str:
        return (
            "# complex values split into (real, imaginary) pairs of "
            "real values (lowering/complex_split.py)\n" + self.executable.as_text()
        )

    def __getattr__(self, name):
        if name == "executable":
            raise AttributeError(name)
        return getattr(self.executable, name)
