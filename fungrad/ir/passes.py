"""Jaxpr-to-jaxpr passes. Primitives are pure, so every rewrite here is valid wherever it applies,
except for the few with side effects (callbacks, :data:`effectful_primitives`), which DCE and
CSE keep as they are.

Cleanup passes (used by tracing and partial evaluation too):

* :func:`dce` drops equations whose outputs are never used;
* :func:`cse` merges equations that apply the same primitive, with the same params, to the
  same inputs (params are compared by value; sub-jaxpr params by identity);
* :func:`simplify` is CSE then DCE, applied to a ClosedJaxpr (unused constvars dropped too).

Compiler passes (on ClosedJaxprs; each also rewrites the ClosedJaxpr params of control flow,
``cond`` branches and ``while``/``scan`` bodies, keeping them closed and their signatures
unchanged; a shared sub-jaxpr is rewritten once and stays shared):

* :func:`inline_calls` replaces ``jit``, ``checkpoint``, ``custom_jvp_call`` and
  ``custom_vjp_call`` equations by their bodies;
* :func:`fold_constants` evaluates equations on constant inputs at compile time;
* :func:`simplify_algebra` applies identities that are exact in IEEE arithmetic;
* :func:`optimize` is the pipeline ``fungrad.lowering`` runs before fusion.

The compiler passes are for *evaluating* a program: inlining drops custom differentiation
rules and checkpoint policies, and ``stop_gradient`` becomes the identity, so a jaxpr that
will be differentiated again must not go through them.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from fungrad import core, dtypes, float_normalization
from fungrad.array import Array

# ---------------------------------------------------------------------------------------------
# Effects: equations that must run even when nothing reads their outputs

effectful_primitives: set = set()
"""Primitives with side effects (``debug_callback``, ``io_callback``): their equations are
never dropped by DCE nor merged by CSE, and neither is an equation whose sub-jaxprs (a ``jit``
body, a loop body, a branch) hold one. ``pure_callback`` is not here: JAX may drop or merge
it like any pure computation."""


def sub_jaxprs(eqn: core.JaxprEqn):
    """The jaxprs in ``eqn``'s params (a loop's body, a cond's branches, a call's body)."""
    for v in eqn.params.values():
        for x in v if type(v) is tuple else (v,):
            if type(x) is core.ClosedJaxpr:
                x = x.jaxpr
            if type(x) is core.Jaxpr:
                yield x


def has_effects(eqn: core.JaxprEqn) -> bool:
    """Whether ``eqn`` has a side effect: an effectful primitive, or one in a sub-jaxpr."""
    if not effectful_primitives:  # (no callback module imported: nothing is effectful)
        return False
    if eqn.primitive in effectful_primitives:
        return True
    return any(jaxpr_has_effects(x) for x in sub_jaxprs(eqn))


def jaxpr_has_effects(jaxpr: core.Jaxpr) -> bool:
    """Whether any equation of ``jaxpr`` (or of its sub-jaxprs) has a side effect."""
    return bool(effectful_primitives) and any(has_effects(e) for e in jaxpr.eqns)


# ---------------------------------------------------------------------------------------------
# Cleanup: DCE, CSE


def dce(jaxpr: core.Jaxpr) -> core.Jaxpr:
    """Drop equations none of whose outputs is used (transitively) by the jaxpr's outputs,
    unless they have side effects (:func:`has_effects`)."""
    return _dce(jaxpr, None)


def _dce(jaxpr: core.Jaxpr, run: _Run | None) -> core.Jaxpr:
    live = {v for v in jaxpr.outvars if type(v) is core.Var}
    kept = []
    effects = bool(effectful_primitives)
    for eqn in reversed(jaxpr.eqns):
        if any(v in live for v in eqn.outvars) or effects and has_effects(eqn):
            if run is not None:
                eqn = run.rewrite_params(eqn)
            kept.append(eqn)
            live.update(v for v in eqn.invars if type(v) is core.Var)
    kept.reverse()
    if run is not None:
        if len(kept) == len(jaxpr.eqns) and all(a is b for a, b in zip(kept, jaxpr.eqns)):
            return jaxpr
        run.changed |= len(kept) != len(jaxpr.eqns)
    return core.Jaxpr(jaxpr.constvars, jaxpr.invars, kept, jaxpr.outvars)


def _key_of(x):
    if type(x) is core.Literal:
        # By bit pattern: 0.0 and -0.0 are different literals (x + 0.0 is not x + -0.0), and a
        # NaN literal equals itself.
        return ("lit", x.aval, np.asarray(x.val, dtype=x.aval.dtype).tobytes())
    return x


def _params_key(params: dict):
    items = []
    for k, v in sorted(params.items()):
        try:
            hash(v)
        except TypeError:
            return None  # unhashable params: never merged
        items.append((k, v))
    return tuple(items)


def cse(jaxpr: core.Jaxpr) -> core.Jaxpr:
    """Merge repeated equations (same primitive, params and inputs), except side effects and
    :data:`COLLECTIVES` (``psum(x) + psum(a)`` with ``a`` being ``x`` on one rank only must
    stay two allreduces there, as on the other ranks)."""
    return _cse(jaxpr, None)


def _cse(jaxpr: core.Jaxpr, run: _Run | None) -> core.Jaxpr:
    seen: dict = {}
    rename: dict[core.Var, core.Var] = {}
    effects = bool(effectful_primitives)

    def rn(x):
        return rename.get(x, x) if type(x) is core.Var else x

    eqns = []
    for eqn in jaxpr.eqns:
        if run is not None:
            eqn = run.rewrite_params(eqn)
        invars = [rn(x) for x in eqn.invars]
        pkey = _params_key(eqn.params)
        if pkey is not None and effects and has_effects(eqn):
            pkey = None  # two prints of one value are two prints
        if eqn.primitive.name in COLLECTIVES:
            pkey = None  # two collectives are two: another rank's operands may differ
        key = None if pkey is None else (eqn.primitive, tuple(map(_key_of, invars)), pkey)
        if key is not None and key in seen:
            for old, new in zip(eqn.outvars, seen[key]):
                rename[old] = new
            continue
        if key is not None:
            seen[key] = eqn.outvars
        eqns.append(eqn if invars == eqn.invars else eqn.replace(invars=invars))
    if run is not None:
        if len(eqns) == len(jaxpr.eqns) and all(a is b for a, b in zip(eqns, jaxpr.eqns)):
            return jaxpr
        run.changed |= len(eqns) != len(jaxpr.eqns)
    return core.Jaxpr(jaxpr.constvars, jaxpr.invars, eqns, [rn(v) for v in jaxpr.outvars])


def simplify(closed: core.ClosedJaxpr) -> core.ClosedJaxpr:
    """CSE + DCE; constvars no longer read are dropped with their values."""
    return drop_unused_consts(core.ClosedJaxpr(dce(cse(closed.jaxpr)), closed.consts))


def drop_unused_consts(closed: core.ClosedJaxpr) -> core.ClosedJaxpr:
    """``closed`` without the constvars (and values) that nothing reads."""
    j = closed.jaxpr
    used = {v for e in j.eqns for v in e.invars if type(v) is core.Var}
    used.update(v for v in j.outvars if type(v) is core.Var)
    keep = [i for i, v in enumerate(j.constvars) if v in used]
    return core.ClosedJaxpr(
        core.Jaxpr([j.constvars[i] for i in keep], j.invars, j.eqns, j.outvars),
        [closed.consts[i] for i in keep],
    )


# ---------------------------------------------------------------------------------------------
# Running a pass over a jaxpr and its sub-jaxprs


class _Run:
    """One application of a pass ``fn(closed, run) -> closed`` to a jaxpr and, through
    :meth:`rewrite_params`, to every ClosedJaxpr held in its equations' params. Sub-jaxprs are
    memoised by identity (a body shared by several equations is rewritten once and stays
    shared, so CSE can still merge those equations). ``fn`` returns its input unchanged when it
    has nothing to do and sets ``changed`` when it rewrote something."""

    def __init__(self, fn):
        self.fn = fn
        self.memo: dict[int, tuple[core.ClosedJaxpr, core.ClosedJaxpr]] = {}
        self.changed = False

    def __call__(self, closed: core.ClosedJaxpr) -> core.ClosedJaxpr:
        hit = self.memo.get(id(closed))
        if hit is not None:
            return hit[1]
        out = self.fn(closed, self)
        self.memo[id(closed)] = (closed, out)  # the key object is kept alive with its id
        return out

    def rewrite_params(self, eqn: core.JaxprEqn) -> core.JaxprEqn:
        """``eqn`` with the pass applied to its sub-jaxpr params (``eqn`` itself if none
        changed)."""
        if not eqn.params:
            return eqn
        new = None
        for k, v in eqn.params.items():
            if type(v) is core.ClosedJaxpr:
                nv = self(v)
            elif type(v) is tuple and v and all(type(x) is core.ClosedJaxpr for x in v):
                nv = tuple(map(self, v))
                if all(a is b for a, b in zip(nv, v)):
                    nv = v
            else:
                continue
            if nv is not v:
                new = dict(eqn.params) if new is None else new
                new[k] = nv
        if new is None:
            return eqn
        return eqn.replace(params=new)


def _closed_with_jaxpr(closed: core.ClosedJaxpr, jaxpr: core.Jaxpr) -> core.ClosedJaxpr:
    return closed if jaxpr is closed.jaxpr else core.ClosedJaxpr(jaxpr, closed.consts)


def _has_subjaxpr_or_function(params: dict) -> bool:
    for v in params.values():
        if isinstance(v, (core.Jaxpr, core.ClosedJaxpr)) or (
            callable(v) and not isinstance(v, (type, np.dtype))
        ):
            return True
        if type(v) is tuple and any(isinstance(x, (core.Jaxpr, core.ClosedJaxpr)) for x in v):
            return True
    return False


def _concrete_value(c, aval: core.ShapedArray):
    """The numpy value of a const (with ``aval``'s dtype), or None for a tracer."""
    if type(c) is Array:
        v = c._value
    elif isinstance(c, core.Tracer):
        return None
    else:
        v = c
    v = np.asarray(v)
    return v if v.dtype == aval.dtype else v.astype(aval.dtype)


def _literal(value, aval: core.ShapedArray) -> core.Literal:
    return core.Literal(np.asarray(value, dtype=aval.dtype)[()], aval)


# ---------------------------------------------------------------------------------------------
# inline_calls

_CALL_BODY_PARAM = {
    "jit": "jaxpr",
    "checkpoint": "jaxpr",
    "custom_jvp_call": "call_jaxpr",  # the primal; the jvp rule only matters to jvp
    "custom_vjp_call": "call_jaxpr",  # the primal; fwd/bwd only matter to vjp
}
"""Call-like primitives by name, with the param holding the ClosedJaxpr they evaluate on all
their operands. (``custom_lin`` is not here: it has no body, only the Python ``bwd`` that its
transpose calls, and it never survives into a primal program: transposition removes it, and
evaluating it is the "forward-mode of a custom_vjp" error.)"""


def inline_calls(closed: core.ClosedJaxpr) -> core.ClosedJaxpr:
    """Replace call-like equations (``jit``, ``checkpoint``, ``custom_jvp_call``,
    ``custom_vjp_call``) by their bodies, recursively; the bodies' consts become constvars of
    the result. ``cond``/``while``/``scan`` keep their bodies, with calls inside inlined too.

    The result computes the same values but has lost custom derivative rules and remat
    policies: inline for evaluation and compilation, not before differentiating.
    """
    return _Run(_inline_closed)(closed)


def _inline_closed(closed: core.ClosedJaxpr, run: _Run) -> core.ClosedJaxpr:
    j = closed.jaxpr
    constvars, consts = list(j.constvars), list(closed.consts)
    const_var_of = {id(c): v for v, c in zip(constvars, consts)}

    def add_const(value, aval: core.ShapedArray) -> core.Var:
        v = const_var_of.get(id(value))
        if v is None or v.aval != aval:
            v = core.Var(aval)
            const_var_of[id(value)] = v
            constvars.append(v)
            consts.append(value)
        return v

    subst: dict[core.Var, core.Var | core.Literal] = {}
    eqns: list[core.JaxprEqn] = []
    inlined = _inline_eqns(j.eqns, subst, False, eqns, run, add_const)
    if not inlined and len(eqns) == len(j.eqns) and all(a is b for a, b in zip(eqns, j.eqns)):
        return closed
    run.changed |= inlined
    outvars = [subst.get(v, v) if type(v) is core.Var else v for v in j.outvars]
    return core.ClosedJaxpr(core.Jaxpr(constvars, j.invars, eqns, outvars), consts)


def _inline_eqns(src, subst, fresh: bool, out: list, run: _Run, add_const) -> bool:
    """Append ``src`` to ``out`` with inputs renamed by ``subst`` and call equations replaced
    by their (recursively inlined) bodies. ``fresh``: give every output a new Var (a body can
    be inlined several times, and each Var must be bound once). Returns whether it inlined."""
    inlined = False
    for eqn in src:
        invars = [subst.get(x, x) if type(x) is core.Var else x for x in eqn.invars]
        body_param = _CALL_BODY_PARAM.get(eqn.primitive.name)
        body = eqn.params.get(body_param) if body_param else None
        if type(body) is core.ClosedJaxpr and len(body.jaxpr.invars) == len(invars):
            inlined = True
            bj = body.jaxpr
            inner: dict = {v: add_const(c, v.aval) for v, c in zip(bj.constvars, body.consts)}
            inner.update(zip(bj.invars, invars))
            _inline_eqns(bj.eqns, inner, True, out, run, add_const)
            for o, r in zip(eqn.outvars, bj.outvars):
                r = inner.get(r, r) if type(r) is core.Var else r
                subst[o] = _coerce(r, o.aval, out, eqn)
            continue
        eqn = run.rewrite_params(eqn)
        outvars = [core.Var(v.aval) for v in eqn.outvars] if fresh else eqn.outvars
        if fresh:
            subst.update(zip(eqn.outvars, outvars))
        if fresh or invars != eqn.invars:
            eqn = eqn.replace(invars=invars, outvars=outvars)
        out.append(eqn)
    return inlined


def _coerce(x, aval: core.ShapedArray, out: list, eqn: core.JaxprEqn):
    """``x`` as a value of ``aval``: itself, or converted when only the weak type differs
    (a call's declared output avals are its body's, so that is the most that can differ)."""
    if x.aval == aval:
        return x
    if x.aval.strip_weak_type() != aval.strip_weak_type():
        raise core.JaxprTypeError(
            f"inline_calls: {eqn.primitive} declares an output of type {aval.str_short()} but "
            f"its body returns {x.aval.str_short()}; the equation is ill-typed"
        )
    v = core.Var(aval)
    out.append(
        core.JaxprEqn(
            core.primitives["convert_element_type"],
            [x],
            dict(new_dtype=aval.dtype, weak_type=aval.weak_type),
            [v],
            eqn.source_info,
        )
    )
    return v


# ---------------------------------------------------------------------------------------------
# fold_constants

FOLD_MAX_ELEMENTS = 64
"""The largest output (in elements) that constant folding bakes into the program: larger
results stay computations, so a compiled program never carries big baked arrays."""

_EXACT_ELEMENTWISE = frozenset(
    {
        "add",
        "sub",
        "mul",
        "div",
        "rem",
        "neg",
        "sign",
        "floor",
        "ceil",
        "round",
        "abs",
        "max",
        "min",
        "nextafter",
        "square",
        "sqrt",
        "integer_pow",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "and",
        "or",
        "xor",
        "not",
        "shift_left",
        "shift_right_logical",
        "shift_right_arithmetic",
        "population_count",
        "clz",
        "select_n",
        "clamp",
        "convert_element_type",
        "stop_gradient",
        "is_finite",
    }
)
"""Elementwise primitives whose numpy impl computes every element by the same exactly
specified operations, so the result on a broadcast scalar is the broadcast of the result on
the scalar, bit for bit. (Transcendentals are left out: numpy's vectorised and scalar paths
may round differently.)"""


COLLECTIVES = frozenset(
    {"psum", "pmax", "pmin", "all_gather", "reduce_scatter", "all_to_all", "ppermute", "axis_index"}
)
"""The collectives (``fungrad/lax/parallel.py``): constant folding never evaluates them. A
collective left in a jaxpr is over a process axis (vmap consumes the others), so its impl
communicates (MPI): every rank must run the same sequence of collectives, and a rank whose
operands happen to be constants (while another's are not) must not run one at compile time."""


def fold_constants(closed: core.ClosedJaxpr) -> core.ClosedJaxpr:
    """Evaluate equations whose inputs are all constants (literals, consts, folded values) and
    whose outputs have at most ``FOLD_MAX_ELEMENTS`` elements with the primitive's numpy impl:
    a 0-d result becomes a Literal, an array whose elements are all equal a broadcast of a
    Literal, any other a const. Avals (dtype and weak type) are kept exactly.

    Exact elementwise ops on broadcast scalars (``broadcast_in_dim`` of a Literal) of any
    size are computed on the scalar and broadcast. Equations with sub-jaxprs or function params
    are never folded, nor are those without inputs (``iota``), nor broadcasts of a Literal
    themselves (a splat is already the cheapest form of a constant array), nor
    :data:`COLLECTIVES` (they communicate).
    """
    return _Run(_fold_closed)(closed)


def _fold_closed(closed: core.ClosedJaxpr, run: _Run) -> core.ClosedJaxpr:
    j = closed.jaxpr
    known: dict[core.Var, np.ndarray] = {}  # vars with a concrete value of <= 64 elements
    for v, c in zip(j.constvars, closed.consts):
        if v.aval.size <= FOLD_MAX_ELEMENTS:
            val = _concrete_value(c, v.aval)
            if val is not None:
                known[v] = val
    splat: dict[core.Var, np.generic] = {}  # var -> the scalar it is a broadcast of
    constvars, consts = list(j.constvars), list(closed.consts)
    new_const_of: dict = {}
    rename: dict[core.Var, core.Var | core.Literal] = {}
    eqns: list[core.JaxprEqn] = []
    changed = False

    def rn(x):
        return rename.get(x, x) if type(x) is core.Var else x

    def value_of(x):
        if type(x) is core.Literal:
            return x.val
        val = known.get(x)
        if val is None and x in splat and x.aval.size <= FOLD_MAX_ELEMENTS:
            val = np.full(x.aval.shape, splat[x], dtype=x.aval.dtype)
        return val

    def scalar_of(x):
        return x.val if type(x) is core.Literal else splat.get(x)

    def add_const(value: np.ndarray, aval: core.ShapedArray) -> core.Var:
        key = (aval, value.tobytes())
        v = new_const_of.get(key)
        if v is None:
            v = new_const_of[key] = core.Var(aval)
            constvars.append(v)
            consts.append(Array(value, aval.weak_type))
        return v

    for eqn in j.eqns:
        eqn = run.rewrite_params(eqn)
        invars = [rn(x) for x in eqn.invars]
        name = eqn.primitive.name
        if invars != eqn.invars:
            eqn = eqn.replace(invars=invars)
        if name == "broadcast_in_dim" and type(invars[0]) is core.Literal:
            splat[eqn.outvars[0]] = invars[0].val
            eqns.append(eqn)
            continue
        if (
            not invars
            or not all(type(x) is core.Literal or x in known or x in splat for x in invars)
            or _has_subjaxpr_or_function(eqn.params)
            or name in COLLECTIVES
        ):
            eqns.append(eqn)
            continue
        if name in _EXACT_ELEMENTWISE and eqn.outvars[0].aval.shape:
            scalars = [scalar_of(x) for x in invars]
            if all(s is not None for s in scalars):
                (o,) = eqn.outvars
                out = _eval_eqn(eqn, scalars, [o.aval.update(shape=())])
                if out is not None:
                    (val,) = out
                    lit = _literal(val, o.aval.update(shape=()))
                    eqns.append(_splat_eqn(lit, o, eqn.source_info))
                    splat[o] = lit.val
                    changed = True
                    continue
        if any(o.aval.size > FOLD_MAX_ELEMENTS for o in eqn.outvars):
            eqns.append(eqn)
            continue
        vals = [value_of(x) for x in invars]
        out = (
            None
            if any(v is None for v in vals)
            else _eval_eqn(eqn, vals, [o.aval for o in eqn.outvars])
        )
        if out is None:
            eqns.append(eqn)
            continue
        changed = True
        for o, val in zip(eqn.outvars, out):
            if not o.aval.shape:
                rename[o] = _literal(val, o.aval)
                continue
            known[o] = val
            flat = val.reshape(-1)
            if flat.size and _all_equal_bits(flat):
                lit = _literal(flat[0], o.aval.update(shape=()))
                eqns.append(_splat_eqn(lit, o, eqn.source_info))
                splat[o] = lit.val
            else:
                rename[o] = c = add_const(val, o.aval)
                known[c] = val
    if not changed and len(eqns) == len(j.eqns) and all(a is b for a, b in zip(eqns, j.eqns)):
        return closed
    run.changed |= changed
    outvars = [rn(v) for v in j.outvars]
    return core.ClosedJaxpr(core.Jaxpr(constvars, j.invars, eqns, outvars), consts)


def _eval_eqn(eqn: core.JaxprEqn, vals, out_avals) -> list[np.ndarray] | None:
    """The outputs of ``eqn``'s impl on numpy ``vals``, or None when one disagrees with
    ``out_avals`` in shape or dtype (then nothing is folded: the compiled program and the
    interpreter must agree on types, and the impl is the reference for values only)."""
    impl = functools.partial(eqn.primitive.impl, **eqn.params)
    if float_normalization.touches_narrow_float([v.aval for v in (*eqn.invars, *eqn.outvars)]):
        # bfloat16: computed in float32, rounded back (as compiled and eager code)
        outs_arg = out_avals if eqn.primitive.multiple_results else out_avals[0]
        impl = float_normalization.widened_impl(eqn.primitive, eqn.params, outs_arg)
    with np.errstate(all="ignore"):
        out = impl(*vals)
    outs = out if eqn.primitive.multiple_results else [out]
    res = [np.asarray(v) for v in outs]
    if len(res) != len(out_avals) or any(
        v.shape != a.shape or v.dtype != a.dtype for v, a in zip(res, out_avals)
    ):
        return None
    return res


def _splat_eqn(lit: core.Literal, out: core.Var, source_info=None) -> core.JaxprEqn:
    """``out = broadcast_in_dim lit``: a constant array whose elements all equal ``lit``
    (``source_info``: the line of the equation it replaces)."""
    return core.JaxprEqn(
        core.primitives["broadcast_in_dim"],
        [lit],
        dict(shape=out.aval.shape, broadcast_dimensions=()),
        [out],
        source_info,
    )


def _all_equal_bits(flat: np.ndarray) -> bool:
    """Whether every element of the non-empty 1-d ``flat`` has the bit pattern of the first
    (so -0.0 differs from 0.0, and NaNs with one bit pattern are equal)."""
    rows = np.ascontiguousarray(flat).view(np.uint8).reshape(flat.size, flat.dtype.itemsize)
    return bool((rows == rows[0]).all())


# ---------------------------------------------------------------------------------------------
# simplify_algebra

UNIFORM_CONST_MAX_ELEMENTS = 1 << 16
"""Consts up to this size are checked for being uniform (all elements equal), so identities
also see ``x * ones``; bigger ones are not scanned at compile time."""


def simplify_algebra(closed: core.ClosedJaxpr) -> core.ClosedJaxpr:
    """Remove equations that are identities, exactly in IEEE arithmetic, replacing their output
    by an input: ``x + (-0.0)``, ``x - 0.0``, ``x * 1``, ``x / 1`` (integers: ``+ 0``, ``- 0``),
    ``neg(neg(x))``, ``not(not(x))``, ``and(x, all-ones)``, ``or(x, 0)``, ``xor(x, 0)``,
    ``max(x, x)``, ``min(x, x)``, ``and(x, x)``, ``or(x, x)``, ``stop_gradient(x)``,
    ``convert_element_type`` to the same dtype and weak type, ``reshape`` /
    ``broadcast_in_dim`` / ``squeeze`` / ``slice`` / ``dynamic_slice`` that keep the shape,
    ``transpose`` by the identity, ``rev`` of size-1 dimensions, ``pad`` by nothing,
    ``concatenate`` of one operand or of slices that cover one array in order,
    ``complex_interleave`` of the two planes of one ``[..., 2]`` array, reductions
    over no axes (float sums excepted: see ``_reduce_rule``), ``integer_pow`` with ``y=1``,
    ``select_n`` with a constant ``which`` or equal cases, ``dynamic_update_slice`` of a
    whole-operand update, two transposes or two row-major reshapes (reshape, squeeze, size-1
    expansion) that undo each other. It also rewrites ``integer_pow(x, 2)`` to ``x * x``, two
    transposes or two row-major reshapes to one, a ``cond`` with a constant index to the
    chosen branch's equations, and a reduction of a ``broadcast_in_dim`` to a reduction of its
    operand (``_reduce_of_broadcast``: a sum times the number of copies).

    Constants are Literals, broadcasts of a Literal and uniform consts. A rewrite happens only
    when the replacement has exactly the output's aval (shape, dtype, weak type). Not
    identities, so kept: ``x * 0`` (NaN, Inf, -0.0), ``x + 0.0`` (-0.0 + 0.0 is 0.0),
    ``x - (-0.0)``, ``x - x``, ``x / x``.
    """
    return _Run(_simplify_closed)(closed)


_UNIFORM_PRESERVING = frozenset(
    {"broadcast_in_dim", "reshape", "transpose", "squeeze", "rev", "slice"}
)
"""Shape primitives whose output is uniform (all elements equal) when their operand is."""


class _Facts:
    """What simplify_algebra knows about the values of the jaxpr it is rewriting: each var's
    producing equation, and the vars whose elements are all one known scalar."""

    def __init__(self, closed: core.ClosedJaxpr, constvars: list, consts: list):
        self.producer: dict[core.Var, core.JaxprEqn] = {}
        self.splat: dict[core.Var, np.generic] = {}
        self._unscanned = dict(zip(closed.jaxpr.constvars, closed.consts))
        self.constvars, self.consts = constvars, consts  # appended to by inlined cond branches

    def scalar(self, x):
        """The value every element of ``x`` has, as a numpy scalar, or None if unknown."""
        if type(x) is core.Literal:
            return np.asarray(x.val, dtype=x.aval.dtype)[()]
        if x in self.splat:
            return self.splat[x]
        c = self._unscanned.pop(x, None)  # each const is scanned once; the answer is cached
        if c is not None and 0 < x.aval.size <= UNIFORM_CONST_MAX_ELEMENTS:
            val = _concrete_value(c, x.aval)
            if val is not None:
                flat = val.reshape(-1)
                if _all_equal_bits(flat):
                    self.splat[x] = flat[0]
                    return flat[0]
        return None

    def record(self, eqn: core.JaxprEqn):
        for v in eqn.outvars:
            self.producer[v] = eqn
        if eqn.primitive.name in _UNIFORM_PRESERVING and eqn.outvars[0].aval.size:
            s = self.scalar(eqn.invars[0])
            if s is not None:
                self.splat[eqn.outvars[0]] = s

    def add_const(self, value, aval: core.ShapedArray) -> core.Var:
        v = core.Var(aval)
        self.constvars.append(v)
        self.consts.append(value)
        return v


def _simplify_closed(closed: core.ClosedJaxpr, run: _Run) -> core.ClosedJaxpr:
    j = closed.jaxpr
    constvars, consts = list(j.constvars), list(closed.consts)
    facts = _Facts(closed, constvars, consts)
    rename: dict[core.Var, core.Var | core.Literal] = {}
    eqns: list[core.JaxprEqn] = []
    changed = False

    def rn(x):
        return rename.get(x, x) if type(x) is core.Var else x

    def emit(eqn):
        eqns.append(eqn)
        facts.record(eqn)

    for eqn in j.eqns:
        eqn = run.rewrite_params(eqn)
        invars = [rn(x) for x in eqn.invars]
        if invars != eqn.invars:
            eqn = eqn.replace(invars=invars)
        rule = _IDENTITIES.get(eqn.primitive.name)
        result = rule(eqn, facts) if rule is not None else None
        if result is not None:
            new_eqns, atoms = result
            if all(a is o or a.aval == o.aval for a, o in zip(atoms, eqn.outvars)):
                changed = True
                for e in new_eqns:
                    emit(e)
                for o, a in zip(eqn.outvars, atoms):
                    if a is not o:
                        rename[o] = a
                continue
        emit(eqn)
    if not changed and all(a is b for a, b in zip(eqns, j.eqns)):
        return closed
    run.changed |= changed
    return core.ClosedJaxpr(
        core.Jaxpr(constvars, j.invars, eqns, [rn(v) for v in j.outvars]), consts
    )


def _replaced_by(eqn: core.JaxprEqn):
    """A rule's result: the single new equation ``eqn``, which binds the old equation's
    output, provided its primitive's shape rule gives that output exactly its aval."""
    out = eqn.primitive.abstract_eval(*[x.aval for x in eqn.invars], **eqn.params)
    if out != eqn.outvars[0].aval:
        return None
    return [eqn], eqn.outvars


def _same(x):
    return [], [x]


def _is_float(dtype) -> bool:
    return dtypes.kind(dtype) == "f"


def _add_rule(eqn, facts):
    # x + (-0.0) is x for every x (-0.0 + -0.0 is -0.0); x + 0.0 is not (-0.0 + 0.0 is 0.0).
    for x, c in (eqn.invars, eqn.invars[::-1]):
        s = facts.scalar(c)
        if (
            s is not None
            and dtypes.kind(s.dtype) in "iuf"
            and s == 0
            and (not _is_float(s.dtype) or np.signbit(s))
        ):
            return _same(x)
    return None


def _sub_rule(eqn, facts):
    # x - 0.0 is x for every x (-0.0 - 0.0 is -0.0); x - (-0.0) is x + 0.0, which is not.
    x, c = eqn.invars
    s = facts.scalar(c)
    if (
        s is not None
        and dtypes.kind(s.dtype) in "iuf"
        and s == 0
        and (not _is_float(s.dtype) or not np.signbit(s))
    ):
        return _same(x)
    return None


def _mul_rule(eqn, facts):
    for x, c in (eqn.invars, eqn.invars[::-1]):
        s = facts.scalar(c)
        if s is not None and dtypes.kind(s.dtype) in "iuf" and s == 1:
            return _same(x)
    return None


def _div_rule(eqn, facts):
    x, c = eqn.invars
    s = facts.scalar(c)
    if s is not None and dtypes.kind(s.dtype) in "iuf" and s == 1:
        return _same(x)
    return None


def _involution_rule(eqn, facts):
    (x,) = eqn.invars
    p = facts.producer.get(x) if type(x) is core.Var else None
    if p is not None and p.primitive is eqn.primitive:
        return _same(p.invars[0])
    return None


def _bitwise_rule(neutral_is_all_ones: bool):
    def rule(eqn, facts):
        a, b = eqn.invars
        if a is b:
            return _same(a) if eqn.primitive.name != "xor" else None
        for x, c in ((a, b), (b, a)):
            s = facts.scalar(c)
            if s is not None and dtypes.kind(s.dtype) in "biu":
                if (np.invert(s) == 0) if neutral_is_all_ones else (s == 0):
                    return _same(x)
        return None

    return rule


def _idempotent_rule(eqn, facts):
    a, b = eqn.invars
    return _same(a) if a is b else None


def _first_operand(eqn, facts):
    return _same(eqn.invars[0])


def _transpose_rule(eqn, facts):
    """Transposing by the identity is the identity; two transposes compose into one (or none)."""
    (x,) = eqn.invars
    perm = tuple(eqn.params["permutation"])
    if perm == tuple(range(len(perm))):
        return _same(x)
    p = facts.producer.get(x) if type(x) is core.Var else None
    if p is None or p.primitive is not eqn.primitive:
        return None
    inner = p.params["permutation"]
    composed = tuple(inner[i] for i in perm)
    if composed == tuple(range(len(perm))):
        return _same(p.invars[0])
    return _replaced_by(eqn.replace(invars=[p.invars[0]], params=dict(permutation=composed)))


def _is_row_major_reshape(eqn: core.JaxprEqn) -> bool:
    """Whether ``eqn`` only regroups its operand's elements in row-major order (a reshape with
    no transposition, a squeeze, or a broadcast_in_dim that only inserts size-1 dimensions)."""
    name = eqn.primitive.name
    if name == "reshape":
        return eqn.params["dimensions"] is None
    if name == "broadcast_in_dim":
        return eqn.outvars[0].aval.size == eqn.invars[0].aval.size
    return name == "squeeze"


def _reshape_like_rule(eqn, facts):
    """``reshape``/``squeeze``/expanding ``broadcast_in_dim``: the identity when the shape is
    kept; of another such equation, the identity when the two undo each other, else one
    reshape of the first one's operand."""
    x, out = eqn.invars[0], eqn.outvars[0]
    if not _is_row_major_reshape(eqn):
        return None
    if x.aval.shape == out.aval.shape:
        return _same(x)
    p = facts.producer.get(x) if type(x) is core.Var else None
    if p is None or not _is_row_major_reshape(p):
        return None
    src = p.invars[0]
    if src.aval.shape == out.aval.shape:
        return _same(src)
    return _replaced_by(
        core.JaxprEqn(
            core.primitives["reshape"],
            [src],
            dict(new_sizes=out.aval.shape, dimensions=None),
            eqn.outvars,
            eqn.source_info,
        )
    )


def _rev_rule(eqn, facts):
    (x,) = eqn.invars
    return _same(x) if all(x.aval.shape[d] <= 1 for d in eqn.params["dimensions"]) else None


def _pad_rule(eqn, facts):
    cfg = eqn.params["padding_config"]
    return _same(eqn.invars[0]) if all(tuple(c) == (0, 0, 0) for c in cfg) else None


def _concatenate_rule(eqn, facts):
    """One operand: that operand. Slices of one array that, in order, cover it along the
    concatenated dimension (and whole along the others): that array (the complex split pass
    and the FFT rules make these when they interleave planes they just split)."""
    if len(eqn.invars) == 1:
        return _same(eqn.invars[0])
    dim = eqn.params["dimension"]
    source, at = None, 0
    for x in eqn.invars:
        p = facts.producer.get(x) if type(x) is core.Var else None
        if p is None or p.primitive.name != "slice":
            return None
        if any(s != 1 for s in (p.params["strides"] or ())):
            return None
        src = p.invars[0]
        if source is None:
            source = src
        if src is not source or type(src) is not core.Var:
            return None
        start, limit = p.params["start_indices"], p.params["limit_indices"]
        for d, (lo, hi) in enumerate(zip(start, limit)):
            if d != dim and (lo, hi) != (0, src.aval.shape[d]):
                return None
        if start[dim] != at:
            return None
        at = limit[dim]
    return _same(source) if at == source.aval.shape[dim] else None


def _interleave_rule(eqn, facts):
    """``complex_interleave(re, im)`` (the complex split's output primitive) of the two planes
    of one ``[..., 2]`` array, each a slice of the last axis reshaped without it: that array
    (a split program returning a value the FFT or another interleaved step computed)."""
    source = None
    for k, x in enumerate(eqn.invars):
        r = facts.producer.get(x) if type(x) is core.Var else None
        if r is None or not _is_row_major_reshape(r):
            return None
        p = facts.producer.get(r.invars[0]) if type(r.invars[0]) is core.Var else None
        if p is None or p.primitive.name != "slice":
            return None
        src = p.invars[0]
        if type(src) is not core.Var or (source is not None and src is not source):
            return None
        source = src
        shape = src.aval.shape
        if not shape or shape[-1] != 2 or shape[:-1] != x.aval.shape:
            return None
        if any(s != 1 for s in (p.params["strides"] or ())):
            return None
        if tuple(p.params["start_indices"]) != (0,) * (len(shape) - 1) + (k,) or tuple(
            p.params["limit_indices"]
        ) != shape[:-1] + (k + 1,):
            return None
    return _same(source)


def _reduce_rule(eqn, facts):
    x = eqn.invars[0]
    if tuple(eqn.params["axes"]):
        return _reduce_of_broadcast(eqn, facts)
    if eqn.primitive.name == "reduce_sum" and dtypes.kind(x.aval.dtype) in "fc":
        # NB: JAX returns x here, but fungrad's reduce_sum impl (np.sum) adds x to a zero,
        # turning -0.0 into 0.0; the impl is the reference, so the sum stays.
        return None
    return _same(x)


#: reductions over axes that a broadcast created, with what they do with the count ``n`` of
#: copies: a sum multiplies by it, the others drop the axes (``n > 0``)
_BROADCAST_REDUCTIONS = {
    "reduce_sum": "times",
    "reduce_max": "drop",
    "reduce_min": "drop",
    "reduce_and": "drop",
    "reduce_or": "drop",
}


def _reduce_of_broadcast(eqn, facts):
    """A reduction over axes that ``broadcast_in_dim`` created (new dimensions, or size-1
    dimensions it expanded) reduces only the operand: ``sum(broadcast(x))`` is ``sum(x)``
    times the number of copies ``n`` (converted to the dtype first, as in JAX: float32 sums
    of 2^24 + 1 ones are 2^24; integers wrap as repeated addition does); max, min, and, or
    just drop those axes. The result is broadcast to the remaining dimensions, so a
    reduction over the operand's own axes alone moves before the broadcast too. A sum of
    ``fnp.ones((30000, 30000))`` no longer adds 9e8 ones at run time. float16 sums are kept
    (their impl accumulates in float32), as are reductions with ``n == 0`` (the identity)."""
    how = _BROADCAST_REDUCTIONS.get(eqn.primitive.name)
    y = eqn.invars[0]
    p = facts.producer.get(y) if type(y) is core.Var else None
    if how is None or p is None or p.primitive.name != "broadcast_in_dim":
        return None
    x, out = p.invars[0], eqn.outvars[0]
    dtype = out.aval.dtype
    if how == "times" and (dtypes.kind(dtype) not in "iuf" or dtype == np.float16):
        return None
    axes = set(eqn.params["axes"])
    bdims = tuple(p.params["broadcast_dimensions"])
    operand_of = {d: i for i, d in enumerate(bdims)}  # y's dims that are x's dims
    created = {
        d for d in axes if d not in operand_of or x.aval.shape[operand_of[d]] != y.aval.shape[d]
    }
    count = math.prod(y.aval.shape[d] for d in created)
    if count == 0 or not created and x.aval.size == y.aval.size:
        return None
    x_axes = tuple(sorted(operand_of[d] for d in axes if d in operand_of))
    new: list[core.JaxprEqn] = []

    def bind(prim, invars, **params):
        aval = prim.abstract_eval(*[v.aval for v in invars], **params)
        v = core.Var(aval)
        new.append(core.JaxprEqn(prim, invars, params, [v], eqn.source_info))
        return v

    z = bind(eqn.primitive, [x], axes=x_axes) if x_axes else x
    if how == "times" and count != 1:
        n = (
            np.array(count, np.uint64).astype(dtype)
            if dtypes.kind(dtype) in "iu"
            else np.asarray(count, dtype)
        )  # integers wrap modulo 2^bits
        weak = core.ShapedArray((), dtype, weak_type=z.aval.weak_type)
        z = bind(core.primitives["mul"], [z, core.Literal(n[()], weak)])
    kept = [d for d in range(y.aval.ndim) if d not in axes]  # y's dims left in the result
    dims = tuple(kept.index(d) for d in bdims if d not in axes)
    if z.aval.shape != out.aval.shape:
        z = bind(
            core.primitives["broadcast_in_dim"],
            [z],
            shape=out.aval.shape,
            broadcast_dimensions=dims,
        )
    if z.aval != out.aval:
        return None
    return new, [z]


def _integer_pow_rule(eqn, facts):
    (x,) = eqn.invars
    y = eqn.params["y"]
    if y == 1:
        return _same(x)
    if y == 2:  # the impl's square-and-multiply for y=2 is exactly one multiply
        return _replaced_by(eqn.replace(primitive=core.primitives["mul"], invars=[x, x], params={}))
    return None


def _select_n_rule(eqn, facts):
    which, *cases = eqn.invars
    if all(c is cases[0] for c in cases):
        return _same(cases[0])
    s = facts.scalar(which)
    if s is None:
        return None
    # An out-of-range ``which`` picks the nearest case (the impl's convention).
    return _same(cases[min(max(int(s), 0), len(cases) - 1)])


def _dynamic_update_slice_rule(eqn, facts):
    x, update, *_ = eqn.invars
    # The start indices are clamped so the update fits: a whole-operand update replaces x.
    return _same(update) if update.aval.shape == x.aval.shape else None


def _cond_rule(eqn, facts):
    index, *ops = eqn.invars
    s = facts.scalar(index)
    if s is None:
        return None
    branches = eqn.params["branches"]
    bj = branches[min(max(int(s), 0), len(branches) - 1)]  # the impl clamps the index
    if bj.out_avals != [v.aval for v in eqn.outvars]:
        return None  # the branches' weak types differ, so cond's outputs are strong
    subst: dict = {v: facts.add_const(c, v.aval) for v, c in zip(bj.jaxpr.constvars, bj.consts)}
    subst.update(zip(bj.jaxpr.invars, ops))
    out: list[core.JaxprEqn] = []
    _copy_eqns(bj.jaxpr.eqns, subst, out)
    return out, [subst.get(v, v) if type(v) is core.Var else v for v in bj.jaxpr.outvars]


def _copy_eqns(src, subst: dict, out: list) -> None:
    """Append copies of ``src`` to ``out``: inputs renamed by ``subst``, every output a fresh
    Var (recorded in ``subst``)."""
    for eqn in src:
        invars = [subst.get(x, x) if type(x) is core.Var else x for x in eqn.invars]
        outvars = [core.Var(v.aval) for v in eqn.outvars]
        subst.update(zip(eqn.outvars, outvars))
        out.append(eqn.replace(invars=invars, outvars=outvars))


def _shape_preserving(eqn, facts):
    # slice and dynamic_slice (whose starts are clamped) that keep the shape are the identity.
    x = eqn.invars[0]
    return _same(x) if x.aval.shape == eqn.outvars[0].aval.shape else None


_IDENTITIES = {
    "add": _add_rule,
    "sub": _sub_rule,
    "mul": _mul_rule,
    "div": _div_rule,
    "neg": _involution_rule,
    "not": _involution_rule,
    "and": _bitwise_rule(True),
    "or": _bitwise_rule(False),
    "xor": _bitwise_rule(False),
    "max": _idempotent_rule,
    "min": _idempotent_rule,
    "stop_gradient": _first_operand,
    "convert_element_type": _first_operand,
    "reshape": _reshape_like_rule,
    "squeeze": _reshape_like_rule,
    "broadcast_in_dim": _reshape_like_rule,
    "transpose": _transpose_rule,
    "rev": _rev_rule,
    "pad": _pad_rule,
    "concatenate": _concatenate_rule,
    "complex_interleave": _interleave_rule,
    "slice": _shape_preserving,
    "dynamic_slice": _shape_preserving,
    "reduce_sum": _reduce_rule,
    "reduce_prod": _reduce_rule,
    "reduce_max": _reduce_rule,
    "reduce_min": _reduce_rule,
    "reduce_and": _reduce_rule,
    "reduce_or": _reduce_rule,
    "reduce_xor": _reduce_rule,
    "integer_pow": _integer_pow_rule,
    "select_n": _select_n_rule,
    "dynamic_update_slice": _dynamic_update_slice_rule,
    "cond": _cond_rule,
}
"""Rewrite rules by primitive name: ``rule(eqn, facts) -> (new_eqns, atoms) | None``, where
``atoms`` replace the equation's outputs (an atom may be an output bound by ``new_eqns``,
which are well typed). The caller applies a rule only if every replacement has its output's
exact aval."""


# ---------------------------------------------------------------------------------------------
# optimize


def optimize(closed: core.ClosedJaxpr, max_rounds: int = 8) -> core.ClosedJaxpr:
    """The compiler's pipeline: :func:`inline_calls`, bfloat16 computed in float32
    (``float_normalization.normalize_floats``), then rounds of :func:`fold_constants`,
    :func:`simplify_algebra`, CSE and DCE (inside sub-jaxprs too) until a round changes
    nothing (at most ``max_rounds``), relu masks read from the relu's output
    (``masks.masks_from_outputs``), then unused consts are dropped everywhere. The result
    computes exactly the values ``closed`` computes; each round is linear in the program size.
    """
    from fungrad.ir.float_normalization import normalize_floats  # (it uses this module's _Run)

    closed = normalize_floats(inline_calls(closed))
    for _ in range(max_rounds):
        changed = False
        for fn in (_fold_closed, _simplify_closed, _cse_closed, _dce_closed):
            run = _Run(fn)
            closed = run(closed)
            changed |= run.changed
        if not changed:
            break
    from fungrad.ir.masks import masks_from_outputs  # (a relu's mask read from its output)

    closed = masks_from_outputs(closed)
    return _Run(_drop_consts_closed)(closed)


def _cse_closed(closed: core.ClosedJaxpr, run: _Run) -> core.ClosedJaxpr:
    return _closed_with_jaxpr(closed, _cse(closed.jaxpr, run))


def _dce_closed(closed: core.ClosedJaxpr, run: _Run) -> core.ClosedJaxpr:
    return _closed_with_jaxpr(closed, _dce(closed.jaxpr, run))


def _drop_consts_closed(closed: core.ClosedJaxpr, run: _Run) -> core.ClosedJaxpr:
    j = closed.jaxpr
    eqns = [run.rewrite_params(e) for e in j.eqns]
    if not all(a is b for a, b in zip(eqns, j.eqns)):
        j = core.Jaxpr(j.constvars, j.invars, eqns, j.outvars)
        closed = core.ClosedJaxpr(j, closed.consts)
    used = {v for e in j.eqns for v in e.invars if type(v) is core.Var}
    used.update(v for v in j.outvars if type(v) is core.Var)
    if all(v in used for v in j.constvars):
        return closed
    return drop_unused_consts(closed)
