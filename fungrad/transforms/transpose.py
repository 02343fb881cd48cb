"""Transposition of linear jaxprs (JAX's ``backward_pass``): the reverse half of reverse mode.

A linear jaxpr's inputs are marked :class:`UndefPrimal` (their values are not known: the jaxpr is
linear in them). Equations that read only known values (residual computations) are evaluated
forward first; then the linear equations are visited in reverse, each primitive's transpose rule
mapping output cotangents to input cotangents, which are accumulated per variable. Cotangents
that are known to be zero stay symbolic (:class:`~fungrad.transforms.jvp.Zero`).

Rule signature (``transpose_rules[prim]``)::

    rule(cts_out, *invals, **params) -> list[ct | None]

``cts_out`` is a list (one entry per output, possibly Zero); ``invals`` holds, per operand, its
known value or an ``UndefPrimal`` for the linear operands; the result gives one cotangent per
operand (None or Zero for non-linear operands and for zero contributions).
"""

from __future__ import annotations

import sys

from fungrad import core, source_info
from fungrad.array import Array
from fungrad.transforms.jvp import Zero, add_tangents

transpose_rules: dict[core.Primitive, object] = {}


class UndefPrimal:
    """A linear input of a jaxpr being transposed: only its aval is known."""

    __slots__ = ("aval",)

    def __init__(self, aval: core.ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"UndefPrimal({self.aval.str_short()})"


def is_undefined_primal(x) -> bool:
    return type(x) is UndefPrimal


def backward_pass(jaxpr: core.Jaxpr, consts, args, cts_out) -> list:
    """Transpose ``jaxpr``: ``args`` has an UndefPrimal for each linear input and values for the
    others; returns the cotangent (or Zero) of every input in order."""
    Var, Literal = core.Var, core.Literal
    linear_vars: set[core.Var] = set()
    primal_env: dict[core.Var, object] = dict(zip(jaxpr.constvars, consts))
    for v, a in zip(jaxpr.invars, args):
        if type(a) is UndefPrimal:
            linear_vars.add(v)
        else:
            primal_env[v] = a

    def read_primal(x):
        if type(x) is Literal:
            return Array(x.val, x.aval.weak_type)
        if x in linear_vars:
            return UndefPrimal(x.aval)
        return primal_env[x]

    # A transpose (or residual) equation staged by a rule keeps the forward equation's line.
    state = source_info._state
    prev = source_info.set_equation_source(sys._getframe(), state.info)
    outer = prev[1]
    try:
        # Forward: evaluate equations that only read known values; collect the linear ones.
        linear_eqns = []
        for eqn in jaxpr.eqns:
            for x in eqn.invars:
                if type(x) is Var and x in linear_vars:
                    linear_vars.update(eqn.outvars)
                    linear_eqns.append(eqn)
                    break
            else:
                state.info = eqn.source_info or outer
                out = eqn.primitive.bind(*map(read_primal, eqn.invars), **eqn.params)
                if eqn.primitive.multiple_results:
                    primal_env.update(zip(eqn.outvars, out))
                else:
                    primal_env[eqn.outvars[0]] = out

        ct_env: dict[core.Var, object] = {}

        def write_ct(v, ct):
            if ct is None or type(ct) is Zero or type(v) is not Var or v not in linear_vars:
                return
            prev = ct_env.get(v)
            ct_env[v] = ct if prev is None else add_tangents(prev, ct)

        for v, ct in zip(jaxpr.outvars, cts_out):
            write_ct(v, ct)

        for eqn in reversed(linear_eqns):
            outvars = eqn.outvars
            if len(outvars) == 1:  # the common case: one output, live or dead
                ct = ct_env.pop(outvars[0], None)
                if ct is None:
                    continue
                cts = [ct]
            else:
                cts = [ct_env.pop(v, None) for v in outvars]
                if all(ct is None for ct in cts):
                    continue
                cts = [
                    Zero(v.aval.strip_weak_type()) if ct is None else ct
                    for v, ct in zip(outvars, cts)
                ]
            rule = transpose_rules.get(eqn.primitive)
            if rule is None:
                raise TypeError(
                    f"Transpose rule (for reverse-mode differentiation) for "
                    f"'{eqn.primitive}' not implemented"
                )
            state.info = eqn.source_info or outer
            cts_in = rule(cts, *map(read_primal, eqn.invars), **eqn.params)
            for v, ct in zip(eqn.invars, cts_in):
                write_ct(v, ct)

        return [
            ct_env.get(v, Zero(v.aval.strip_weak_type())) if type(a) is UndefPrimal else None
            for v, a in zip(jaxpr.invars, args)
        ]
    finally:
        source_info.restore(prev)


def deflinear_transpose(primitive, transpose_fn):
    """Register ``transpose_fn(ct, *invals, **params) -> list`` for a single-output linear
    primitive; a Zero output cotangent gives Zero input cotangents without calling it."""

    def rule(cts, *invals, **params):
        (ct,) = cts
        if type(ct) is Zero:
            return [Zero(x.aval) if type(x) is UndefPrimal else None for x in invals]
        return transpose_fn(ct, *invals, **params)

    transpose_rules[primitive] = rule
